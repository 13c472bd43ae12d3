"""The dense side of ``moe-transformer``: dense FFN layers, the LM head, the engine's small
kernels per layer, the TP all-reduces, and the weights they hold per GPU."""

from __future__ import annotations

import sympy as sp

from stepwall.core.laws import ffn_params, ffn_serial_k, shard
from stepwall.core.terms import Collective, Op
from stepwall.plugins.moe_transformer.spec import PLUGIN
from stepwall.plugins.moe_transformer.work import Pass


def _ffn(p: Pass) -> sp.Expr:
    """Dense FFN weights per GPU over the dense layers."""
    m = p.m
    ffn = ffn_params(m.hidden, m.dense_intermediate, m.ffn_matrices)
    return p.n_dense * ffn * shard(m.dense_intermediate, p.layout.tp)


def _head(p: Pass) -> sp.Expr:
    """LM head weights per GPU (vocabulary-parallel)."""
    m = p.m
    return m.vocab * m.hidden * shard(m.vocab, p.layout.tp)


def add_dense(p: Pass) -> None:
    """Dense FFN layers (where the model has any), the LM head, and the engine's own kernels
    per layer: norms, RoPE, quantisation, residual adds."""
    m, spec, step = p.m, p.spec, p.step
    if spec.n_dense_layers > 0 or not p.has_moe:
        p.gemm("dense.ffn", _ffn(p), m.dense_bits, step.tokens_rank, "dense",
               "dense FFN layers (gate-up, down)", 2 * p.n_dense, spec.dense_math,
               serial_k=p.n_dense * ffn_serial_k(m.hidden, m.dense_intermediate,
                                                 p.layout.tp))  # fmt: skip
    # logits for every verified token when decoding; for the last prompt token otherwise
    # (the last prompt token is on one rank of a context-parallel split)
    head_rows = (sp.S.One if p.context_split
                 else step.users_per_rank * (1 if p.prefill else step.tokens_per_user))  # fmt: skip
    p.gemm("lm_head", _head(p), m.embedding_bits, head_rows, "dense",
           "LM head (vocabulary-parallel)", sp.Integer(1), spec.embedding_math,
           serial_k=m.hidden)  # fmt: skip
    act = m.hidden * m.activation_bits
    kernels = p.engine.layer_kernels
    p.ops.append(Op("layers.elementwise", 2 * step.tokens_rank * act * m.n_layers * kernels,
                    sp.Integer(0), PLUGIN,
                    "the engine's small kernels per layer (norms, RoPE, quantise), activations "
                    "read and written", "base", p.batches * m.n_layers * kernels, p.lane,
                    "elementwise"))  # fmt: skip


def dense_weights(p: Pass) -> dict[str, sp.Expr]:
    """Bytes per GPU of the dense FFN and of the embeddings: the input embedding and the LM
    head, or the one matrix both use when they are tied (tie_word_embeddings)."""
    return {
        "dense": _ffn(p) * p.m.dense_bits,
        "embeddings": (2 - p.m.tie_embeddings) * _head(p) * p.m.embedding_bits,
    }


def tp_allreduce(p: Pass) -> Collective:
    """The two all-reduces per layer over the TP group."""
    m = p.m
    return Collective(
        "comm.tp_allreduce",
        "all_reduce",
        p.layout.tp,
        p.step.tokens_rank / p.batches * m.hidden * m.activation_bits,
        p.batches * (2 * m.n_layers - m.mixer_only_layers),
        PLUGIN,
        "two all-reduces per layer (after attention and after FFN; one where a layer has no FFN)",
        "tbo.attention/comm" if p.tbo else "",
    )
