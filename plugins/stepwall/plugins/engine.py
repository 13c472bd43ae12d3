"""Engine kind ``engine``: what the serving software adds to the GPU's work.

An engine profile (``specs/engines/*.toml``) states, each with its source:

- host time per step (scheduling, sampling, the CUDA-graph replay bubble) and per layer
  (work a CUDA graph does not remove), as terms; ``native`` scales them and the drafting
  work the decoding plugin hands over (`Decoding.host`): the seed's "native engine = −40%
  overhead" is native = 0.6;
- the small kernels it launches per decoder layer besides the model's GEMMs, attention and
  experts (norms, RoPE, quantisation, top-k, residual adds), which the model plugin costs
  as elementwise kernels;
- a factor on the hardware's kernel floors for its kernel library (1: the library the
  floors were measured with; 0: an estimator without floors, as the seed's), and one on the
  routed experts' activation traffic (0: an estimator of weights and FLOPs only);
- the host time added per kernel launch without CUDA graphs (``launch_overhead``), as a term,
  and the host time per decoder layer of a prefill pass it runs outside CUDA graphs
  (``prefill_layer_host``), a floor on that pass's time;
- the share of device memory it gives weights and the KV cache;
- how it overlaps work: two-batch overlap, shared experts during dispatch, the share of the
  GPU communication kernels take, and the prefill chunk of aggregated serving;
- the release it describes (``version``, ``date``), and its kernel paths: per GPU family
  (``hardware.family``) and op precision, a table ``[FAMILY.PRECISION]`` with the precision
  the kernels run at (``runs_as``) and a factor on that roof's calibrated efficiency, where
  they differ from the calibrated roof (`stepwall.core.terms.KernelPath`).
- how its expert dispatch sends tokens (``dispatcher``), what its memory fraction is of, and
  the block size of its paged KV cache.
- how it places prompts on attention-DP ranks and whether prefill rides in decode
  iterations or stalls them (the in-flight batching law, docs/physics.md).
"""

from __future__ import annotations

from typing import Any

import attrs
import sympy as sp

from stepwall.core.fields import FACTOR, FRACTION, KindSpec, choice, flag, quantity, text
from stepwall.core.laws import launch_time
from stepwall.core.roofline import roof
from stepwall.core.scenario import Scenario
from stepwall.core.terms import (
    EXPERT_LIBRARIES,
    FAMILIES,
    OP_PRECISIONS,
    PRECISIONS,
    SCALE_UP_KINDS,
    Constraint,
    Decoding,
    Engine,
    KernelPath,
    Step,
    Term,
    Workload,
)
from stepwall.plugin.hookspecs import hookimpl

PLUGIN = "engine"


def _time(doc: str, latex: str) -> Any:
    return quantity("time", doc, latex=latex, minimum=0.0, inclusive=True, default=0.0)


