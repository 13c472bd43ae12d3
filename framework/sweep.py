"""Sweeps: a scenario evaluated over the cartesian product of parameter values.

One model is built and lambdified once; the grid is fed to it as broadcast numpy arrays, so a
sweep does no symbolic work per point. Values are checked like ``--set`` values (unit,
dimension, range, whole number). Validity is evaluated with the metrics: every constraint
(memory, divisibility, cluster size, …) is compiled beside them, so each row says whether it
is feasible and, if not, which constraint fails first.

A key whose *value* a plugin reads while building the model (``model.n_experts`` decides
whether MoE terms exist) is structural: the sweep builds one model per value of such a key
and evaluates the rest of the grid through it.

Values may be listed (``parallel.tp=8,16,36``) or given as a range: ``1..256`` (step 1),
``8..72:8`` (step 8), ``1..256:x2`` (×2 each), ``1..4096:20log`` or ``0.5..1:6lin`` (that many
log- or evenly-spaced points; whole numbers for integer keys), with units:
``7TB/s..9TB/s:0.5TB/s``.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.errors import SpecError, UnitError, did_you_mean
from stepwall.model import METRIC_UNITS, METRICS, StepModel, build_model
from stepwall.spec import check_magnitude, parse_set
from stepwall.units import parse_quantity, parse_unit, split_quantity

DEFAULT_METRICS = ("step_time_s", "tokens_per_s_per_user", "tokens_per_s", "tokens_per_s_per_gpu")
MAX_POINTS = 20_000_000  # a grid beyond this is refused: use a coarser step


def metric_names(model: StepModel) -> list[str]:
    """Every name a sweep, a table or a placeholder may ask for: the metrics, ``group.G``
    (seconds per term group) and ``term.NAME`` (seconds per term)."""
    groups = sorted({t.group for t in model.terms})
    return [*METRICS, *(f"group.{g}" for g in groups), *(f"term.{t.name}" for t in model.terms)]


def metric_unit(name: str) -> str:
    return METRIC_UNITS.get(name, "s")


def pick(model: StepModel, ev: Mapping[str, Any], name: str, where: str = "--metric") -> Any:
    """One named quantity out of ``model.evaluate`` output (see `metric_names`)."""
    if name in METRICS:
        return ev[name]
    if name.startswith("term.") and name[5:] in ev["terms"]:
        return ev["terms"][name[5:]]
    if name.startswith("group."):
        members = [t.name for t in model.terms if t.group == name[6:]]
        if members:
            return sum(np.asarray(ev["terms"][n], dtype=float) for n in members)

    names = metric_names(model)
    dym = did_you_mean(name, names)
    raise SpecError(
        where,
        name,
        f"unknown metric{dym}",
        f"one of: {', '.join(METRICS)}, group.<group>, term.<term>",
    )


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

    def labels(self, integer: bool) -> list[str]:
        """The values as text with the range's unit, e.g. ["8TB/s", "8.5TB/s", …]."""
        lo, hi, by = self.lo, self.hi, self.by
        if self.how == "step":
            n = math.floor((hi - lo) / by * (1 + 1e-12)) + 1
            _cap(n, self.text)
            xs = lo + by * np.arange(n)
        elif self.how == "factor":
            n = math.floor(math.log(hi / lo) / math.log(by) * (1 + 1e-12)) + 1
            _cap(n, self.text)
            xs = lo * by ** np.arange(n)
        else:
            _cap(int(by), self.text)
            xs = (
                np.geomspace(lo, hi, int(by)) if self.how == "log" else np.linspace(lo, hi, int(by))
            )
        if integer and self.how in ("log", "lin"):  # a count of points: nearest whole values
            xs = np.unique(np.round(xs))
        return [f"{_short(x)}{self.unit}" for x in xs]


def _short(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.10g}"


def _cap(n: int, text: str) -> None:
    if n > MAX_POINTS:
        raise SpecError(
            "--vary", text, f"a range of {n:.3g} points", f"at most {MAX_POINTS:,} (a coarser step)"
        )


