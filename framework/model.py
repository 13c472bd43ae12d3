"""The step model: a scenario's terms composed into step time and metrics.

step time   t  = Σ terms  (terms sharing an ``overlap`` tag contribute Max over their groups)
per user       = τ / t                      (accepted tokens per step over step time)
aggregate      = dp · C · τ / t             (C users per replica, dp replicas)
per GPU        = aggregate / (dp · GPUs per replica)
memory per GPU = weights + KV cache, against the hardware's usable capacity

Expressions stay symbolic in every parameter; numbers enter only in `evaluate`, through one
``lambdify(cse=True)`` per model.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall import registry, symbols
from stepwall.constraints import Violation, composer_constraints, violation
from stepwall.errors import PluginError, SpecError, shown_path
from stepwall.spec import Scenario, load_scenario
from stepwall.terms import Constraint, Decoding, Layout, Term, Workload

METRICS = (
    "step_time_s",
    "tokens_per_s_per_user",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "gpus",
    "memory_bytes_per_gpu",
    "memory_capacity_per_gpu",
    "weight_bytes_per_gpu",
    "kv_bytes_per_gpu",
)
# Metrics that describe a configuration rather than its performance: meaningful even where it
# is infeasible (they say why: 527 GB resident of 275 GB usable). The others are withheld there.
DIAGNOSTIC_METRICS = frozenset(
    {
        "gpus",
        "memory_bytes_per_gpu",
        "memory_capacity_per_gpu",
        "weight_bytes_per_gpu",
        "kv_bytes_per_gpu",
    }
)
METRIC_UNITS = {
    "step_time_s": "s",
    "tokens_per_s_per_user": "tokens/s",
    "tokens_per_s": "tokens/s",
    "tokens_per_s_per_gpu": "tokens/s",
    "gpus": "",
    "memory_bytes_per_gpu": "B",
    "memory_capacity_per_gpu": "B",
    "weight_bytes_per_gpu": "B",
    "kv_bytes_per_gpu": "B",
}


@attrs.define(eq=False)
class _Compiled:
    """The model's one ``lambdify``: made on first evaluation, shared across same-shape models."""

    fn: Any = None


