"""Linear-attention (state-space) layers of ``moe-transformer``: Gated DeltaNet as Qwen3-Next
and Qwen3.5 run it in 3 of every 4 layers, Mamba-2 as Nemotron-H and Nemotron-3 do. Each such
layer holds a recurrent state per request of fixed size (a d_k x d_v matrix per value head) in
place of a KV cache: a decode token reads and writes it once and updates it in O(d_k·d_v) per
head, whatever the context; a prompt is processed in chunks (`stepwall.core.laws.
linear_state_flops`)."""

from __future__ import annotations

import sympy as sp

from stepwall.core.laws import (
    CHUNK_KERNELS,
    chunk_chain,
    chunked_tokens,
    linear_state_elements,
    linear_state_flops,
    linear_state_params,
    shard,
)
from stepwall.core.symbols import min_of
from stepwall.core.terms import Op
from stepwall.plugins.moe_transformer.spec import PLUGIN
from stepwall.plugins.moe_transformer.work import Pass

# kernels per linear layer besides the projections: the causal conv1d, the recurrence, the
# gated norm (vLLM's and SGLang's Qwen3-Next layers: causal_conv1d_update,
# fused_recurrent_gated_delta_rule, RMSNormGated; their Mamba-2 layers: causal_conv1d_update,
# selective_state_update, RMSNormGated). Each is a small kernel: its floor is the GPU's
# kernel_floor, not an attention kernel's (op kind "recurrence"; docs/physics.md)
LINEAR_KERNELS = 3


def linear_params(p: Pass) -> sp.Expr:
    """Weights per GPU of one linear-attention layer (`linear_state_params`)."""
    m = p.m
    rep, split = linear_state_params(m.hidden, m.linear_key_heads, m.linear_value_heads,
                                     m.linear_key_dim, m.linear_value_dim, p.layout.tp,
                                     m.linear_head_scalars, m.linear_decay_rank)  # fmt: skip
    return rep + split


def add_linear(p: Pass) -> sp.Expr:
    """The linear layers' projections, their recurrence, and their chunked form for prompt
    tokens (`add_chunks`); returns their weights' bytes."""
    m, spec, step = p.m, p.spec, p.step
    weights = m.linear_layers * linear_params(p)
    # in_proj reduces over h, out_proj over the rank's ⌈H_v/TP⌉ heads of d_v
    heads = m.linear_value_heads * shard(m.linear_value_heads, p.layout.tp)
    p.gemm("linear.projections", weights, m.attention_bits, step.tokens_rank, "attention",
           "linear-attention projections (in_proj, out_proj)", 2 * m.linear_layers,
           spec.attention_math,
           serial_k=m.linear_layers * (m.hidden + heads * m.linear_value_dim))  # fmt: skip
    state = linear_state_elements(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                  p.layout.tp) * m.state_bits  # fmt: skip
    # each request's state is read and written once per pass (its own tokens in order)
    moved = 2 * m.linear_layers * step.users_per_rank * state
    new = step.users_per_rank * step.tokens_per_user
    # a prefill pass's tokens all take the chunked form, and its recurrence kernel is that
    # pipeline; a decode iteration's own tokens take the recurrence
    decode_flops = linear_state_flops(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                      p.layout.tp, m.linear_chunk, prompt=False)  # fmt: skip
    flops = sp.S.Zero if p.prefill else m.linear_layers * new * decode_flops
    kernels = p.batches * (LINEAR_KERNELS - int(p.prefill)) * m.linear_layers
    p.ops.append(Op("linear.state", moved, flops, PLUGIN,
                    "the recurrent state of each request: read, updated and written once per "
                    "pass", "attention", kernels, p.lane, "recurrence", "bf16"))  # fmt: skip
    carried = step.prefill_tokens_rank  # a decode iteration's prompt tokens, in pieces
    if p.prefill:
        add_chunks(p, new + carried, step.tokens_per_user)
    elif carried != 0:  # a workload that states no piece: one sequence of them all
        add_chunks(p, carried, carried if step.prefill_piece == 0 else min_of(
            step.prefill_piece, carried))  # fmt: skip
    return weights * m.attention_bits


def add_chunks(p: Pass, tokens: sp.Expr, piece: sp.Expr) -> None:
    """Prompt tokens through the chunked form: each sequence of ``piece`` tokens padded to
    whole chunks (`chunked_tokens`), attention within each chunk and its state update at the
    prompt's FLOPs (`linear_state_flops`), the form's `CHUNK_KERNELS` per layer, and the
    chunks along one sequence one after another (`chunk_chain`) in every layer. The delta
    rule's kernels are a family of their own (op kind ``chunked_recurrence``); Mamba-2's scan
    (``chunked_scan``) is priced as the recurrence is."""
    m, form = p.m, p.spec.linear_form
    kind = "chunked_recurrence" if form == "delta_rule" else "chunked_scan"
    per_token = linear_state_flops(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                   p.layout.tp, m.linear_chunk, prompt=True)  # fmt: skip
    padded = tokens * chunked_tokens(piece, m.linear_chunk) / piece
    chain = m.linear_layers * chunk_chain(piece, m.linear_chunk)
    p.ops.append(Op("linear.chunks", sp.S.Zero, m.linear_layers * padded * per_token, PLUGIN,
                    "prompt tokens in the chunked form: attention within each chunk and the "
                    "state carried from chunk to chunk", "attention",
                    p.batches * CHUNK_KERNELS[form] * m.linear_layers, p.lane, kind, "bf16",
                    chain=chain))  # fmt: skip
