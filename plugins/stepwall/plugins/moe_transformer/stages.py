"""Pipeline stages of ``moe-transformer``: with ``parallel.pp`` = p > 1 each group of tp·ep GPUs
holds consecutive layers in turn, the busiest stage ⌈L/p⌉ of them (vLLM's and SGLang's
pipeline parallelism: the embedding on the first stage, the LM head and any MTP module on the
last). A stage's step is its share of every layer's work over the pass's m micro-batches (each
re-reads the stage's weights: `Pass.batches`), the LM head whole (the last stage is the
busiest), and each micro-batch's activations sent on to the next stage; the waiting between
stages is the composer's `pipeline_bubble`."""

from __future__ import annotations

import attrs
import sympy as sp

from stepwall.core.laws import shard
from stepwall.core.symbols import max_of
from stepwall.core.terms import Collective, Workload
from stepwall.plugins.moe_transformer.spec import PLUGIN
from stepwall.plugins.moe_transformer.work import Pass

# ops and collectives the last stage runs whole: the LM head, the MTP draft module
WHOLE = ("lm_head", "draft.")


def _whole(name: str) -> bool:
    return name.startswith(WHOLE)


def stage_of(p: Pass, work: Workload) -> Workload:
    """The busiest stage's work: its share s = ⌈L/p⌉/L of every layer's ops, collectives,
    weights and cache; the LM head and the draft module whole; of the embeddings, one matrix
    at each end stage (untied: the embedding first, the LM head last; tied: the one matrix at
    both); and the activations each micro-batch hands to the next stage."""
    m, pp = p.m, p.layout.pp
    s = shard(m.n_layers, pp)
    ops = tuple(
        op if _whole(op.name)
        else attrs.evolve(op, bytes=op.bytes * s, flops=op.flops * s, kernels=op.kernels * s,
                          serial_bytes=op.serial_bytes * s)
        for op in work.ops
    )  # fmt: skip
    collectives = [_stage_collective(c, s) for c in work.collectives]
    collectives.append(_handoff(p))
    parts = {k: v * s for k, v in work.weight_parts.items()}
    if "embeddings" in work.weight_parts:
        ends = max_of(1 / (2 - m.tie_embeddings), 1 / pp)
        parts["embeddings"] = work.weight_parts["embeddings"] * ends
    return attrs.evolve(
        work,
        ops=ops,
        collectives=tuple(collectives),
        weight_bytes_per_gpu=sp.Add(*parts.values()),
        kv_bytes_per_gpu=work.kv_bytes_per_gpu * s,
        layers=work.layers * s,
        weight_parts=parts,
    )


def _stage_collective(c: Collective, s: sp.Expr) -> Collective:
    """A layer's collectives run on its own stage (its share s of the calls); a prompt's KV
    cache goes to the decode pool from each stage, its layers' share (s of the size)."""
    if _whole(c.name):
        return c
    if c.op == "send":
        return attrs.evolve(c, size=c.size * s)
    return attrs.evolve(c, count=c.count * s)


def _handoff(p: Pass) -> Collective:
    """Each micro-batch's hidden states to the next stage: tokens/m x h activations, m sends a
    step (point to point over the scale-up link; none leave the last stage, which the busiest
    stage's count includes)."""
    m, step, layout = p.m, p.step, p.layout
    size = step.tokens_rank / layout.microbatches * m.hidden * m.activation_bits
    why = "each micro-batch's activations to the next pipeline stage"
    return Collective("comm.pp_handoff", "send", sp.Integer(2), size, layout.microbatches,
                      PLUGIN, why)  # fmt: skip
