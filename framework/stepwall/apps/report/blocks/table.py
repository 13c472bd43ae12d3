"""Block ``table``: metrics of scenarios along a key, or of several scenarios, as a Markdown
table and a CSV file (cells of infeasible configurations say so)."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps.report.placeholders import Infeasible, csv_number, fill, formatted, unit_scale
from stepwall.apps.report.render import FEASIBLE, VIOLATION, reason
from stepwall.core.errors import first_repeat
from stepwall.core.options import option
from stepwall.core.terminal import visible
from stepwall.model.metrics import DIAGNOSTIC_METRICS
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report

INFEASIBLE = "infeasible"
AXIS_KEYS = ("key", "values", "scenarios", "metrics", "labels", "label", "units", "formats")
MAX_ENTRIES = 1000  # rows or columns of one table: a page shows a few dozen


def _list(report: Report, spec: dict[str, Any], name: str, at: str) -> list[Any]:
    """``spec[name]``: a non-empty list of at most `MAX_ENTRIES` entries."""
    value = spec[name]
    if not isinstance(value, list) or not value:
        raise report.err(f"{at}.{name}", f"{value!r} is not a non-empty list",
                         f"[…] with 1 to {MAX_ENTRIES} entries")  # fmt: skip
    if len(value) > MAX_ENTRIES:
        raise report.err(f"{at}.{name}", f"{len(value):,} entries",
                         f"at most {MAX_ENTRIES} rows or columns in one table")  # fmt: skip
    return value


@attrs.frozen
class TableOptions:
    id: str = option("an identifier: the CSV file and what placeholders call the table")
    rows: dict[str, Any] = option(
        "an axis: { scenarios = [...] }, { key = …, values = [...], label = 'TP-{value}' } or "
        "{ metrics = [...], units = [...], formats = [...] }"
    )
    columns: dict[str, Any] = option("an axis, as rows")
    title: str = option("shown above the table", default="")
    scenario: str = option("the alias when no axis names scenarios", default="")
    metric: str = option("the metric when no axis names metrics", default="")
    unit: str = option("the unit of the cells (of the metric's dimension)", default="")
    format: str = option("a Python format for the cells, e.g. .1f", default="")
    caption: str = option("shown under the table", default="")
    corner: str = option("the top-left cell", default="")


def _axis(report: Report, spec: Any, at: str) -> list[dict[str, Any]]:
    """An axis: scenarios (aliases), values of a key, or metrics -> labelled entries.

    Stays whole: one case per axis kind (scenarios, values of a key, metrics), then the label
    checks they share.
    """
    if not isinstance(spec, dict):
        axes = "{ key = …, values = […] }, { scenarios = […] } or { metrics = […] }"
        raise report.err(at, "not a table", axes)
    for k in spec:
        if k not in AXIS_KEYS:
            raise report.err(f"{at}.{k}", "unknown key", f"one of: {', '.join(AXIS_KEYS)}")
    labels = _list(report, spec, "labels", at) if "labels" in spec else None
    out: list[dict[str, Any]] = []
    if "scenarios" in spec:
        names = _list(report, spec, "scenarios", at)
        for a in names:
            report.alias(a, at + ".scenarios")
        labels = labels or [report.label(a) for a in names]
        out = [{"alias": a} for a in names]
        for extra in ("metrics", "units", "formats"):
            if extra in spec:
                if len(_list(report, spec, extra, at)) != len(out):
                    raise report.err(f"{at}.{extra}", f"{len(spec[extra])} entries for "
                                     f"{len(out)} scenarios", "one per scenario")  # fmt: skip
                for entry, v in zip(out, spec[extra], strict=True):
                    entry[extra[:-1]] = v
    elif "key" in spec:
        if "values" not in spec:
            raise report.err(at + ".values", "missing", "a list of values")
        values = _list(report, spec, "values", at)
        tmpl = spec.get("label", "{value}")
        if not isinstance(tmpl, str):
            raise report.err(at + ".label", f"{tmpl!r} is not text", "e.g. 'TP-{value}'")
        labels = labels or [tmpl.replace("{value}", str(v)) for v in values]
        out = [{"key": spec["key"], "value": v} for v in values]
    elif "metrics" in spec:
        ms = _list(report, spec, "metrics", at)
        units = _list(report, spec, "units", at) if "units" in spec else [""] * len(ms)
        formats = _list(report, spec, "formats", at) if "formats" in spec else [""] * len(ms)
        for extra, given in (("units", units), ("formats", formats)):
            if len(given) != len(ms):
                raise report.err(f"{at}.{extra}", f"{len(given)} entries for {len(ms)} metrics",
                                 "one per metric")  # fmt: skip
        labels = labels or ms
        out = [
            {"metric": m, "unit": u, "format": f}
            for m, u, f in zip(ms, units, formats, strict=True)
        ]
    else:
        raise report.err(at, "names no scenarios, key or metrics",
                         "scenarios = […], key + values, or metrics = […]")  # fmt: skip
    if len(labels) != len(out):
        raise report.err(at + ".labels", f"{len(labels)} labels for {len(out)} entries",
                         "one label per entry")  # fmt: skip
    for entry, label in zip(out, labels, strict=True):
        entry["label"] = str(label)
    shown = [e["label"] for e in out]
    twice = first_repeat(shown)
    if twice is not None:  # placeholders and the CSV find a cell by its labels
        raise report.err(at, f"the label {twice!r} appears twice", "one entry per label")
    return out


def _unit_suffix(col: dict[str, Any]) -> str:
    return f" [{col['unit']}]" if "metric" in col and col.get("unit") else ""


def render(report: Report, o: TableOptions, at: str) -> list[str]:
    """A table block: one cell per row and column entry, its markdown and its CSV.

    Stays whole: the sweeps gathered in the first pass over the cells are read in the second,
    and both passes share `cell`.
    """
    report.claim(o.id, at + "id")
    rows = _axis(report, o.rows, at + "rows")
    cols = _axis(report, o.columns, at + "columns")
    base = {"scenario": o.scenario, "metric": o.metric, "unit": o.unit, "format": o.format}
    grid: dict[str, dict[str, Any]] = {r["label"]: {} for r in rows}
    shown: dict[str, dict[str, str]] = {r["label"]: {} for r in rows}
    reasons: dict[str, str] = {}  # row -> the first constraint that fails in it

    def cell(r: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
        return {**base, **{k: v for k, v in {**r, **c}.items() if k != "label"}}

    # each (alias, key) pair is one vectorized sweep over all the values it needs
    need: dict[tuple[Any, Any], tuple[list[Any], list[str]]] = {}
    for c in cols:
        for r in rows:
            x = cell(r, c)
            alias = x.get("alias") or x["scenario"]
            model = report.alias(alias, at + "scenario")
            metric = report.metric(model, x.get("metric"), at + "metric")
            formatted(1.0, x.get("format") or "", report.where, at + "format")  # before the work
            vals, ms = need.setdefault((alias, x.get("key")), ([], []))
            if x.get("key") and x["value"] not in vals:
                vals.append(x["value"])
            if metric not in ms:
                ms.append(metric)
    for (alias, key), (vals, ms) in need.items():
        report.series(alias, key, vals, ms, at + "rows")
    for c in cols:
        for r in rows:
            x = cell(r, c)
            alias = x.get("alias") or x["scenario"]
            model = report.models[alias]
            metric = x["metric"]
            scale = unit_scale(x.get("unit") or "", metric, report.where, at + "unit")
            key = x.get("key")
            allv, allm = need[(alias, key)]
            data = report.series(alias, key, allv, allm, at + "rows")
            j = allv.index(x["value"]) if key else 0
            v = float(data[metric][j]) / scale
            grid[r["label"]][c["label"]] = v
            if not data[FEASIBLE][j]:
                reasons.setdefault(r["label"], reason(model, str(data[VIOLATION][j])))
                if metric not in DIAGNOSTIC_METRICS:
                    shown[r["label"]][c["label"]] = INFEASIBLE
                    grid[r["label"]][c["label"]] = Infeasible(
                        f"{o.id}[{r['label']!r}][{c['label']!r}] is infeasible "
                        f"({reasons[r['label']]})"
                    )
                    continue
            shown[r["label"]][c["label"]] = formatted(v, x.get("format") or "", report.where,
                                                      at + "format")  # fmt: skip
    report.ns.tables[o.id] = grid
    head = [o.corner, *(c["label"] + _unit_suffix(c) for c in cols)]
    lines = []
    if o.title:
        lines += [f"**{fill(o.title, report.ns, report.where, at + 'title')}**", ""]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join([":---"] + ["---:"] * len(cols)) + "|")
    for r in rows:
        lines.append("| " + " | ".join([r["label"], *shown[r["label"]].values()]) + " |")
    for label, why in reasons.items():
        lines += ["", f"Infeasible ({label}): {why}"]
    lines += ["", f"Data: [{o.id}.csv]({o.id}.csv)"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([visible(h) for h in head])
    for r in rows:
        cells = shown[r["label"]]
        w.writerow([
            visible(r["label"]),
            *(INFEASIBLE if cells[c["label"]] == INFEASIBLE
              else csv_number(grid[r["label"]][c["label"]]) for c in cols),
        ])  # fmt: skip
    report.outputs[f"{o.id}.csv"] = buf.getvalue().encode()
    return lines


BLOCK = BlockKind(
    "table", "metrics of scenarios along a key, as a table and a CSV file", TableOptions, render,
    early=True,
)  # fmt: skip
