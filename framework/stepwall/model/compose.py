"""The step model: a scenario's terms composed into step time and metrics.

step time   t  = Σ terms  (terms sharing an ``overlap`` tag run concurrently: Max over lanes)
per user       = τ / t                      (tokens each user gets per step over step time)
aggregate      = dp · C · τ / t             (C users per replica, dp replicas)
per GPU        = aggregate / (dp · GPUs per replica)
TTFT           = queueing wait + prefill    (under load, `stepwall.model.queueing`)
request        = TTFT + (OSL − 1) · t / τ    (one request's end-to-end latency)
prefill rate   = prompts · ISL / (t_pool · GPUs per replica)  (a pool's batch: `prefill_batch`)
P/D pools      = decode pool's prompt demand (aggregate · ISL/OSL) / prefill rate GPUs
memory per GPU = weights + KV cache, against the capacity × the engine's memory fraction

Expressions stay symbolic in every parameter; numbers enter only in `evaluate`, through one
``lambdify(cse=True)`` per model shape (`stepwall.numeric.compiled.CompiledModel`).
"""

from __future__ import annotations

import difflib
import math
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import sympy as sp
import tomlkit

from stepwall.core import laws
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import PluginError, SpecError, shown_path
from stepwall.core.laws import usable_memory
from stepwall.core.scenario import Scenario
from stepwall.core.symbols import Parameter, constants_in, rebuild
from stepwall.core.terms import (
    KV_TRANSFER_TERM,
    Constraint,
    Decoding,
    Engine,
    Layout,
    Step,
    Term,
    Workload,
    check_kinds,
)
from stepwall.core.units import format_quantity
from stepwall.model.constraints import HINT_LIMIT, Violation, composer_constraints, explain
from stepwall.model.economics import energy_metrics
from stepwall.model.metrics import (
    BUILTIN_METRICS,
    DIAGNOSTIC_METRICS,
    METRIC_UNITS,
    METRICS,
    Metric,
    check_dimensions,
    declared,
)
from stepwall.model.queueing import QUANTILES, prefill_service, serving_under_load
from stepwall.numeric.compiled import (
    CompiledModel,
    ConstraintInfo,
    MetricInfo,
    ModelCache,
    OpInfo,
    TermInfo,
    cache_key,
    group_times,
    one_point,
    scenario_info,
    shape_key,
    summary_of,
    value_of,
)
from stepwall.numeric.printer import function_sources
from stepwall.plugin import registry as registries
from stepwall.plugin.registry import Registry
from stepwall.spec.loader import catalog_names, read_toml
from stepwall.spec.validation import UnknownKey, load_scenario

__all__ = [
    "DIAGNOSTIC_METRICS",
    "METRICS",
    "METRIC_UNITS",
    "StepModel",
    "build_model",
    "summary",
]


