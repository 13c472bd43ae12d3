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
from stepwall.core.errors import DimensionError
from stepwall.core.symbols import constant
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
    elif rows != 0:
        slowdown = 1 + half_rows / sp.Max(rows, half_rows, evaluate=False)
    else:
        slowdown = sp.S.One
    sides = [bytes_ / (bandwidth * mem_eff), flops * slowdown / (peak * flop_eff)]
    if serial_bandwidth is not None and serial_bytes != 0:
        sides.append(serial_bytes / serial_bandwidth)
    return sp.Max(*sides, evaluate=False)


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


@law(DIMENSIONLESS, hidden=DIMENSIONLESS, intermediate=DIMENSIONLESS)
def ffn_params(hidden: sp.Expr, intermediate: sp.Expr) -> sp.Expr:
    """A gated FFN (gate, up, down projections) holds 3·h·I weights."""
    return 3 * hidden * intermediate


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


@law((DIMENSIONLESS, DIMENSIONLESS))
def gqa_params(
    hidden: sp.Expr, n_heads: sp.Expr, n_kv_heads: sp.Expr, head_dim: sp.Expr, tp: sp.Expr
) -> tuple[sp.Expr, sp.Expr]:
    """GQA weights per layer on one TP rank, as (replicated, split) parameter counts: q and o
    (2·h·H·d_h) split by heads, k and v (2·h·H_kv·d_h) split by KV heads."""
    q_o = 2 * hidden * n_heads * head_dim * shard(n_heads, tp)
    k_v = 2 * hidden * n_kv_heads * head_dim * shard(n_kv_heads, tp)
    return sp.Integer(0), q_o + k_v


@law(INFORMATION, bits=INFORMATION)
def mla_kv_bytes(kv_lora_rank: sp.Expr, qk_rope_head_dim: sp.Expr, bits: sp.Expr) -> sp.Expr:
    """MLA KV cache per token per layer: the latent (r_kv + d_rope) elements, shared by all
    heads, so every TP rank keeps it whole (DeepSeek-V2 §2.1)."""
    return (kv_lora_rank + qk_rope_head_dim) * bits


@law(INFORMATION, bits=INFORMATION)
def gqa_kv_bytes(n_kv_heads: sp.Expr, head_dim: sp.Expr, tp: sp.Expr, bits: sp.Expr) -> sp.Expr:
    """GQA KV cache per token per layer on one TP rank: 2·H_kv·d_h elements split by KV
    heads."""
    return 2 * n_kv_heads * head_dim * shard(n_kv_heads, tp) * bits


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
def gqa_score_flops(head_dim: sp.Expr, n_heads: sp.Expr, tp: sp.Expr, context: sp.Expr) -> sp.Expr:
    """FLOPs per query token per layer on one TP rank to attend over S cached tokens with
    GQA: 2·S·d_h multiply-adds per head (scores and values)."""
    return 2 * context * head_dim * FLOPS_PER_MAC * n_heads * shard(n_heads, tp)


# ---------------------------------------------------------------- routing


