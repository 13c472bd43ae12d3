"""Block ``validation``: predictions against a validation table (``stepwall validate``): the
summary per class, each row with its source, a predicted-vs-measured plot (log-log, with a
band) and a CSV. Its summary is published to placeholders as ``ID.median_abs_error``,
``ID.worst_abs_error``, ``ID.rows``, ``ID.within``, and per class as ``ID.CLASS.…``."""

from __future__ import annotations

import csv
import io
import math
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps import validate
from stepwall.apps.report.placeholders import csv_number, fill
from stepwall.apps.report.plots import plot_predicted_vs_measured
from stepwall.apps.sweep import metric_unit
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report


@attrs.frozen
class ValidationOptions:
    id: str = option("an identifier: the CSV and SVG files and the placeholders' prefix")
    tables: tuple[str, ...] = option(
        "validation tables, relative to the report (default: the shipped specs/validation/)",
        default=(),
    )
    band: float = option("the shaded band around the diagonal, as a fraction", default=0.15)
    title: str = option("the plot's title", default="")
    caption: str = option("shown under the plot", default="")


def _per_unit(metric: str) -> tuple[str, float]:
    """How a metric's values are shown: per-second rates as they are, times in ms."""

    unit = metric_unit(metric)
    return ("ms", 1e3) if unit == "s" else (unit, 1.0)


def render(report: Report, o: ValidationOptions, at: str) -> list[str]:
    """A validation block: the tables' rows predicted, their summary as scalars, two tables, a
    chart and a CSV.

    Stays whole: the lines and the CSV are built in the order the block shows them, from one
    set of results.
    """
    report.claim(o.id, at + "id")
    if not 0 < o.band < 1:
        raise report.err(at + "band", f"{o.band} is not a fraction", "a number in (0, 1)")
    paths = [report.path.parent / t for t in o.tables] or validate.default_tables()
    for p in paths:
        if not p.is_file():
            raise report.err(at + "tables", f"{p} not found", "validation tables (.toml)")
    try:
        results = validate.predict(validate.load_rows(paths), report.registry)
    except SpecError as e:
        raise report.err(at + "tables", f"{e.where}:{e.key}: {e.problem}", e.expected) from None
    report.files |= {p.resolve() for p in paths}
    for r in results:
        report.track(r.model)
    s = validate.summary(results)

    def publish(prefix: str, st: dict[str, Any]) -> None:
        for k in ("median_abs_error", "worst_abs_error", "rows"):
            report.ns.scalars[f"{prefix}.{k}"] = float(st[k])
        report.ns.scalars[f"{prefix}.within"] = float(st["within_15pct"])
        report.ns.scalars[f"{prefix}.worst_row"] = st["worst_row"]

    publish(o.id, s)
    for c, cs in s["classes"].items():
        publish(f"{o.id}.{c}", cs)

    def pct(v: float) -> str:
        return "infeasible" if not math.isfinite(v) else f"{v:.1%}"

    lines = ["| class | rows | median \\|error\\| | worst \\|error\\| | within 15% |",
             "|:---|---:|---:|---:|---:|"]  # fmt: skip
    for c, cs in [*s["classes"].items(), ("all", s)]:
        name = "**all**" if c == "all" else f"{c} ({validate.CLASSES[c]})"
        lines.append(f"| {name} | {cs['rows']} | {pct(cs['median_abs_error'])} | "
                     f"{pct(cs['worst_abs_error'])} | {cs['within_15pct']} |")  # fmt: skip
    lines += ["", "| row | class | scenario | metric | measured | predicted | error | source |",
              "|:---|:---|:---|:---|---:|---:|---:|:---|"]  # fmt: skip
    for r in results:
        unit, scale = _per_unit(r.row.spec.metric)
        sets = "".join(f" `{x}`" for x in r.row.spec.set)
        filled = f" (batch {r.concurrency}: fills memory)" if r.concurrency is not None else ""
        date = f", {r.row.spec.date}" if r.row.spec.date else ""
        lines.append(
            f"| {r.row.spec.id} | {r.row.spec.row_class} | `{r.row.spec.scenario}`{sets}{filled}"
            f" | {r.row.spec.metric} | {validate.fmt_value(r.row.measured * scale)} {unit} | "
            f"{validate.fmt_value(r.predicted * scale)} | {validate.fmt_error(r)} | "
            f"[{r.row.spec.source}]({r.row.spec.url}){date} |"
        )
    notes = [r for r in results if r.row.spec.notes]
    if notes:
        lines += ["", "Notes on each row (what the spec cannot express, and interpretations):", ""]
        lines += [f"- **{r.row.spec.id}**: {r.row.spec.notes}" for r in notes]
    classes = sorted({r.row.spec.row_class for r in results}, key=list(validate.CLASSES).index)
    units = {_per_unit(r.row.spec.metric)[0] for r in results}
    groups = []
    for c in classes:
        rs = [r for r in results if r.row.spec.row_class == c and not r.infeasible]
        groups.append((c, [r.row.measured * _per_unit(r.row.spec.metric)[1] for r in rs],
                       [r.predicted * _per_unit(r.row.spec.metric)[1] for r in rs]))  # fmt: skip
    title = fill(o.title, report.ns, report.where, at + "title")
    unit = units.pop() if len(units) == 1 else "tokens/s, ms"
    report.outputs[f"{o.id}.svg"] = plot_predicted_vs_measured(groups, o.band, title, unit)
    lines += ["", f"![{title or o.id}]({o.id}.svg)"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    lines += ["", f"Data: [{o.id}.csv]({o.id}.csv)"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "class", "scenario", "set", "metric", "unit", "measured", "predicted",
                "error", "filled_concurrency", "source", "url", "date"])  # fmt: skip
    for r in results:
        w.writerow([r.row.spec.id, r.row.spec.row_class, r.row.spec.scenario,
                    " ".join(r.row.spec.set), r.row.spec.metric,
                    validate.metric_unit(r.row.spec.metric), csv_number(r.row.measured),
                    "infeasible" if r.infeasible else csv_number(r.predicted),
                    "" if r.infeasible else csv_number(r.error),
                    "" if r.concurrency is None else r.concurrency, r.row.spec.source,
                    r.row.spec.url, r.row.spec.date])  # fmt: skip
    report.outputs[f"{o.id}.csv"] = buf.getvalue().encode()
    return lines


BLOCK = BlockKind(
    "validation", "predictions against published measurements: per-class summary, rows, a "
    "predicted-vs-measured plot and a CSV", ValidationOptions, render, early=True,
)  # fmt: skip

__all__ = ["BLOCK"]
