"""The physical laws, one function each, with the dimensions of their arguments and result
declared and checked where the law is defined (`law`).

Plugins, analyses and third-party packages compose their terms from these; a law called
with the wrong quantity (a size where a bandwidth belongs) fails at once, naming the law and
the argument. Each docstring states the law and its source.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import sympy as sp

from stepwall.core.dimensions import dimension_of
from stepwall.core.errors import DimensionError, PluginError
from stepwall.core.symbols import constant, max_of, min_of
from stepwall.core.units import (
    BANDWIDTH,
    COMPUTE_RATE,
    DIMENSIONLESS,
    INFORMATION,
    OPERATION,
    TIME,
    Dim,
)

F = TypeVar("F", bound=Callable[..., Any])

BYTE = constant("const.byte", "1 B", doc="one byte: an activation element is 2 of them")
# bytes per activation element a GEMM of each math reads (NVFP4: 4-bit values and an 8-bit
# scale per 16; weight-only kernels read BF16 activations)
GEMM_INPUT_BYTES = {"bf16": 2, "wna16": 2, "fp8": 1, "int8": 1, "fp4": sp.Rational(9, 16)}

FLOPS_PER_MAC = constant(
    "const.flops_per_mac",
    "2 FLOP",
    r"2\,\mathrm{FLOP}",
    "a multiply-add is two floating-point operations",
)


def law(returns: Dim | tuple[Dim, ...], **arguments: Dim) -> Callable[[F], F]:
    """Declare a law's argument and result dimensions; each call checks them.

    Arguments not named are not checked (flags, counts given as Python numbers)."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            for name, want in arguments.items():
                if name in bound.arguments:
                    _expect(fn.__name__, f"argument {name}", bound.arguments[name], want)
            out = fn(*args, **kwargs)
            wants = returns if isinstance(returns, tuple) else (returns,)
            outs = out if isinstance(returns, tuple) else (out,)
            for i, (value, want) in enumerate(zip(outs, wants, strict=True)):
                _expect(fn.__name__, f"result {i}" if len(wants) > 1 else "result", value, want)
            return out

        checked.dimensions = (arguments, returns)  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    return wrap


def _expect(name: str, what: str, value: Any, want: Dim) -> None:
    if value is None:  # an optional argument left out
        return
    expr = sp.sympify(value)
    if expr.is_Number and expr.is_zero:
        return
    try:
        got = dimension_of(expr)
    except DimensionError as e:
        raise DimensionError(f"law {name}: {what}: {e.message}", left=e.left) from None
    if got != want:
        raise DimensionError(
            f"law {name}: {what} must have dimension {want}", left=str(got), right=str(want)
        )


# ---------------------------------------------------------------- compute and memory


@law(TIME, bytes_=INFORMATION, flops=OPERATION, bandwidth=BANDWIDTH, mem_eff=DIMENSIONLESS,
     peak=COMPUTE_RATE, flop_eff=DIMENSIONLESS, rows=DIMENSIONLESS, half_rows=DIMENSIONLESS,
     serial_bytes=INFORMATION, serial_bandwidth=BANDWIDTH)  # fmt: skip
def roofline_rows(
    bytes_: sp.Expr,
    flops: sp.Expr,
    bandwidth: sp.Expr,
    mem_eff: sp.Expr,
    peak: sp.Expr,
    flop_eff: sp.Expr,
    rows: sp.Expr,
    half_rows: sp.Expr,
    serial_bytes: sp.Expr = sp.S.Zero,
    serial_bandwidth: sp.Expr | None = None,
    capped: bool = True,
) -> sp.Expr:
    """Roofline (Williams et al., 2009) with a size-dependent compute rate: t =
    max(B/(B_mem·η_mem), F·(1 + n½/max(M, n½))/(F_peak·η), B_s/B_serial). The compute side is
    Hockney's (n + n½)/r∞ in the rows M a GEMM processes (Hockney & Jesshope, Parallel Computers
    2, 1988) down to M = n½, below which the kernel switches to small tiles and pays at most
    twice its work (it is memory-bound there: padding to n½ rows would charge a one-token GEMM
    like a 200-token one). ``rows`` = 0: no GEMM. The third side, when given: bytes one sequence
    streams by itself at the rate one sequence reaches (a lone decode query over its KV cache).
    ``capped`` = False: the plain (n + n½)/r∞, for an attention kernel whose per-query work
    (load Q, softmax, write O) does not shrink with the context it reads."""
    if rows != 0 and not capped:
        slowdown = 1 + half_rows / rows
    elif rows != 0:  # = 1 + n½/max(M, n½), written so that it reads as rising in n½
        slowdown = sp.Min(1 + half_rows / rows, 2, evaluate=False)
    else:
        slowdown = sp.S.One
    sides = [bytes_ / (bandwidth * mem_eff), flops * slowdown / (peak * flop_eff)]
    if serial_bandwidth is not None and serial_bytes != 0:
        sides.append(serial_bytes / serial_bandwidth)
    return sp.Max(*sides, evaluate=False)


@law(TIME, steps=DIMENSIONLESS, latency=TIME)
def chain_time(steps: sp.Expr, latency: sp.Expr) -> sp.Expr:
    """Dependent steps: t = n × τ (each step waits for the last one's result, so no width of
    the GPU hides them): added to an op's roofline time for a chunked recurrence's chunks
    along a sequence (`chunk_chain`), a side of a GEMM's roof for its k-loop (`mla_serial_k`,
    `ffn_serial_k` and their neighbours: its tiles stream and multiply while they walk k)."""
    return steps * latency


@law(TIME, kernels=DIMENSIONLESS, floor=TIME, factor=DIMENSIONLESS)
def floor_time(kernels: sp.Expr, floor: sp.Expr, factor: sp.Expr) -> sp.Expr:
    """Kernel floors: t = kernels × t_floor × φ, the fixed launch-to-finish time of each
    kernel under CUDA graphs (φ: the engine's kernel library against the measured one)."""
    return kernels * floor * factor


@law(TIME, kernels=DIMENSIONLESS, latency=TIME)
def launch_time(kernels: sp.Expr, latency: sp.Expr) -> sp.Expr:
    """Kernel launches: t = kernels × launch latency."""
    return kernels * latency


# ---------------------------------------------------------------- architecture counts


@law(DIMENSIONLESS, hidden=DIMENSIONLESS, intermediate=DIMENSIONLESS, matrices=DIMENSIONLESS)
def ffn_params(hidden: sp.Expr, intermediate: sp.Expr, matrices: sp.Expr | int = 3) -> sp.Expr:
    """An FFN of n matrices of h x I holds n·h·I weights: 3 gated (gate, up, down: SwiGLU),
    2 ungated (up, down: Nemotron-H's squared-ReLU MLP, NVIDIA Nemotron-H report 2025)."""
    return matrices * hidden * intermediate


@law(DIMENSIONLESS, size=DIMENSIONLESS, ranks=DIMENSIONLESS)
def shard(size: sp.Expr, ranks: sp.Expr) -> sp.Expr:
    """Fraction of a dimension of ``size`` held by the most loaded of ``ranks`` ranks:
    ⌈size/ranks⌉ / size (uneven splits are set by the largest shard)."""
    return sp.ceiling(size / ranks) / size