_BY = re.compile(r"^(?:x(?P<factor>.+)|(?P<n>\d+)(?P<kind>log|lin)|(?P<step>.+))$")


def parse_span(key: str, text: str) -> Span:
    """``1..256``, ``8..72:8``, ``1..256:x2``, ``1..4096:20log``, ``7TB/s..9TB/s:0.5TB/s``."""
    where = f"{key}={text}"
    expect = "LO..HI, LO..HI:STEP, LO..HI:xFACTOR or LO..HI:Nlog / Nlin, e.g. 1..256:x2"
    lo_text, _, rest = text.strip().partition("..")
    hi_text, _, by_text = rest.partition(":")
    try:
        lo, unit = split_quantity(lo_text.strip())
        hi, hi_unit = split_quantity(hi_text.strip())
        scale, dim = parse_unit(unit)
        hi_scale, hi_dim = parse_unit(hi_unit) if hi_unit else (scale, dim)
    except UnitError as e:
        raise SpecError("--vary", where, str(e), expect) from None
    if hi_dim != dim:
        raise SpecError("--vary", where, f"ends of different dimensions ({dim}, {hi_dim})",
                        "both ends of the same quantity")  # fmt: skip
    hi = hi * hi_scale / scale
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise SpecError("--vary", where, "the range runs backwards or is not finite", "LO ≤ HI")
    b = _BY.match(by_text.strip() or "1")
    assert b is not None  # the last alternative matches anything
    if b["factor"]:
        try:
            factor = float(b["factor"])
        except ValueError:
            raise SpecError(
                "--vary", where, f"cannot read factor {b['factor']!r}", expect
            ) from None
        if not factor > 1 or lo <= 0:
            raise SpecError("--vary", where, "a factor range needs LO > 0 and a factor > 1",
                            "e.g. 1..256:x2")  # fmt: skip
        return Span(text, lo, hi, unit, "factor", factor)
    if b["n"]:
        n = int(b["n"])
        if n < 2 or (b["kind"] == "log" and lo <= 0):
            raise SpecError("--vary", where, f"{by_text!r} needs at least 2 points (and LO > 0 "
                            "for log spacing)", "e.g. 1..4096:20log")  # fmt: skip
        return Span(text, lo, hi, unit, b["kind"], n)
    try:
        step, step_unit = split_quantity(b["step"].strip())
        step_scale, step_dim = parse_unit(step_unit) if step_unit else (scale, dim)
    except UnitError as e:
        raise SpecError("--vary", where, str(e), expect) from None
    if step_dim != dim:
        raise SpecError("--vary", where, f"step {b['step']!r} is not of the range's dimension",
                        f"a step like 1{unit}")  # fmt: skip
    step = step * step_scale / scale
    if not (math.isfinite(step) and step > 0):
        raise SpecError("--vary", where, "the step must be positive", expect)
    return Span(text, lo, hi, unit, "step", step)


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
class Sweep:
    """A finished sweep: the axes (key, the values as given, SI magnitudes) and results
    (each metric as an array with one axis per key, in ``keys`` order), with ``feasible``
    and ``violation`` (the first constraint that fails, "" where all hold) per point."""

    scenario: str
    keys: tuple[str, ...]
    given: tuple[tuple[Any, ...], ...]
    si: tuple[np.ndarray, ...]
    metrics: tuple[str, ...]
    results: Mapping[str, np.ndarray]
    model: StepModel
    feasible: np.ndarray = attrs.field(factory=lambda: np.ones(0, dtype=bool))
    violation: np.ndarray = attrs.field(factory=lambda: np.zeros(0, dtype=object))
    warnings: tuple[str, ...] = ()
    integer: tuple[bool, ...] = ()  # whether each key takes whole values (written as such)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.si)

    def _points(self, feasible_only: bool) -> Iterable[tuple[int, ...]]:
        for idx in itertools.product(*(range(n) for n in self.shape)):
            if not feasible_only or bool(self.feasible[idx]):
                yield idx

    def rows(self, feasible_only: bool = False) -> list[dict[str, Any]]:
        """One dict per grid point (row-major, last key fastest): key values in SI, metrics,
        ``feasible`` and ``violation``."""
        out = []
        for idx in self._points(feasible_only):
            row: dict[str, Any] = {
                k: _num(self.si[i][j]) for i, (k, j) in enumerate(zip(self.keys, idx, strict=True))
            }
            for m in self.metrics:
                row[m] = _num(self.results[m][idx])
            row["feasible"] = bool(self.feasible[idx])
            row["violation"] = str(self.violation[idx])
            out.append(row)
        return out

    def _head(self) -> list[str]:
        return [
            *self.keys,
            *(f"{m} [{metric_unit(m)}]" if metric_unit(m) else m for m in self.metrics),
            "feasible",
            "violation",
        ]

    def to_csv(self, feasible_only: bool = False) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self._head())
        whole = self.integer or (False,) * len(self.keys)
        for r in self.rows(feasible_only):
            keys = zip(self.keys, whole, strict=True)
            w.writerow([
                *(str(int(r[k])) if i else _fmt_csv(r[k]) for k, i in keys),
                *(_fmt_csv(r[c]) for c in self.metrics),
                "true" if r["feasible"] else "false",
                r["violation"],
            ])  # fmt: skip
        return buf.getvalue()

    def to_json(self, feasible_only: bool = False) -> str:
        doc = {
            "scenario": self.scenario,
            "axes": [
                {"key": k, "given": [str(g) for g in gv], "si": [_num(x) for x in s]}
                for k, gv, s in zip(self.keys, self.given, self.si, strict=True)
            ],
            "units": {m: metric_unit(m) for m in self.metrics},
            "rows": self.rows(feasible_only),
        }
        return json.dumps(doc, indent=2) + "\n"

    def to_table(self, feasible_only: bool = False) -> str:
        head = self._head()
        body = []
        for idx in self._points(feasible_only):
            ok = bool(self.feasible[idx])
            body.append(
                [str(self.given[i][j]) for i, j in enumerate(idx)]
                + [f"{_num(self.results[m][idx]):.6g}" for m in self.metrics]
                + ["yes" if ok else "no", str(self.violation[idx])]
            )
        widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
        lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
        if not body:
            lines.append("(no feasible point)" if feasible_only else "(empty)")
        return "\n".join(lines)