class Shared(list[CompiledModel]):
    """The compiled model of the StepModels that `build_model` made for one shape (at most
    one entry), and its entry in the on-disk cache (`stepwall.numeric.compiled.cache_key`): a model
    made otherwise (another ``shared``, other expressions) is compiled from its own."""

    def __init__(self, cache_key: tuple[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__()
        self.cache_key = cache_key


@attrs.frozen
class StepModel:
    """Terms, how they combine, the metrics and constraints, and the values to substitute."""

    scenario: Scenario
    terms: tuple[Term, ...]
    decoding: Decoding
    layout: Layout
    workload: Workload
    metrics: Mapping[str, sp.Expr]
    constraints: tuple[Constraint, ...] = ()
    structural_keys: frozenset[str] = frozenset()  # numeric keys whose value shaped the model
    engine: Engine = attrs.field(factory=Engine)
    steps: tuple[Step, ...] = ()  # the scenario's own step, then the others (ttft)
    ttft_terms: tuple[Term, ...] = ()  # the terms of one prompt prefilled alone
    # the metrics' declarations, built-in then plugins' (`stepwall.model.metrics.declared`)
    declared_metrics: tuple[Metric, ...] = BUILTIN_METRICS
    # the spec path that provides each requirement (`stepwall.plugin.requirements`) the
    # scenario's kinds provide: "nodes" -> "cluster.nodes" for the built-in cluster
    provides: Mapping[str, str] = attrs.field(factory=dict)
    # the compiled model, shared by every StepModel of the same shape (see `build_model`)
    shared: list[CompiledModel] = attrs.field(factory=list, eq=False, repr=False)

    @property
    def step_time(self) -> sp.Expr:
        return self.metrics["step_time_s"]

    @property
    def values(self) -> Mapping[Parameter, float]:
        return self.scenario.values

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        """Every parameter of the scenario, in a stable order (by path)."""
        return tuple(sorted(self.scenario.values, key=lambda s: s.name))

    @property
    def numeric(self) -> CompiledModel:
        """The compiled model (one per shape, made on first use), from the on-disk cache
        when any process compiled this shape before."""
        return self.compiled()

    def compiled(self, scalar: bool = False) -> CompiledModel:
        """`numeric`; with ``scalar``, with its plain-Python form for one point as well (several
        times faster than numpy on one point), added on first use: kept like `numeric`, for
        every model of the shape and in the on-disk cache."""
        have = self.shared[0] if self.shared else None
        if have is not None and (have.scalar_source or not scalar):
            return have
        key = getattr(self.shared, "cache_key", None)
        store = ModelCache(key is not None)
        if have is None and key is not None:
            have = store.get(*key)
        if have is not None:
            self.shared[:] = [have]  # the numpy form of a plain-Python one made below
            if have.scalar_source or not scalar:
                return have
        found = compile_model(self, scalar)
        if key is not None:
            shape, reads = key
            store.put(shape, {p: reads[p] for p in found.structural_keys}, found)
        self.shared[:] = [found]
        return found

    def evaluate(self, overrides: Mapping[sp.Symbol | str, Any] | None = None) -> dict[str, Any]:
        """Metrics, term times, per-GPU op work (bytes, FLOPs) and constraints, numerically.
        ``overrides`` maps parameters (Symbol or path) to values or numpy arrays (broadcast
        together, for vectorized sweeps). ``constraints`` maps each constraint's name to
        whether it holds; ``feasible`` is all of them and every metric finite. One point runs
        the plain-Python form (`compiled`), arrays the numpy one."""
        vals = {s.name: v for s, v in self.scenario.values.items()}
        for k, v in (overrides or {}).items():
            name = k if isinstance(k, str) else k.name
            if name not in vals:
                raise SpecError("evaluate", str(k), "not a parameter of this scenario",
                                "a spec path such as parallel.tp")  # fmt: skip
            vals[name] = v
        return self.compiled(scalar=one_point((overrides or {}).values())).evaluate(vals)

    def violations(self, evaluated: Mapping[str, Any] | None = None) -> list[Violation]:
        """The constraints that do not hold at the scenario's point, each in words (a metric
        that is not finite counts as one)."""
        ev = evaluated or self.evaluate()
        out = [
            violation(self, c)
            for c in self.constraints
            if not bool(np.all(ev["constraints"][c.name]))
        ]
        if not out and not bool(np.all(ev["feasible"])):
            bad = [m.name for m in self.declared_metrics if not m.optional
                   and not np.all(np.isfinite(np.asarray(ev[m.name], dtype=float)))]  # fmt: skip
            why = "a parameter is zero or out of its physical range"
            c = Constraint("finite", sp.true, why, (), "stepwall")
            out.append(Violation(c, self.scenario.label, "", f"{', '.join(bad)} is not finite"))
        return out

    def check(self) -> None:
        """Raise a one-line SpecError for the first constraint that does not hold."""
        found = self.violations()
        if found:
            v = found[0]
            more = f" [and {len(found) - 1} more]" if len(found) > 1 else ""
            why = v.constraint.message + (f"; {v.hint}" if v.hint else "")
            raise SpecError(v.where, v.key, v.text + more, why=why)

    def parameter(self, key: str, where: str = "parameter") -> Parameter:
        """The Parameter of a spec path in this scenario; else a SpecError naming the closest."""
        sym = self.scenario.parameter(key)
        if sym is None:
            names = sorted(s.name for s in self.values if not s.name.startswith("const."))
            hint = difflib.get_close_matches(key, names, n=1)
            raise SpecError(where, key, "not a parameter of this scenario",
                            f"a parameter such as {hint[0] if hint else names[0]}")  # fmt: skip
        return sym

    def substituted(self, expr: sp.Expr, free: Iterable[sp.Symbol] = ()) -> sp.Expr:
        """``expr`` with every parameter but ``free`` replaced by its value (no simplify)."""
        keep = set(free)
        values = {s: sp.Float(v, 6) for s, v in self.scenario.values.items() if s not in keep}
        return rebuild(expr, values)

    def group_times(self, evaluated: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Seconds per term group (moe, attention, comm, base, spec), summed over terms."""
        ev = evaluated or self.evaluate()
        return group_times(self.numeric, ev)


def compile_model(model: StepModel, scalar: bool = False) -> CompiledModel:
    """The model's one ``lambdify`` (and, with ``scalar``, its plain-Python form for one
    point) and the names that read its outputs."""
    params = model.parameters
    # a metric the specs cannot give (energy without a board power) is NaN: unknown
    names = tuple(m.name for m in model.declared_metrics)
    exprs = [model.metrics.get(m, sp.nan) for m in names] + [t.expr for t in model.terms]
    exprs += [e for op in model.workload.ops for e in (op.bytes, op.flops)]
    exprs += [c.relation for c in model.constraints]
    base = model.shared[0] if model.shared else None  # its numpy form is kept
    wanted = ([] if base else ["numpy"]) + (["math"] if scalar else [])
    printed = dict(zip(wanted, function_sources(params, exprs, wanted), strict=True))
    source, imports = (base.source, base.imports) if base else printed["numpy"]
    scalar_source, scalar_imports = printed.get("math", ("", ()))
    return CompiledModel(
        tuple(s.name for s in params),
        {s.name: float(s.value) for s in params if s.value is not None},
        source,
        tuple(TermInfo(t.name, t.group, t.plugin, t.why, t.overlap) for t in model.terms),
        tuple(OpInfo(op.name, op.group, op.plugin) for op in model.workload.ops),
        tuple(ConstraintInfo(c.name, c.plugin, c.message, c.keys) for c in model.constraints),
        model.structural_keys,
        tuple(  # each declaration's fields that eval shows
            MetricInfo(*(getattr(m, f.name) for f in attrs.fields(MetricInfo)))
            for m in model.declared_metrics
        ),
        imports,
        scalar_source,
        scalar_imports,
    )


def compose_step_time(terms: Sequence[Term], tbo_hidden: sp.Expr = sp.S.One) -> sp.Expr:
    """Σ terms, where terms sharing an overlap tag run concurrently and contribute the Max
    over their lanes' sums. A tag ``"tbo.experts/comm"`` names the lane after the slash; a bare tag
    uses the term's group as its lane. A two-batch-overlap tag (``tbo.…``) hides ``tbo_hidden``
    of its shorter lanes (`laws.partial_overlap`; 1: the Max)."""
    plain = [t.expr for t in terms if not t.overlap]
    tagged: dict[str, dict[str, list[sp.Expr]]] = defaultdict(lambda: defaultdict(list))
    for t in terms:
        if t.overlap:
            tag, _, lane = t.overlap.partition("/")
            tagged[tag][lane or t.group].append(t.expr)
    overlapped = []
    for tag, lanes in tagged.items():
        sums = [sp.Add(*g) for g in lanes.values()]
        longest = sp.Max(*sums, evaluate=False)
        hidden = tbo_hidden if tag.startswith("tbo.") else sp.S.One
        overlapped.append(laws.partial_overlap(longest, sp.Add(*sums), hidden))
    return sp.Add(*plain, *overlapped)


# ---------------------------------------------------------------- building


def scenario_of(
    ref: str | Path, sets: Iterable[str] = (), registry: Registry | None = None
) -> Scenario:
    """A scenario (catalog name or path) read, overridden by ``sets`` (``"parallel.tp=16"``)
    and validated against the kinds of ``registry`` (default: built-ins and installed
    plugins): `stepwall.load_scenario`."""
    return load_scenario(ref, (registry or registries.default()).kinds, sets)


def build_model(
    scenario: Scenario | str | Path,
    sets: Iterable[str] = (),
    registry: Registry | None = None,
) -> StepModel:
    """Run the flow: decoding -> partition -> model work -> compute, collective, fixed terms,
    memory, constraints.

    Models of the same shape (same kinds, choices and flags, and the same values of the keys a
    plugin read while building: `StepModel.structural_keys`) differ only in the numbers
    substituted, so the expressions and their compiled function are built once per shape and
    registry, and reused with the new scenario's values."""
    registry = registry or registries.default()
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, registry.kinds, sets)
    shape = shape_key(scenario)
    for reads, known in registry.models.get(shape, ()):
        if all(value_of(scenario, path) == v for path, v in reads):
            with_values = _with_constants(scenario, known.values)
            reused: StepModel = attrs.evolve(known, scenario=with_values)
            return reused
    model = attrs.evolve(_build(scenario, registry), shared=Shared(cache_key(scenario, registry)))
    reads = tuple(sorted((path, value_of(scenario, path)) for path in model.structural_keys))
    registry.remember(shape, reads, model)
    return model


def _with_constants(scenario: Scenario, values: Mapping[Parameter, float]) -> Scenario:
    """The scenario's values plus the physical constants among ``values``."""
    constants = {s: v for s, v in values.items() if getattr(s, "value", None) is not None}
    return attrs.evolve(scenario, values={**constants, **scenario.values})


def _build(scenario: Scenario, registry: Registry) -> StepModel:
    """The flow itself, for a scenario whose shape was not built before: decoding, engine,
    layout, then for each step (the scenario's own, then time to first token) the model's
    work and its compute, collective and fixed terms.

    Stays whole: the composition flow in order, each stage reading those before it (decoding,
    engine, layout, steps, terms, metrics, constraints).
    """

    def need(result: Any, hook: str, section: str) -> Any:
        if result is None:
            raise SpecError(
                scenario.origin,
                f"{section}.kind",
                f"plugin {registry.owner(section, scenario.kinds.get(section, ''))} does not "
                f"implement {hook} for kind {scenario.kinds.get(section)!r}",
            )
        return result

    decoding = need(registry.call_owner("stepwall_decoding", scenario), "stepwall_decoding",
                    "decoding")  # fmt: skip
    engine = need(registry.call_owner("stepwall_engine", scenario), "stepwall_engine", "engine")
    layout = need(
        registry.call_owner("stepwall_partition", scenario, decoding=decoding),
        "stepwall_partition",
        "parallel",
    )
    loaded = registry.call_owner("stepwall_decoding_under_load", scenario, decoding=decoding,
                                 layout=layout, engine=engine)  # fmt: skip
    decoding = loaded if loaded is not None else decoding
    steps = need(
        registry.call_owner(
            "stepwall_steps", scenario, decoding=decoding, layout=layout, engine=engine
        ),
        "stepwall_steps",
        "workload",
    )
    if not steps or [s.name for s in steps[1:]] != ["ttft"]:
        raise PluginError(
            f"plugin {registry.owner('workload', scenario.kinds.get('workload', ''))}: "
            "stepwall_steps must return the scenario's step, then one named 'ttft'"
        )

    def cost(s: Step) -> tuple[Workload, list[Term]]:
        return _cost(scenario, registry, decoding, layout, engine, s, need)

    costed = [_cost_mixture(s, cost, engine) for s in steps]
    (workload, terms), (_, ttft_terms) = costed[0], costed[1]
    ttft_terms = [attrs.evolve(t, name=f"ttft.{t.name}") for t in ttft_terms]
    _unique("terms", [*terms, *ttft_terms])
    resident = registry.call_owner("stepwall_device_memory", scenario, workload=workload)
    if resident is None:
        resident = workload.weight_bytes_per_gpu + workload.kv_bytes_per_gpu
    step, ttft = steps
    hidden = engine.overlap_efficiency
    t, t_ttft = compose_step_time(terms, hidden), compose_step_time(ttft_terms, hidden)
    gpus = layout.gpus_per_replica
    aggregate = layout.dp * step.users * step.produced / t
    # a prefill pool's rate: the scenario's own step where it is one, else a batch of prompts
    # filling each attention rank's per-iteration token budget (a pool batches prompts; one
    # prompt alone, the ttft step, leaves most of a replica idle)
    pool, t_pool = step, t
    if step.name != "prefill":
        pool = prefill_batch(ttft, layout, engine)
        t_pool = compose_step_time(cost(pool)[1], hidden)
    prefill_rate = pool.users * pool.tokens_per_user / (t_pool * gpus)
    # a separate prefill pool feeding this decode pool: each request's prompt (ttft step)
    # per step.produced·(OSL) output tokens; GPUs it needs at that prefill rate
    demand = aggregate * ttft.tokens_per_user / step.completion
    prefill_gpus = demand / prefill_rate
    # what the engine lets weights and KV cache use of the device's memory
    memory = registry.required(scenario, "device_memory")
    capacity = usable_memory(memory, workload.weight_bytes_per_gpu, engine.memory_fraction,
                             engine.memory_of_free)  # fmt: skip
    load = serving_under_load(step, prefill_service(step, ttft, t, t_ttft, engine, layout), t)
    per_gpu = step.users * step.produced / (t * gpus)
    # tokens in and out per output token (a prefill pool's output is its prompt tokens), the
    # prompt's cached prefix included, as benchmark clients count input tokens
    served = (ttft.produced + (step.completion if step.name != "prefill" else 0)) / (
        step.completion
    )
    pd_per_gpu = aggregate / (layout.dp * gpus + prefill_gpus)
    p50, p90, p99 = QUANTILES
    metrics = {
        "step_time_s": t,
        "tokens_per_s_per_user": step.produced / t,
        "tokens_per_s": aggregate,
        "tokens_per_s_per_gpu": per_gpu,
        "output_tokens_per_s_per_gpu": per_gpu,
        "total_tokens_per_s_per_gpu": per_gpu * served,
        "tpot_s": t / step.produced,
        "itl_s": t,
        "ttft_s": load.ttft[p50],
        "ttft_p90_s": load.ttft[p90],
        "ttft_p99_s": load.ttft[p99],
        "prefill_s": t_ttft,
        "kv_transfer_s": sp.Add(
            *(t.expr for t in ttft_terms if t.name == f"ttft.{KV_TRANSFER_TERM}")
        ),
        "e2e_latency_s": load.e2e,
        "request_rate_per_s": layout.dp * load.request_rate,
        "prefill_tokens_per_s_per_gpu": prefill_rate,
        "pd_prefill_gpus": prefill_gpus,
        "pd_tokens_per_s_per_gpu": pd_per_gpu,
        "pd_total_tokens_per_s_per_gpu": pd_per_gpu * served,
        "gpus": layout.dp * gpus,
        "memory_bytes_per_gpu": resident,
        "weight_bytes_per_gpu": workload.weight_bytes_per_gpu,
        "kv_bytes_per_gpu": workload.kv_bytes_per_gpu,
        "memory_capacity_per_gpu": capacity,
    }
    metrics.update(energy_metrics(scenario, metrics["tokens_per_s_per_gpu"], registry))
    metric_decls = declared(registry)
    builtin = dict(metrics)
    for m in metric_decls[len(BUILTIN_METRICS) :]:  # the plugins' (expr checked by `declared`)
        given = m.expr(scenario, builtin) if m.expr is not None else None
        if given is not None:
            metrics[m.name] = sp.sympify(given, strict=True)
    check_dimensions(metrics, metric_decls)
    stated = registry.call_each(
        "stepwall_constraints", scenario, decoding=decoding, layout=layout, workload=workload
    )
    # the degrees that shrink resident memory, those the scenario sets first
    held = {s.name for s in sp.sympify(resident).free_symbols}
    levers = sorted(
        (k for k in held if k.startswith("parallel.")),
        key=lambda k: (k not in scenario.provenance, k),
    )
    levers += sorted(k for k in held if k.startswith("workload."))  # what fills the KV cache
    constraints = [  # the plugins' first: a root cause reads better than its symptom
        *(c for cs in stated for c in cs),
        *composer_constraints([*terms, *ttft_terms], resident, capacity, levers, memory.name),
        *load.constraints,
    ]
    _unique("constraints", constraints)
    # Physical constants that the model uses join the values, wherever they were declared.
    used = constants_in([*metrics.values(), *(c.relation for c in constraints)])
    scenario = attrs.evolve(scenario, values={**used, **scenario.values})
    return StepModel(
        scenario,
        tuple(terms),
        decoding,
        layout,
        workload,
        metrics,
        tuple(constraints),
        frozenset(scenario.reads),
        engine,
        tuple(steps),
        tuple(ttft_terms),
        metric_decls,
        registry.paths(scenario),
    )


def prefill_batch(ttft: Step, layout: Layout, engine: Engine) -> Step:
    """The step of a prefill pool at batch: on each of the replica's attention ranks, as many
    whole prompts as the engine's per-iteration token budget holds (at least one), costed as
    the ``prefill`` workload kind's step is."""
    new, prompt = ttft.tokens_per_user, ttft.produced  # prefilled, and with any cached prefix
    per_rank = sp.Max(1, sp.floor(engine.prefill_chunk / new), evaluate=False)
    return Step("prefill", per_rank * layout.ep, per_rank, new, ttft.context, prompt,
                completion=prompt)  # fmt: skip


def _cost_mixture(
    step: Step, cost: Callable[[Step], tuple[Workload, list[Term]]], engine: Engine
) -> tuple[Workload, list[Term]]:
    """One step's work and terms (``cost``: `_cost` for the scenario); a step whose prompt
    tokens ride in a share f of its iterations (``Step.prefill_share``) is priced as the
    mixture (1 − f)·T(decode only) + f·T(with B/f prompt tokens), term by term
    (`laws.prefill_iteration_share`); an interleaving engine's own prefill passes ride with
    them (f of the iterations take passes/f each: one where passes < 1), each at least its
    host time where the engine runs them outside CUDA graphs (`passes_host_floor`)."""
    f = step.prefill_share
    host = step.prefill_passes != 0 and engine.prefill_layer_host != 0
    if f == 1 and not host:
        return cost(step)
    alone = attrs.evolve(step, prefill_tokens=sp.S.Zero, prefill_tokens_rank=sp.S.Zero,
                         prefill_passes=sp.S.Zero, prefill_share=sp.S.One)  # fmt: skip
    carrying = attrs.evolve(step, prefill_tokens=step.prefill_tokens / f,
                            prefill_tokens_rank=step.prefill_tokens_rank / f,
                            prefill_passes=step.prefill_passes / f,
                            prefill_share=sp.S.One)  # fmt: skip
    _, decode_only = cost(alone)
    workload, terms = cost(carrying)
    if host:
        terms.append(passes_host_floor(terms, decode_only, carrying.prefill_passes, workload,
                                       engine))  # fmt: skip
    without = {t.name: t.expr for t in decode_only}
    mixed = [attrs.evolve(t, expr=(1 - f) * without.pop(t.name, sp.S.Zero) + f * t.expr)
             for t in terms]  # fmt: skip
    mixed += [attrs.evolve(t, expr=(1 - f) * t.expr) for t in decode_only if t.name in without]
    return workload, mixed


def _cost(
    scenario: Scenario,
    registry: Registry,
    decoding: Decoding,
    layout: Layout,
    engine: Engine,
    step: Step,
    need: Any,
) -> tuple[Workload, list[Term]]:
    """One step's work and terms: model work, then compute, collective and fixed terms."""
    workload = need(
        registry.call_owner("stepwall_model_work", scenario, decoding=decoding, layout=layout,
                            step=step, engine=engine),
        "stepwall_model_work",
        "model",
    )  # fmt: skip
    kinds = registry.op_kinds
    check_kinds(workload.ops, kinds)
    compute = need(
        registry.call_owner(
            "stepwall_compute_terms", scenario, ops=workload.ops, engine=engine, op_kinds=kinds
        ),
        "stepwall_compute_terms",
        "hardware",
    )
    comm = need(
        registry.call_owner(
            "stepwall_collective_terms",
            scenario,
            collectives=workload.collectives,
            engine=engine,
        ),
        "stepwall_collective_terms",
        "cluster.scale_up",
    )
    fixed = registry.call_each("stepwall_fixed_terms", scenario, workload=workload,
                               decoding=decoding, step=step, engine=engine)  # fmt: skip
    terms = [*compute, *comm, *(t for ts in fixed for t in ts)]
    if step.name in ("ttft", "prefill") and engine.prefill_layer_host != 0:
        terms.append(prefill_host_floor(terms, workload, engine))
    if layout.pipelined:
        terms.append(pipeline_bubble(terms, layout, step, engine))
    return workload, terms


def prefill_host_floor(terms: Sequence[Term], workload: Workload, engine: Engine) -> Term:
    """A prefill pass the engine runs outside CUDA graphs takes at least its host time, L·h
    (``Engine.prefill_layer_host`` per decoder layer): launches are asynchronous, so the pass
    takes max(GPU time, L·h), the host's share beyond the GPU's Max(0, L·h − t)."""
    host = workload.layers * engine.prefill_layer_host
    own = compose_step_time(terms, engine.overlap_efficiency)
    return Term("engine.prefill_host", sp.Max(0, host - own, evaluate=False), "engine",
                "host time of a pass outside CUDA graphs beyond its GPU time: "
                "Max(0, layers × t_host,layer − t)", "base")  # fmt: skip


def passes_host_floor(carrying: Sequence[Term], alone: Sequence[Term], passes: sp.Expr,
                      workload: Workload, engine: Engine) -> Term:  # fmt: skip
    """The same floor for the n prefill passes an interleaving engine runs between decode
    iterations outside CUDA graphs: n·L·h of host time, beyond the passes' GPU time (the
    iteration carrying them less the decode iteration alone), Max(0, n·L·h − (T_c − T_a))."""
    hidden = engine.overlap_efficiency
    gpu = compose_step_time(carrying, hidden) - compose_step_time(alone, hidden)
    host = passes * workload.layers * engine.prefill_layer_host
    return Term("engine.prefill_host", sp.Max(0, host - gpu, evaluate=False), "engine",
                "host time of the interleaved prefill passes outside CUDA graphs beyond their "
                "GPU time: Max(0, passes × layers × t_host,layer − t_passes)", "base")  # fmt: skip


def pipeline_bubble(terms: Sequence[Term], layout: Layout, step: Step, engine: Engine) -> Term:
    """The stage slots a pipelined step waits beyond its own m micro-batches' work (the
    terms): one prompt's micro-batches fill the empty pipeline (`laws.pipeline_fill`, time to
    first token); decode iterations keep them in flight (`laws.pipeline_iteration`)."""
    p, m = layout.pp, layout.microbatches
    fill = step.name == "ttft"
    factor = laws.pipeline_fill(p, m) if fill else laws.pipeline_iteration(p, m)
    own = compose_step_time(terms, engine.overlap_efficiency)
    why = ("the empty pipeline filling: (m + p − 1)/m stage slots per micro-batch" if fill
           else "micro-batches in flight over p stages: max(m, p)/m stage slots each")  # fmt: skip
    return Term("pipeline.bubble", (factor - 1) * own, "parallelism", why, "base")


def _unique(what: str, items: Sequence[Term | Constraint]) -> None:
    names = [i.name for i in items]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        owners = sorted({i.plugin for i in items if i.name == dupes[0]})
        raise PluginError(
            f"plugin {' and plugin '.join(owners)}: two {what} are named {dupes[0]!r}; "
            f"{what[:-1]} names must be unique"
        )


def check_entry(path: Path, section: str, registry: Registry | None = None) -> list[str]:
    """Check a catalog entry's own constraints (those whose keys all lie in ``section``, e.g.
    ``n_dense_layers <= n_layers`` for a model) by putting it into the first catalog scenario
    of the same kind that takes the entry as it is (not one that overrides its values in a
    ``[section]`` table of its own); raise a SpecError for a violated one. Returns
    plausibility warnings."""

    registry = registry or registries.default()
    with tempfile.TemporaryDirectory() as tmp:
        for name in catalog_names("scenarios"):
            if isinstance(read_toml(catalog_root() / "scenarios" / f"{name}.toml").get(section),
                          dict):  # fmt: skip
                continue  # it overrides some of the entry's values
            probe = Path(tmp) / "probe.toml"
            doc: dict[str, Any] = {"from": name}
            *tables, last = section.split(".")  # cluster.scale_up: [cluster] scale_up = …
            table = doc
            for t in tables:
                table = table.setdefault(t, {})
            table[last] = str(path.resolve())
            probe.write_text(tomlkit.dumps(doc), encoding="utf-8")
            try:
                model = build_model(probe, registry=registry)
            except UnknownKey:
                continue  # a scenario of another kind: try the next
            except SpecError as e:
                if e.key.rpartition(".")[2] == "kind":
                    continue  # likewise
                raise
            ev = model.evaluate()
            for c in model.constraints:
                local = c.keys and all(k.startswith(section + ".") for k in c.keys)
                if local and not bool(np.all(ev["constraints"][c.name])):
                    v = violation(model, c)
                    raise SpecError(str(path), v.key, v.text, why=c.message)
            return list(model.scenario.warnings)
    return []


# ---------------------------------------------------------------- the eval document


def model_summary(model: StepModel) -> dict[str, Any]:
    """`summary` of a built model, its violations included."""
    ev = model.evaluate()
    return summary(model.scenario, model.numeric, model.violations(ev), ev)


def compile_scenario(
    scenario: Scenario,
    registry: Registry | None = None,
    *,
    cache: bool = True,
    scalar: bool = False,
) -> CompiledModel:
    """The compiled model of a scenario, from the on-disk cache when a model of its shape was
    compiled before (in any process), else built and stored. ``scalar`` asks for the
    plain-Python form too (one point, no numpy: what ``stepwall eval`` runs)."""
    registry = registry or registries.default()
    key = cache_key(scenario, registry) if cache else None
    store = ModelCache(key is not None)
    found = store.get(*key) if key is not None else None
    if found is not None and (found.scalar_source or not scalar):
        return found
    model = build_model(scenario, registry=registry)
    if scalar and key is None:  # nothing stored
        return compile_model(model, scalar=True)
    return model.compiled(scalar)  # from the cache or compiled and stored by the model


def summary(
    scenario: Scenario,
    numeric: CompiledModel,
    violations: Sequence[Violation] = (),
    evaluated: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `stepwall eval --json` object: metrics, groups, terms, ops, parameters with their
    sources, and the violations found (empty when the point is feasible)."""
    ev = evaluated or numeric.evaluate({s.name: v for s, v in scenario.values.items()})
    return summary_of(scenario_info(scenario), numeric, [v.to_json() for v in violations], ev)


def violation(
    model: StepModel, c: Constraint, values: Mapping[sp.Symbol, float] | None = None
) -> Violation:
    """``c`` (known not to hold) said with the values at the point, and what would fix it."""
    vals = dict(values if values is not None else model.values)
    if c.keys:
        key = _blamed(model, c)
        where = shown_path(model.scenario.file_of(key))
    else:
        key, where = "", f"plugin {c.plugin}"
    text = explain(c.relation, vals, key, c.labels)
    return Violation(c, where, key, text, repair_hint(model, c, vals))


def _blamed(model: StepModel, c: Constraint) -> str:
    """The key to name: one the user set on the command line (among the constraint's keys,
    else among the parameters its relation depends on), else one a file states, else the
    constraint's first (a plugin default nobody wrote down is the last thing to blame)."""
    stated, keys = model.scenario.provenance, c.keys
    held = sorted(s.name for s in c.relation.free_symbols if isinstance(s, sp.Symbol))
    on_command_line = [k for k in (*keys, *held) if stated.get(k) in ("--set", "--at")]
    in_a_file = [k for k in keys if k in stated]
    return (on_command_line or in_a_file or list(keys))[0]


def repair_hint(model: StepModel, c: Constraint, values: Mapping[sp.Symbol, float]) -> str:
    """For a constraint a parallel degree or a workload size can fix: a value at which every
    constraint holds (divisibility, cluster fit, memory, ...), else no hint. A degree: the
    nearest up to `HINT_LIMIT` (the smallest that fits, for memory); a workload size (users,
    context): the largest below the value now. Keys set on the command line are tried first."""
    stated = model.scenario.provenance
    keys = sorted(c.keys, key=lambda k: stated.get(k) not in ("--set", "--at"))
    for key in keys:
        if not key.startswith(("parallel.", "workload.")):
            continue
        try:
            sym = model.parameter(key)
        except Exception:
            continue
        now = float(values[sym])  # a float: a size typed as 1e20 is past int64
        if key.startswith("parallel."):
            limit = int(min(max(_cluster_gpus(model, values), 2 * now, 8), HINT_LIMIT))
            cand = np.arange(1, limit + 1, dtype=float)
            ok = _feasible_at(model, values, sym, cand)
            if ok.any():
                best = min(cand[ok], key=lambda v: (abs(v - now), -v))
                return f"{key} = {int(best)} satisfies every constraint"
        else:
            # a count (users, tokens) takes whole values; a rate, any value of its unit
            f = model.scenario.field(key)
            dim = None if f is None or f.metadata["integer"] else f.metadata["dim"]
            rate = None if dim is None or dim.dimensionless else dim
            largest = _largest_feasible_below(model, values, sym, now, whole=rate is None)
            if largest is not None:
                shown = str(int(largest)) if rate is None else f'"{format_quantity(largest, rate)}"'
                return f"{key} = {shown} satisfies every constraint"
    return ""


def _feasible_at(
    model: StepModel, values: Mapping[sp.Symbol, float], sym: sp.Symbol, cand: np.ndarray
) -> np.ndarray:
    """Whether every constraint holds with ``sym`` at each of ``cand`` (one vectorized call)."""
    ev = model.evaluate({**{s: v for s, v in values.items() if s != sym}, sym: cand})
    return np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), cand.shape)


