"""Sweeps: a scenario evaluated over the cartesian product of parameter values.

One model is built and lambdified once; the grid is fed to it as broadcast numpy arrays, so a
sweep does no symbolic work per point. Values go through the spec parser (units, dimension,
range and integer checks) exactly as ``--set`` would. Checks a plugin makes when the model is
built (e.g. ``parallel.tp`` beyond the cluster) are run by building the model once at every
corner of the grid (each key at its smallest and largest value), which covers every check that
is monotone in each key -- all of today's are.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall import registry
from stepwall.errors import SpecError, did_you_mean
from stepwall.model import METRIC_UNITS, METRICS, StepModel, build_model
from stepwall.spec import load_scenario, parse_set

DEFAULT_METRICS = ("step_time_s", "tokens_per_s_per_user", "tokens_per_s", "tokens_per_s_per_gpu")
CORNER_LIMIT = 64  # beyond 2**6 corners only the all-min and all-max corners are built


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


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """``"parallel.tp=8,16,36"`` -> ("parallel.tp", [8, 16, 36]); each value reads like a
    ``--set`` value (TOML, else text such as ``8TB/s``)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise SpecError("--vary", text, "not a sweep", "KEY=V1,V2,…, e.g. parallel.tp=8,16,36,72")
    values = [parse_set(f"{key}={v}")[1] for v in raw.split(",") if v.strip()]
    return key, values


@attrs.frozen
class Sweep:
    """A finished sweep: the axes (key, the values as given, SI magnitudes) and results
    (each metric as an array with one axis per key, in ``keys`` order)."""

    scenario: str
    keys: tuple[str, ...]
    given: tuple[tuple[Any, ...], ...]
    si: tuple[np.ndarray, ...]
    metrics: tuple[str, ...]
    results: Mapping[str, np.ndarray]
    model: StepModel

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.si)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per grid point (row-major, last key fastest): key values in SI, metrics."""
        out = []
        for idx in itertools.product(*(range(n) for n in self.shape)):
            row: dict[str, Any] = {
                k: _num(self.si[i][j]) for i, (k, j) in enumerate(zip(self.keys, idx, strict=True))
            }
            for m in self.metrics:
                row[m] = _num(self.results[m][idx])
            out.append(row)
        return out

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            [
                *self.keys,
                *(f"{m} [{metric_unit(m)}]" if metric_unit(m) else m for m in self.metrics),
            ]
        )
        for r in self.rows():
            w.writerow([_fmt_csv(r[c]) for c in (*self.keys, *self.metrics)])
        return buf.getvalue()

    def to_json(self) -> str:
        doc = {
            "scenario": self.scenario,
            "axes": [
                {"key": k, "given": [str(g) for g in gv], "si": [_num(x) for x in s]}
                for k, gv, s in zip(self.keys, self.given, self.si, strict=True)
            ],
            "units": {m: metric_unit(m) for m in self.metrics},
            "rows": self.rows(),
        }
        return json.dumps(doc, indent=2) + "\n"

    def to_table(self) -> str:
        head = [
            *self.keys,
            *(f"{m} [{metric_unit(m)}]" if metric_unit(m) else m for m in self.metrics),
        ]
        points = itertools.product(*(range(n) for n in self.shape))
        body = [
            [str(self.given[i][j]) for i, j in enumerate(idx)]
            + [f"{r[m]:.6g}" for m in self.metrics]
            for idx, r in zip(points, self.rows(), strict=True)
        ]
        widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
        lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
        return "\n".join(lines)


def _num(x: Any) -> float:
    return float(np.asarray(x, dtype=float))


def _fmt_csv(x: float) -> str:
    return repr(float(x))


def si_values(
    scenario: str | Path, key: str, values: Sequence[Any], sets: Iterable[str] = ()
) -> np.ndarray:
    """The SI magnitudes of ``values`` for ``key``, each validated as ``--set key=value``
    would be (unknown key, unit, dimension, range, whole number)."""
    kinds = registry.default().kinds
    out = []
    for v in values:
        text = v if isinstance(v, str) else json.dumps(v)
        sc = load_scenario(scenario, kinds, [*sets, f"{key}={text}"])
        try:
            out.append(sc.value(key))
        except KeyError:
            raise SpecError(
                "--vary",
                key,
                "not a numeric parameter (a structural key needs one scenario per value)",
                "a numeric key such as parallel.tp",
            ) from None
    return np.asarray(out, dtype=float)


def _set_text(key: str, v: Any) -> str:
    return f"{key}={v if isinstance(v, str) else json.dumps(v)}"


def validate_corners(
    scenario: str | Path, axes: Sequence[tuple[str, Sequence[Any], np.ndarray]], sets: Sequence[str]
) -> None:
    """Build the model at each corner of the grid so build-time checks see the extremes."""
    ends = []
    for key, given, si in axes:
        lo, hi = int(np.argmin(si)), int(np.argmax(si))
        ends.append([(key, given[lo])] if lo == hi else [(key, given[lo]), (key, given[hi])])
    corners = list(itertools.product(*ends))
    if len(corners) > CORNER_LIMIT:
        corners = [corners[0], corners[-1]]
    for corner in corners:
        extra = [_set_text(k, v) for k, v in corner]
        try:
            build_model(scenario, [*sets, *extra])
        except SpecError as e:
            point = ", ".join(extra)
            raise SpecError(
                e.where, e.key, f"{e.problem} [at the sweep corner {point}]", e.expected
            ) from None


def run(
    scenario: str | Path,
    vary: Sequence[tuple[str, Sequence[Any]]],
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
    axes = [(k, list(v), si_values(scenario, k, list(v), sets)) for k, v in vary]
    validate_corners(scenario, axes, sets)
    model = model or build_model(scenario, sets)
    names = list(metrics)
    empty = model.evaluate()
    for m in names:
        pick(model, empty, m)
    shape = tuple(len(a[2]) for a in axes)
    total = int(np.prod(shape)) if shape else 1
    grids = np.meshgrid(*(a[2] for a in axes), indexing="ij") if axes else []
    flat = [g.reshape(-1) for g in grids]
    out = {m: np.empty(total) for m in names}
    start = 0
    while start < total:
        stop = min(total, start + chunk)
        ev = model.evaluate({k: f[start:stop] for k, f in zip(keys, flat, strict=True)})
        for m in names:
            out[m][start:stop] = np.broadcast_to(
                np.asarray(pick(model, ev, m), dtype=float), (stop - start,)
            )
        start = stop
        if progress:
            progress(start, total)
    results = {m: v.reshape(shape) for m, v in out.items()}
    return Sweep(
        model.scenario.name,
        tuple(keys),
        tuple(tuple(a[1]) for a in axes),
        tuple(a[2] for a in axes),
        tuple(names),
        results,
        model,
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