def _num(x: Any) -> float:
    return float(np.asarray(x, dtype=float))


def _fmt_csv(x: float) -> str:
    return repr(float(x))


def axis_values(
    model: StepModel, key: str, values: Sequence[Any] | Span, warnings: list[str]
) -> tuple[list[Any], np.ndarray]:
    """The values of one axis as given and as SI magnitudes, each checked as ``--set
    key=value`` would be (unknown key, unit, dimension, range, whole number)."""
    sc = model.scenario
    f = sc.field(key)
    if f is None:
        if key in {s.name for s in model.values}:
            raise SpecError("--vary", key, "is fixed by the model, not a spec value",
                            "a numeric spec key such as parallel.tp")  # fmt: skip
        names = sorted(p for s in sc.sections for p in _numeric_keys(sc, s))
        dym = did_you_mean(key, names)
        raise SpecError("--vary", key, f"not a numeric key of this scenario{dym}",
                        "a numeric key such as parallel.tp")  # fmt: skip
    given = values.labels(bool(f.metadata["integer"])) if isinstance(values, Span) else values
    si = []
    for v in given:
        try:
            magnitude, dim = parse_quantity(v)
        except UnitError as e:
            raise SpecError("--vary", key, str(e), "values with the key's unit") from None
        if dim.dimensionless and not f.metadata["dim"].dimensionless and not isinstance(v, str):
            raise SpecError("--vary", key, f"{v!r} has no unit", "values with units, e.g. 8TB/s")
        si.append(check_magnitude(f, magnitude, dim, repr(v), "--vary", key, warnings))
    return list(given), np.asarray(si, dtype=float)


