"""Hardware kind ``gpu-offload``: a GPU that keeps only part of the routed experts resident.

Laws (per GPU, per step), with B the routed-expert bytes the step touches (the model
plugin's ``moe.routed_experts`` op), F its FLOPs and f the resident fraction:

- resident part, from device memory:   t_hbm  = max(f·B / (B_HBM·η_mem), F / (F_peak·η_flop))
  (the roofline of `stepwall.plugins.gpu`, reused);
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
from stepwall.errors import SpecError
from stepwall.hookspecs import hookimpl
from stepwall.plugins.gpu import Gpu, launch_terms, roofline
from stepwall.plugins.moe_transformer import ffn_params, shard
from stepwall.spec import KindSpec, Scenario, choice, quantity
from stepwall.terms import Op, Term, Workload

PLUGIN = "offload"  # the entry-point name: errors and terms name the plugin by it
KIND = "gpu-offload"
ROUTED = "moe.routed_experts"  # the op of model kind moe-transformer this plugin splits


@attrs.frozen
class GpuOffload(Gpu):
    """Every field of kind ``gpu``, plus where the experts that do not fit live."""

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


def host_link_time(bytes_: sp.Expr, resident: sp.Expr, bandwidth: sp.Expr, eff: sp.Expr):
    """Time to stream the non-resident share of ``bytes_`` over the host link:
    t = (1 − f)·B / (B_link·η_link)."""
    return (1 - resident) * bytes_ / (bandwidth * eff)


def routed_expert_bytes_per_gpu(scenario: Scenario) -> sp.Expr:
    """Routed-expert weights one GPU holds when all are resident (model kind moe-transformer):
    (L − L_d)·(E + R)/N_ep · 3·h·I_e·⌈I_e/N_tp⌉/I_e · b_e."""
    if scenario.kinds.get("model") != "moe-transformer":
        raise SpecError(
            scenario.origin,
            "hardware.kind",
            f"plugin {PLUGIN}: kind {KIND!r} needs model kind 'moe-transformer', "
            f"not {scenario.kinds.get('model')!r}",
            "model.kind = 'moe-transformer'",
        )
    m, par = scenario.params.model, scenario.params.parallel
    if scenario.model.n_experts == 0:
        return sp.Integer(0)
    expert = ffn_params(m.hidden, m.expert_intermediate) * shard(m.expert_intermediate, par.tp)
    slots = (m.n_experts + par.redundant_experts) / par.ep
    return (m.n_layers - m.n_dense_layers) * slots * expert * m.expert_bits


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "hardware",
            KIND,
            GpuOffload,
            "a GPU with part of the routed experts in host memory, streamed over a link",
        )
    ]


@hookimpl
def stepwall_compute_terms(scenario: Scenario, ops: tuple[Op, ...]) -> list[Term] | None:
    if scenario.kinds["hardware"] != KIND:
        return None
    hw = scenario.params.hardware
    serialized = scenario.hardware.transfer == "serialized"

    def hbm(op: Op, bytes_: sp.Expr) -> sp.Expr:
        return roofline(
            bytes_,
            op.flops,
            hw.hbm_bandwidth,
            hw.hbm_efficiency,
            hw.bf16_flops,
            hw.compute_efficiency,
        )

    terms = []
    for op in ops:
        if op.name != ROUTED:
            terms.append(
                Term(
                    op.name,
                    hbm(op, op.bytes),
                    PLUGIN,
                    f"roofline of {op.why}",
                    op.group,
                    op.overlap,
                )
            )
            continue
        f = hw.resident_expert_fraction
        link = host_link_time(op.bytes, f, hw.host_link_bandwidth, hw.host_link_efficiency)
        terms.append(
            Term(
                op.name,
                hbm(op, f * op.bytes),
                PLUGIN,
                f"roofline of the resident share f of {op.why}",
                op.group,
                op.overlap if serialized else (op.overlap or "host_link"),
            )
        )
        terms.append(
            Term(
                f"{op.name}.host_link",
                link,
                PLUGIN,
                "non-resident experts (1 − f) streamed from host memory over the link, "
                + ("after the HBM reads (serialized)" if serialized else "overlapped (max)"),
                op.group if serialized else "host_link",
                op.overlap if serialized else (op.overlap or "host_link"),
            )
        )
    terms.extend(launch_terms(ops, hw.launch_latency, PLUGIN))
    return terms


@hookimpl
def stepwall_device_memory(scenario: Scenario, workload: Workload) -> sp.Expr | None:
    if scenario.kinds["hardware"] != KIND:
        return None
    f = scenario.params.hardware.resident_expert_fraction
    offloaded = (1 - f) * routed_expert_bytes_per_gpu(scenario)
    return workload.weight_bytes_per_gpu + workload.kv_bytes_per_gpu - offloaded
