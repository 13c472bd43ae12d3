"""Hardware kind ``gpu``: a roofline per operation at its own precision's roof, plus kernel
floors (`stepwall.core.roofline` states the laws).

A GPU spec gives its memory (capacity, peak bandwidth, the fraction each kind of kernel
achieves), the fixed time of each kind of kernel (floors, measured under CUDA graphs), and
one roof per tensor-core math precision it has, as subsections::

    [bf16]
    flops = "2250 TFLOP/s"   # dense peak
    efficiency = 0.70        # plateau fraction on large GEMMs
    half_rows = 200          # rows (tokens) at which a GEMM reaches half the plateau
    [fp8]  …                 # absent: no FP8 tensor cores (fp8 work runs at the bf16 roof)

A roof section may also state the routed experts' and attention kernels' own values at its
precision (``moe_efficiency``, ``moe_bandwidth_efficiency``, ``moe_floor``, ``attention_*``,
and grouped-query attention's ``gqa_attention_*``): their kernel families
(`stepwall.core.roofline.FAMILY`, `KIND_FAMILY`). A ``[wna16]`` section states the
grouped GEMMs' values of weight-only kernels (W4A16, W8A16), which run at the bf16 roof.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import sympy as sp

from stepwall.core.fields import FRACTION, KindSpec, choice, quantity
from stepwall.core.laws import (
    BYTE,
    CHUNK_KERNELS,
    FLOPS_PER_MAC,
    GEMM_INPUT_BYTES,
    balanced_expert_load,
    chunk_chain,
    chunked_tokens,
    ffn_params,
    floor_time,
    gqa_kv_bytes,
    gqa_score_flops,
    linear_state_elements,
    linear_state_flops,
    moe_activation_bytes,
    random_expert_load,
)
from stepwall.core.primitives import Primitive, PrimitiveLaw
from stepwall.core.roofline import ROW_BLOCKS, op_terms
from stepwall.core.scenario import Scenario
from stepwall.core.terms import (
    EXPERT_LIBRARIES,
    FAMILIES,
    OP_PRECISIONS,
    PRECISIONS,
    WEIGHT_ONLY,
    Engine,
    KernelPath,
    Op,
    OpKind,
    Term,
)
from stepwall.core.units import DIMENSIONLESS, INFORMATION
from stepwall.plugin.hookspecs import hookimpl

PLUGIN = "gpu"


def _fraction(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, maximum=1.0, plausible=FRACTION, **kw)


def _floor(doc: str, latex: str, default: float | None = 0.0) -> Any:
    """A kernel's fixed time: from 0 to 1 s (a kernel launch is microseconds)."""
    return quantity(
        "time", doc, latex=latex, minimum=0.0, inclusive=True, maximum=1.0, default=default
    )


def _optional_time(doc: str, latex: str) -> Any:
    """A kernel's time that falls back to another value when not stated."""
    return _floor(doc, latex, default=None)


@attrs.frozen
class Gpu:
    memory_capacity: float = quantity(
        "information", "usable device memory per GPU", latex="M_{cap}"
    )
    hbm_bandwidth: float = quantity("bandwidth", "peak device-memory bandwidth", latex="B_{HBM}")
    hbm_efficiency: float = _fraction(
        "achieved fraction of hbm_bandwidth streaming GEMM weights (and small kernels)",
        r"\eta_{mem}",
    )
    moe_efficiency: float | None = _fraction(
        "achieved fraction of hbm_bandwidth in the routed experts' grouped GEMMs "
        "(default: hbm_efficiency)",
        r"\eta_{moe}",
        default=None,
    )
    attention_efficiency: float | None = _fraction(
        "achieved fraction of hbm_bandwidth reading the KV cache in decode attention "
        "(default: hbm_efficiency)",
        r"\eta_{attn}",
        default=None,
    )
    attention_user_bandwidth: float | None = quantity(
        "bandwidth",
        "rate at which one sequence's decode attention streams its KV cache when alone "
        "(split-KV parallelism; none: no such limit)",
        latex=r"\beta_{seq}",
        default=None,
    )
    attention_half_context: float | None = quantity(
        "dimensionless",
        "KV tokens per query at which an attention kernel reaches half its compute plateau "
        "(n½ in context: per-query work of loading Q, softmax and writing O; none: no such "
        "cost)",
        latex=r"S_{1/2}",
        minimum=0.0,
        inclusive=True,
        default=None,
    )
    sparse_mla_heads: float = quantity(
        "dimensionless",
        "query heads per rank the token-sparse MLA prefill kernel computes at a time: a rank's "
        "heads are zero-padded up to a multiple of it (1: no padding)",
        latex=r"H_{tile}",
        minimum=1.0,
        inclusive=True,
        integer=True,
        default=1.0,
    )
    board_power: float | None = quantity(
        "power",
        "board power under load per GPU (the module's TDP as configured; none: energy metrics "
        "are unknown)",
        latex="P_{GPU}",
        default=None,
    )
    moe_floor: float = _floor("fixed time of a layer's routed-expert op (grouped GEMMs)",
                              "t_{moe}")  # fmt: skip
    attention_floor: float = _floor("fixed time of an attention kernel", "t_{attn}")
    kernel_floor: float = _floor("fixed time of a small kernel (norm, RoPE, quantise)",
                                 "t_{kern}")  # fmt: skip
    family: str | None = choice(
        FAMILIES,
        "architecture family, which selects the engine's kernel paths ([engine] "
        "FAMILY.PRECISION; none: every op at its own precision's calibrated roof)",
        default=None,
    )