@law((DIMENSIONLESS, DIMENSIONLESS))
def mla_params(
    hidden: sp.Expr,
    q_lora_rank: sp.Expr,
    kv_lora_rank: sp.Expr,
    qk_nope_head_dim: sp.Expr,
    qk_rope_head_dim: sp.Expr,
    v_head_dim: sp.Expr,
    n_heads: sp.Expr,
    tp: sp.Expr,
) -> tuple[sp.Expr, sp.Expr]:
    """MLA weights per layer on one TP rank, as (replicated, head-split) parameter counts:
    q_a (h·r_q) and kv_a (h·(r_kv + d_rope)) are replicated; q_b (r_q·H·(d_nope + d_rope)),
    kv_b (r_kv·H·(d_nope + d_v)) and o (H·d_v·h) split by heads (DeepSeek-V2 §2.1)."""
    replicated = hidden * q_lora_rank + hidden * (kv_lora_rank + qk_rope_head_dim)
    per_head = (
        q_lora_rank * (qk_nope_head_dim + qk_rope_head_dim)
        + kv_lora_rank * (qk_nope_head_dim + v_head_dim)
        + v_head_dim * hidden
    )
    return replicated, per_head * n_heads * shard(n_heads, tp)


@law(DIMENSIONLESS)
def mla_serial_k(
    hidden: sp.Expr, q_lora_rank: sp.Expr, kv_lora_rank: sp.Expr, qk_nope_head_dim: sp.Expr,
    v_head_dim: sp.Expr, n_heads: sp.Expr, tp: sp.Expr,
) -> sp.Expr:  # fmt: skip
    """The reduction lengths k of an MLA layer's five GEMMs on one TP rank, summed (the k-loop
    each walks, `chain_time`): the fused q_a/kv_a down-projection (h), q_b (r_q), the absorbed
    key and value up-projections (d_nope, r_kv) and o (d_v of each of its ⌈H/TP⌉ heads)
    (TensorRT-LLM tech blog 1's five MLA GEMMs)."""
    heads = n_heads * shard(n_heads, tp)
    return hidden + q_lora_rank + qk_nope_head_dim + kv_lora_rank + heads * v_head_dim


@law(DIMENSIONLESS)
def gqa_serial_k(hidden: sp.Expr, n_heads: sp.Expr, head_dim: sp.Expr, tp: sp.Expr) -> sp.Expr:
    """The reduction lengths of a GQA layer's two GEMMs on one TP rank, summed: the fused qkv
    projection (h) and o (d_h of each of its ⌈H/TP⌉ heads)."""
    return hidden + n_heads * shard(n_heads, tp) * head_dim


@law(DIMENSIONLESS)
def compressed_serial_k(
    hidden: sp.Expr, q_lora_rank: sp.Expr, n_heads: sp.Expr, head_dim: sp.Expr,
    o_lora_rank: sp.Expr, o_groups: sp.Expr, tp: sp.Expr,
) -> sp.Expr:  # fmt: skip
    """The reduction lengths of a DeepSeek-V4 attention layer's four GEMMs on one TP rank,
    summed: the fused wq_a/wkv (h), wq_b (r_q), the grouped wo_a (each group's H/G heads of d)
    and wo_b (r_o of each of its ⌈G/TP⌉ groups)."""
    return (hidden + q_lora_rank + n_heads * head_dim / o_groups
            + o_groups * shard(o_groups, tp) * o_lora_rank)  # fmt: skip


@law(DIMENSIONLESS)
def ffn_serial_k(hidden: sp.Expr, intermediate: sp.Expr, tp: sp.Expr) -> sp.Expr:
    """The reduction lengths of an FFN's two GEMMs on one TP rank, summed: the fused gate-up
    projection (h) and down (its ⌈I/TP⌉ columns of the intermediate)."""
    return hidden + intermediate * shard(intermediate, tp)


@law((DIMENSIONLESS, DIMENSIONLESS))
def gqa_params(
    hidden: sp.Expr, n_heads: sp.Expr, n_kv_heads: sp.Expr, head_dim: sp.Expr, tp: sp.Expr,
    kv_tensors: int = 2,
) -> tuple[sp.Expr, sp.Expr]:  # fmt: skip
    """GQA weights per layer on one TP rank, as (replicated, split) parameter counts: q and o
    (2·h·H·d_h) split by heads, k and v (2·h·H_kv·d_h) split by KV heads; with
    ``kv_tensors`` = 1 the keys serve as values and there is no v projection (Gemma 4's
    attention_k_eq_v, transformers' Gemma4TextAttention)."""
    q_o = 2 * hidden * n_heads * head_dim * shard(n_heads, tp)
    k_v = kv_tensors * hidden * n_kv_heads * head_dim * shard(n_kv_heads, tp)
    return sp.Integer(0), q_o + k_v


@law((DIMENSIONLESS, DIMENSIONLESS))
def compressed_attention_params(
    hidden: sp.Expr, q_lora_rank: sp.Expr, n_heads: sp.Expr, head_dim: sp.Expr,
    o_lora_rank: sp.Expr, o_groups: sp.Expr, tp: sp.Expr,
) -> tuple[sp.Expr, sp.Expr]:  # fmt: skip
    """DeepSeek-V4 attention weights per layer on one TP rank, as (replicated, split): the
    query down-projection (h·r_q) and the one shared key-value head (h·d) whole on each rank;
    the query up-projection (r_q·H·d) and the grouped low-rank output, each of G groups of H/G
    heads down to r_o (H·d·r_o in all) and the G·r_o back to h, split by heads and groups
    (DeepSeek-V4 inference/model.py: wq_a, wq_b, wkv, wo_a, wo_b)."""
    replicated = hidden * q_lora_rank + hidden * head_dim
    by_heads = (q_lora_rank * n_heads * head_dim + n_heads * head_dim * o_lora_rank) * shard(
        n_heads, tp
    )
    return replicated, by_heads + o_groups * o_lora_rank * hidden * shard(o_groups, tp)


@law(DIMENSIONLESS)
def compressor_params(hidden: sp.Expr, head_dim: sp.Expr, overlap: sp.Expr | int) -> sp.Expr:
    """A compressing layer's weights that pool each group of tokens into one entry: a key-value
    and a weight projection of the hidden state, each c·d wide, where c = 2 for CSA's
    overlapping groups and 1 for HCA's (DeepSeek-V4 inference/model.py Compressor: wkv,
    wgate); whole on each rank."""
    return 2 * hidden * overlap * head_dim


@law(INFORMATION, bits=INFORMATION)
def shared_kv_bytes(head_dim: sp.Expr, bits: sp.Expr) -> sp.Expr:
    """DeepSeek-V4's cache entry: one d-element vector serving as both key and value for every
    head (shared-KV MQA), whole on each TP rank."""
    return head_dim * bits


@law(DIMENSIONLESS, context=DIMENSIONLESS, chunk=DIMENSIONLESS)
def chunk_tokens(context: sp.Expr, chunk: sp.Expr) -> sp.Expr:
    """Tokens a chunked-local attention layer keeps and attends to at S tokens of context: those
    of the current chunk of C, S − C·⌊S/C⌋ (Llama 4's chunked attention on its RoPE layers,
    attention_chunk_size; vLLM frees the blocks of earlier chunks)."""
    return context - chunk * sp.floor(context / chunk)