@law(DIMENSIONLESS, n_experts=DIMENSIONLESS, top_k=DIMENSIONLESS, tokens=DIMENSIONLESS)
def expected_distinct_experts(n_experts: sp.Expr, top_k: sp.Expr, tokens: sp.Expr) -> sp.Expr:
    """E·(1 − (1 − k/E)^T): experts hit at least once by T tokens under uniform top-k routing
    (each token's k picks treated as independent draws; docs/physics.md, the
    moe-transformer model)."""
    return n_experts * (1 - (1 - top_k / n_experts) ** tokens)


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
def tree_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """Double-binary-tree all-reduce: 2·log2(N)·α + 2(N−1)/N · S/β."""
    return 2 * sp.log(n, 2) * alpha + 2 * (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def switch_allreduce(n: sp.Expr, size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """In-switch (NVLS) all-reduce: one switch round trip α + 2(N−1)/N · S/β."""
    return alpha + 2 * (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, alpha_peer=TIME, beta=BANDWIDTH)
def all_to_all(
    n: sp.Expr, size: sp.Expr, alpha: sp.Expr, alpha_peer: sp.Expr, beta: sp.Expr
) -> sp.Expr:
    """All-to-all: α + (N−1)·α_peer + (N−1)/N · S/β (S bytes sent per GPU)."""
    return alpha + (n - 1) * alpha_peer + (n - 1) / n * size / beta


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def cheapest_allreduce(
    n: sp.Expr,
    size: sp.Expr,
    alpha: sp.Expr,
    beta: sp.Expr,
    switch_alpha: sp.Expr | None = None,
) -> sp.Expr:
    """The cheapest of ring, tree and (where the switch reduces, ``switch_alpha`` given)
    in-switch all-reduce, as NCCL's tuner picks."""
    options = [ring_allreduce(n, size, alpha, beta), tree_allreduce(n, size, alpha, beta)]
    if switch_alpha is not None:
        options.append(switch_allreduce(n, size, switch_alpha, beta))
    return sp.Min(*options, evaluate=False)


@law(TIME, n=DIMENSIONLESS, size=INFORMATION, domain=DIMENSIONLESS, alpha=TIME,
     beta=BANDWIDTH, net_alpha=TIME, nic_beta=BANDWIDTH)  # fmt: skip
def hierarchical_allreduce(
    n: sp.Expr,
    size: sp.Expr,
    domain: sp.Expr,
    alpha: sp.Expr,
    beta: sp.Expr,
    switch_alpha: sp.Expr | None,
    net_alpha: sp.Expr,
    nic_beta: sp.Expr,
) -> sp.Expr:
    """All-reduce over N > D GPUs in ⌈N/D⌉ domains: reduce inside each domain, then all-reduce
    the 1/D shard each GPU owns across domains (cheaper of ring and tree), each GPU over its
    own NIC at ``nic_beta`` (already divided by the fabric's oversubscription)."""
    d = sp.ceiling(n / domain)
    piece = size / domain
    across = sp.Min(
        ring_allreduce(d, piece, net_alpha, nic_beta),
        tree_allreduce(d, piece, net_alpha, nic_beta),
        evaluate=False,
    )
    return cheapest_allreduce(domain, size, alpha, beta, switch_alpha) + across


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
) -> sp.Expr:
    """All-to-all over N GPUs of which ``inside`` share each scale-up domain: the (N−d)/N of
    each GPU's bytes bound for other domains leave over its NIC (``nic_beta``,
    oversubscription included), after the all-to-all among the d inside."""
    within = all_to_all(inside, size * inside / n, alpha, alpha_peer, beta)
    return within + net_alpha + (n - inside) / n * size / nic_beta


@law(TIME, size=INFORMATION, alpha=TIME, beta=BANDWIDTH)
def point_to_point(size: sp.Expr, alpha: sp.Expr, beta: sp.Expr) -> sp.Expr:
    """A send of S bytes over one link: α + S/β."""
    return alpha + size / beta


# ---------------------------------------------------------------- speculative decoding


@law(DIMENSIONLESS, acceptance=DIMENSIONLESS)
def chain_accepted(acceptance: sp.Expr, drafts: sp.Expr | int) -> sp.Expr:
    """A chain of n drafts, each accepted with probability a given its prefix was:
    τ = Σ_{i=0..n} a^i = (1 − a^(n+1)) / (1 − a) (Leviathan et al. 2023, eq. 1).
    A whole-number n gives the sum itself, which stays finite as a → 1."""
    if isinstance(drafts, int):
        return sp.Add(*(acceptance**i for i in range(drafts + 1)))
    return (1 - acceptance ** (drafts + 1)) / (1 - acceptance)


@law(DIMENSIONLESS, acceptance=DIMENSIONLESS, budget=DIMENSIONLESS)
def tree_accepted(acceptance: sp.Expr, budget: sp.Expr, depth: int) -> sp.Expr:
    """A draft tree of B nodes over D levels offers B/D candidates per level; a level is
    accepted if any candidate matches, a_tree = 1 − (1 − a)^(B/D), and τ is the chain law at
    a_tree over D levels. A first-order model: candidates treated as independent."""
    per_level = 1 - (1 - acceptance) ** (sp.sympify(budget) / depth)
    return chain_accepted(per_level, depth)


# ---------------------------------------------------------------- in-flight batching


def _busiest_share(count: sp.Expr, ranks: sp.Expr) -> sp.Expr:
    """E⌈A/R⌉ for A ~ Poisson(Λ) dealt round-robin over R ranks: max(1 − e^(−Λ), Λ/R +
    (1 − 1/R)/2 · (1 − e^(−Λ))), exact for Λ ≪ R (one each) and for residues of A mod R
    spread evenly (√Λ ≫ R); up to 27% high in between (Λ ≈ R, √Λ < R: the residues are
    not even there)."""
    some = 1 - sp.exp(-count)
    return sp.Max(some, count / ranks + (1 - 1 / ranks) / 2 * some)


@law((DIMENSIONLESS, DIMENSIONLESS), arrivals=DIMENSIONLESS, prompt=DIMENSIONLESS,
     chunk=DIMENSIONLESS, ranks=DIMENSIONLESS)  # fmt: skip
def busiest_rank_prefill(
    arrivals: sp.Expr,
    prompt: sp.Expr,
    chunk: sp.Expr,
    ranks: sp.Expr,
    synchronised: bool,
    interleaved: bool,
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
    together, so the busiest holds the mean λ·I/R, in λ·⌈I/P⌉/R passes. A stable mixed rank
    needs λ·I/R ≤ P (docs/physics.md)."""
    mean = arrivals * prompt / ranks
    if interleaved:
        if synchronised:
            return mean, arrivals * sp.ceiling(prompt / chunk) / ranks
        tokens = prompt * _busiest_share(arrivals, ranks)
        some = 1 - sp.exp(-arrivals)
        return tokens, sp.Max(some * sp.ceiling(prompt / chunk), tokens / chunk)
    if synchronised:
        return sp.Min(chunk, mean), sp.S.Zero
    piece = sp.Min(prompt, chunk)
    return sp.Min(chunk, piece * _busiest_share(arrivals * prompt / piece, ranks)), sp.S.Zero