def _moe_half_rows(at: str) -> Any:
    return quantity("dimensionless", "rows per expert at which the routed experts' grouped "
                    f"GEMMs at {at} reach half their plateau (default: half_rows)",
                    latex=r"n_{1/2,moe}", minimum=0.0, inclusive=True, default=None)  # fmt: skip


def _moe_efficiency(at: str) -> Any:
    return _fraction(f"achieved fraction of {at} in the routed experts' grouped GEMMs (their "
                     "kernel family's plateau; default: efficiency)", r"\eta_{p,moe}",
                     default=None)  # fmt: skip


def _moe_bandwidth_efficiency(at: str) -> Any:
    return _fraction("achieved fraction of hbm_bandwidth streaming the routed experts' weights "
                     f"at {at} (default: the GPU's moe_efficiency)", r"\eta_{mem,p,moe}",
                     default=None)  # fmt: skip


def _moe_floor(at: str) -> Any:
    return _optional_time(f"fixed time of a layer's routed-expert op at {at} (default: the "
                          "GPU's moe_floor)", "t_{p,moe}")  # fmt: skip


def _moe_expert_latency(at: str) -> Any:
    return _optional_time(f"fixed time of each expert the routed-expert kernels at {at} run, "
                          "whatever its bytes: its tiles' pipeline fill and drain (none: no "
                          "such cost)", "t_{e,moe}")  # fmt: skip


@attrs.frozen
class Roof:
    flops: float = quantity("compute_rate", "dense tensor-core peak at this precision",
                            latex="F_{p}")  # fmt: skip
    efficiency: float = _fraction("achieved fraction of the peak on large GEMMs", r"\eta_{p}")
    half_rows: float = quantity(
        "dimensionless",
        "rows (tokens) at which a GEMM reaches half its plateau (n½)",
        latex=r"n_{1/2}",
        minimum=0.0,
        inclusive=True,
        default=0.0,
    )
    gemm_floor: float = _floor(
        "fixed time of a GEMM kernel at this precision (with its activation quantisation)",
        "t_{gemm}",
    )
    moe_half_rows: float | None = _moe_half_rows("this precision")
    moe_efficiency: float | None = _moe_efficiency("this peak")
    moe_bandwidth_efficiency: float | None = _moe_bandwidth_efficiency("this precision")
    moe_floor: float | None = _moe_floor("this precision")
    moe_expert_latency: float | None = _moe_expert_latency("this precision")
    attention_efficiency: float | None = _fraction(
        "achieved fraction of this peak in attention kernels over a KV cache of this "
        "precision (their kernel family's plateau; default: efficiency)",
        r"\eta_{p,attn}",
        default=None,
    )
    attention_bandwidth_efficiency: float | None = _fraction(
        "achieved fraction of hbm_bandwidth reading a KV cache of this precision in decode "
        "attention (default: the GPU's attention_efficiency)",
        r"\eta_{mem,p,attn}",
        default=None,
    )
    attention_floor: float | None = _optional_time(
        "fixed time of an attention kernel at this precision (default: the GPU's attention_floor)",
        "t_{p,attn}",
    )
    attention_half_context: float | None = quantity(
        "dimensionless",
        "KV tokens per query at which an attention kernel at this precision reaches half its "
        "compute plateau (default: the GPU's attention_half_context)",
        latex=r"S_{p,1/2}",
        minimum=0.0,
        inclusive=True,
        default=None,
    )
    attention_user_bandwidth: float | None = quantity(
        "bandwidth",
        "rate at which one sequence's decode attention streams a KV cache of this precision "
        "when alone (default: the GPU's attention_user_bandwidth)",
        latex=r"\beta_{p,seq}",
        default=None,
    )
    gqa_attention_bandwidth_efficiency: float | None = _fraction(
        "attention_bandwidth_efficiency for grouped-query decode attention kernels "
        "(TensorRT-LLM's generation kernels; default: attention_bandwidth_efficiency)",
        r"\eta_{mem,p,gqa}",
        default=None,
    )
    gqa_attention_floor: float | None = _optional_time(
        "fixed time of a grouped-query attention kernel at this precision (default: "
        "attention_floor)",
        "t_{p,gqa}",
    )
    chunk_recurrence_efficiency: float | None = _fraction(
        "achieved fraction of this peak in a linear-attention layer's chunked prefill kernels "
        "on their padded chunks' FLOPs (FLA's chunk_gated_delta_rule: their kernel family's "
        "plateau; default: efficiency)",
        r"\eta_{p,chunk}",
        default=None,
    )
    chunk_recurrence_floor: float | None = _optional_time(
        "fixed time of one kernel of the chunked prefill pipeline at this precision (default: "
        "the GPU's kernel_floor)",
        "t_{p,chunk}",
    )
    chunk_recurrence_latency: float | None = _optional_time(
        "time of one dependent step of the chunked prefill: a chunk's state from the previous "
        "chunk's, which no parallelism hides (default: none)",
        r"\tau_{p,chunk}",
    )
    gemm_k_latency: float | None = _optional_time(
        "time per element of k that a GEMM at this precision walks one after another: each "
        "output tile reduces over k in a serial loop, which no width hides at small m "
        "(default: none)",
        r"\tau_{p,k}",
    )


