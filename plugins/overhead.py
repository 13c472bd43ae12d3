"""Overhead kind ``fixed``: the engine's dispatch cost per step and per layer.

These are real terms, not fudge: framework dispatch and scheduling per step, and the
per-layer host work a CUDA graph does not remove. Values are calibrated against a measured
step and carry that source. ``native`` scales them and the drafting work the decoding plugin
hands over (``Decoding.host``: drafter forward, tree building are dispatch-bound at decode
batch sizes): the seed's "native engine = −40% overhead" is native = 0.6.
"""

from __future__ import annotations

import attrs

from stepwall.fields import KindSpec, quantity
from stepwall.hookspecs import hookimpl
from stepwall.scenario import Scenario
from stepwall.terms import Decoding, Term, Workload

PLUGIN = "overhead"


@attrs.frozen
class Fixed:
    per_step: float = quantity(
        "time",
        "dispatch and scheduling per step",
        latex="t_{step}",
        minimum=0.0,
        inclusive=True,
        default=0.0,
    )
    per_layer: float = quantity(
        "time",
        "host-side cost per layer per step",
        latex="t_{layer}",
        minimum=0.0,
        inclusive=True,
        default=0.0,
    )
    native: float = quantity(
        "dimensionless",
        "engine factor on dispatch overhead (1 = as measured, 0.6 = a native engine)",
        latex=r"\nu",
        default=1.0,
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [KindSpec("overhead", "fixed", Fixed, "fixed per-step and per-layer costs", True)]


@hookimpl
def stepwall_fixed_terms(scenario: Scenario, workload: Workload, decoding: Decoding) -> list[Term]:
    o = scenario.params.overhead
    drafting = [
        Term(t.name, t.expr * o.native, t.plugin, f"{t.why} × native factor", t.group, t.overlap)
        for t in decoding.host
    ]
    return [
        *drafting,
        Term(
            "overhead.per_step",
            o.per_step * o.native,
            PLUGIN,
            "engine dispatch per step × native factor",
            "base",
        ),
        Term(
            "overhead.per_layer",
            workload.layers * o.per_layer * o.native,
            PLUGIN,
            "per-layer host cost × layers × native factor",
            "base",
        ),
    ]
