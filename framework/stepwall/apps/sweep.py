"""Sweeps: a scenario evaluated over the cartesian product of parameter values.

The model is compiled once (`stepwall.numeric.compiled`; from the on-disk cache when its shape was
compiled before) and the grid is fed to it as broadcast numpy arrays, chunk by chunk, so a
sweep does no symbolic work per point and streams in bounded memory. Values are checked like
``--set`` values (unit, dimension, range, whole number). Validity is evaluated with the
metrics: every constraint (memory, divisibility, cluster size, …) is compiled beside them, so
each row says whether it is feasible and, if not, which constraint fails first.

A key whose *value* a plugin reads while building the model (``model.n_experts`` decides
whether MoE terms exist) is structural: the sweep builds one model per value of such a key
and evaluates the rest of the grid through it.

Values may be listed (``parallel.tp=8,16,36``) or given as a range: ``1..256`` (step 1),
``8..72:8`` (step 8), ``1..256:x2`` (×2 each), ``1..4096:20log`` or ``0.5..1:6lin`` (that many
log- or evenly-spaced points; whole numbers for integer keys), with units:
``7TB/s..9TB/s:0.5TB/s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.core.errors import SpecError, UnitError, did_you_mean, first_repeat
from stepwall.core.scenario import Scenario
from stepwall.core.units import parse_quantity
from stepwall.io.formats import Column, Table
from stepwall.model.compose import compile_scenario
from stepwall.model.metrics import METRIC_UNITS, METRICS
from stepwall.numeric.compiled import CompiledModel
from stepwall.plugin import registry as registries
from stepwall.plugin.registry import Registry
from stepwall.spec import grammar
from stepwall.spec.loader import parse_set
from stepwall.spec.validation import load_scenario
from stepwall.spec.values import check_magnitude

DEFAULT_METRICS = ("step_time_s", "tokens_per_s_per_user", "tokens_per_s", "tokens_per_s_per_gpu")
MAX_POINTS = 200_000_000  # a grid (sweep) or space (search) beyond this is refused up front
MAX_VALUES = 1_000_000  # values on one axis (--vary, --batch, --gpus)
CHUNK = 200_000


def metric_names(model: Any) -> list[str]:
    """Every name a sweep, a table or a placeholder may ask for: the metrics, ``group.G``
    (seconds per term group) and ``term.NAME`` (seconds per term). ``model`` is a StepModel
    or a CompiledModel (anything with named, grouped ``terms``)."""
    groups = sorted({t.group for t in model.terms})
    extra = [m for m in _plugin_units(model) if m not in METRICS]
    return [*METRICS, *extra, *(f"group.{g}" for g in groups),
            *(f"term.{t.name}" for t in model.terms)]  # fmt: skip


def _plugin_units(model: Any) -> dict[str, str]:
    """The metrics plugins declared, with their units, of a StepModel or a CompiledModel."""
    if hasattr(model, "declared_metrics"):
        return {m.name: m.unit for m in model.declared_metrics if m.name not in METRIC_UNITS}
    return {m.name: m.unit for m in getattr(model, "plugin_metrics", ())}


def metric_unit(name: str, model: Any = None) -> str:
    """The unit of a metric, ``group.G`` or ``term.T`` (seconds); ``model`` knows the
    metrics its plugins declared."""
    if name in METRIC_UNITS:
        return METRIC_UNITS[name]
    return _plugin_units(model).get(name, "s") if model is not None else "s"


def pick(model: Any, ev: Mapping[str, Any], name: str, where: str = "--metric") -> Any:
    """One named quantity out of an evaluation (see `metric_names`)."""
    if name in METRICS or name in _plugin_units(model):
        return ev[name]
    if name.startswith("term.") and name[5:] in ev["terms"]:
        return ev["terms"][name[5:]]
    if name.startswith("group."):
        members = [t.name for t in model.terms if t.group == name[6:]]
        if members:
            return sum(np.asarray(ev["terms"][n], dtype=float) for n in members)
    names = metric_names(model)
    dym = did_you_mean(name, names)
    raise SpecError(where, name, f"unknown metric{dym}",
                    f"one of: {', '.join([*METRICS, *_plugin_units(model)])}, group.<group>, "
                    "term.<term>")  # fmt: skip


@attrs.frozen
class Span:
    """A range of values ``lo..hi`` with a step, a factor or a count of points (``how``:
    "step", "factor", "log", "lin"), as written on the command line."""

    text: str
    lo: float  # in ``unit``
    hi: float
    unit: str
    how: str
    by: float  # the step (in ``unit``), the factor, or the number of points

    flag: str = "--vary"  # the argument it came from, for messages

    def count(self) -> float:
        """How many values the range holds, computed without making them (may be inf)."""
        lo, hi, by = self.lo, self.hi, self.by
        if self.how == "step":
            n = (hi - lo) / by * (1 + 1e-12)
        elif self.how == "factor":
            n = math.log(hi / lo) / math.log(by) * (1 + 1e-12)
        else:
            return float(by)
        return math.floor(n) + 1.0 if math.isfinite(n) else math.inf

    def labels(self, integer: bool) -> list[str]:
        """The values as text with the range's unit, e.g. ["8TB/s", "8.5TB/s", …]; more
        than `MAX_VALUES` are refused before any is made."""
        lo, hi, by = self.lo, self.hi, self.by
        n = self.count()
        if not n <= MAX_VALUES:
            raise SpecError(self.flag, self.text, f"a range of {n:.3g} points",
                            f"at most {MAX_VALUES:,} on one axis (a coarser step)")  # fmt: skip
        if self.how == "step":
            xs = lo + by * np.arange(int(n))
        elif self.how == "factor":
            xs = lo * by ** np.arange(int(n))
        else:
            xs = np.geomspace(lo, hi, int(n)) if self.how == "log" else np.linspace(lo, hi, int(n))
        if integer and self.how in ("log", "lin"):  # a count of points: nearest whole values
            xs = np.unique(np.round(xs))
        return [f"{_short(x)}{self.unit}" for x in xs]


def _short(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.10g}"


def check_points(n: float, where: str, narrow: str) -> None:
    """Refuse up front a run that would evaluate more than `MAX_POINTS` points (a sweep's
    grid, a search's space), before anything is allocated for it."""
    if n > MAX_POINTS:
        raise SpecError(where, "", f"would evaluate {n:.2g} points",
                        why=f"limit {MAX_POINTS:.0e}; {narrow}")  # fmt: skip


def parse_span(key: str, text: str, flag: str = "--vary") -> Span:
    """A `Span` from its text (`stepwall.spec.grammar.parse_span`); errors name ``flag``
    (the argument) and ``key=text`` (or the text, without a key)."""
    where = f"{key}={text}" if key else text
    return Span(where, *grammar.parse_span(text, flag, where), flag)


def parse_vary(text: str) -> tuple[str, list[Any] | Span]:
    """``"parallel.tp=8,16,36"`` -> ("parallel.tp", [8, 16, 36]); each value reads like a
    ``--set`` value (TOML, else text such as ``8TB/s``). ``KEY=LO..HI[:BY]`` gives a `Span`."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        expect = "KEY=V1,V2,… or KEY=LO..HI[:STEP], e.g. parallel.tp=8,16,36,72"
        raise SpecError("--vary", text, "not a sweep", expect)
    if ".." in raw:
        return key, parse_span(key, raw.strip())
    values = [parse_set(f"{key}={v}")[1] for v in raw.split(",") if v.strip()]
    if not values:
        raise SpecError("--vary", text, "no values", "KEY=V1,V2,…")
    return key, values


@attrs.frozen
class Axis:
    key: str
    given: tuple[Any, ...]
    si: np.ndarray
    integer: bool


def axis_values(
    scenario: Scenario, key: str, values: Sequence[Any] | Span, warnings: list[str]
) -> Axis:
    """The values of one axis as given and as SI magnitudes, each checked as ``--set
    key=value`` would be (unknown key, unit, dimension, range, whole number)."""
    f = scenario.field(key)
    if f is None:
        if key in scenario.by_path:
            raise SpecError("--vary", key, "is fixed by the model, not a spec value",
                            "a numeric spec key such as parallel.tp")  # fmt: skip
        dym = did_you_mean(key, scenario.numeric_paths())
        raise SpecError("--vary", key, f"not a numeric key of this scenario{dym}",
                        "a numeric key such as parallel.tp")  # fmt: skip
    integer = bool(f.metadata["integer"])
    given = values.labels(integer) if isinstance(values, Span) else list(values)
    si = []
    for v in given:
        try:
            magnitude, dim = parse_quantity(v)
        except UnitError as e:
            raise SpecError("--vary", key, str(e), "values with the key's unit") from None
        if dim.dimensionless and not f.metadata["dim"].dimensionless and not isinstance(v, str):
            raise SpecError("--vary", key, f"{v!r} has no unit", "values with units, e.g. 8TB/s")
        si.append(check_magnitude(f.metadata, magnitude, dim, repr(v), "--vary", key, warnings))
    return Axis(key, tuple(given), np.asarray(si, dtype=float), integer)


@attrs.frozen
class Plan:
    """A sweep, ready to evaluate: the base scenario, the axes, the metrics, and how to get
    the compiled model of each structural combination."""

    scenario: Scenario
    ref: str | Path
    sets: tuple[str, ...]
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]
    numeric: CompiledModel
    registry: Registry
    warnings: tuple[str, ...]
    model: Any = None  # a StepModel, when the caller had one

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a.si) for a in self.axes)

    @property
    def total(self) -> int:
        return math.prod(self.shape)

    def columns(self) -> tuple[Column, ...]:
        keys = [Column(a.key, "", "int" if a.integer else "float") for a in self.axes]
        ms = [Column(m, metric_unit(m, self.numeric)) for m in self.metrics]
        return (*keys, *ms, Column("feasible", "", "bool"), Column("violation", "", "text"))

    def chunks(
        self, chunk: int = CHUNK, progress: Callable[[int, int], None] | None = None,
        feasible_only: bool = False,
    ) -> Iterator[list[Any]]:  # fmt: skip
        """The grid, row-major (last key fastest), in chunks: key columns, metric columns,
        feasible, violation."""
        keys = [a.key for a in self.axes]
        structural = [i for i, k in enumerate(keys) if k in self.numeric.structural_keys]
        free = [i for i in range(len(keys)) if i not in structural]
        numerics: dict[tuple[Any, ...], CompiledModel] = {}
        done = 0
        for start in range(0, self.total, chunk):
            idx = np.arange(start, min(self.total, start + chunk))
            coords = np.unravel_index(idx, self.shape) if self.axes else ()
            cols = [a.si[c] for a, c in zip(self.axes, coords, strict=True)]
            out = {m: np.empty(idx.size) for m in self.metrics}
            ok = np.zeros(idx.size, dtype=bool)
            first = np.full(idx.size, "", dtype=object)
            combos = (
                np.unique(np.column_stack([cols[i] for i in structural]), axis=0)
                if structural else np.zeros((1, 0))
            )  # fmt: skip
            for combo in combos:
                rows = np.ones(idx.size, dtype=bool)
                for i, v in zip(structural, combo, strict=True):
                    rows &= cols[i] == v
                key = tuple(combo)
                if key not in numerics:
                    numerics[key] = self._numeric_for(
                        {keys[i]: v for i, v in zip(structural, combo, strict=True)}
                    )
                num = numerics[key]
                values: dict[str, Any] = {s.name: v for s, v in self.scenario.values.items()}
                values.update({keys[i]: float(v) for i, v in zip(structural, combo, strict=True)})
                values.update({keys[i]: cols[i][rows] for i in free})
                ev = num.evaluate(values)
                n = int(rows.sum())
                for m in self.metrics:
                    out[m][rows] = np.broadcast_to(np.asarray(pick(num, ev, m), dtype=float), (n,))
                good = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), (n,))
                ok[rows] = good
                code = np.zeros(n, dtype=np.intp)  # 0: holds, j: the j-th name below
                for j, c in enumerate(num.constraints, 1):
                    holds = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), (n,))
                    code[(code == 0) & ~holds] = j
                code[(code == 0) & ~good] = len(num.constraints) + 1
                names = ["", *(c.name for c in num.constraints), "finite"]
                first[rows] = np.asarray(names, dtype=object)[code]
            done += idx.size
            if progress:
                progress(done, self.total)
            data: list[Any] = [*cols, *(out[m] for m in self.metrics), ok, first]
            if feasible_only:
                data = [np.asarray(d)[ok] for d in data]
            yield data

    def _numeric_for(self, pinned: Mapping[str, float]) -> CompiledModel:
        if not pinned:
            return self.numeric

        extra = [f"{k}={_short(v)}" for k, v in pinned.items()]
        sc = load_scenario(self.ref, self.registry.kinds, [*self.sets, *extra])
        numeric = compile_scenario(sc, self.registry)
        for m in self.metrics:  # the metric exists in every structural variant
            pick(numeric, numeric.evaluate({s.name: v for s, v in sc.values.items()}), m)
        return numeric

    def table(self, feasible_only: bool = False, progress: Any = None) -> Table:
        """The sweep as a streamed `Table` (for the output formats)."""
        return Table(self.columns(), lambda: self.chunks(progress=progress,
                                                         feasible_only=feasible_only),
                     title=self.scenario.label)  # fmt: skip


def plan_sweep(
    scenario: str | Path,
    vary: Sequence[tuple[str, Sequence[Any] | Span]],
    sets: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    registry: Registry | None = None,
    model: Any = None,
    cache: bool = True,
) -> Plan:
    """Check the axes and metrics and compile the model: everything but the evaluation."""
    registry = registry or registries.default()
    keys = [k for k, _ in vary]
    dup = first_repeat(keys)
    if dup is not None:
        raise SpecError("--vary", dup, "varied twice", "each key once")
    for k in keys:
        if any(s.partition("=")[0].strip() == k for s in sets):
            raise SpecError("--vary", k, "also given with --set", "a key either set or varied")
    if model is not None:
        sc, numeric = model.scenario, model.numeric
    else:
        sc = load_scenario(scenario, registry.kinds, sets)
        numeric = compile_scenario(sc, registry, cache=cache)
    warnings = list(sc.warnings)
    axes = tuple(axis_values(sc, k, v, warnings) for k, v in vary)
    check_points(
        math.prod(len(a.si) for a in axes), "sweep", "a coarser step or fewer --vary values"
    )
    ev = numeric.evaluate({s.name: v for s, v in sc.values.items()})
    for m in metrics:
        pick(numeric, ev, m)
    return Plan(sc, scenario, tuple(sets), axes, tuple(metrics), numeric, registry,
                tuple(dict.fromkeys(warnings)), model)  # fmt: skip


@attrs.frozen
class Sweep:
    """A finished sweep held in memory: the axes and results (each metric as an array with
    one axis per key, in ``keys`` order), with ``feasible`` and ``violation`` per point."""

    plan: Plan
    results: Mapping[str, np.ndarray]
    feasible: np.ndarray
    violation: np.ndarray

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(a.key for a in self.plan.axes)

    @property
    def given(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(a.given for a in self.plan.axes)

    @property
    def si(self) -> tuple[np.ndarray, ...]:
        return tuple(a.si for a in self.plan.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.plan.shape

    @property
    def model(self) -> Any:
        return self.plan.model

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.plan.warnings

    def table(self, feasible_only: bool = False) -> Table:
        flat = [np.asarray(self.results[m]).reshape(-1) for m in self.plan.metrics]
        grids = np.meshgrid(*self.si, indexing="ij") if self.si else []
        cols: list[Any] = [g.reshape(-1) for g in grids]
        data = [*cols, *flat, self.feasible.reshape(-1), self.violation.reshape(-1)]
        if feasible_only:
            keep = self.feasible.reshape(-1)
            data = [np.asarray(d)[keep] for d in data]
        return Table(self.plan.columns(), lambda: iter([data]), title=self.plan.scenario.label)


def run_sweep(
    scenario: str | Path,
    vary: Sequence[tuple[str, Sequence[Any] | Span]],
    sets: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    registry: Registry | None = None,
    model: Any = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = CHUNK,
) -> Sweep:
    """Evaluate ``scenario`` (with ``sets``) over the product of ``vary``'s values, in
    memory (use `plan_sweep` and `Plan.table` to stream a large grid)."""
    plan = plan_sweep(scenario, vary, sets, metrics, registry=registry, model=model)
    parts = list(plan.chunks(chunk, progress))
    n = len(plan.axes)
    results = {
        m: np.concatenate([p[n + i] for p in parts]).reshape(plan.shape)
        for i, m in enumerate(plan.metrics)
    }
    feasible = np.concatenate([p[-2] for p in parts]).reshape(plan.shape)
    violation = np.concatenate([p[-1] for p in parts]).reshape(plan.shape)
    return Sweep(plan, results, feasible, violation)
