"""Validation: predictions against published end-to-end serving measurements.

A validation table is a TOML file of ``[[row]]`` tables (``specs/validation/*.toml`` ship
with stepwall). Each row names a scenario (catalog name or a path relative to the file) with
``--set``-style overrides, the metric, the measured value with its unit (and ``divide_by``
when the figure covers several GPUs, e.g. 8 for a per-node figure of a per-GPU metric), the
row's class and where it was published. The error of a row is predicted / measured − 1.

These measurements are never fitted: hardware and engine values come from primitive
microbenchmarks (``stepwall calibrate``), so the error here is the model's, out of sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.apps.sweep import metric_names, metric_unit, pick
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError, UnitError, did_you_mean, first_repeat
from stepwall.core.options import option, structure_options
from stepwall.core.units import parse_quantity, parse_unit
from stepwall.model.compose import build_model
from stepwall.model.metrics import DIAGNOSTIC_METRICS, METRICS
from stepwall.plugin import registry as registries
from stepwall.plugin.registry import Registry
from stepwall.spec.loader import find_spec_file, read_toml

CLASSES = {
    "tp_batch1": "tensor parallel at batch 1 (latency-bound)",
    "dp_ep_node": "attention data parallel + expert parallel on one node",
    "wide_ep": "expert parallel across nodes (disaggregated decode)",
    "prefill": "prefill throughput and time to first token",
    "dense": "dense and small-expert models (not DeepSeek-shaped)",
    "frontier": "best METRIC at ≥ TARGET through search",
    "latency": "TTFT / TPOT / end-to-end latency at real load",
    "middle": "single points at 8–256 requests per replica",
    "other": "anything else",
}


MAX_ROWS = 1000  # rows in the tables of one run: the shipped ones have 25; each costs a model


@attrs.frozen
class RowSpec:
    """One ``[[row]]`` of a validation table, as written."""

    id: str = option("a unique identifier")
    row_class: str = option("the regime the row tests", choices=tuple(CLASSES))
    scenario: str = option("a scenario: catalog name, or a path relative to the table")
    metric: str = option("the metric predicted, e.g. tokens_per_s_per_gpu")
    measured: str = option('the published value with its unit, e.g. "5393 tokens/s"')
    source: str = option("the publication: title and section")
    url: str = option("where it is published")
    set: tuple[str, ...] = option("--set overrides on the scenario", default=())
    divide_by: float = option(
        "the figure covers this many of the metric's units (8: a per-node figure of a "
        "per-GPU metric)",
        default=1.0,
    )
    fill_memory: bool = option(
        "the engine sized its batch to fill memory: workload.concurrency becomes the largest "
        "at which the configuration fits (searched by stepwall)",
        default=False,
    )
    date: str = option("when it was published (YYYY-MM or YYYY-MM-DD)", default="")
    evidence: str = option("the quoted figure as printed (25 words or fewer)", default="")
    notes: str = option("what the spec cannot express, and interpretations", default="")


@attrs.frozen
class TableSpec:
    """A validation table file."""

    description: str = option("what the rows are", default="")
    row: tuple[dict[str, Any], ...] = option("the rows ([[row]] tables)", default=())


@attrs.frozen
class Row:
    spec: RowSpec
    origin: Path  # the table file
    index: int  # its position in the file
    scenario: Path
    measured: float  # SI, per unit of the metric

    @property
    def where(self) -> str:
        return f"{self.origin}:row[{self.index}]"


@attrs.frozen
class Result:
    row: Row
    predicted: float  # SI; NaN where the configuration is infeasible
    infeasible: str = ""  # the first violated constraint, if any
    concurrency: int | None = None  # the batch found by fill_memory
    model: Any = attrs.field(default=None, eq=False, repr=False)  # the row's StepModel

    @property
    def error(self) -> float:
        """predicted / measured − 1 (NaN where infeasible)."""
        return self.predicted / self.row.measured - 1.0


def default_tables() -> list[Path]:
    """The shipped tables: ``specs/validation/*.toml``, in name order."""
    return sorted((catalog_root() / "validation").glob("*.toml"))


def load_rows(paths: Iterable[Path]) -> list[Row]:
    """Read and check every row of the tables (ids unique across them); a bad row is a
    one-line `SpecError` naming the file, the row and the key.

    Stays whole: the checks of each row in the order their errors are reported, sharing the ids
    seen across the tables.
    """
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for path in paths:
        where = str(path)
        doc = read_toml(path)
        raw = {k: v for k, v in doc.items() if k in ("description", "row")}
        for k in doc:
            if k not in raw:
                raise SpecError(where, k, "unknown key", "description or [[row]] tables")
        listed = raw.get("row", [])
        if not isinstance(listed, list) or not listed:
            problem = "no rows" if listed == [] else f"{listed!r} is not a list of tables"
            raise SpecError(where, "row", problem, "[[row]] tables, each a published measurement")
        if len(rows) + len(listed) > MAX_ROWS:  # each row builds and evaluates a model
            raise SpecError(where, f"row[{MAX_ROWS - len(rows)}]", f"more than {MAX_ROWS:,} rows "
                            "in the tables", f"at most {MAX_ROWS:,} measurements")  # fmt: skip
        table: TableSpec = structure_options(TableSpec, raw, where)
        for i, given in enumerate(table.row):
            at = f"row[{i}]."
            if not isinstance(given, dict):
                raise SpecError(where, f"row[{i}]", "not a table", "[[row]] tables")
            named = {("row_class" if k == "class" else k): v for k, v in given.items()}
            if "row_class" in given:
                raise SpecError(where, at + "row_class", "unknown key", "class")
            try:
                spec: RowSpec = structure_options(RowSpec, named, where, at)
            except SpecError as e:  # the file says `class`, as the errors must
                said = [x.replace("row_class", "class") for x in (e.key, e.problem, e.expected)]
                raise SpecError(where, *said, why=e.why) from None
            for key in ("id", "source", "url"):
                if not getattr(spec, key).strip():
                    raise SpecError(where, at + key, "is empty", _expected(key))
            if spec.date and not re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", spec.date):
                raise SpecError(where, at + "date", f"{spec.date!r} is not a date",
                                _expected("date"))  # fmt: skip
            keys = [a.partition("=")[0].strip() for a in spec.set]
            twice = first_repeat(keys)
            if twice is not None:
                raise SpecError(where, at + "set", f"{twice} is set twice", "each key once")
            if spec.id in seen:
                raise SpecError(where, at + "id", f"{spec.id!r} is also {seen[spec.id]}",
                                "a unique identifier")  # fmt: skip
            seen[spec.id] = f"{where}:row[{i}]"
            scenario = find_spec_file(spec.scenario, "scenarios", where=where,
                                      key=at + "scenario", base=path.parent)  # fmt: skip
            rows.append(Row(spec, path, i, scenario, _measured(spec, where, at)))
    return rows


def _expected(key: str) -> str:
    """What a row's ``key`` holds, from its declaration."""
    return str(attrs.fields_dict(RowSpec)[key].metadata.get("doc", "a value"))


def _measured(spec: RowSpec, where: str, at: str) -> float:
    if spec.metric not in METRICS and not spec.metric.startswith(("term.", "group.")):
        raise SpecError(where, at + "metric", f"unknown metric {spec.metric!r}"
                        f"{did_you_mean(spec.metric, METRICS)}",
                        "a metric such as tokens_per_s_per_gpu")  # fmt: skip
    unit = metric_unit(spec.metric)
    try:
        value, dim = parse_quantity(spec.measured)
        _, want = parse_unit(unit)
    except UnitError as e:
        raise SpecError(where, at + "measured", str(e), 'a value and unit, e.g. "5393 tokens/s"'
                        ) from None  # fmt: skip
    if dim != want:
        raise SpecError(where, at + "measured", f"{spec.measured!r} is not a {want} quantity",
                        f"a value in {unit or 'no unit'}, as {spec.metric} is")  # fmt: skip
    if not math.isfinite(value) or value <= 0:
        what = "positive" if math.isfinite(value) else "a finite number"
        raise SpecError(where, at + "measured", f"{spec.measured!r} is not {what}",
                        "a positive measured value")  # fmt: skip
    if not math.isfinite(spec.divide_by) or spec.divide_by <= 0:
        raise SpecError(where, at + "divide_by", f"{spec.divide_by} is not positive",
                        "a positive number")  # fmt: skip
    return value / spec.divide_by


def predict(
    rows: Sequence[Row],
    registry: Registry | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """Build each row's model (shapes are shared, so a table costs a few builds) and read
    its metric; ``progress(done, total)`` after each row."""
    registry = registry or registries.default()
    out: list[Result] = []
    for row in rows:
        try:
            model = build_model(row.scenario, row.spec.set, registry)
        except SpecError as e:
            given = e.where == "--set"  # one of the row's overrides
            loc = e.key if given else f"{e.where}:{e.key}" if e.key else e.where
            raise SpecError(str(row.origin), f"row[{row.index}]" + (".set" if given else ""),
                            f"{loc}: {e.problem}", e.expected) from None  # fmt: skip
        names = metric_names(model)
        if row.spec.metric not in names:
            raise SpecError(str(row.origin), f"row[{row.index}].metric",
                            f"unknown metric {row.spec.metric!r}"
                            f"{did_you_mean(row.spec.metric, names)}",
                            "a metric such as tokens_per_s_per_gpu")  # fmt: skip
        overrides = {}
        filled = None
        if row.spec.fill_memory:
            users = model.provides["users"]  # the workload's users per replica
            filled = largest_feasible(model, users)
            overrides[users] = filled
        ev = model.evaluate(overrides)
        value = float(np.asarray(pick(model, ev, row.spec.metric), dtype=float))
        broken = model.violations(ev)
        if broken and row.spec.metric not in DIAGNOSTIC_METRICS:
            out.append(Result(row, math.nan, broken[0].line, filled, model))
        else:
            out.append(Result(row, value, "", filled, model))
        if progress:
            progress(len(out), len(rows))
    return out


def largest_feasible(model: Any, key: str, limit: int = 1 << 22) -> int:
    """The largest whole value of ``key`` at which every constraint holds (1 if none does),
    by doubling then bisection: feasibility falls once as the value grows (memory)."""

    def ok(v: int) -> bool:
        return bool(np.all(model.evaluate({key: v})["feasible"]))

    if not ok(1):
        return 1
    lo, hi = 1, 2
    while hi < limit and ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Median and worst |error| over all rows and per class. An infeasible row has no
    prediction: it is counted (``infeasible``) and left out of the median and the worst,
    which are NaN where no row is feasible."""

    def stats(rs: Sequence[Result]) -> dict[str, Any]:
        ok = [r for r in rs if r.infeasible == ""]
        errs = [abs(r.error) for r in ok]
        worst = max(range(len(ok)), key=lambda i: errs[i], default=None)
        return {
            "rows": len(rs),
            "infeasible": len(rs) - len(ok),
            "median_abs_error": float(np.median(errs)) if errs else math.nan,
            "worst_abs_error": math.nan if worst is None else errs[worst],
            "worst_row": "" if worst is None else ok[worst].row.spec.id,
            "within_15pct": sum(e <= 0.15 for e in errs),
        }

    classes = sorted({r.row.spec.row_class for r in results}, key=list(CLASSES).index)
    return {
        **stats(results),
        "classes": {c: stats([r for r in results if r.row.spec.row_class == c]) for c in classes},
    }


def document(results: Sequence[Result]) -> dict[str, Any]:
    """The JSON document of ``stepwall validate --json``."""
    return {
        "rows": [
            {
                "id": r.row.spec.id,
                "class": r.row.spec.row_class,
                "scenario": r.row.spec.scenario,
                "set": list(r.row.spec.set),
                "metric": r.row.spec.metric,
                "unit": metric_unit(r.row.spec.metric),
                "measured": r.row.measured,
                "predicted": None if r.infeasible else r.predicted,
                "error": None if r.infeasible else r.error,
                "infeasible": r.infeasible or None,
                "filled_concurrency": r.concurrency,
                "source": r.row.spec.source,
                "url": r.row.spec.url,
                "date": r.row.spec.date,
                "table": str(r.row.origin),
            }
            for r in results
        ],
        "summary": summary(results),
    }


def fmt_error(r: Result) -> str:
    return "infeasible" if r.infeasible else f"{r.error:+.1%}"


def fmt_value(v: float) -> str:
    if not math.isfinite(v):
        return "—"
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def text(results: Sequence[Result]) -> str:
    """The table ``stepwall validate`` prints: each row, then the summary."""
    head = ("id", "class", "metric", "measured", "predicted", "error")
    body = [
        (r.row.spec.id, r.row.spec.row_class, r.row.spec.metric, fmt_value(r.row.measured),
         fmt_value(r.predicted), fmt_error(r))
        for r in results
    ]  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    right = {3, 4, 5}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body), ""]
    s = summary(results)
    out.append(_summary_line("all", s))
    for c, cs in s["classes"].items():
        out.append(_summary_line(c, cs))
    for r in results:
        if r.concurrency is not None:
            out.append(f"{r.row.spec.id}: batch that fills memory: {r.concurrency} per replica")
    for r in results:
        if r.infeasible:
            out.append(f"{r.row.spec.id}: infeasible ({r.infeasible})")
    if s["infeasible"]:
        many = s["infeasible"] > 1
        out.append(f"{s['infeasible']} infeasible row{'s have' if many else ' has'} no "
                   "prediction: left out of the median, the worst and within 15%")  # fmt: skip
    return "\n".join(out) + "\n"


def _summary_line(name: str, s: dict[str, Any]) -> str:
    median, worst = s["median_abs_error"], s["worst_abs_error"]
    if not math.isfinite(worst):
        return f"{name:<11} {s['rows']:>3} rows  none feasible"
    return (
        f"{name:<11} {s['rows']:>3} rows  median |error| {median:.1%}  "
        f"worst {worst:.1%} ({s['worst_row']})  within 15%: {s['within_15pct']}"
        + (f"  infeasible: {s['infeasible']}" if s["infeasible"] else "")
    )


__all__ = [
    "CLASSES",
    "Result",
    "Row",
    "RowSpec",
    "default_tables",
    "document",
    "largest_feasible",
    "load_rows",
    "metric_unit",
    "predict",
    "summary",
    "text",
]