@attrs.frozen
class WeightOnly:
    """A weight-only kernel family (``[wna16]``): N-bit weights dequantised in the kernel
    before BF16 math, on the bf16 roof; its grouped GEMMs' own values (none stated: the GPU's)."""

    moe_half_rows: float | None = _moe_half_rows("WNA16")
    moe_efficiency: float | None = _moe_efficiency("the bf16 peak at WNA16")
    moe_bandwidth_efficiency: float | None = _moe_bandwidth_efficiency("WNA16")
    moe_floor: float | None = _moe_floor("WNA16")
    moe_expert_latency: float | None = _moe_expert_latency("WNA16")
    moe_row_blocks: str | None = choice(
        ROW_BLOCKS,
        "how the grouped GEMMs take an expert's rows: marlin (Marlin MoE: m-blocks of 8 to 64 "
        "rows chosen from the rows per expert, rows padded to whole blocks, the expert's "
        "weights streamed once per block: `marlin_expert_blocks`); unset: as they come",
        default=None,
    )


@attrs.frozen
class ExpertLibrary:
    """An engine's own routed-expert kernels as a kernel family of the GPU (``[triton]``:
    Triton's fused MoE, which SGLang runs on Hopper where DeepEP does not exchange the
    experts; ``[trtllm_gen]``: FlashInfer's TensorRT-LLM-generation MoE, SGLang's on
    Blackwell), at the roof of the kernel path that names them (``moe_kernels``); a value not
    stated: the GPU's for that precision."""

    moe_half_rows: float | None = _moe_half_rows("these kernels")
    moe_efficiency: float | None = _moe_efficiency("the path's peak in these kernels")
    moe_bandwidth_efficiency: float | None = _moe_bandwidth_efficiency("these kernels")
    moe_floor: float | None = _moe_floor("these kernels")
    moe_expert_latency: float | None = _moe_expert_latency("these kernels")


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    kinds = [
        KindSpec(
            "hardware",
            "gpu",
            Gpu,
            "a GPU: rooflines per precision, kernel floors",
            provides={"device_memory": "memory_capacity", "board_power": "board_power"},
        )
    ]
    for p in PRECISIONS:  # bf16 is required; an absent fp8/fp4/int8 section: no such cores
        kinds.append(KindSpec(f"hardware.{p}", "roof", Roof, f"{p} tensor cores",
                              default=p == "bf16"))  # fmt: skip
    for w in WEIGHT_ONLY:  # absent: such kernels at the GPU-wide values on the bf16 roof
        kinds.append(KindSpec(f"hardware.{w}", "weight_only", WeightOnly, f"{w} kernels (weights "
                              "dequantised before BF16 math)"))  # fmt: skip
    for lib in EXPERT_LIBRARIES:  # absent: the engine's kernels at the GPU's values
        kinds.append(KindSpec(f"hardware.{lib}", "expert_library", ExpertLibrary, f"an "
                              f"engine's own routed-expert kernels ({lib})"))  # fmt: skip
    return kinds