def _numeric_keys(sc: Any, section: str) -> list[str]:
    obj = sc.sections[section]
    return [f"{section}.{a.name}" for a in attrs.fields(type(obj)) if "dim" in a.metadata]


def run(
    scenario: str | Path,
    vary: Sequence[tuple[str, Sequence[Any] | Span]],
    sets: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    model: StepModel | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 200_000,
) -> Sweep:
    """Evaluate ``scenario`` (with ``sets``) over the product of ``vary``'s values."""
    keys = [k for k, _ in vary]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise SpecError("--vary", dup, "varied twice", "each key once")
    for k in keys:
        if any(s.partition("=")[0].strip() == k for s in sets):
            raise SpecError("--vary", k, "also given with --set", "a key either set or varied")
    model = model or build_model(scenario, sets)
    warnings = list(model.scenario.warnings)
    axes = [(k, *axis_values(model, k, v, warnings)) for k, v in vary]
    shape = tuple(len(a[2]) for a in axes)
    total = math.prod(shape)
    _cap(total, " × ".join(keys) or "the grid")
    names = list(metrics)
    ev0 = model.evaluate()
    for m in names:
        pick(model, ev0, m)
    grids = np.meshgrid(*(a[2] for a in axes), indexing="ij") if axes else []
    flat = [g.reshape(-1) for g in grids]
    out = {m: np.empty(total) for m in names}
    feasible = np.zeros(total, dtype=bool)
    violation = np.full(total, "", dtype=object)
    structural = [i for i, k in enumerate(keys) if k in model.structural_keys]
    combos = itertools.product(*(np.unique(axes[i][2]) for i in structural))
    done = 0
    for combo in combos:
        rows = np.arange(total)
        for i, v in zip(structural, combo, strict=True):
            rows = rows[flat[i][rows] == v]
        if not rows.size:
            continue
        m_ = model
        if structural:
            pinned = [f"{keys[i]}={_short(v)}" for i, v in zip(structural, combo, strict=True)]
            m_ = build_model(scenario, [*sets, *pinned])
            for m in names:
                pick(m_, m_.evaluate(), m)
        free = [i for i in range(len(keys)) if i not in structural]
        for start in range(0, rows.size, chunk):
            part = rows[start : start + chunk]
            ev = m_.evaluate({keys[i]: flat[i][part] for i in free})
            for m in names:
                out[m][part] = np.broadcast_to(np.asarray(pick(m_, ev, m), dtype=float), part.shape)
            ok = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), part.shape)
            feasible[part] = ok
            first = np.full(part.shape, "", dtype=object)
            for c in m_.constraints:
                holds = np.broadcast_to(
                    np.asarray(ev["constraints"][c.name], dtype=bool), part.shape
                )
                first[(first == "") & ~holds] = c.name
            first[(first == "") & ~ok] = "finite"
            violation[part] = first
            done += part.size
            if progress:
                progress(done, total)
    results = {m: v.reshape(shape) for m, v in out.items()}
    return Sweep(
        model.scenario.name,
        tuple(keys),
        tuple(tuple(a[1]) for a in axes),
        tuple(a[2] for a in axes),
        tuple(names),
        results,
        model,
        feasible.reshape(shape),
        violation.reshape(shape),
        tuple(dict.fromkeys(warnings)),
        tuple(bool(model.scenario.field(k).metadata["integer"]) for k in keys),  # type: ignore[union-attr]
    )


class ProgressBar:
    """A one-line bar on stderr, shown only on a terminal and once a run passes a second."""

    def __init__(self, stream: Any = None, after: float = 1.0) -> None:
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.after = after
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not getattr(self.stream, "isatty", lambda: False)():
            return
        if time.monotonic() - self.start < self.after and not self.shown:
            return
        self.shown = True
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
