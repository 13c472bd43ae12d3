"""Hardware kind ``gpu``: a roofline per operation plus a per-kernel launch cost."""

from __future__ import annotations

import attrs

from stepwall.fields import KindSpec, quantity
from stepwall.hookspecs import hookimpl
from stepwall.laws import roofline
from stepwall.scenario import Scenario
from stepwall.terms import Op, Term, launch_terms

PLUGIN = "gpu"


@attrs.frozen
class Gpu:
    memory_capacity: float = quantity(
        "information", "usable device memory per GPU", latex="M_{cap}"
    )
    hbm_bandwidth: float = quantity("bandwidth", "peak device-memory bandwidth", latex="B_{HBM}")
    hbm_efficiency: float = quantity(
        "dimensionless", "achieved fraction of hbm_bandwidth", latex=r"\eta_{mem}", maximum=1.0
    )
    bf16_flops: float = quantity("compute_rate", "dense BF16 peak", latex="F_{bf16}")
    compute_efficiency: float = quantity(
        "dimensionless", "achieved fraction of the peak", latex=r"\eta_{flop}", maximum=1.0
    )
    launch_latency: float = quantity(
        "time",
        "cost per kernel launch (CUDA-graph replay)",
        latex=r"t_{launch}",
        minimum=0.0,
        inclusive=True,
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [KindSpec("hardware", "gpu", Gpu, "a GPU as a roofline with launch cost")]


@hookimpl
def stepwall_compute_terms(scenario: Scenario, ops: tuple[Op, ...]) -> list[Term]:
    hw = scenario.params.hardware
    terms = [
        Term(
            op.name,
            roofline(
                op.bytes,
                op.flops,
                hw.hbm_bandwidth,
                hw.hbm_efficiency,
                hw.bf16_flops,
                hw.compute_efficiency,
            ),
            PLUGIN,
            f"roofline of {op.why}",
            op.group,
            op.overlap,
        )
        for op in ops
    ]
    terms.extend(launch_terms(ops, hw.launch_latency, PLUGIN))
    return terms
