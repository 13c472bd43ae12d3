"""Parallel layout ``standard``: TP × EP GPUs per stage, PP stages per replica, DP replicas.

Within a stage of tp·ep GPUs, attention heads and each expert's intermediate dimension are
split over the ``tp`` ranks (two all-reduces per layer); the expert set is spread over ``ep``
ranks (dispatch and combine all-to-all per MoE layer) and attention runs data-parallel over
them (each of the ``ep`` groups serves ⌈C/ep⌉ users). ``dp`` independent replicas multiply
aggregate throughput. TP-8 is tp=8; "EP-72 with DP attention" is ep=72. With ``pp`` > 1 the
layers split into pp consecutive stages of tp·ep GPUs each, ``microbatches`` of the users in
flight through them (`laws.pipeline_iteration`, `laws.pipeline_fill`; as many as stages
unless set, as vLLM and SGLang run one batch in flight per stage). With ``cp`` > 1 a prompt
prefilled alone is split over cp of the attention ranks (prefill context parallelism,
SGLang's attention CP group: each rank its share of the prompt's queries, the KV gathered).
A search tries every tp·ep·dp·pp = N with tp within one scale-up domain
(``stepwall_layouts``); pp and cp are searched as structural axes (``--vary parallel.pp=1,2,4``,
each value compiled on its own), their layouts of N GPUs made for each value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall.core.fields import FACTOR, KindSpec, flag, quantity
from stepwall.core.scenario import Scenario
from stepwall.core.terms import Constraint, Decoding, Layout, Workload
from stepwall.plugin.entries import Layouts, LayoutTable
from stepwall.plugin.hookspecs import hookimpl

PLUGIN = "parallelism"
DEGREES = ("parallel.tp", "parallel.ep", "parallel.dp")  # what a search sets per layout


def _degree(doc: str, latex: str) -> Any:
    return quantity("dimensionless", doc, latex=latex, integer=True, default=1)


@attrs.frozen
class Parallel:
    tp: int = _degree("tensor-parallel degree", "N_{tp}")
    ep: int = _degree("expert-parallel degree (attention data-parallel across it)", "N_{ep}")
    dp: int = _degree("independent replicas", "N_{dp}")
    pp: int = _degree("pipeline stages: consecutive layers on groups of tp·ep GPUs", "N_{pp}")
    microbatches: int | None = quantity(
        "dimensionless",
        "micro-batches of the users in flight through the pipeline stages (read only when "
        "pp > 1; unset: as many as stages, as vLLM and SGLang run); fewer than pp leaves "
        "stages idle",
        latex="m",
        integer=True,
        default=None,
    )
    cp: int = _degree(
        "prefill context-parallel degree: a prompt prefilled alone is split over cp of the "
        "replica's attention ranks, each computing its share of the queries against the "
        "gathered KV (SGLang's prefill CP); 1: one rank prefills it",
        "N_{cp}",
    )
    imbalance: float = quantity(
        "dimensionless",
        "load of the busiest EP rank over the mean (1 = uniform routing)",
        latex=r"\lambda",
        minimum=1.0,
        inclusive=True,
        default=1.0,
        plausible=("1", FACTOR[1]),
    )
    redundant_experts: int = quantity(
        "dimensionless",
        "extra expert replicas (EPLB) held in memory",
        latex="R",
        integer=True,
        minimum=0,
        inclusive=True,
        default=0,
    )
    uneven: bool = flag(
        "allow degrees that do not divide heads, experts or FFN widths (the busiest rank sets "
        "the time); real engines refuse these"
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [KindSpec("parallel", "standard", Parallel, "TP × EP per replica, DP replicas", True)]


@hookimpl
def stepwall_partition(scenario: Scenario, decoding: Decoding) -> Layout:
    p, w = scenario.params.parallel, scenario.params.workload
    pipelined = scenario.parallel.pp > 1
    microbatches = sp.S.One
    if pipelined:  # unset: one micro-batch per stage
        microbatches = p.pp if scenario.parallel.microbatches is None else p.microbatches
    context_parallel = scenario.parallel.cp > 1
    return Layout(
        tp=p.tp,
        ep=p.ep,
        dp=p.dp,
        gpus_per_replica=p.tp * p.ep * (p.pp if pipelined else 1),
        users=w.concurrency,
        users_per_attention_rank=sp.ceiling(w.concurrency / p.ep),
        imbalance=p.imbalance,
        redundant_experts=p.redundant_experts,
        uneven=scenario.parallel.uneven,
        pp=p.pp if pipelined else sp.S.One,
        microbatches=microbatches,
        pipelined=pipelined,
        cp=p.cp if context_parallel else sp.S.One,
        context_parallel=context_parallel,
    )


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    p, cl = scenario.params.parallel, scenario.params.cluster
    degrees = ("tp", "ep", "pp", "dp") if layout.pipelined else ("tp", "ep", "dp")
    fits = Constraint(
        "layout_fits_cluster",
        layout.gpus_per_replica * p.dp <= cl.nodes * cl.gpus_per_node,
        f"{'·'.join(degrees)} GPUs must exist in the cluster (or --set cluster.nodes=…)",
        (*(f"parallel.{d}" for d in degrees), "cluster.nodes"),
        PLUGIN,
    )
    out = [fits]
    if layout.pipelined:
        # `laws.pipeline_iteration`: each micro-batch holds at least one user of an attention
        # rank (unset, the micro-batches are the stages)
        keys = ("parallel.microbatches" if scenario.parallel.microbatches is not None
                else "parallel.pp", "workload.concurrency", "parallel.ep")  # fmt: skip
        out.append(Constraint(
            "microbatches_within_users", layout.microbatches <= layout.users_per_attention_rank,
            "each pipeline micro-batch holds at least one user of its attention rank", keys,
            PLUGIN))  # fmt: skip
    if layout.context_parallel:
        out.append(Constraint(
            "cp_within_attention_ranks", p.cp <= p.ep,
            "a prompt's context-parallel group is attention ranks of its replica (cp ≤ ep)",
            ("parallel.cp", "parallel.ep"), PLUGIN))  # fmt: skip
    return out


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def layout_count(gpus: Sequence[int], domain: int, pp: int = 1) -> int:
    """How many layouts `layout_table` makes, counted without making them."""
    staged = [n // pp for n in gpus if n % pp == 0]
    return sum(len(divisors(n // tp)) for n in staged for tp in divisors(n) if tp <= domain)


def layout_table(gpus: Sequence[int], domain: int, pp: int = 1) -> LayoutTable:
    """Every (N, tp, ep, dp) with tp·ep·dp·pp = N and tp within one scale-up domain;
    attention runs data-parallel over the ep ranks. A size that pp does not divide has
    none."""
    rows = []
    for n in gpus:
        if n % pp:
            continue
        for tp in divisors(n // pp):
            if tp > domain:
                continue
            for ep in divisors(n // pp // tp):
                rows.append((n, tp, ep, n // (pp * tp * ep)))
    arr = np.array(rows, dtype=float).reshape(-1, 4)
    degrees = {k: arr[:, i + 1].copy() for i, k in enumerate(DEGREES)}
    return LayoutTable(arr[:, 0].copy(), degrees, degrees["parallel.ep"])


@hookimpl
def stepwall_layouts(scenario: Scenario) -> Layouts:
    """The layouts of N GPUs at the scenario's pipeline stages (tp·ep·dp·pp = N)."""
    pp = int(scenario.parallel.pp)
    return Layouts(DEGREES, functools.partial(layout_table, pp=pp),
                   functools.partial(layout_count, pp=pp))  # fmt: skip