@attrs.frozen
class StepModel:
    """Terms, how they combine, the metrics, and the values to substitute."""

    scenario: Scenario
    terms: tuple[Term, ...]
    decoding: Decoding
    layout: Layout
    workload: Workload
    metrics: Mapping[str, sp.Expr]
    constraints: tuple[Constraint, ...] = ()
    structural_keys: frozenset[str] = frozenset()  # numeric keys whose value shaped the model
    # the lambdified model, shared by every StepModel of the same shape (see `build_model`)
    compiled: _Compiled = attrs.field(factory=lambda: _Compiled(), eq=False, repr=False)

    @property
    def step_time(self) -> sp.Expr:
        return self.metrics["step_time_s"]

    @property
    def values(self) -> Mapping[sp.Symbol, float]:
        return self.scenario.values

    @cached_property
    def parameters(self) -> tuple[sp.Symbol, ...]:
        """Every parameter of the scenario, in a stable order (by path)."""
        return tuple(sorted(self.scenario.values, key=lambda s: s.name))

    @property
    def _compiled(self) -> Any:
        if self.compiled.fn is None:
            exprs = [self.metrics[m] for m in METRICS] + [t.expr for t in self.terms]
            exprs += [e for op in self.workload.ops for e in (op.bytes, op.flops)]
            exprs += [c.relation for c in self.constraints]
            self.compiled.fn = sp.lambdify(self.parameters, exprs, modules="numpy", cse=True)
        return self.compiled.fn

    def evaluate(self, overrides: Mapping[sp.Symbol | str, Any] | None = None) -> dict[str, Any]:
        """Metrics, term times, per-GPU op work (bytes, FLOPs) and constraints, numerically.
        ``overrides`` maps parameters (Symbol or path) to values or numpy arrays (broadcast
        together, for vectorized sweeps). ``constraints`` maps each constraint's name to
        whether it holds; ``feasible`` is all of them and every metric finite."""
        vals = dict(self.scenario.values)
        for k, v in (overrides or {}).items():
            try:
                sym = symbols.lookup(k).symbol if isinstance(k, str) else k
            except KeyError:
                sym = None
            if sym not in vals:
                raise SpecError("evaluate", str(k), "not a parameter of this scenario",
                                "a spec path such as parallel.tp")  # fmt: skip
            vals[sym] = v
        with np.errstate(all="ignore"):
            out = self._compiled(*(vals[s] for s in self.parameters))
        result = dict(zip(METRICS, out[: len(METRICS)], strict=True))
        n, k = len(METRICS), len(self.terms)
        result["terms"] = dict(zip((t.name for t in self.terms), out[n : n + k], strict=True))
        w = 2 * len(self.workload.ops)
        work = out[n + k : n + k + w]
        result["ops"] = {
            op.name: {"bytes": work[2 * i], "flops": work[2 * i + 1]}
            for i, op in enumerate(self.workload.ops)
        }
        holds = out[n + k + w :]
        result["constraints"] = {
            c.name: np.asarray(h, dtype=bool) for c, h in zip(self.constraints, holds, strict=True)
        }
        feasible = np.asarray(True)
        for h in result["constraints"].values():
            feasible = feasible & h
        for m in METRICS:
            feasible = feasible & np.isfinite(np.asarray(result[m], dtype=float))
        result["feasible"] = feasible
        return result

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
            bad = [m for m in METRICS if not np.all(np.isfinite(np.asarray(ev[m], dtype=float)))]
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

    def parameter(self, key: str, where: str = "parameter") -> sp.Symbol:
        """The Symbol of a spec path in this scenario; else a SpecError naming the closest."""
        try:
            sym = symbols.lookup(key).symbol
        except KeyError:
            sym = None
        if sym is None or sym not in self.values:
            names = sorted(s.name for s in self.values if not s.name.startswith("const."))
            hint = difflib.get_close_matches(key, names, n=1)
            raise SpecError(where, key, "not a parameter of this scenario",
                            f"a parameter such as {hint[0] if hint else names[0]}")  # fmt: skip
        return sym

    def substituted(self, expr: sp.Expr, free: Iterable[sp.Symbol] = ()) -> sp.Expr:
        """``expr`` with every parameter but ``free`` replaced by its value (no simplify)."""
        keep = set(free)
        return expr.xreplace(
            {s: sp.Float(v, 6) for s, v in self.scenario.values.items() if s not in keep}
        )

    def group_times(self, evaluated: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Seconds per term group (moe, attention, comm, base, spec), summed over terms."""
        ev = evaluated or self.evaluate()
        out: dict[str, float] = defaultdict(float)
        for t in self.terms:
            out[t.group] += float(ev["terms"][t.name])
        return dict(out)


def compose_step_time(terms: Sequence[Term]) -> sp.Expr:
    """Σ terms, where terms sharing an overlap tag contribute Max over their groups' sums."""
    plain = [t.expr for t in terms if not t.overlap]
    tagged: dict[str, dict[str, list[sp.Expr]]] = defaultdict(lambda: defaultdict(list))
    for t in terms:
        if t.overlap:
            tagged[t.overlap][t.group].append(t.expr)
    overlapped = [sp.Max(*(sp.Add(*g) for g in groups.values())) for groups in tagged.values()]
    return sp.Add(*plain, *overlapped)


def build_model(
    scenario: Scenario | str | Path,
    sets: Iterable[str] = (),
    hooks: registry.Hooks | None = None,
) -> StepModel:
    """Run the flow: decoding -> partition -> model work -> compute, collective, fixed terms.

    Models of the same shape (same kinds, choices and flags, and the same values of the keys a
    plugin read while building: `StepModel.structural_keys`) differ only in the numbers
    substituted, so the expressions and their compiled function are built once per shape and
    plugin manager, and reused with the new scenario's values."""
    hooks = hooks or registry.default()
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, hooks.kinds, sets)
    shape = shape_key(scenario)
    for reads, known in hooks.models.get(shape, ()):
        if all(_value_of(scenario, path) == v for path, v in reads):
            return attrs.evolve(known, scenario=_with_constants(scenario, known.values))
    model = _build(scenario, hooks)
    reads = tuple(sorted((path, _value_of(scenario, path)) for path in model.structural_keys))
    hooks.remember(shape, reads, model)
    return model