@attrs.frozen
class EngineSpec:
    per_step: float = _time("host time per step not hidden behind the GPU", "t_{step}")
    per_layer: float = _time("host time per decoder layer per step", "t_{layer}")
    native: float = quantity(
        "dimensionless",
        "factor on host time and drafting (1 = as measured, 0.6 = a native engine)",
        latex=r"\nu",
        default=1.0,
        plausible=FACTOR,
    )
    layer_kernels: int = quantity(
        "dimensionless",
        "small kernels the engine launches per decoder layer (norms, RoPE, quantise, top-k)",
        latex="k_{layer}",
        integer=True,
        minimum=0.0,
        inclusive=True,
        default=0.0,
    )
    floor_factor: float = quantity(
        "dimensionless",
        "factor on the hardware's kernel floors and its kernels' serial steps (a GEMM's "
        "k-loop, a recurrence's chunk chain) for this engine's kernel library",
        latex=r"\phi",
        minimum=0.0,
        inclusive=True,
        default=1.0,
        plausible=FACTOR,
    )
    activation_factor: float = quantity(
        "dimensionless",
        "factor on the routed experts' activation traffic around their grouped GEMMs (1: "
        "the kernels' own data flow; 0: an estimator pricing the experts' weights and FLOPs "
        "only, as the seed's)",
        latex=r"\phi_{act}",
        minimum=0.0,
        inclusive=True,
        default=1.0,
        plausible=FACTOR,
    )
    launch_overhead: float = _time(
        "host time per kernel launch (0 under CUDA graphs)", "t_{launch}"
    )
    prefill_layer_host: float = _time(
        "host time per decoder layer of a forward pass the engine runs outside CUDA graphs "
        "(its prefill): such a pass takes at least layers × this (0: captured, or unmeasured)",
        "t_{host,layer}",
    )
    memory_efficiency: float | None = quantity(
        "dimensionless",
        "fraction of HBM bandwidth every kernel of this engine streams at, overriding the "
        "hardware's per-kind efficiencies and per-sequence attention rate (the seed's "
        "estimator: one measured value)",
        latex=r"\eta_{eng}",
        maximum=1.0,
        default=None,
        plausible=FRACTION,
    )
    memory_fraction: float = quantity(
        "dimensionless",
        "share of device memory the engine gives weights and KV cache (the rest: activations, "
        "CUDA graphs, workspaces)",
        latex=r"f_{mem}",
        maximum=1.0,
        default=1.0,
        plausible=FRACTION,
    )
    two_batch_overlap: bool = flag(
        "split each step into two micro-batches so one's communication hides under the "
        "other's compute"
    )
    comm_sm_fraction: float = quantity(
        "dimensionless",
        "share of the GPU that overlapped communication kernels take from compute",
        latex=r"f_{comm}",
        minimum=0.0,
        inclusive=True,
        maximum=0.9,
        default=0.0,
        plausible=(FRACTION[0], "0.9"),
    )
    overlap_shared_experts: bool = flag("run the shared experts on a side stream during dispatch")
    fuse_shared_experts: bool = flag(
        "run a model's one shared expert as one more routed expert of the fused MoE kernel, "
        "picked by every token, where the experts are not split by EP and no two-batch "
        "overlap runs (its weights of the routed experts' width and precision)"
    )
    overlap_efficiency: float = quantity(
        "dimensionless",
        "share of the shorter side of each two-batch-overlap stage hidden under the longer "
        "(1: perfect overlap; unmeasured on most engines: state it as a range)",
        latex=r"\eta_{tbo}",
        maximum=1.0,
        default=1.0,
        plausible=FRACTION,
    )
    prefill_chunk: int = quantity(
        "dimensionless",
        "most tokens one iteration puts through an attention rank in aggregated serving: "
        "decode tokens included where prefill is mixed into decode iterations (TensorRT-LLM "
        "max_num_tokens, vLLM max_num_batched_tokens), a prefill pass's chunk where it is "
        "interleaved (SGLang --chunked-prefill-size)",
        latex="P_{chunk}",
        integer=True,
        default=8192,
    )
    recv_interval: int = quantity(
        "dimensionless",
        "decode iterations between the scheduler's polls for new requests (SGLang "
        "--scheduler-recv-interval; 1: every iteration, the default of every engine): a prompt "
        "arriving meanwhile waits for the next poll and is prefilled with the others that came",
        latex="N_{recv}",
        integer=True,
        minimum=1,
        inclusive=True,
        default=1,
    )
    schedules_ahead: int = quantity(
        "dimensionless",
        "iterations the scheduler launches ahead of the GPU: 1 for an overlap (async) "
        "scheduler, which schedules iteration n+1 while n runs, so a new request joins an "
        "iteration later (SGLang's overlap schedule, TensorRT-LLM's overlap scheduler, vLLM's "
        "async scheduling); 0 where it schedules each iteration after the last one's results",
        latex="a_{sched}",
        integer=True,
        minimum=0,
        inclusive=True,
        maximum=1,
        default=0,
    )
    draft_limit_batch: int | None = quantity(
        "dimensionless",
        "users per attention rank above which a draft chain verifies at most draft_limit "
        "drafts (TensorRT-LLM speculative max_concurrency / draft_len_schedule, vLLM "
        "disable_by_batch_size; none: never limited, each engine's default)",
        latex="B_{spec}",
        integer=True,
        default=None,
    )
    draft_limit: int = quantity(
        "dimensionless",
        "drafts per user a chain verifies above draft_limit_batch (0: speculation off)",
        latex="n_{load}",
        integer=True,
        minimum=0,
        inclusive=True,
        default=0,
    )
    version: str = text('the engine release the profile describes ("": unstated)', default="")
    launcher: str = choice(
        ("", "vllm", "sglang", "trtllm"),
        "the engine whose launch command `--emit` writes for this profile's release "
        '(specs/engines/launch/LAUNCHER-VERSION.toml lists its options; "": none)',
        default="",
    )
    date: str = text(
        "a release date, YYYY-MM or YYYY-MM-DD",
        default="",
        pattern=r"(19|20)\d\d-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?",
        example="e.g. 2026-08 or 2026-08-21, the date of the release the profile describes",
    )

    dispatcher: str = choice(
        ("per_expert", "per_rank", "auto", "gather"),
        "how expert dispatch and combine send a token: once per chosen expert (low-latency "
        "kernels), once per destination rank and node (normal / high-throughput kernels), "
        "auto: per rank for prefill, per expert for decode (SGLang's DeepEP auto mode), or "
        "gather: every attention-DP rank all-gathers all ranks' tokens and reduce-scatters "
        "the experts' outputs (TensorRT-LLM's CUTLASS MoE backend in its 2025 releases)",
        default="per_expert",
    )
    memory_of_free: bool = flag(
        "memory_fraction is a share of the memory the weights leave free (TensorRT-LLM's "
        "free_gpu_memory_fraction), not of all device memory"
    )
    kv_block: int = quantity(
        "dimensionless",
        "tokens per block (page) of the paged KV cache",
        latex="b_{kv}",
        integer=True,
        default=1,
    )
    prefill_placement: str = choice(
        ("round_robin", "synchronised"),
        "how new prompts are placed on attention-DP ranks: dealt round-robin or to the least "
        "loaded rank, or held until every rank takes prompts in the same iteration",
        default="round_robin",
    )
    balance_timeout: int = quantity(
        "dimensionless",
        "synchronised placement: the most iterations a waiting prompt is held for every "
        "attention rank to have one before the waiting prompts are placed anyway "
        "(TensorRT-LLM attention_dp_config.timeout_iters)",
        latex="W_{bal}",
        integer=True,
        minimum=0,
        inclusive=True,
        default=50,
    )
    prefill_schedule: str = choice(
        ("mixed", "interleaved"),
        "prefill chunks ride in decode iterations (mixed), or run in iterations of their own "
        "that stall decode (interleaved)",
        default="mixed",
    )