@law(DIMENSIONLESS, prompt=DIMENSIONLESS, chunk=DIMENSIONLESS)
def chunk_tokens_mean(prompt: sp.Expr, chunk: sp.Expr) -> sp.Expr:
    """Tokens a prompt's token attends to on a chunked-local layer, on average over the P
    positions of the prompt: each whole chunk of C gives C²/2 token pairs, the last r = P −
    C·⌊P/C⌋ tokens r²/2, so (⌊P/C⌋·C² + r²)/(2P); P/2 below one chunk, as dense attention
    (and 0 for no prompt: the denominator held at 1 token)."""
    whole = sp.floor(prompt / chunk)
    rest = prompt - chunk * whole
    return (whole * chunk**2 + rest**2) / (2 * max_of(prompt, 1))


@law(DIMENSIONLESS, context=DIMENSIONLESS, window=DIMENSIONLESS, ratio=DIMENSIONLESS)
def compressed_entries(context: sp.Expr, window: sp.Expr, ratio: sp.Expr) -> sp.Expr:
    """Cache entries one layer of compressing attention keeps for S tokens: the last W
    uncompressed (its sliding-window branch) and one per r tokens of the whole context,
    S/r taken as a continuous count (DeepSeek-V4 report: CSA r = 4, HCA r = 128)."""
    return min_of(context, window) + context / ratio


@law(INFORMATION, bits=INFORMATION)
def mla_kv_bytes(kv_lora_rank: sp.Expr, qk_rope_head_dim: sp.Expr, bits: sp.Expr) -> sp.Expr:
    """MLA KV cache per token per layer: the latent (r_kv + d_rope) elements, shared by all
    heads, so every TP rank keeps it whole (DeepSeek-V2 §2.1)."""
    return (kv_lora_rank + qk_rope_head_dim) * bits


@law(INFORMATION, bits=INFORMATION)
def gqa_kv_bytes(
    n_kv_heads: sp.Expr, head_dim: sp.Expr, tp: sp.Expr, bits: sp.Expr, kv_tensors: int = 2
) -> sp.Expr:
    """GQA KV cache per token per layer on one TP rank: 2·H_kv·d_h elements split by KV
    heads, or H_kv·d_h where the keys serve as values (``kv_tensors`` = 1, `gqa_params`)."""
    return kv_tensors * n_kv_heads * head_dim * shard(n_kv_heads, tp) * bits


@law(OPERATION)
def mla_score_flops(
    kv_lora_rank: sp.Expr, qk_rope_head_dim: sp.Expr, n_heads: sp.Expr, tp: sp.Expr,
    context: sp.Expr,
) -> sp.Expr:  # fmt: skip
    """FLOPs per query token per layer on one TP rank to attend over S cached tokens with
    absorbed MLA: S·(2·r_kv + d_rope) multiply-adds per head."""
    per_head = context * (2 * kv_lora_rank + qk_rope_head_dim) * FLOPS_PER_MAC
    return per_head * n_heads * shard(n_heads, tp)


@law(OPERATION)
def mla_prompt_score_flops(
    qk_nope_head_dim: sp.Expr, qk_rope_head_dim: sp.Expr, v_head_dim: sp.Expr,
    n_heads: sp.Expr, tp: sp.Expr, context: sp.Expr,
) -> sp.Expr:  # fmt: skip
    """FLOPs per prompt token per layer on one TP rank to attend over S tokens with MLA
    expanded to multi-head form, as prefill kernels run it (the latent is up-projected once
    per token, DeepSeek-V2 §2.1.2): S·(d_nope + d_rope + d_v) multiply-adds per head."""
    per_head = context * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) * FLOPS_PER_MAC
    return per_head * n_heads * shard(n_heads, tp)


@law(OPERATION)
def mla_sparse_prompt_flops(
    kv_lora_rank: sp.Expr, qk_rope_head_dim: sp.Expr, n_heads: sp.Expr, tp: sp.Expr,
    head_tile: sp.Expr, slots: sp.Expr,
) -> sp.Expr:  # fmt: skip
    """FLOPs per prompt token per layer on one TP rank of the token-sparse MLA prefill kernel:
    absorbed form (keys of r_kv + d_rope, values of r_kv: FlashMLA's MQA mode) over a fixed
    k_I slots per query, invalid ones masked rather than skipped, for the rank's ⌈H/tp⌉ heads
    zero-padded up to a multiple of the kernel's head tile (FlashMLA README, sparse prefill;
    sgl-project/sglang nsa_backend.py `_forward_flashmla_sparse`)."""
    heads = head_tile * sp.ceiling(sp.ceiling(n_heads / tp) / head_tile)
    return slots * (2 * kv_lora_rank + qk_rope_head_dim) * FLOPS_PER_MAC * heads


@law(OPERATION)
def gqa_score_flops(head_dim: sp.Expr, n_heads: sp.Expr, tp: sp.Expr, context: sp.Expr) -> sp.Expr:
    """FLOPs per query token per layer on one TP rank to attend over S cached tokens with
    GQA: 2·S·d_h multiply-adds per head (scores and values)."""
    return 2 * context * head_dim * FLOPS_PER_MAC * n_heads * shard(n_heads, tp)


@law(OPERATION)
def indexer_score_flops(index_heads: sp.Expr, index_head_dim: sp.Expr, context: sp.Expr) -> sp.Expr:
    """FLOPs per query token per layer of DeepSeek Sparse Attention's lightning indexer: a
    ReLU-gated dot product of d_I per index head with each of S cached index keys, summed
    over the H_I heads with per-head weights, S·H_I·d_I multiply-adds (DeepSeek-V3.2-Exp
    report, §2.1); every TP rank scores every key for its own queries."""
    return context * index_heads * index_head_dim * FLOPS_PER_MAC


@law(INFORMATION, bits=INFORMATION)
def index_key_bytes(index_head_dim: sp.Expr, bits: sp.Expr) -> sp.Expr:
    """Index-key cache per token per layer: one key of d_I elements shared by the indexer's
    heads (DeepSeek-V3.2-Exp §2.1: a single key per token, like MQA), whole on every TP rank."""
    return index_head_dim * bits


@law(DIMENSIONLESS)
def indexer_params(
    hidden: sp.Expr, q_lora_rank: sp.Expr, index_heads: sp.Expr, index_head_dim: sp.Expr
) -> sp.Expr:
    """Lightning-indexer weights per layer: the query up-projection from MLA's query latent
    (r_q·H_I·d_I), the key projection (h·d_I) and the head weights (h·H_I) (DeepSeek-V3.2
    inference/model.py Indexer: wq_b, wk, weights_proj); replicated across TP ranks."""
    return (
        q_lora_rank * index_heads * index_head_dim + hidden * index_head_dim + hidden * index_heads
    )