def shape_key(scenario: Scenario) -> tuple[Any, ...]:
    """What fixes a model's shape besides the structural keys: the kinds and every field
    that is not a number (choices, flags)."""
    parts: list[Any] = [tuple(sorted(scenario.kinds.items()))]
    for name in sorted(scenario.sections):
        obj = scenario.sections[name]
        parts += [
            (name, f.name, repr(getattr(obj, f.name)))
            for f in attrs.fields(type(obj))
            if "dim" not in f.metadata
        ]
    return tuple(parts)


def _value_of(scenario: Scenario, path: str) -> Any:
    section, _, name = path.rpartition(".")
    return getattr(scenario.sections[section], name, None) if section in scenario.sections else None


def _with_constants(scenario: Scenario, values: Mapping[sp.Symbol, float]) -> Scenario:
    """The scenario's values plus the physical constants among ``values``."""
    known = symbols.constant_values()
    constants = {s: v for s, v in values.items() if s in known}
    return attrs.evolve(scenario, values={**constants, **scenario.values})


def _build(scenario: Scenario, hooks: registry.Hooks) -> StepModel:
    """The flow itself, for a scenario whose shape was not built before."""
    kinds = scenario.kinds

    def need(result: Any, hook: str, section: str) -> Any:
        if result is None:
            raise SpecError(
                scenario.origin,
                f"{section}.kind",
                f"no plugin implements {hook} for kind {kinds.get(section)!r}",
            )
        return result

    decoding = need(
        hooks.call("stepwall_decoding", scenario=scenario), "stepwall_decoding", "decoding"
    )
    layout = need(
        hooks.call("stepwall_partition", scenario=scenario, decoding=decoding),
        "stepwall_partition",
        "parallel",
    )
    workload = need(
        hooks.call("stepwall_model_work", scenario=scenario, decoding=decoding, layout=layout),
        "stepwall_model_work",
        "model",
    )
    compute = need(
        hooks.call("stepwall_compute_terms", scenario=scenario, ops=workload.ops),
        "stepwall_compute_terms",
        "hardware",
    )
    comm = need(
        hooks.call(
            "stepwall_collective_terms", scenario=scenario, collectives=workload.collectives
        ),
        "stepwall_collective_terms",
        "cluster.scale_up",
    )
    fixed = hooks.call(
        "stepwall_fixed_terms", scenario=scenario, workload=workload, decoding=decoding
    )
    terms = [*compute, *comm, *decoding.terms, *(t for ts in fixed for t in ts)]
    names = [t.name for t in terms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        owners = sorted({t.plugin for t in terms if t.name == dupes[0]})
        raise PluginError(
            f"plugin {' and plugin '.join(owners)}: two terms are named {dupes[0]!r}; "
            "term names must be unique"
        )

    resident = hooks.call("stepwall_device_memory", scenario=scenario, workload=workload)
    if resident is None:
        resident = workload.weight_bytes_per_gpu + workload.kv_bytes_per_gpu
    t = compose_step_time(terms)
    tau, users = decoding.accepted_tokens, layout.users
    gpus = layout.dp * layout.gpus_per_replica
    capacity = scenario.params.hardware.memory_capacity
    metrics = {
        "step_time_s": t,
        "tokens_per_s_per_user": tau / t,
        "tokens_per_s": layout.dp * users * tau / t,
        "tokens_per_s_per_gpu": users * tau / (t * layout.gpus_per_replica),
        "gpus": gpus,
        "memory_bytes_per_gpu": resident,
        "weight_bytes_per_gpu": workload.weight_bytes_per_gpu,
        "kv_bytes_per_gpu": workload.kv_bytes_per_gpu,
        "memory_capacity_per_gpu": capacity,
    }
    stated = hooks.call(
        "stepwall_constraints",
        scenario=scenario,
        decoding=decoding,
        layout=layout,
        workload=workload,
    )
    # the degrees that shrink resident memory, those the scenario sets first
    levers = sorted(
        (s.name for s in sp.sympify(resident).free_symbols if s.name.startswith("parallel.")),
        key=lambda k: (k not in scenario.provenance, k),
    )
    constraints = [  # the plugins' first: a root cause reads better than its symptom
        *(c for cs in stated for c in cs),
        *composer_constraints(terms, resident, capacity, levers),
    ]
    cnames = [c.name for c in constraints]
    dupes = sorted({n for n in cnames if cnames.count(n) > 1})
    if dupes:
        owners = sorted({c.plugin for c in constraints if c.name == dupes[0]})
        raise PluginError(
            f"plugin {' and plugin '.join(owners)}: two constraints are named {dupes[0]!r}; "
            "constraint names must be unique"
        )
    # Physical constants (symbols.constant) that the model uses join the values, wherever
    # a plugin declared them; constants it does not use stay out of the parameters.
    exprs = [*metrics.values(), *(c.relation for c in constraints)]
    used = set().union(*(sp.sympify(e).free_symbols for e in exprs))
    constants = {k: v for k, v in symbols.constant_values().items() if k in used}
    scenario = _with_constants(scenario, constants)
    return StepModel(
        scenario,
        tuple(terms),
        decoding,
        layout,
        workload,
        metrics,
        tuple(constraints),
        frozenset(scenario.reads),
    )


def check_entry(path: Path, section: str, hooks: registry.Hooks | None = None) -> list[str]:
    """Check a catalog entry's own constraints (those whose keys all lie in ``section``, e.g.
    ``n_dense_layers <= n_layers`` for a model) by putting it into the first catalog scenario
    of the same kind; raise a SpecError for a violated one. Returns plausibility warnings."""
    import tempfile

    from stepwall.spec import catalog_names

    hooks = hooks or registry.default()
    with tempfile.TemporaryDirectory() as tmp:
        for name in catalog_names("scenarios"):
            probe = Path(tmp) / "probe.toml"
            probe.write_text(f'from = "{name}"\n{section} = {json.dumps(str(path.resolve()))}\n')
            try:
                model = build_model(probe, hooks=hooks)
            except SpecError as e:
                if "kind" in e.key or "unknown key" in e.problem:
                    continue  # a scenario of another kind: try the next
                raise
            ev = model.evaluate()
            for c in model.constraints:
                local = c.keys and all(k.startswith(section + ".") for k in c.keys)
                if local and not bool(np.all(ev["constraints"][c.name])):
                    v = violation(model, c)
                    raise SpecError(str(path), v.key, v.text, why=c.message)
            return list(model.scenario.warnings)
    return []


def summary(model: StepModel) -> dict[str, Any]:
    """The `stepwall eval --json` object."""
    ev = model.evaluate()
    used, cap = float(ev["memory_bytes_per_gpu"]), float(ev["memory_capacity_per_gpu"])
    violations = model.violations(ev)
    return {
        "scenario": model.scenario.name,
        "overrides": list(model.scenario.overrides),
        "feasible": not violations,
        "violations": [v.to_json() for v in violations],
        "step_time_s": float(ev["step_time_s"]),
        "tokens_per_s_per_user": float(ev["tokens_per_s_per_user"]),
        "tokens_per_s": float(ev["tokens_per_s"]),
        "tokens_per_s_per_gpu": float(ev["tokens_per_s_per_gpu"]),
        "gpus": round(float(ev["gpus"])),
        "memory": {
            "bytes_per_gpu": used,
            "capacity_per_gpu": cap,
            "fits": used <= cap,
            "weight_bytes_per_gpu": float(ev["weight_bytes_per_gpu"]),
            "kv_bytes_per_gpu": float(ev["kv_bytes_per_gpu"]),
        },
        "groups": model.group_times(ev),
        "parameters": [
            {
                "path": path,
                "value": float(model.values[symbols.lookup(path).symbol]),
                "unit": ""
                if symbols.lookup(path).dim.dimensionless
                else str(symbols.lookup(path).dim),
                "file": shown_path(model.scenario.provenance.get(path, "")),
                "source": text,
            }
            for path, text in sorted(model.scenario.sources.items())
        ],
        "ops": [
            {
                "name": op.name,
                "group": op.group,
                "plugin": op.plugin,
                "bytes_per_gpu": float(ev["ops"][op.name]["bytes"]),
                "flops_per_gpu": float(ev["ops"][op.name]["flops"]),
            }
            for op in model.workload.ops
        ],
        "terms": [
            {
                "name": t.name,
                "plugin": t.plugin,
                "group": t.group,
                "overlap": t.overlap,
                "seconds": float(ev["terms"][t.name]),
                "why": t.why,
            }
            for t in model.terms
        ],
    }
