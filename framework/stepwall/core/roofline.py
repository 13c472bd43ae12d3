"""How a GPU turns per-step work (`Op`s) into time: the API of kind ``gpu`` and of hardware
kinds that extend it (``KindSpec(..., extends=("hardware", "gpu"))``).

Per op, two terms, as the op's kind declares (`stepwall.core.terms.OpKind`: what its compute
ramp is in) and as kind gpu prices that kind (`GpuPricing`: which hardware fields give its
bandwidth efficiency and kernel floor):

- the roofline at the op's own roof, t = max(B / (B_HBM·η_kind), F·(1 + n½/M) / (F_p·η_p)):
  bytes at the bandwidth its kind achieves (weight-streaming GEMMs, grouped expert GEMMs,
  attention over the KV cache), FLOPs at the dense peak of its math precision p with the
  plateau efficiency η_p, slowed while the GEMM has few rows M (n½: the rows at which it
  reaches half the plateau; Hockney's half-performance length); an attention kernel's
  ramp is in the KV tokens each query reads, F·(1 + S½/S) (per-query work); where the
  precision's roof states ``gemm_k_latency`` τ_k, a GEMM's k-loop is a third side, K·τ_k
  for K the reduction lengths summed over the op's kernels (each output tile walks k in a
  serial loop, which no width hides at small M);
- its floors, kernels × t_floor(kind) × φ: the fixed time of each kernel launch-to-finish
  under CUDA graphs (a GEMM at its precision, with the activation quantisation it needs; a
  grouped-GEMM MoE op; an attention kernel; a small kernel), for the engine's kernel
  library (φ, `Engine.floor_factor`); where a grouped-GEMM family states
  ``moe_expert_latency`` t_e, also t_e·φ for each expert its kernels run (`Op.experts`):
  each expert's tiles fill and drain the pipeline whatever its bytes, so small experts
  stream below the family's plateau rate (docs/calibration.md, "A fixed time per expert").

A kernel family (the routed experts' grouped GEMMs, attention kernels) may have its own
plateau, streaming efficiency, floor, n½ and per-sequence rate at a precision: where that
precision's roof section states them (`FAMILY`), they replace the GEMM's and the GPU-wide
values for its ops, and a family with its own plateau ramps by the plain Hockney law.

Weight-only kernels (``wna16``: N-bit weights dequantised in the kernel before BF16 math)
run at the bf16 roof as a kernel family of their own: their values are the GPU's ``[wna16]``
section's where it states them, else the GPU-wide ones, never the BF16-weight kernels' of
``[bf16]`` (the two stream weights at different rates: docs/calibration.md, "Per kernel
family"); where that section states ``moe_row_blocks``, its grouped GEMMs take each expert's
rows in the kernel's m-blocks, computing the padded rows and streaming the weights once per
block (`stepwall.core.laws.marlin_expert_blocks`).
An engine's own routed-expert kernels (Triton's fused MoE in SGLang on Hopper, FlashInfer's
TensorRT-LLM-generation MoE on Blackwell) are kernel families of the GPU too, ``[triton]``
and ``[trtllm_gen]``, which the engine's kernel path names (``moe_kernels``)
for the layouts that run them (`stepwall.core.terms.Op.engine_kernels`).
A precision the GPU has no tensor cores for runs at the next wider one that it has
(fp4 → fp8 → bf16, int8 → fp8 → bf16), as engines dequantise weights (W4A16) on such parts;
where the engine states a kernel path for the GPU's family and the op's precision
(`stepwall.core.terms.KernelPath`), the op runs at that path's roof, at its factor on the
roof's plateau efficiency.
Efficiencies, n½ and floors are fitted to microbenchmarks of the primitives
(``stepwall calibrate``), each with its source in the hardware spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import sympy as sp

from stepwall.core.errors import PluginError, SpecError
from stepwall.core.laws import chain_time, floor_time, marlin_expert_blocks, roofline_rows
from stepwall.core.scenario import Scenario
from stepwall.core.terms import OP_KINDS, WEIGHT_ONLY, Engine, KernelPath, Op, OpKind, Term


@attrs.frozen
class GpuPricing:
    """How kind gpu prices a kind of op (`stepwall.core.terms.OpKind`, its ``pricing["gpu"]``):
    ``efficiency``, the hardware field giving the fraction of HBM bandwidth its kernels stream
    at (where the GPU leaves it unstated: ``hbm_efficiency``); ``floor``, the hardware field
    giving one kernel's floor ("": the GEMM floor of its precision's roof)."""

    efficiency: str = "hbm_efficiency"
    floor: str = ""


GPU_PRICING = {
    "gemm": GpuPricing(),
    "grouped_gemm": GpuPricing("moe_efficiency", "moe_floor"),
    "attention": GpuPricing("attention_efficiency", "attention_floor"),
    "gqa_attention": GpuPricing("attention_efficiency", "attention_floor"),
    "elementwise": GpuPricing(floor="kernel_floor"),
    "recurrence": GpuPricing(floor="kernel_floor"),
    "chunked_recurrence": GpuPricing(floor="kernel_floor"),
    "chunked_scan": GpuPricing(floor="kernel_floor"),
}  # the built-in op kinds' (`stepwall.core.terms.OP_KINDS`)


def pricing(kind: OpKind, plugin: str) -> GpuPricing:
    """How kind gpu prices ``kind``: as its declaration's ``pricing["gpu"]`` says, a built-in
    kind as `GPU_PRICING` says, else as a weight-streaming GEMM."""
    given = kind.pricing.get("gpu")
    if given is None:
        return GPU_PRICING.get(kind.name, GpuPricing())
    if not isinstance(given, GpuPricing):
        raise PluginError(f"plugin {kind.plugin or plugin}: op kind {kind.name!r} is priced "
                          f"on kind gpu by a GpuPricing, not {type(given).__name__}")  # fmt: skip
    return given


FALLBACK = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "int8": ("int8", "fp8", "bf16"),
            "bf16": ("bf16",), **{w: ("bf16",) for w in WEIGHT_ONLY}}  # fmt: skip


def roof(scenario: Scenario, precision: str) -> tuple[str, Any]:
    """The precision an op of ``precision`` runs at on this GPU and its roof section's
    parameters (``flops``, ``efficiency``, ``half_rows``)."""
    for p in FALLBACK[precision]:
        if scenario.kinds.get(f"hardware.{p}", "none") == "roof":
            return p, getattr(scenario.params.hardware, p)
    raise SpecError(scenario.origin, "hardware.bf16", "the GPU states no bf16 roof",
                    "[bf16] flops, efficiency, half_rows")  # fmt: skip


def op_terms(
    scenario: Scenario,
    op: Op,
    engine: Engine,
    plugin: str,
    *,
    bytes_: sp.Expr | None = None,
    overlap: str | None = None,
    why: str = "",
    op_kinds: Mapping[str, OpKind] = OP_KINDS,
) -> list[Term]:
    """The roofline term of ``op`` (named after it) and its floor term (``<name>.floor``),
    priced as its kind's declaration in ``op_kinds`` says (the registry's, with plugins'
    kinds: the ``op_kinds`` of ``stepwall_compute_terms``). ``bytes_`` replaces the op's
    bytes (a part of it read from elsewhere); ``overlap`` its overlap tag.

    Where the engine's kernel path names its own routed-expert kernels (`KernelPath.
    moe_kernels`, a GPU kernel family ``[hardware.NAME]`` the GPU states) and the op runs in
    them (`Op.engine_kernels`, w), each term is w·(at that family) + (1 − w)·(at the GPU's own).
    """
    kind = op_kinds.get(op.kind)
    if kind is None:
        raise PluginError(f"plugin {plugin}: op {op.name!r} is of kind {op.kind!r}, which "
                          "op_terms was not given (pass the op_kinds of "
                          "stepwall_compute_terms)")  # fmt: skip
    own = _priced(scenario, op, engine, plugin, kind, "", bytes_, overlap, why)
    library = engine.kernel_path(op.precision).moe_kernels
    w = op.engine_kernels
    if kind.ramp != "expert_rows" or not library or w == 0:
        return own
    if f"hardware.{library}" not in scenario.sections:  # the GPU states no such family
        return own
    theirs = _priced(scenario, op, engine, plugin, kind, library, bytes_, overlap, why)
    if w == 1:
        return theirs
    return [attrs.evolve(t, expr=w * e.expr + (1 - w) * t.expr,
                         why=f"{t.why}; {library} kernels where the layout runs them")
            for t, e in zip(own, theirs, strict=True)]  # fmt: skip


def _priced(scenario: Scenario, op: Op, engine: Engine, plugin: str, kind: OpKind,
            library: str, bytes_: sp.Expr | None, overlap: str | None, why: str
            ) -> list[Term]:  # fmt: skip
    """The roofline and floor terms of ``op`` in the GPU's kernel family for it, or in the
    family ``library`` names (an engine's own routed-expert kernels).

    Stays whole: each op kind's exceptions (the MoE ramp, attention's context ramp and per-user
    rate) adjust the same roofline inputs before its roofline and floor terms are built.
    """
    hw = scenario.params.hardware
    priced = pricing(kind, plugin)
    eff_field, floor_field = priced.efficiency, priced.floor
    stated = getattr(scenario.hardware, eff_field) is not None  # else: as weight streaming
    efficiency = getattr(hw, eff_field) if stated else hw.hbm_efficiency
    if engine.memory_efficiency is not None:  # the engine's own measured streaming rate
        efficiency = engine.memory_efficiency
    path = engine.kernel_path(op.precision)  # the engine's kernels for this GPU family
    used, r = roof(scenario, path.runs_as)
    lane = op.overlap if overlap is None else overlap
    slow = 1 / (1 - engine.comm_sm_fraction) if engine.two_batch_overlap else sp.S.One
    moved = op.bytes if bytes_ is None else bytes_
    terms = []
    rows, capped, half_rows, flop_eff = op.rows, True, r.half_rows, r.efficiency
    factor = path.moe_factor if kind.ramp == "expert_rows" else path.factor  # the engine's
    if kind.ramp == "context":  # its ramp is in the context each query reads
        stated_half = scenario.hardware.attention_half_context is not None
        half_rows = hw.attention_half_context if stated_half else sp.S.Zero
        rows, capped = (op.rows if stated_half else sp.S.Zero), False
    serial = None  # the rate one sequence's attention reaches alone, where the GPU states it
    single = engine.memory_efficiency is not None  # an engine's one streaming rate: no other
    if kind.serial and not single and scenario.hardware.attention_user_bandwidth is not None:
        serial = hw.attention_user_bandwidth
    per_kernel = getattr(hw, floor_field) if floor_field else r.gemm_floor
    # the kernel family's own values at this precision, where its roof section states them
    # (a weight-only kernel's: where the GPU's section of that name states them)
    family = library or (path.runs_as if path.runs_as in WEIGHT_ONLY else used)
    at_family = f"hardware.{family}"
    stated_at = scenario.section(at_family) if at_family in scenario.sections else None
    own = _own(stated_at, getattr(hw, family, None), FAMILY.get(kind.ramp, ("",) * 7))
    if kind.name in KIND_FAMILY:  # a kernel family within the ramp's: its own values first
        mine = _own(stated_at, getattr(hw, family, None), KIND_FAMILY[kind.name])
        own = [m if m is not None else o for m, o in zip(mine, own, strict=True)]
    if own[0] is not None:
        half_rows, rows = own[0], op.rows
    if own[1] is not None:  # a family's own plateau: its own Hockney ramp, uncapped
        flop_eff, capped = own[1], False
    per_kernel = per_kernel if own[3] is None else own[3]
    if not single:
        efficiency = efficiency if own[2] is None else own[2]
        serial = serial if own[4] is None or not kind.serial else own[4]
    flops = op.flops
    if kind.ramp == "expert_rows" and flops != 0:  # a kernel family's own m-blocks
        moved, flops, rows = _row_blocks(getattr(stated_at, "moe_row_blocks", None), op, moved)
    if moved != 0 or flops != 0:
        t = roofline_rows(moved, flops, hw.hbm_bandwidth, efficiency, r.flops,
                          flop_eff * factor, rows, half_rows, op.serial_bytes, serial,
                          capped)  # fmt: skip
        if op.chain != 0 and own[5] is not None:
            # steps no width hides, in the engine's kernel library as its floors are
            steps = chain_time(op.chain, own[5] * engine.floor_factor)
            t = sp.Max(t, steps, evaluate=False) if kind.chain_alongside else t + steps
        at = op.precision if used == op.precision else f"{op.precision} at the {used} roof"
        if attrs.evolve(path, moe_kernels="") != KernelPath(op.precision, op.precision):
            at += ", the engine's kernel path"
        if library:
            at += f", {library} kernels"
        terms.append(Term(op.name, slow * t, plugin, why or f"roofline ({at}) of {op.why}",
                          op.group, lane))  # fmt: skip
    if op.kernels != 0:
        floor = floor_time(op.kernels, per_kernel, engine.floor_factor)
        why_floor = f"{op.kind} kernel floors × engine factor"
        if op.experts != 0 and own[6] is not None:  # the family's fixed time per expert
            floor += floor_time(op.experts, own[6], engine.floor_factor)
            why_floor = f"{op.kind} kernel floors and a fixed time per expert × engine factor"
        terms.append(Term(f"{op.name}.floor", floor, plugin, why_floor, op.group, lane))
    return terms


# the fields a precision's roof section may restate for the kernel family of an op kind, by
# the kind's ramp: (n½, plateau, streaming efficiency, floor, one sequence's rate, one step of
# the op's chain, one expert's fixed time)
FAMILY = {
    "expert_rows": ("moe_half_rows", "moe_efficiency", "moe_bandwidth_efficiency", "moe_floor",
                    "", "", "moe_expert_latency"),
    "context": ("attention_half_context", "attention_efficiency",
                "attention_bandwidth_efficiency", "attention_floor", "attention_user_bandwidth",
                "", ""),
}  # fmt: skip
# the same for an op kind whose kernels are a family of their own within their ramp's; a
# field it leaves unstated is the ramp family's
KIND_FAMILY = {
    "gemm": ("", "", "", "", "", "gemm_k_latency", ""),
    "gqa_attention": ("", "", "gqa_attention_bandwidth_efficiency", "gqa_attention_floor", "",
                      "", ""),
    "chunked_recurrence": ("", "chunk_recurrence_efficiency", "", "chunk_recurrence_floor", "",
                           "chunk_recurrence_latency", ""),
}  # fmt: skip


# how a grouped-GEMM kernel family takes each expert's rows (`WeightOnly.moe_row_blocks`):
# the law giving (rows computed, weight passes) from the rows it counts and the rows it has
ROW_BLOCK_LAWS = {"marlin": marlin_expert_blocks}
ROW_BLOCKS = tuple(ROW_BLOCK_LAWS)


def _row_blocks(blocks: str | None, op: Op, moved: sp.Expr
                ) -> tuple[sp.Expr, sp.Expr, sp.Expr]:  # fmt: skip
    """(bytes, FLOPs, rows per expert) of grouped GEMMs whose kernel takes each expert's rows
    in m-blocks: the weights streamed once per block, the padded rows computed; the op's own
    where the family states no blocks."""
    if blocks is None or op.rows == 0:
        return moved, op.flops, op.rows
    counted = op.rows if op.counted_rows == 0 else op.counted_rows
    computed, passes = ROW_BLOCK_LAWS[blocks](counted, op.rows)
    return moved * passes, op.flops * computed / op.rows, computed


def _own(stated: Any, r: Any, fields: tuple[str, ...]) -> list[Any]:
    """The roof's own value of each of ``fields`` where its section states it, else None."""
    return [getattr(r, f) if f and getattr(stated, f, None) is not None else None
            for f in fields]  # fmt: skip
