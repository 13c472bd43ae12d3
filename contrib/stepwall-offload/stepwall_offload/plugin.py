"""Hardware kind ``gpu-offload``: a GPU that keeps only part of the routed experts resident.

Laws (per GPU, per step), with B the routed-expert bytes the step touches (the model
plugin's ``moe.routed_experts`` op), F its FLOPs and f the resident fraction:

- resident part, from device memory:   t_hbm  = max(f·B / (B_HBM·η_mem), F / (F_peak·η_flop))
  (`stepwall.op_terms`, as kind ``gpu`` uses it, with its kernel floors);
- offloaded part, over the host link:  t_link = (1 − f)·B / (B_link·η_link);
- ``transfer = "overlapped"``: the expert step takes max(t_hbm, t_link) (streaming next
  experts while computing on resident ones); ``"serialized"``: t_hbm + t_link.

Under uniform routing the experts a step touches are a random subset, so a fraction 1 − f of
them is not resident and crosses the link; nothing streamed is kept for the next step (no
expert cache). Every other op is a plain roofline, as on kind ``gpu``.

Device memory per GPU counts only the resident fraction of the routed experts:
weights + KV − (1 − f)·(routed-expert bytes per GPU).
"""

from __future__ import annotations

import attrs
import sympy as sp
from stepwall import (  # the public API (docs/api.md): what stays put across releases
    Engine,
    KindSpec,
    Op,
    Scenario,
    Term,
    Workload,
    choice,
    hookimpl,
    op_terms,
    quantity,
)

PLUGIN = "offload"  # the entry-point name: errors and terms name the plugin by it
KIND = "gpu-offload"
ROUTED = "moe.routed_experts"  # the op of model kind moe-transformer this plugin splits


@attrs.frozen
class Offload:
    """Where the experts that do not fit live; kind ``gpu-offload`` extends kind ``gpu``
    with these fields (memory, HBM, FLOPs and launch latency come from ``gpu``)."""

    resident_expert_fraction: float = quantity(
        "dimensionless",
        "fraction of the routed experts held in device memory (the rest stays in host memory)",
        latex="f_{res}",
        minimum=0.0,
        inclusive=True,
        maximum=1.0,
    )
    host_link_bandwidth: float = quantity(
        "bandwidth",
        "host-to-device link bandwidth, one direction (PCIe 5.0 x16 64 GB/s, NVLink-C2C 450 GB/s)",
        latex=r"B_{link}",
    )
    host_link_efficiency: float = quantity(
        "dimensionless", "achieved fraction of host_link_bandwidth", latex=r"\eta_{link}", maximum=1
    )
    transfer: str = choice(
        ("overlapped", "serialized"),
        "link streaming runs alongside HBM reads and compute (max) or before them (sum)",
        default="overlapped",
    )


def host_link_time(bytes_: sp.Expr, resident: sp.Expr, bandwidth: sp.Expr, eff: sp.Expr) -> sp.Expr:
    """Time to stream the non-resident share of ``bytes_`` over the host link:
    t = (1 − f)·B / (B_link·η_link)."""
    return (1 - resident) * bytes_ / (bandwidth * eff)


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "hardware",
            KIND,
            Offload,
            "a GPU with part of the routed experts in host memory, streamed over a link",
            extends=("hardware", "gpu"),
        )
    ]


@hookimpl
def stepwall_compute_terms(scenario: Scenario, ops: tuple[Op, ...], engine: Engine) -> list[Term]:
    hw = scenario.params.hardware
    serialized = scenario.hardware.transfer == "serialized"
    terms: list[Term] = []
    for op in ops:
        if op.name != ROUTED:
            terms += op_terms(scenario, op, engine, PLUGIN)
            continue
        f = hw.resident_expert_fraction
        overlap = op.overlap if serialized else (op.overlap or "host_link")
        terms += op_terms(scenario, op, engine, PLUGIN, bytes_=f * op.bytes, overlap=overlap,
                          why=f"roofline of the resident share f of {op.why}")  # fmt: skip
        link = host_link_time(op.bytes, f, hw.host_link_bandwidth, hw.host_link_efficiency)
        terms.append(
            Term(
                f"{op.name}.host_link",
                link,
                PLUGIN,
                "non-resident experts (1 − f) streamed from host memory over the link, "
                + ("after the HBM reads (serialized)" if serialized else "overlapped (max)"),
                op.group if serialized else "host_link",
                overlap,
            )
        )
    return terms


@hookimpl
def stepwall_device_memory(scenario: Scenario, workload: Workload) -> sp.Expr:
    """Weights + KV, less the routed experts left in host memory: (1 − f)·(routed-expert
    bytes per GPU, the model plugin's ``weight_parts["routed_experts"]``)."""
    f = scenario.params.hardware.resident_expert_fraction
    routed = workload.weight_parts.get("routed_experts", sp.Integer(0))
    return workload.weight_bytes_per_gpu + workload.kv_bytes_per_gpu - (1 - f) * routed