@attrs.frozen
class KernelPathSpec:
    runs_as: str | None = choice(
        OP_PRECISIONS,
        "tensor-core precision these ops run at (fp4 as wna16: the weights streamed at their "
        "own bits and dequantised before a BF16 MMA; default: their own)",
        default=None,
    )
    efficiency_factor: float = quantity(
        "dimensionless",
        "factor on that roof's calibrated plateau efficiency for this engine's kernels (the "
        "calibrated library's time over this engine's on the same GEMMs)",
        latex=r"\kappa_{path}",
        default=1.0,
        plausible=FACTOR,
    )
    moe_efficiency_factor: float | None = quantity(
        "dimensionless",
        "the same factor in the routed experts' grouped GEMMs (default: efficiency_factor)",
        latex=r"\kappa_{path,moe}",
        default=None,
        plausible=FACTOR,
    )
    moe_kernels: str | None = choice(
        EXPERT_LIBRARIES,
        "the engine's own routed-expert kernels where its experts are not exchanged by an "
        "all-to-all dispatcher (EP = 1): the GPU's kernel family of that name "
        "([hardware.NAME], fitted to those kernels' own table; none stated: the GPU's "
        "values); unset: the GPU's own grouped GEMMs everywhere",
        default=None,
    )


@attrs.frozen
class CollectivePathSpec:
    allreduce_latency: float = quantity(
        "time",
        "fixed latency of the engine's own all-reduce law inside a scale-up domain of this "
        "fabric, α + 2(N−1)/N·S/β, which replaces the cluster's calibrated algorithms",
        latex=r"\alpha_{eng}",
        minimum=0.0,
        inclusive=True,
    )
    allreduce_bandwidth: float = quantity(
        "bandwidth", "bus bandwidth of the engine's own all-reduce law", latex=r"\beta_{eng}"
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    paths = [KindSpec(f"engine.{f}.{p}", "kernel_path", KernelPathSpec, f"how the engine runs "
                      f"{p} ops on {f} GPUs (hardware.family)") for f in FAMILIES
             for p in PRECISIONS]  # fmt: skip
    fabrics = [KindSpec(f"engine.{k}", "collective_path", CollectivePathSpec, "the engine's own "
                        f"all-reduce law on a {k} domain (cluster.scale_up.kind)")
               for k in SCALE_UP_KINDS]  # fmt: skip
    return [KindSpec("engine", "engine", EngineSpec, "a serving engine's profile", True), *paths,
            *fabrics]  # fmt: skip


def kernel_paths(scenario: Scenario) -> tuple[KernelPath, ...]:
    """The engine's kernel paths for the scenario's GPU family (``[engine] FAMILY.PRECISION``;
    none for a GPU that states no family)."""
    family = getattr(scenario.sections["hardware"], "family", None)
    out = []
    for p in PRECISIONS:
        at = f"engine.{family}.{p}"
        if family is not None and at in scenario.sections:
            given = scenario.sections[at]
            factor = scenario.parameter(f"{at}.efficiency_factor")
            moe = factor if given.moe_efficiency_factor is None else scenario.parameter(
                f"{at}.moe_efficiency_factor")  # fmt: skip
            out.append(KernelPath(p, given.runs_as or p, factor, moe, given.moe_kernels or ""))
    return tuple(out)


@hookimpl
def stepwall_engine(scenario: Scenario) -> Engine:
    e, spec = scenario.params.engine, scenario.engine
    # a structural zero where the profile states none: no floor term to build or range
    host = e.prefill_layer_host * e.native if spec.prefill_layer_host else sp.S.Zero
    return Engine(
        layer_kernels=e.layer_kernels,
        floor_factor=e.floor_factor,
        activation_factor=e.activation_factor,
        launch_overhead=e.launch_overhead,
        prefill_layer_host=host,
        memory_efficiency=e.memory_efficiency if spec.memory_efficiency is not None else None,
        two_batch_overlap=spec.two_batch_overlap,
        comm_sm_fraction=e.comm_sm_fraction,
        overlap_shared_experts=spec.overlap_shared_experts,
        fuse_shared_experts=spec.fuse_shared_experts,
        prefill_chunk=e.prefill_chunk,
        memory_fraction=e.memory_fraction,
        overlap_efficiency=e.overlap_efficiency,
        draft_limit_batch=e.draft_limit_batch if spec.draft_limit_batch is not None else None,
        draft_limit=int(spec.draft_limit),
        kernel_paths=kernel_paths(scenario),
        dispatcher=spec.dispatcher,
        memory_of_free=spec.memory_of_free,
        kv_block=e.kv_block,
        prefill_placement=spec.prefill_placement,
        balance_timeout=e.balance_timeout,
        prefill_schedule=spec.prefill_schedule,
        recv_interval=int(spec.recv_interval),
        schedules_ahead=int(spec.schedules_ahead),
        allreduce=own_allreduce(scenario),
    )


def own_allreduce(scenario: Scenario) -> tuple[Any, Any] | None:
    """The engine's own all-reduce law (α, β) on the cluster's fabric, where its profile states
    one (``[engine] FABRIC``), else None."""
    at = f"engine.{scenario.kinds.get('cluster.scale_up', '')}"
    if at not in scenario.sections:
        return None
    return (scenario.parameter(f"{at}.allreduce_latency"),
            scenario.parameter(f"{at}.allreduce_bandwidth"))  # fmt: skip


@hookimpl
def stepwall_constraints(scenario: Scenario) -> list[Constraint]:
    """A kernel path runs at most at its roof's peak: η_p × κ_path ≤ 1."""
    family = getattr(scenario.sections["hardware"], "family", None)
    out = []
    for k in kernel_paths(scenario):
        _, r = roof(scenario, k.runs_as)
        at = f"engine.{family}.{k.precision}"
        out.append(Constraint(f"kernel_path_{k.precision}_within_peak",
                              r.efficiency * sp.Max(k.factor, k.moe_factor) <= 1,
                              f"{k.precision} kernels on {family} run at most at the "
                              f"{k.runs_as} peak", (f"{at}.efficiency_factor",
                              f"{at}.moe_efficiency_factor"), PLUGIN))  # fmt: skip
    return out


@hookimpl
def stepwall_fixed_terms(
    scenario: Scenario, workload: Workload, decoding: Decoding, step: Step, engine: Engine
) -> list[Term]:
    e = scenario.params.engine
    drafting = [
        Term(t.name, t.expr * e.native, t.plugin, f"{t.why} × native factor", t.group, t.overlap)
        for t in (decoding.host if step.name == "decode" else ())
    ]
    terms = [
        *drafting,
        Term(
            "engine.per_step",
            e.per_step * e.native,
            PLUGIN,
            "host time per step × native factor",
            "base",
        ),
        Term(
            "engine.per_layer",
            workload.layers * e.per_layer * e.native,
            PLUGIN,
            "host time per layer × layers × native factor",
            "base",
        ),
    ]
    kernels = sp.Add(*(op.kernels for op in workload.ops))
    if kernels != 0:
        terms.append(Term("engine.launches", launch_time(kernels, engine.launch_overhead), PLUGIN,
                          "host time per kernel launch without CUDA graphs", "base"))  # fmt: skip
    return terms
