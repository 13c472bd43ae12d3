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
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall import registry, symbols
from stepwall.errors import PluginError, SpecError
from stepwall.spec import Scenario, catalog_root, load_scenario
from stepwall.terms import Decoding, Layout, Term, Workload

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


@attrs.frozen
class StepModel:
    """Terms, how they combine, the metrics, and the values to substitute."""

    scenario: Scenario
    terms: tuple[Term, ...]
    decoding: Decoding
    layout: Layout
    workload: Workload
    metrics: Mapping[str, sp.Expr]

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

    @cached_property
    def _compiled(self) -> Any:
        exprs = [self.metrics[m] for m in METRICS] + [t.expr for t in self.terms]
        exprs += [e for op in self.workload.ops for e in (op.bytes, op.flops)]
        return sp.lambdify(self.parameters, exprs, modules="numpy", cse=True)

    def evaluate(self, overrides: Mapping[sp.Symbol | str, Any] | None = None) -> dict[str, Any]:
        """Metrics, term times and per-GPU op work (bytes, FLOPs), numerically. ``overrides``
        maps parameters (Symbol or path) to values or numpy arrays (broadcast together, for
        vectorized sweeps)."""
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
        work = out[n + k :]
        result["ops"] = {
            op.name: {"bytes": work[2 * i], "flops": work[2 * i + 1]}
            for i, op in enumerate(self.workload.ops)
        }
        return result

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
    """Run the flow: decoding -> partition -> model work -> compute, collective, fixed terms."""
    hooks = hooks or registry.default()
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, hooks.kinds, sets)
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
    for t in terms:
        if not isinstance(t, Term):
            raise PluginError(f"a plugin returned {type(t).__name__} where a Term was expected")
    names = [t.name for t in terms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PluginError(f"two terms share the name {dupes[0]!r}; term names must be unique")

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
    # Physical constants (symbols.constant) that the metrics use join the values, wherever
    # a plugin declared them; constants no metric uses stay out of the parameters.
    used = set().union(*(sp.sympify(e).free_symbols for e in metrics.values()))
    constants = {s: v for s, v in symbols.constant_values().items() if s in used}
    scenario = attrs.evolve(scenario, values={**constants, **scenario.values})
    return StepModel(scenario, tuple(terms), decoding, layout, workload, metrics)


def display_path(origin: str) -> str:
    """A spec file as users should read it: relative to the catalog when it is in it."""
    if not origin or origin == "--set":
        return origin
    p = Path(origin)
    try:
        return str(p.resolve().relative_to(catalog_root().parent))
    except ValueError:
        return str(p)


def summary(model: StepModel) -> dict[str, Any]:
    """The `stepwall eval --json` object."""
    ev = model.evaluate()
    used, cap = float(ev["memory_bytes_per_gpu"]), float(ev["memory_capacity_per_gpu"])
    return {
        "scenario": model.scenario.name,
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
                "file": display_path(model.scenario.provenance.get(path, "")),
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
