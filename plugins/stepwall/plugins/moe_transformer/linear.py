"""Linear-attention (state-space) layers of ``moe-transformer``: Gated DeltaNet as Qwen3-Next
and Qwen3.5 run it in 3 of every 4 layers, Mamba-2 as Nemotron-H and Nemotron-3 do. Each such
layer holds a recurrent state per request of fixed size (a d_k x d_v matrix per value head) in
place of a KV cache: a decode token reads and writes it once and updates it in O(d_k·d_v) per
head, whatever the context; a prompt is processed in chunks (`stepwall.core.laws.
linear_state_flops`)."""

from __future__ import annotations

import sympy as sp

from stepwall.core.laws import linear_state_elements, linear_state_flops, linear_state_params
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
    """The linear layers' projections and their recurrence; returns their weights' bytes."""
    m, spec, step = p.m, p.spec, p.step
    weights = m.linear_layers * linear_params(p)
    p.gemm("linear.projections", weights, m.attention_bits, step.tokens_rank, "attention",
           "linear-attention projections (in_proj, out_proj)", 2 * m.linear_layers,
           spec.attention_math)  # fmt: skip
    state = linear_state_elements(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                  p.layout.tp) * m.state_bits  # fmt: skip
    # each request's state is read and written once per pass (its own tokens in order)
    moved = 2 * m.linear_layers * step.users_per_rank * state
    decode_flops = linear_state_flops(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                      p.layout.tp, m.linear_chunk, prompt=p.prefill)  # fmt: skip
    prompt_flops = linear_state_flops(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                      p.layout.tp, m.linear_chunk, prompt=True)  # fmt: skip
    new = step.users_per_rank * step.tokens_per_user
    flops = m.linear_layers * (new * decode_flops + step.prefill_tokens_rank * prompt_flops)
    kernels = p.batches * LINEAR_KERNELS * m.linear_layers
    p.ops.append(Op("linear.state", moved, flops, PLUGIN,
                    "the recurrent state of each request: read, updated and written once per "
                    "pass", "attention", kernels, p.lane, "recurrence", "bf16"))  # fmt: skip
    return weights * m.attention_bits