@law((DIMENSIONLESS, DIMENSIONLESS))
def linear_state_params(
    hidden: sp.Expr, key_heads: sp.Expr, value_heads: sp.Expr, key_dim: sp.Expr,
    value_dim: sp.Expr, tp: sp.Expr, scalars: sp.Expr | int = 2, decay_rank: sp.Expr | int = 0,
) -> tuple[sp.Expr, sp.Expr]:  # fmt: skip
    """A linear-attention (state-space) layer's weights on one TP rank, as (replicated, split):
    the input projection to queries and keys (2·H_k·d_k), values and output gate (2·H_v·d_v)
    and s scalars per value head, and the output projection (H_v·d_v·h), all split by heads.
    Gated DeltaNet (Yang et al. 2024, as Qwen3-Next and Qwen3.5 implement it: in_proj_qkvz,
    in_proj_ba, out_proj) has s = 2 (decay and write strength); Mamba-2 (Dao & Gu 2024, §7:
    in_proj to z, x, B, C over G groups of N, and dt) has the same form with keys and queries
    as B and C (H_k = G, d_k = N) and s = 1. Kimi Delta Attention (Kimi Linear, Moonshot 2025:
    q, k, v, a full-rank output gate, one write strength per head) adds a decay per key channel
    through rank r, h·r whole on each rank and r·H_k·d_k split (f_a_proj, f_b_proj)."""
    qk = hidden * 2 * key_heads * key_dim * shard(key_heads, tp)
    vz = hidden * (2 * value_heads * value_dim + scalars * value_heads) * shard(value_heads, tp)
    out = value_heads * value_dim * hidden * shard(value_heads, tp)
    decay = decay_rank * key_heads * key_dim * shard(key_heads, tp)
    return hidden * decay_rank, qk + vz + out + decay


@law(DIMENSIONLESS)
def linear_state_elements(value_heads: sp.Expr, key_dim: sp.Expr, value_dim: sp.Expr,
                          tp: sp.Expr) -> sp.Expr:  # fmt: skip
    """A request's recurrent state per layer on one TP rank: a d_k x d_v matrix per value head,
    whatever its context (Gated DeltaNet's S_t; Mamba-2's H x P x N state)."""
    return value_heads * shard(value_heads, tp) * key_dim * value_dim


@law(OPERATION)
def linear_state_flops(value_heads: sp.Expr, key_dim: sp.Expr, value_dim: sp.Expr, tp: sp.Expr,
                       chunk: sp.Expr, prompt: bool) -> sp.Expr:  # fmt: skip
    """FLOPs per token per layer on one TP rank of the recurrence: a rank-one update of each
    head's d_k x d_v state and its read-out by the query, 2·d_k·d_v multiply-adds per head
    (Gated DeltaNet eq. 10; Mamba-2's selective state update); a prompt token in the chunked
    form adds attention within its chunk of C tokens, C·(d_k + d_v) multiply-adds per head
    (Yang et al. 2024 §3.3; Mamba-2's SSD, Dao & Gu 2024 §6)."""
    per_head = 2 * key_dim * value_dim
    if prompt:
        per_head += chunk * (key_dim + value_dim)
    return per_head * FLOPS_PER_MAC * value_heads * shard(value_heads, tp)


# kernels of one layer's chunked prefill, by form: the delta rule's (flash-linear-attention's
# chunk_gated_delta_rule, which vLLM and SGLang run for Gated DeltaNet prompts) are the L2
# norms of queries and keys, then chunk_local_cumsum, chunk_scaled_dot_kkt_fwd, solve_tril,
# recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h and chunk_fwd_o (fla/ops/gated_delta_rule/
# chunk.py); Mamba-2's SSD (mamba_chunk_scan_combined) runs _chunk_cumsum_fwd,
# _chunk_state_fwd, _state_passing_fwd, _bmm_chunk_fwd and _chunk_scan_fwd
# (state-spaces/mamba mamba_ssm/ops/triton/ssd_combined.py)
CHUNK_KERNELS = {"delta_rule": 8, "ssd": 5}


@law(DIMENSIONLESS, tokens=DIMENSIONLESS, chunk=DIMENSIONLESS)
def chunked_tokens(tokens: sp.Expr, chunk: sp.Expr) -> sp.Expr:
    """Tokens a chunked recurrence computes for a sequence of T tokens: ⌈T/C⌉·C, its last
    chunk padded to a whole one (the chunk kernels tile C tokens at a time)."""
    return sp.ceiling(tokens / chunk) * chunk


@law(DIMENSIONLESS, tokens=DIMENSIONLESS, chunk=DIMENSIONLESS)
def chunk_chain(tokens: sp.Expr, chunk: sp.Expr) -> sp.Expr:
    """Dependent steps of a chunked recurrence along one sequence of T tokens: ⌈T/C⌉, each
    chunk's state computed from the previous chunk's (Yang et al. 2024 §3.3; FLA's
    chunk_gated_delta_rule_fwd_h walks a sequence's chunks in order, its sequences and heads
    in parallel)."""
    return sp.ceiling(tokens / chunk)


# ---------------------------------------------------------------- routing


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, top_k=DIMENSIONLESS, tokens=DIMENSIONLESS)
def expected_distinct_experts(n_experts: sp.Expr, top_k: sp.Expr, tokens: sp.Expr) -> sp.Expr:
    """E·(1 − (1 − k/E)^T): experts hit at least once by T tokens under uniform top-k routing
    (each token's k picks treated as independent draws; docs/physics.md, the
    moe-transformer model). A k above E, which `top_k_within_experts` refuses, misses no
    expert (the base held at 0), so the refusal is reported, not a complex number."""
    return n_experts * (1 - max_of(0, 1 - top_k / n_experts) ** tokens)


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, top_k=DIMENSIONLESS, fraction=DIMENSIONLESS)
def tokens_for_expert_fraction(n_experts: sp.Expr, top_k: sp.Expr, fraction: sp.Expr) -> sp.Expr:
    """The inverse of `expected_distinct_experts`: the tokens T at which a fraction φ of the
    experts is hit in expectation, T = ln(1 − φ) / ln(1 − k/E)."""
    return sp.log(1 - fraction) / sp.log(1 - top_k / n_experts)


# ---------------------------------------------------------------- collectives
# α-β laws (Thakur, Rabenseifner & Gropp 2005; NCCL docs): S bytes per GPU, N GPUs, bus
# bandwidth β (nccl-tests convention), per-step latency α.


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def ring_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Ring all-reduce: 2(N−1)·α + 2(N−1)/N · S/β."""
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def ring_allgather(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Ring all-gather or reduce-scatter of S bytes per GPU (the gathered buffer, or the one
    reduced): (N−1)·α + (N−1)/N · S/β, half a ring all-reduce (nccl-tests' bus bandwidth
    convention)."""
    return (n - 1) * alpha + (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def tree_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Double-binary-tree all-reduce: 2·log2(N)·α + 2(N−1)/N · S/β."""
    return 2 * sp.log(n, 2) * alpha + 2 * (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def switch_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """In-switch (NVLS) all-reduce: one switch round trip α + 2(N−1)/N · S/β."""
    return alpha + 2 * (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def oneshot_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """One-shot all-reduce: α₁ + (N−1)·S/β₁. Each GPU reads every peer's whole buffer in one
    step and reduces it locally, so it moves N−1 times the message but pays one latency: the
    custom kernels engines run at small sizes (TensorRT-LLM's ONESHOT strategy, SGLang's and
    vLLM's custom all-reduce; Lamport-synchronised in TensorRT-LLM)."""
    return alpha + (n - 1) * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, alpha_peer=TIME, beta=BANDWIDTH)
def all_to_all(
    n: sp.Expr,
    size: sp.Expr,
    alpha: sp.Expr,
    alpha_peer: sp.Expr,
    beta: sp.Expr,
    reach: sp.Expr = sp.S.One,
) -> sp.Expr:
    """All-to-all: α + (N−1)·ρ·α_peer + (N−1)/N · S/β (S bytes sent per GPU, 1/N of them to
    itself; ρ the share of the N−1 peers it messages, 1 unless stated)."""
    return alpha + (n - 1) * reach * alpha_peer + (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH,
     switch_alpha=TIME, oneshot_alpha=TIME, oneshot_beta=BANDWIDTH)  # fmt: skip
def cheapest_allreduce(
    n: sp.Expr,
    size: sp.Expr,
    alpha: sp.Expr,
    beta: sp.Expr,
    switch_alpha: sp.Expr | None = None,
    oneshot_alpha: sp.Expr | None = None,
    oneshot_beta: sp.Expr | None = None,
) -> sp.Expr:
    """The cheapest of ring, tree, (where the switch reduces, ``switch_alpha`` given)
    in-switch and (where the domain states its kernel, ``oneshot_alpha`` and ``oneshot_beta``
    given) one-shot all-reduce, as an engine's strategy table or NCCL's tuner picks."""
    options = [ring_allreduce(n, size, alpha, beta), tree_allreduce(n, size, alpha, beta)]
    if switch_alpha is not None:
        options.append(switch_allreduce(n, size, switch_alpha, beta))
    if oneshot_alpha is not None and oneshot_beta is not None:
        options.append(oneshot_allreduce(n, size, oneshot_alpha, oneshot_beta))
    return sp.Min(*options, evaluate=False)


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, domain=DIMENSIONLESS, within=TIME,
     net_alpha=TIME, nic_beta=BANDWIDTH)  # fmt: skip
