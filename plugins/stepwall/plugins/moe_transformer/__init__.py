"""Model kind ``moe-transformer``: per-step bytes and FLOPs of an MoE (or dense) decoder.

Work per GPU under a layout (TP over ``tp`` ranks, experts over ``ep`` ranks, attention
data-parallel over ``ep``), summed over layers. Each law is one function; precisions are
per component (e.g. INT4 experts, BF16 attention). Architecture fields follow the
Hugging Face config names of DeepSeek-V3 / Kimi K2. The hooks are here; the work is split by
concern: `spec` (the fields), `work` (one pass being costed), `attention`, `dense`, `moe`
(with MTP drafting), `constraints`, and `importer` (the fields from a Hugging Face config).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

from stepwall.core.errors import SpecError
from stepwall.core.fields import KindSpec
from stepwall.core.scenario import Scenario
from stepwall.core.terms import Constraint, Decoding, Engine, Layout, Step, Workload
from stepwall.plugin.hookspecs import hookimpl
from stepwall.plugins.moe_plateau import ANALYSIS
from stepwall.plugins.moe_transformer.attention import (
    Attention,
    add_attention,
    cp_kv_gather,
    kv_transfer,
)
from stepwall.plugins.moe_transformer.constraints import layout_constraints
from stepwall.plugins.moe_transformer.dense import add_dense, dense_weights, tp_allreduce
from stepwall.plugins.moe_transformer.importer import IMPORTERS
from stepwall.plugins.moe_transformer.linear import add_linear
from stepwall.plugins.moe_transformer.moe import add_moe, draft_ops
from stepwall.plugins.moe_transformer.spec import PLUGIN, MoeTransformer
from stepwall.plugins.moe_transformer.stages import stage_of
from stepwall.plugins.moe_transformer.work import Pass, prefill_passes

if TYPE_CHECKING:
    from stepwall.plugin.entries import Analysis

__all__ = ["PLUGIN", "MoeTransformer"]


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "model",
            "moe-transformer",
            MoeTransformer,
            "decoder-only transformer with MoE (or dense, n_experts = 0) FFNs",
            importers=IMPORTERS,
        )
    ]


@hookimpl
def stepwall_model_work(
    scenario: Scenario, decoding: Decoding, layout: Layout, step: Step, engine: Engine
) -> Workload:
    """The per-GPU work of ``step``: attention, the dense side, MoE layers, TP all-reduces,
    MTP drafting in decode, a context-parallel prompt's KV gather, and the prompt's KV cache
    sent to a decode pool."""
    p = Pass(scenario, layout, step, engine)
    if layout.context_parallel and p.spec.linear_layers > 0:
        raise SpecError(scenario.origin, "parallel.cp", "context parallelism over linear-"
                        "attention or state-space layers is not modelled (their state is "
                        "handed from rank to rank, not gathered)", "parallel.cp = 1")  # fmt: skip
    att = Attention.of(p)
    add_attention(p, att)
    add_dense(p)
    parts = {"attention": att.weights * p.m.attention_bits, **dense_weights(p)}
    if p.spec.linear_layers > 0:
        parts["linear"] = add_linear(p)
    if p.has_moe:
        parts |= add_moe(p)
    p.collectives.append(tp_allreduce(p))
    if decoding.draft_passes != 0 and step.name == "decode":
        p.ops += draft_ops(p, decoding, att)
    if p.context_split:
        p.collectives.append(cp_kv_gather(p, att))
    if step.kv_transfer != 0:
        p.collectives.append(kv_transfer(p, att))
    weights = sp.Add(*parts.values())
    if step.prefill_passes != 0:
        p.ops.append(prefill_passes(p, weights))
    work = Workload(
        tuple(p.ops), tuple(p.collectives), weights, att.resident_kv(p), p.m.n_layers, parts
    )
    return stage_of(p, work) if layout.pipelined else work


@hookimpl
def stepwall_constraints(scenario: Scenario, layout: Layout) -> list[Constraint]:
    return layout_constraints(scenario, layout)


@hookimpl
def stepwall_analyses() -> list[Analysis]:
    """The EP plateau (`stepwall.plugins.moe_plateau`), imported only when analyses are."""

    return [ANALYSIS]
