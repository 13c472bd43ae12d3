"""Hardware kind ``gpu``: a roofline per operation plus a per-kernel launch cost."""

from __future__ import annotations

import attrs
import sympy as sp

from stepwall.hookspecs import hookimpl
from stepwall.spec import KindSpec, Scenario, quantity
from stepwall.terms import Op, Term

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


def roofline(
    bytes_: sp.Expr,
    flops: sp.Expr,
    bandwidth: sp.Expr,
    mem_eff: sp.Expr,
    peak: sp.Expr,
    flop_eff: sp.Expr,
) -> sp.Expr:
    """Roofline: t = max(bytes / (B·η_mem), flops / (F·η_flop)) (Williams et al., 2009)."""
    return sp.Max(bytes_ / (bandwidth * mem_eff), flops / (peak * flop_eff))


def launch_terms(ops: tuple[Op, ...], launch_latency: sp.Expr, plugin: str) -> list[Term]:
    """Kernel launches: Σ kernels × t_launch, one term (none when no op launches kernels)."""
    kernels = sp.Add(*(op.kernels for op in ops))
    if kernels == 0:
        return []
    return [Term("kernel_launches", kernels * launch_latency, plugin,
                 "kernel launches per step × launch latency", "base")]  # fmt: skip


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [KindSpec("hardware", "gpu", Gpu, "a GPU as a roofline with launch cost")]


@hookimpl
def stepwall_compute_terms(scenario: Scenario, ops: tuple[Op, ...]) -> list[Term] | None:
    if scenario.kinds["hardware"] != "gpu":
        return None
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
