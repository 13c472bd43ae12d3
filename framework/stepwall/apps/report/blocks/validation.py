"""Block ``validation``: predictions against a validation table (``stepwall validate``): the
summary per class, the band coverage, each row with its source and band, the frontier rows'
best configurations and ranking groups, a predicted-vs-measured plot (log-log, with a band), a
frontier plot per GPU (``ID-frontier-GPU.svg``) and a CSV. Its summary is published to
placeholders as ``ID.median_abs_error``, ``ID.worst_abs_error``, ``ID.rows``, ``ID.within``,
per class as ``ID.CLASS.…``, and ``ID.coverage`` (the fraction inside their bands),
``ID.banded``, ``ID.inside``."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps import validate
from stepwall.apps.report.placeholders import csv_number, fill
from stepwall.apps.report.plots import Curve, plot_frontier_band, plot_predicted_vs_measured
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
        if r.model is not None:
            report.track(r.model)
        else:  # a frontier row: its searches' models are compiled, not built
            report.files.add(r.row.scenario.resolve())
    s = validate.summary(results)

    def publish(prefix: str, st: dict[str, Any]) -> None:
        for k in ("median_abs_error", "worst_abs_error", "rows"):
            report.ns.scalars[f"{prefix}.{k}"] = float(st[k])
        report.ns.scalars[f"{prefix}.within"] = float(st["within_15pct"])
        report.ns.scalars[f"{prefix}.worst_row"] = st["worst_row"]

    publish(o.id, s)
    for c, cs in s["classes"].items():
        publish(f"{o.id}.{c}", cs)
    cov = s["coverage"]
    for k in ("banded", "inside"):
        report.ns.scalars[f"{o.id}.{k}"] = float(cov[k])
    report.ns.scalars[f"{o.id}.coverage"] = float(cov["fraction"])

    def pct(v: float) -> str:
        return "infeasible" if not math.isfinite(v) else f"{v:.1%}"

    lines = ["| class | rows | median \\|error\\| | worst \\|error\\| | within 15% |",
             "|:---|---:|---:|---:|---:|"]  # fmt: skip
    for c, cs in [*s["classes"].items(), ("all", s)]:
        name = "**all**" if c == "all" else f"{c} ({validate.CLASSES[c]})"
        lines.append(f"| {name} | {cs['rows']} | {pct(cs['median_abs_error'])} | "
                     f"{pct(cs['worst_abs_error'])} | {cs['within_15pct']} |")  # fmt: skip
    lines += ["", _coverage(cov)]
    lines += ["", "| row | class | scenario | metric | measured | predicted | error | band | "
              "source |", "|:---|:---|:---|:---|---:|---:|---:|---:|:---|"]  # fmt: skip
    for r in results:
        unit, scale = _per_unit(r.row.spec.metric)
        sets = "".join(f" `{x}`" for x in r.row.spec.set)
        filled = f" (batch {r.concurrency}: fills memory)" if r.concurrency is not None else ""
        target = f" at `{r.row.spec.at}`" if r.row.spec.at else ""
        date = f", {r.row.spec.date}" if r.row.spec.date else ""
        lines.append(
            f"| {r.row.spec.id} | {r.row.spec.row_class} | `{r.row.spec.scenario}`{sets}{filled}"
            f"{target} | {r.row.spec.metric} | {validate.fmt_value(r.row.measured * scale)} "
            f"{unit} | {validate.fmt_value(r.predicted * scale)} | {validate.fmt_error(r)} | "
            f"{_band(r, scale)} | [{r.row.spec.source}]({r.row.spec.url}){date} |"
        )
    lines += _frontier(report, o.id, results, s["rankings"])
    lines += _disagg(results, s["splits"])
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
                "error", "band_low", "band_high", "inside_band", "at", "chosen",
                "deployed", "picked", "filled_concurrency", "source", "url", "date"])  # fmt: skip
    for r in results:
        ends = ("", "") if r.band is None or r.infeasible else tuple(map(csv_number, r.band))
        w.writerow([r.row.spec.id, r.row.spec.row_class, r.row.spec.scenario,
                    " ".join(r.row.spec.set), r.row.spec.metric,
                    validate.metric_unit(r.row.spec.metric), csv_number(r.row.measured),
                    "infeasible" if r.infeasible else csv_number(r.predicted),
                    "" if r.infeasible else csv_number(r.error), *ends,
                    "" if r.inside is None else str(r.inside).lower(), r.row.spec.at,
                    r.chosen, _split(r.row.deployed), _split(None if r.infeasible else r.split),
                    "" if r.concurrency is None else r.concurrency,
                    r.row.spec.source, r.row.spec.url, r.row.spec.date])  # fmt: skip
    report.outputs[f"{o.id}.csv"] = buf.getvalue().encode()
    return lines


def _split(gpus: tuple[int, int] | None) -> str:
    return "" if gpus is None else f"{gpus[0]}:{gpus[1]}"


def _band(r: validate.Result, scale: float) -> str:
    """A row's band in the table's unit (bold where the measurement lies inside); "—"."""
    if r.band is None or r.infeasible:
        return "—"
    text = f"{validate.fmt_value(r.band[0] * scale)}–{validate.fmt_value(r.band[1] * scale)}"
    return f"**{text}**" if r.inside else text


def _coverage(c: dict[str, Any]) -> str:
    if not c["banded"]:
        return f"Band coverage: no row has a band ({c['unbanded']} rows have no ranged input)."
    rest = f"; {c['unbanded']} rows have no ranged input" if c["unbanded"] else ""
    return (f"Band coverage: **{c['inside']} of {c['banded']}** measurements lie inside their "
            f"band ({c['fraction']:.0%}; bold in the table){rest}.")  # fmt: skip


def _disagg(results: list[validate.Result], splits: dict[str, Any]) -> list[str]:
    """The disagg rows' deployments: the prefill and decode GPUs the search picks against
    the deployed ones, and how many ratios fall within the factor; nothing without them."""
    rows = [r for r in results if r.row.deployed is not None]
    if not rows:
        return []
    lines = ["", f"P/D rows: the deployment `search --disagg` picks at each target within the "
             f"deployed GPUs; **{splits['within']} of {splits['rows']}** prefill:decode GPU "
             f"ratios lie within ×{splits['factor']:g} of the deployed one's.", "",
             "| row | target | deployed P:D | picked | ratio × | deployment |",
             "|:---|:---|---:|---:|---:|:---|"]  # fmt: skip
    for r in rows:
        dep = r.row.deployed
        assert dep is not None
        factor = r.ratio_factor
        picked = "—" if r.split is None or r.infeasible else f"{r.split[0]}:{r.split[1]}"
        ratio = "—" if factor is None else f"{factor:.2f}"
        lines.append(f"| {r.row.spec.id} | `{r.row.spec.at}` | {dep[0]}:{dep[1]} | {picked} | "
                     f"{ratio} | {r.chosen or r.infeasible} |")  # fmt: skip
    return lines


def _frontier(
    report: Report, block: str, results: list[validate.Result], ranks: list[dict[str, Any]]
) -> list[str]:
    """The frontier rows' best configurations, the ranking groups, and a frontier plot per
    GPU (each search's predicted frontier with its band, the measured bests at their
    targets); nothing without frontier rows."""
    rows = [r for r in results if r.run is not None]
    if not rows:
        return []
    lines = ["", "Frontier rows: the best configuration stepwall finds at each target, and what "
             "binds it.", "", "| row | target | best configuration |",
             "|:---|:---|:---|"]  # fmt: skip
    lines += [f"| {r.row.spec.id} | `{r.row.spec.at}` | {r.chosen or r.infeasible} |" for r in rows]
    if ranks:
        lines += ["", "Ranking groups (best first):", ""]
        lines += [f"- **{g['group']}** at `{g['at']}`: {'match' if g['match'] else 'mismatch'};"
                  f" measured {' > '.join(g['measured'])}; predicted "
                  f"{' > '.join(g['predicted'])}" for g in ranks]  # fmt: skip
    by_gpu: dict[str, list[validate.Result]] = {}
    for r in rows:
        assert r.run is not None
        by_gpu.setdefault(Path(r.run.hardware).stem, []).append(r)
    for gpu, rs in sorted(by_gpu.items()):
        name = f"{block}-frontier-{gpu}.svg"
        report.outputs[name] = _frontier_plot(rs, f"{gpu}: predicted frontiers and measured bests")
        lines += ["", f"![{gpu} frontiers]({name})"]
    return lines


def _frontier_plot(rows: list[validate.Result], title: str) -> bytes:
    runs = list(dict.fromkeys(r.run for r in rows if r.run is not None))
    curves: list[tuple[Curve, Curve | None, Curve | None]] = []
    for run in runs:
        spec = run.result.plan.spec

        def curve(res: Any, label: str, x: str = spec.x, y: str = spec.y) -> Curve:
            pts = sorted((p[x], p[y]) for p in res.frontier if None not in (p[x], p[y]))
            return label, [a for a, _ in pts], [b for _, b in pts]

        ends = [curve(e, "") for e in run.ends] if run.ends is not None else [None, None]
        curves.append((curve(run.result, run.label), ends[0], ends[1]))
    measured = [(runs.index(r.run), r.row.target.value, r.row.measured) for r in rows
                if r.run is not None and r.row.target is not None]  # fmt: skip
    spec = runs[0].result.plan.spec
    return plot_frontier_band(curves, measured, _axis(spec.x), _axis(spec.y), title)


def _axis(metric: str) -> str:
    unit = metric_unit(metric)
    return f"{metric} [{unit}]" if unit else metric


BLOCK = BlockKind(
    "validation", "predictions against published measurements: per-class summary, rows, a "
    "predicted-vs-measured plot and a CSV", ValidationOptions, render, early=True,
)  # fmt: skip

__all__ = ["BLOCK"]