def hierarchical_allreduce(
    n: sp.Expr,
    size: sp.Expr,
    domain: sp.Expr,
    within: sp.Expr,
    net_alpha: sp.Expr,
    nic_beta: sp.Expr,
) -> sp.Expr:
    """All-reduce over N > D GPUs in ⌈N/D⌉ domains: reduce inside each domain (``within``, the
    time of that all-reduce of S bytes over D GPUs), then all-reduce the 1/D shard each GPU owns
    across domains (cheaper of ring and tree), each GPU over its own NIC at ``nic_beta``
    (already divided by the fabric's oversubscription)."""
    d = sp.ceiling(n / domain)
    piece = size / domain
    across = sp.Min(
        ring_allreduce(d, piece, net_alpha, nic_beta),
        tree_allreduce(d, piece, net_alpha, nic_beta),
        evaluate=False,
    )
    return within + across


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, inside=DIMENSIONLESS, alpha=TIME,
     alpha_peer=TIME, beta=BANDWIDTH, net_alpha=TIME, nic_beta=BANDWIDTH)  # fmt: skip
def hierarchical_all_to_all(
    n: sp.Expr,
    size: sp.Expr,
    inside: sp.Expr,
    alpha: sp.Expr,
    alpha_peer: sp.Expr,
    beta: sp.Expr,
    net_alpha: sp.Expr,
    nic_beta: sp.Expr,
    reach: sp.Expr = sp.S.One,
    across: sp.Expr | None = None,
) -> sp.Expr:
    """All-to-all over N GPUs of which ``inside`` share each scale-up domain: the (N−d)/N of
    each GPU's bytes bound for other domains leave over its NIC (``nic_beta``,
    oversubscription included), after the all-to-all among the d inside (messaging a share
    ρ of them). ``across``: the bytes that leave over the NIC where the sender says: a
    dispatcher that crosses the network once per destination node and forwards each copy
    inside that node (DeepEP normal kernels), so that all S cross a scale-up domain once."""
    if across is None:
        within = all_to_all(inside, size * inside / n, alpha, alpha_peer, beta, reach)
        return within + net_alpha + (n - inside) / n * size / nic_beta
    return all_to_all(inside, size, alpha, alpha_peer, beta, reach) + net_alpha + across / nic_beta