@hookimpl
def stepwall_compute_terms(
    scenario: Scenario, ops: tuple[Op, ...], engine: Engine, op_kinds: Mapping[str, OpKind]
) -> list[Term]:
    return [t for op in ops for t in op_terms(scenario, op, engine, PLUGIN, op_kinds=op_kinds)]


# ---------------------------------------------------------------- primitives (calibration)

_BITS = {"weight_bits": INFORMATION}


def _gemm(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """One m×n×k GEMM with an n×k weight of ``weight_bits`` per element and 16-bit
    activations: the same roofline and floor as the model's ``gemm`` ops."""
    m, n, k = x["m"], x["n"], x["k"]
    act = sp.Integer(2) * BYTE
    op = Op("gemm", n * k * x["weight_bits"] + m * (n + k) * act, m * n * k * FLOPS_PER_MAC,
            PLUGIN, "a GEMM", "calibration", sp.S.One, "", "gemm", t["precision"], m,
            chain=k)  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _moe(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """One layer's routed experts on one of ``ep`` ranks for ``tokens`` tokens (before
    dispatch), routed as the benchmark routes them (``routing``: balanced,
    `balanced_expert_load`, unless the table says random, `random_expert_load`):
    the model's ``moe.routed_experts`` op for those experts and rows."""
    return _expert_layer(scenario, x, t, "")


def _in_library(library: str) -> PrimitiveLaw:
    """The same layer in ``library``'s kernels (`EXPERT_LIBRARIES`): the ``[library]``
    family's values, as an engine whose kernel path names them prices its routed experts."""

    def law(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
        return _expert_layer(scenario, x, t, library)

    law.__doc__ = (f"The same layer in {EXPERT_LIBRARIES[library]}: the [{library}] family's "
                   "values, as an engine whose kernel path names them prices its routed "
                   "experts.")  # fmt: skip
    return law


def _expert_layer(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str],
                  library: str) -> sp.Expr:  # fmt: skip
    """A routed-expert layer in the GPU's grouped GEMMs, or in ``library``'s kernels."""
    p = t["precision"]
    engine = Engine(kernel_paths=(KernelPath(p, p, moe_kernels=library),)) if library else Engine()
    ours = sp.S.One if library else sp.S.Zero
    expert = ffn_params(x["hidden"], x["inter"])
    routed = random_expert_load if t["routing"] == "random" else balanced_expert_load
    hit, picks = routed(x["experts"], x["topk"], x["tokens"], x["ep"])
    # the benchmark gives the kernel every token; it holds experts/ep of them
    counted = x["tokens"] * x["topk"] * x["ep"] / x["experts"]
    op = Op("moe", hit * expert * x["weight_bits"], expert * picks * FLOPS_PER_MAC, PLUGIN,
            "a routed-expert layer", "calibration", sp.S.One, "", "grouped_gemm",
            p, picks / hit, counted_rows=counted, engine_kernels=ours, experts=hit)  # fmt: skip
    # the tables' kernels write the GEMMs' output in BF16
    moved = moe_activation_bytes(picks, x["tokens"], x["hidden"], GEMM_INPUT_BYTES[p] * BYTE,
                                 GEMM_INPUT_BYTES["bf16"] * BYTE)  # fmt: skip
    acts = Op("moe.activations", moved, sp.S.Zero, PLUGIN, "its activations around the GEMMs",
              "calibration", kind="grouped_gemm", precision=p, engine_kernels=ours)  # fmt: skip
    terms = [term for o in (op, acts) for term in op_terms(scenario, o, engine, PLUGIN)]
    return sp.Add(*(term.expr for term in terms))


def _mla_decode(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """One absorbed-MLA decode attention kernel: ``batch`` queries each over ``kv_len``
    cached latents of (kv_lora_rank + qk_rope_head_dim) elements, ``heads`` heads on the GPU:
    the model's ``attention.core`` op for one layer."""
    latent = x["kv_lora_rank"] + x["qk_rope_head_dim"]
    flops = x["batch"] * x["heads"] * x["kv_len"] * (2 * x["kv_lora_rank"] + x["qk_rope_head_dim"])
    op = Op("mla", x["batch"] * x["kv_len"] * latent * x["kv_bits"], flops * FLOPS_PER_MAC,
            PLUGIN, "an MLA decode kernel", "calibration", sp.S.One, "", "attention",
            t["precision"], x["kv_len"], x["kv_len"] * latent * x["kv_bits"])  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _gqa_decode(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """One grouped-query decode attention kernel: ``batch`` queries of ``heads`` heads on the
    GPU, each over ``kv_len`` cached keys and values of ``kv_heads`` x ``head_dim``: the
    model's ``attention.core`` op of a GQA layer (`gqa_kv_bytes`, `gqa_score_flops`)."""
    kv_token = gqa_kv_bytes(x["kv_heads"], x["head_dim"], sp.S.One, x["kv_bits"])
    flops = x["batch"] * gqa_score_flops(x["head_dim"], x["heads"], sp.S.One, x["kv_len"])
    op = Op("gqa", x["batch"] * x["kv_len"] * kv_token, flops, PLUGIN,
            "a GQA decode kernel", "calibration", sp.S.One, "", "gqa_attention",
            t["precision"], x["kv_len"], x["kv_len"] * kv_token)  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _gdn_prefill(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]
                 ) -> sp.Expr:  # fmt: skip
    """One layer's chunked prefill (FLA's chunk_gated_delta_rule) of ``batch`` prompts of
    ``seq_len`` tokens, ``value_heads`` heads on the GPU, in chunks of ``chunk``: the model's
    ``linear.chunks`` op (`chunked_tokens`, `chunk_chain`, `CHUNK_KERNELS`)."""
    per_token = linear_state_flops(x["value_heads"], x["key_dim"], x["value_dim"], sp.S.One,
                                   x["chunk"], prompt=True)  # fmt: skip
    flops = x["batch"] * chunked_tokens(x["seq_len"], x["chunk"]) * per_token
    op = Op("chunks", sp.S.Zero, flops, PLUGIN, "a chunked prefill", "calibration",
            sp.Integer(CHUNK_KERNELS["delta_rule"]), "", "chunked_recurrence", t["precision"],
            chain=chunk_chain(x["seq_len"], x["chunk"]))  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _gdn_decode(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]
                ) -> sp.Expr:  # fmt: skip
    """One layer's decode recurrence for ``batch`` requests of one token each: the model's
    ``linear.state`` op (each request's state of ``state_bits`` read and written once,
    `linear_state_flops`) in the one kernel the table times."""
    state = linear_state_elements(x["value_heads"], x["key_dim"], x["value_dim"], sp.S.One)
    flops = x["batch"] * linear_state_flops(x["value_heads"], x["key_dim"], x["value_dim"],
                                            sp.S.One, x["chunk"], prompt=False)  # fmt: skip
    op = Op("recurrence", 2 * x["batch"] * state * x["state_bits"], flops, PLUGIN,
            "a decode recurrence", "calibration", sp.S.One, "", "recurrence",
            t["precision"])  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _copy(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """A streaming kernel moving ``bytes`` (read + written): a small kernel's floor plus the
    bytes at the weight-streaming efficiency."""
    op = Op("copy", x["bytes"], sp.S.Zero, PLUGIN, "a streaming copy", "calibration", sp.S.One,
            "", "elementwise")  # fmt: skip
    return sp.Add(*(term.expr for term in op_terms(scenario, op, Engine(), PLUGIN)))


def _tiny(scenario: Scenario, x: Mapping[str, sp.Symbol], t: Mapping[str, str]) -> sp.Expr:
    """A kernel with almost no work (a GEMM of m, n, k ≤ 256): its floor alone."""
    return floor_time(sp.S.One, scenario.params.hardware.kernel_floor, sp.S.One)


def _routable(scenario: Scenario, x: Mapping[str, float]) -> tuple[str, str, str] | None:
    """Top-k picks among the experts, and each EP rank holds at least one expert."""
    for col in ("topk", "ep"):
        if x[col] > x["experts"]:
            return col, f"{x[col]:g} > experts = {x['experts']:g}", f"{col} ≤ experts"
    return None


@hookimpl
def stepwall_primitives() -> list[Primitive]:
    one = DIMENSIONLESS
    precision = {"precision": OP_PRECISIONS}
    # how the table's benchmark routed tokens (an optional column: balanced unless it says)
    routing = {"routing": ("balanced", "random")}
    roofs = tuple(f"{p}.{f}" for p in PRECISIONS for f in ("efficiency", "half_rows"))
    floors = tuple(f"{p}.{f}" for p in PRECISIONS for f in ("gemm_floor", "gemm_k_latency"))
    family = ("moe_half_rows", "moe_efficiency", "moe_bandwidth_efficiency", "moe_floor",
              "moe_expert_latency")  # fmt: skip
    grouped = tuple(f"{p}.{f}" for p in OP_PRECISIONS for f in family)
    attention = tuple(f"{p}.{f}" for p in ("bf16", "fp8")
                      for f in ("attention_efficiency", "attention_bandwidth_efficiency",
                                "attention_floor", "attention_half_context",
                                "attention_user_bandwidth"))  # fmt: skip
    # a GQA decode table informs the streaming side: its kernels' FLOPs never bind
    gqa = tuple(f"{p}.gqa_attention_{f}" for p in ("bf16", "fp8")
                for f in ("bandwidth_efficiency", "floor"))  # fmt: skip
    return [
        Primitive("gemm", "hardware", "a dense GEMM (cuBLAS/CUTLASS/DeepGEMM), m tokens × n×k "
                  "weights", {"m": one, "n": one, "k": one, **_BITS}, precision,
                  ("hbm_efficiency", *floors, *roofs), _gemm, PLUGIN),
        Primitive("moe", "hardware", "a layer's routed experts (fused grouped GEMMs) on one EP "
                  "rank, balanced or random routing", {"tokens": one, "hidden": one, "inter": one,
                  "experts": one, "topk": one, "ep": one, **_BITS}, {**precision, **routing},
                  ("moe_efficiency", "moe_floor", *roofs, *grouped), _moe, PLUGIN, _routable,
                  {"routing": "balanced"}),
        *(Primitive(f"moe_{lib}", "hardware", f"a layer's routed experts in "
                    f"{EXPERT_LIBRARIES[lib]} on one EP rank, balanced or random routing",
                    {"tokens": one, "hidden": one, "inter": one, "experts": one, "topk": one,
                     "ep": one, **_BITS},
                    {"precision": PRECISIONS, **routing}, ("moe_efficiency", "moe_floor", *roofs,
                    *grouped, *(f"{lib}.{f}" for f in family)), _in_library(lib), PLUGIN,
                    _routable, {"routing": "balanced"}) for lib in EXPERT_LIBRARIES),
        Primitive("mla_decode", "hardware", "an absorbed-MLA decode attention kernel",
                  {"batch": one, "kv_len": one, "heads": one, "kv_lora_rank": one,
                   "qk_rope_head_dim": one, "kv_bits": INFORMATION}, {"precision": ("bf16", "fp8")},
                  ("attention_efficiency", "attention_floor", "attention_user_bandwidth",
                   "attention_half_context", *attention),
                  _mla_decode, PLUGIN),
        Primitive("gqa_decode", "hardware", "a grouped-query decode attention kernel",
                  {"batch": one, "kv_len": one, "heads": one, "kv_heads": one, "head_dim": one,
                   "kv_bits": INFORMATION}, {"precision": ("bf16", "fp8")}, gqa, _gqa_decode,
                  PLUGIN),
        Primitive("gdn_prefill", "hardware", "a linear-attention layer's chunked prefill (FLA "
                  "chunk_gated_delta_rule), batch prompts of seq_len tokens",
                  {"batch": one, "seq_len": one, "value_heads": one, "key_dim": one,
                   "value_dim": one, "chunk": one}, {"precision": ("bf16",)},
                  ("bf16.chunk_recurrence_efficiency", "bf16.chunk_recurrence_floor",
                   "bf16.chunk_recurrence_latency", "kernel_floor", "bf16.efficiency"),
                  _gdn_prefill, PLUGIN),
        Primitive("gdn_decode", "hardware", "a linear-attention layer's decode recurrence, "
                  "batch requests of one token", {"batch": one, "value_heads": one,
                  "key_dim": one, "value_dim": one, "chunk": one, "state_bits": INFORMATION},
                  {"precision": ("bf16",)}, ("hbm_efficiency", "kernel_floor"), _gdn_decode,
                  PLUGIN),
        Primitive("memory_copy", "hardware", "a streaming copy kernel (bytes read + written)",
                  {"bytes": INFORMATION}, {}, ("hbm_efficiency", "kernel_floor"), _copy, PLUGIN),
        Primitive("small_kernel", "hardware", "a kernel with almost no work (its floor)", {}, {},
                  ("kernel_floor",), _tiny, PLUGIN),
    ]  # fmt: skip