def _largest_feasible_below(
    model: StepModel, values: Mapping[sp.Symbol, float], sym: sp.Symbol, now: float,
    whole: bool = True,
) -> float | None:  # fmt: skip
    """The largest value under ``now`` at which every constraint holds, or None: the largest
    feasible point of a geometric grid (from 1 for a whole count, from ``now``/10⁶ for a
    rate), then of a linear grid up to the next grid point (exact where feasibility is
    monotone, as memory is in users and context; a feasible value in any case). A rate is
    rounded down to three significant digits where that still holds. Three vectorized
    calls, whatever ``now`` is."""

    def snap(v: np.ndarray) -> np.ndarray:
        return np.unique(np.round(v)) if whole else np.unique(v)

    top = max(now - 1, 1.0) if whole else now * (1 - 1e-9)
    coarse = snap(np.geomspace(1.0 if whole else now * 1e-6, top, HINT_LIMIT))
    ok = _feasible_at(model, values, sym, coarse)
    if not ok.any():
        return None
    low = float(coarse[ok].max())
    above = coarse[coarse > low]
    high = (float(above.min()) - (1 if whole else 0)) if above.size else low
    fine = snap(np.linspace(low, max(high, low), HINT_LIMIT))
    best = float(fine[_feasible_at(model, values, sym, fine)].max())
    if whole:
        return best
    digits = 2 - math.floor(math.log10(best))
    rounded = math.floor(best * 10**digits) / 10**digits
    held = _feasible_at(model, values, sym, np.array([rounded]))
    return rounded if rounded > 0 and bool(held[0]) else best


def _cluster_gpus(model: StepModel, values: Mapping[sp.Symbol, float]) -> int:
    """The cluster's GPUs (nodes × GPUs per node) at ``values``; 0 when they lack either."""
    by_name = {s.name: v for s, v in values.items()}
    try:
        return int(by_name[model.provides["nodes"]] * by_name[model.provides["gpus_per_node"]])
    except KeyError:
        return 0