@law(TIME, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def point_to_point(size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """A send of S bytes over one link: α + S/β."""
    return alpha + size / beta


# ---------------------------------------------------------------- speculative decoding


@law(DIMENSIONLESS, acceptance=DIMENSIONLESS, decay=DIMENSIONLESS)
def chain_accepted(
    acceptance: sp.Expr, drafts: sp.Expr | int, decay: sp.Expr | float = 1
) -> sp.Expr:
    """A chain of n drafts, the i-th accepted with probability a_i = a·d^(i−1) given its
    prefix was: τ(n) = 1 + Σ_{i=1..n} Π_{j≤i} a_j = Σ_{i=0..n} a^i·d^(i(i−1)/2) (Leviathan et
    al. 2023, eq. 1, at d = 1: (1 − a^(n+1)) / (1 − a); d < 1 for drafts predicted from drafts,
    TensorRT-LLM tech blog 1's MTP 1-5 ablation). A whole-number n gives the sum itself, which
    stays finite as a → 1; a symbolic n only at d = 1."""
    if isinstance(drafts, int):
        return sp.Add(*(acceptance**i * decay ** (i * (i - 1) // 2) for i in range(drafts + 1)))
    if decay != 1:
        raise PluginError("chain_accepted: a decay needs a whole-number draft count")
    return (1 - acceptance ** (drafts + 1)) / (1 - acceptance)


@law(DIMENSIONLESS, acceptance=DIMENSIONLESS, budget=DIMENSIONLESS)
def tree_accepted(acceptance: sp.Expr, budget: sp.Expr, depth: int) -> sp.Expr:
    """A draft tree of B nodes over D levels offers B/D candidates per level; a level is
    accepted if any candidate matches, a_tree = 1 − (1 − a)^(B/D), and τ is the chain law at
    a_tree over D levels. A first-order model: candidates treated as independent."""
    per_level = 1 - (1 - acceptance) ** (sp.sympify(budget) / depth)
    return chain_accepted(per_level, depth)


# ---------------------------------------------------------------- overlap


# ---------------------------------------------------------------- pipelines
# p stages of consecutive layers, m micro-batches; t_s: one stage's time on one micro-batch.


@law(DIMENSIONLESS, stages=DIMENSIONLESS, microbatches=DIMENSIONLESS)
def pipeline_fill(stages: sp.Expr, microbatches: sp.Expr) -> sp.Expr:
    """One batch of m micro-batches through an empty pipeline of p stages (GPipe's schedule,
    Huang et al. 2019): (m + p − 1)·t_s against a stage's own m·t_s, a factor (m + p − 1)/m;
    its bubble, the idle share, is (p − 1)/(m + p − 1)."""
    return (microbatches + stages - 1) / microbatches


@law(DIMENSIONLESS, stages=DIMENSIONLESS, microbatches=DIMENSIONLESS)
def pipeline_iteration(stages: sp.Expr, microbatches: sp.Expr) -> sp.Expr:
    """Decode iterations with m micro-batches in flight over p stages, each micro-batch's next
    token waiting for its last: a micro-batch returns every max(m, p) stage slots, a factor
    max(m, p)/m on a stage's own m·t_s (no bubble once m ≥ p; vLLM keeps p micro-batches,
    its virtual engines)."""
    return max_of(microbatches, stages) / microbatches


@law(DIMENSIONLESS, stages=DIMENSIONLESS, microbatches=DIMENSIONLESS)
def bubble_fraction(stages: sp.Expr, microbatches: sp.Expr) -> sp.Expr:
    """The idle share of `pipeline_fill`'s schedule: (p − 1)/(m + p − 1)."""
    return (stages - 1) / (microbatches + stages - 1)


@law(TIME, longest=TIME, total=TIME, hidden=DIMENSIONLESS)
def partial_overlap(longest: sp.Expr, total: sp.Expr, hidden: sp.Expr) -> sp.Expr:
    """Lanes run concurrently with a fraction η of the shorter lanes' time hidden under the
    longest: t = max + (1 − η)(Σ − max); η = 1 is perfect overlap (the max), η = 0 runs them
    one after the other (the sum). Two-batch overlap's stages (DeepSeek's DualPipe and
    SGLang's TBO: one micro-batch's communication under the other's compute) have η < 1 where
    the kernels share SMs and links; η is the hidden share of the shorter side."""
    return longest + (1 - hidden) * (total - longest)


@law(DIMENSIONLESS, users=DIMENSIONLESS, limit_batch=DIMENSIONLESS)
def under_load(light: sp.Expr, heavy: sp.Expr, users: sp.Expr, limit_batch: sp.Expr) -> sp.Expr:
    """An engine that limits speculation under load runs ``light`` while a rank's batch b is
    at most B and ``heavy`` above it (TensorRT-LLM's speculative max_concurrency and
    draft_len_schedule, vLLM's disable_by_batch_size): Piecewise on b, so it vectorises."""
    return sp.Piecewise((light, users <= limit_batch), (heavy, True))


# ---------------------------------------------------------------- expert dispatch
# Uniform top-k routing: a token's k experts are k of the E drawn without replacement. DeepEP
# (deepseek-ai/DeepEP docs/legacy.md @ 0297fc80): the normal (high-throughput) kernels send a
# token once per destination rank, and once per destination node across RDMA (then forward it
# over NVLink); the low-latency kernels send one message per (token, expert).


def _all_missed(pool: sp.Expr, held: sp.Expr, top_k: int) -> sp.Expr:
    """C(P − H, k)/C(P, k) = Π_{i<k} (P − H − i)/(P − i): the chance that k picks without
    replacement from P items all miss a given H of them."""
    return sp.Mul(*(max_of(0, pool - held - i) / (pool - i) for i in range(top_k)))


def _choose(n: sp.Expr, r: int) -> sp.Expr:
    """C(n, r) = Π_{l<r} (n − l)/r! for a whole r (n may be a symbol)."""
    return sp.Mul(*(n - v for v in range(r))) / sp.factorial(r)


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, ranks=DIMENSIONLESS)
def destination_ranks(n_experts: sp.Expr, top_k: int, ranks: sp.Expr) -> sp.Expr:
    """Distinct ranks a token's top-k experts live on, E/R experts per rank:
    R·[1 − C(E − E/R, k)/C(E, k)], the sender's own rank included (what a per-rank dispatcher
    sends: one copy each)."""
    return ranks * (1 - _all_missed(n_experts, n_experts / ranks, top_k))


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, ranks=DIMENSIONLESS, tokens=DIMENSIONLESS)
def rank_reach(n_experts: sp.Expr, top_k: int, ranks: sp.Expr, tokens: sp.Expr) -> sp.Expr:
    """The chance that a given other rank receives at least one of a sender's T tokens (each
    routed on its own): 1 − [C(E − E/R, k)/C(E, k)]^T; the peers a sender messages are (R − 1)
    times it. At T = 1, (R − 1)·reach = (R − 1)/R · `destination_ranks`: the remote share of a
    token's destinations (the sender's own copy is not on the wire)."""
    return 1 - _all_missed(n_experts, n_experts / ranks, top_k) ** tokens


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, nodes=DIMENSIONLESS, groups=DIMENSIONLESS)
def destination_nodes(
    n_experts: sp.Expr, top_k: int, nodes: sp.Expr, groups: sp.Expr, topk_groups: int
) -> sp.Expr:
    """Distinct nodes a token reaches (its own included) under group-limited routing
    (DeepSeek-V3, arXiv 2412.19437 §2.1.2: G groups of E/G experts; a token picks t groups,
    then its k experts uniformly among their M = t·E/G), the experts placed in order, E/N per
    node. N ≤ G, a node holding c = G/N whole groups: N·[1 − Σ_j H(j)·C(M − j·E/G, k)/C(M, k)],
    H(j) = C(c, j)·C(G − c, t − j)/C(G, t) the chance j of the t groups are on the node.
    N > G, each group over N/G nodes: (t·N/G)·[1 − C(M − E/N, k)/C(M, k)]. G = t = 1 is
    unrestricted routing, `destination_ranks` over N nodes."""
    pool = topk_groups * n_experts / groups
    whole = groups / nodes
    missed = sp.Add(
        *(
            max_of(0, _choose(whole, j) * _choose(groups - whole, topk_groups - j))
            / _choose(groups, topk_groups)
            * _all_missed(pool, j * n_experts / groups, top_k)
            for j in range(topk_groups + 1)
        )
    )
    spread = topk_groups * nodes / groups * (1 - _all_missed(pool, n_experts / nodes, top_k))
    return sp.Piecewise((nodes * (1 - missed), nodes <= groups), (spread, True))


# ---------------------------------------------------------------- memory


@law(DIMENSIONLESS, tokens=DIMENSIONLESS, block=DIMENSIONLESS)
def paged_tokens(tokens: sp.Expr, block: sp.Expr) -> sp.Expr:
    """KV slots a sequence of L tokens holds in a paged cache of b-token blocks, ⌈L/b⌉·b,
    on average over sequences whose lengths fall anywhere in a block: L + (b − 1)/2 (vLLM
    PagedAttention, Kwon et al. 2023: the waste is at most one block per sequence)."""
    return tokens + (block - 1) / 2


@law(INFORMATION, total=INFORMATION, weights=INFORMATION, fraction=DIMENSIONLESS)
def usable_memory(total: sp.Expr, weights: sp.Expr, fraction: sp.Expr, of_free: bool) -> sp.Expr:
    """What the weights and the KV cache may hold of a GPU's memory M: a fraction f of M
    (SGLang --mem-fraction-static, vLLM --gpu-memory-utilization: the rest is left to
    activations and CUDA graphs), or, ``of_free``, the weights plus f of the memory they leave
    free (TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction), at most M."""
    if of_free:
        return min_of(total, weights + fraction * (total - weights))
    return fraction * total


# ---------------------------------------------------------------- queueing


@law(DIMENSIONLESS, customers=DIMENSIONLESS, cycle=TIME, occupancy=TIME, scv=DIMENSIONLESS)
def closed_loop_utilisation(
    customers: sp.Expr, cycle: sp.Expr, occupancy: sp.Expr, scv: sp.Expr = sp.S.Zero
) -> sp.Expr:
    """Utilisation ρ of a first-come-first-served server in a closed loop of N customers, each
    holding it for s (``occupancy``, squared coefficient of variation c²) and then spending a
    (``cycle``: its own service latency and think time) elsewhere before it returns. Mean value
    analysis with Schweitzer's approximation (an arrival sees (N − 1)/N of the mean queue;
    Lazowska et al., Quantitative System Performance, 1984, ch. 6) and the M/G/1 residual
    s(1 + c²)/2 of the customer in service gives the wait W = f·ρ·s(1 + c²)/2 / (1 − f·ρ),
    f = (N − 1)/N; with the throughput X = N/(a + W) = ρ/s (Little's law) ρ solves
    f(s(1 + c²)/2 − a)ρ² + (a + f·N·s)ρ − N·s = 0. Its root in [0, 1], capped at 1 (the
    asymptotic bound X ≤ 1/s of a closed system: Harchol-Balter, Performance Modeling and
    Design of Computer Systems, 2013, ch. 7)."""
    f = (customers - 1) / customers
    quad = f * (occupancy * (1 + scv) / 2 - cycle)
    lin = cycle + f * customers * occupancy
    demand = customers * occupancy
    # lin² + 4·quad·demand = (a − f·N·s)² + 2f(1 + c²)·N·s², never negative
    root = 2 * demand / (lin + sp.sqrt(lin**2 + 4 * quad * demand))
    return min_of(root, 1)


@law(TIME, customers=DIMENSIONLESS, cycle=TIME, occupancy=TIME, utilisation=DIMENSIONLESS,
     scv=DIMENSIONLESS)  # fmt: skip
def closed_loop_wait(
    customers: sp.Expr,
    cycle: sp.Expr,
    occupancy: sp.Expr,
    utilisation: sp.Expr,
    scv: sp.Expr = sp.S.Zero,
) -> sp.Expr:
    """Mean queueing wait in the closed loop of `closed_loop_utilisation` at its utilisation ρ:
    W = max(f·ρ·s(1 + c²)/2 / (1 − f·ρ), N·s − a). The second side is the asymptotic bound of
    a saturated closed system, R ≥ N·s − a (Harchol-Balter 2013, ch. 7): past the knee
    N* = (a + s)/s the wait grows by s per customer."""
    seen = (customers - 1) / customers * utilisation
    mva = seen * occupancy * (1 + scv) / (2 * (1 - seen))
    return max_of(mva, customers * occupancy - cycle)


@law(TIME, utilisation=DIMENSIONLESS, occupancy=TIME, scv=DIMENSIONLESS)
def mg1_wait(utilisation: sp.Expr, occupancy: sp.Expr, scv: sp.Expr = sp.S.Zero) -> sp.Expr:
    """Mean queueing wait of an M/G/1 queue (Poisson arrivals, service s with squared
    coefficient of variation c², utilisation ρ < 1), the Pollaczek–Khinchine formula
    W = ρ·s·(1 + c²) / (2(1 − ρ)) (Kleinrock, Queueing Systems vol. 1, 1975, ch. 5;
    Harchol-Balter 2013, ch. 23); c² = 0 is M/D/1."""
    return utilisation * occupancy * (1 + scv) / (2 * (1 - utilisation))


@law(TIME, mean=TIME, backlog=TIME, utilisation=DIMENSIONLESS, quantile=DIMENSIONLESS)
def wait_quantile(
    mean: sp.Expr, backlog: sp.Expr, utilisation: sp.Expr, quantile: sp.Expr
) -> sp.Expr:
    """The p-quantile of a queueing wait of mean W whose part beyond a fixed ``backlog`` B
    (a saturated closed loop's N·s − a, else 0) is the exponential approximation of M/G/1
    waits: P(W − B > x) ≈ ρ·exp(−ρx/(W − B)) (an atom 1 − ρ at zero, P(wait) = ρ exactly for
    M/G/1, and Kingman's heavy-traffic exponential tail, Kleinrock, Queueing Systems vol. 2,
    1976, ch. 2), so w_p = B + max(0, (W − B)/ρ · ln(ρ/(1 − p))) (B where ρ ≤ 1 − p); ρ > 0."""
    # unevaluated: an assumption query on a Min/Max of step times takes minutes; where
    # ρ ≤ 1 − p the logarithm is ≤ 0 and the Max gives B
    log = sp.log(utilisation / (1 - quantile), evaluate=False)
    tail = sp.Mul(mean - backlog, log, 1 / utilisation, evaluate=False)
    return backlog + max_of(tail, 0)


@law((DIMENSIONLESS, DIMENSIONLESS), n_experts=DIMENSIONLESS, top_k=DIMENSIONLESS,
     tokens=DIMENSIONLESS, ranks=DIMENSIONLESS)  # fmt: skip
def balanced_expert_load(
    n_experts: sp.Expr, top_k: sp.Expr, tokens: sp.Expr, ranks: sp.Expr
) -> tuple[sp.Expr, sp.Expr]:
    """(experts hit, picks) on one of R EP ranks when a balanced router spreads T tokens' k
    picks evenly over the E experts, as kernel benchmarks route (aiconfigurator's
    collect_moe ``balanced_logits``): hit = max(1, min(E, T·k)/R), picks = max(1, T·k/R) (the
    rank measured holds at least one pick)."""
    picks = tokens * top_k
    hit = max_of(1, min_of(n_experts, picks) / ranks)
    return hit, max_of(1, picks / ranks)


@law((DIMENSIONLESS, DIMENSIONLESS), n_experts=DIMENSIONLESS, top_k=DIMENSIONLESS,
     tokens=DIMENSIONLESS, ranks=DIMENSIONLESS)  # fmt: skip
def random_expert_load(
    n_experts: sp.Expr, top_k: sp.Expr, tokens: sp.Expr, ranks: sp.Expr
) -> tuple[sp.Expr, sp.Expr]:
    """(experts hit, picks) on one of R EP ranks when each of T tokens picks k of the E
    experts at random, as kernel tuners that draw top-k of random scores route (ROCm/aiter's
    fused-MoE tuner, csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py, unless
    TUNE_MOE_EXPERT_BALANCE): hit = max(1, E·(1 − (1 − k/E)^T)/R)
    (`expected_distinct_experts`), picks = max(1, T·k/R). Fewer experts than a balanced
    router's min(E, T·k) at small T: 23.8 of 33 at T = 4, k = 9."""
    hit = max_of(1, expected_distinct_experts(n_experts, top_k, tokens) / ranks)
    return hit, max_of(1, tokens * top_k / ranks)


# the m-blocks of Marlin's grouped GEMMs (rows of one expert per block), smallest first, and
# the fill below which a block is taken: vllm-project/vllm
# vllm/model_executor/layers/fused_moe/fused_marlin_moe.py (SGLang's fused_marlin_moe has
# the same loop)
MARLIN_ROW_BLOCKS = (8, 16, 32, 48, 64)
MARLIN_BLOCK_FILL = sp.Rational(9, 10)


@law((DIMENSIONLESS, DIMENSIONLESS), counted=DIMENSIONLESS, rows=DIMENSIONLESS)
def marlin_expert_blocks(counted: sp.Expr, rows: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(rows computed, weight passes) of one expert holding ``rows`` rows in Marlin's MoE
    GEMMs. The kernel picks one m-block b for the layer from its own count of rows per expert,
    c = M·k/E (M: the tokens it is given, E: the experts it holds): the smallest of 8, 16, 32,
    48, 64 with c/b < 0.9, else 64 (fused_marlin_moe, vLLM and SGLang). Each expert's rows are
    padded to whole blocks and each block streams the expert's weights again: computed =
    b·⌈r/b⌉, passes = ⌈r/b⌉."""
    blocks = [(sp.Integer(b), counted < MARLIN_BLOCK_FILL * b) for b in MARLIN_ROW_BLOCKS[:-1]]
    largest = sp.Integer(MARLIN_ROW_BLOCKS[-1])
    block = sp.Piecewise(*blocks, (largest, True))
    passes = sp.ceiling(rows / block)
    return block * passes, passes


@law(INFORMATION, picks=DIMENSIONLESS, tokens=DIMENSIONLESS, width=DIMENSIONLESS,
     input_bits=INFORMATION, output_bits=INFORMATION)  # fmt: skip
def moe_activation_bytes(
    picks: sp.Expr, tokens: sp.Expr, width: sp.Expr, input_bits: sp.Expr, output_bits: sp.Expr
) -> sp.Expr:
    """Activation bytes a layer's routed experts move besides their grouped GEMMs' weights,
    in the memory-bound steps around the GEMMs (TensorRT-LLM's CUTLASS MoE,
    cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu: expandInputRowsKernel
    quantises, finalizeMoeRoutingKernel un-permutes, weights and reduces): each token the
    rank holds is read and written quantised (b_out + b_in) and its combined output written
    (b_out); the first GEMM reads each of the rank's picks' rows of ``width`` at the GEMMs'
    input precision b_in, the second writes it at the output precision b_out and the
    finalize reads it back (b_in + 2·b_out again): width·(picks + tokens)·(b_in + 2·b_out),
    the traffic every library has (a separate permutation kernel adds 2·b_in per pick). It
    grows with the picks, not the experts' width, so it dominates where experts are split
    thin and at prefill sizes (docs/physics.md, "Activation traffic of the routed experts")."""
    return width * (picks + tokens) * (input_bits + 2 * output_bits)


# ---------------------------------------------------------------- in-flight batching


def _busiest_share(count: sp.Expr, ranks: sp.Expr) -> sp.Expr:
    """E⌈A/R⌉ for A ~ Poisson(Λ) dealt round-robin over R ranks: max(1 − e^(−Λ), Λ/R +
    (1 − 1/R)/2 · (1 − e^(−Λ))), exact for Λ ≪ R (one each) and for residues of A mod R
    spread evenly (√Λ ≫ R); high in between (Λ ≈ R, √Λ < R: the residues are not even
    there), by up to 18% at R = 32, 26% at 72, 31% at 144, and low by up to 9.4% at R = 2-4
    (docs/physics.md gives the exact series)."""
    some = 1 - sp.exp(-count)
    return max_of(some, count / ranks + (1 - 1 / ranks) / 2 * some)


@law((DIMENSIONLESS, DIMENSIONLESS), arrivals=DIMENSIONLESS, ranks=DIMENSIONLESS,
     timeout=DIMENSIONLESS)  # fmt: skip
def balance_window(arrivals: sp.Expr, ranks: sp.Expr, timeout: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(prompts placed together n, mean iterations a prompt waits) when synchronised
    placement holds prompts until each of R attention ranks can take one, or until the
    first has waited W iterations (TensorRT-LLM attention_dp_config enable_balance,
    timeout_iters; tech blog 10, ADP Balance Strategy). In a closed loop every rank is full
    (the engine's batch is C/R per rank), so a rank can take a prompt only when one of its
    own requests finishes, at λ/R per iteration. A window opened by one prompt closes
    after w = min(W, H(R − 1)·R/λ) iterations (the expected last of the other ranks' first
    completions; H the harmonic number, ≈ ln k + γ + 1/(2k)) and places the n = 1 + λ·w
    prompts that arrived, the first having waited w and the rest w/2 on average: a mean
    wait of w·(1 + λw/2)/n (docs/physics.md, in-flight batching)."""
    others = max_of(ranks - 1, 1)
    harmonic = sp.log(others) + sp.EulerGamma + 1 / (2 * others)
    window = min_of(timeout, harmonic * ranks / arrivals)
    together = 1 + arrivals * window
    return together, window * (1 + arrivals * window / 2) / together


@law((DIMENSIONLESS, DIMENSIONLESS), arrivals=DIMENSIONLESS, prompt=DIMENSIONLESS,
     chunk=DIMENSIONLESS, ranks=DIMENSIONLESS, together=DIMENSIONLESS)  # fmt: skip
def busiest_rank_prefill(
    arrivals: sp.Expr,
    prompt: sp.Expr,
    chunk: sp.Expr,
    ranks: sp.Expr,
    synchronised: bool,
    interleaved: bool,
    together: sp.Expr | None = None,
) -> tuple[sp.Expr, sp.Expr]:
    """Prompt tokens the busiest of R attention ranks prefills per decode iteration, in
    expectation, and the prefill passes of their own per decode iteration. Prompts of I
    tokens arrive as a Poisson stream of λ per iteration; a pass prefills at most P tokens
    per rank. Mixed into decode iterations (one pass each), a prompt is g = min(I, P)-token
    pieces, Λ = λ·I/g per iteration, the busiest rank takes min(P, g·E⌈Λ/R⌉) and no pass is
    its own. Interleaved, every decode iteration's prompts are prefilled before the next:
    the busiest rank takes I·E⌈λ/R⌉ in max((1 − e^(−λ))·⌈I/P⌉, tokens/P) passes. Dealt
    round-robin or to the least-loaded rank (`_busiest_share`); ``synchronised``
    (TensorRT-LLM's attention-DP balance, tech blog 10): ranks wait to take prompts
    together, n of them at a time (``together``, default R; `balance_window`) on
    min(n, R) ranks, so the busiest holds λ·I/min(n, R), in λ·⌈I/P⌉/min(n, R) passes. A
    stable mixed rank needs λ·I/R ≤ P (docs/physics.md)."""
    if synchronised:
        n = ranks if together is None else min_of(together, ranks)
        held = arrivals * prompt / n
        if interleaved:
            return held, arrivals * sp.ceiling(prompt / chunk) / n
        return min_of(chunk, held), sp.S.Zero
    if interleaved:
        tokens = prompt * _busiest_share(arrivals, ranks)
        some = 1 - sp.exp(-arrivals)
        return tokens, max_of(some * sp.ceiling(prompt / chunk), tokens / chunk)
    piece = min_of(prompt, chunk)
    return min_of(chunk, piece * _busiest_share(arrivals * prompt / piece, ranks)), sp.S.Zero


@law(DIMENSIONLESS, busiest=DIMENSIONLESS, arrivals=DIMENSIONLESS, prompt=DIMENSIONLESS,
     chunk=DIMENSIONLESS)  # fmt: skip
def prefill_iteration_share(
    busiest: sp.Expr, arrivals: sp.Expr, prompt: sp.Expr, chunk: sp.Expr, synchronised: bool
) -> sp.Expr:
    """Share f of a mixed engine's decode iterations in which the busiest attention rank
    prefills, B prompt tokens per iteration on it in expectation (`busiest_rank_prefill`),
    prompts of I tokens arriving at λ per iteration in pieces of g = min(I, P). Dealt as they
    come, an iteration prefills unless no piece arrived, f = max(1 − e^(−λ·I/g), B/P) (at
    most P per iteration); ``synchronised``, every rank takes a piece together, f = min(1,
    B/g). Those iterations carry B/f prompt tokens, the others none, so the mean iteration
    costs (1 − f)·T(0) + f·T(B/f), not T(B), which would spread one prompt thinly over every
    iteration: a step's cost is concave in its tokens where experts touched saturate and
    convex where a roof turns compute-bound (docs/physics.md, in-flight batching)."""
    piece = min_of(prompt, chunk)
    if synchronised:
        return min_of(1, busiest / piece)
    return min_of(1, max_of(1 - sp.exp(-arrivals * prompt / piece), busiest / chunk))
