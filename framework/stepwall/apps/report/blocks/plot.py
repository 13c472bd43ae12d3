"""Block ``plot``: an SVG figure: step-time breakdown by term group, a metric against a key
(with derived points marked), speed per user against throughput per GPU, or the tornado of a
``tornado`` derivation (by id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps.report.placeholders import fill, unit_scale
from stepwall.apps.report.plots import (
    plot_breakdown,
    plot_latency_throughput,
    plot_metric_vs_key,
    plot_tornado,
)
from stepwall.apps.report.render import sweep_value
from stepwall.apps.sweep import metric_names
from stepwall.core.options import option
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report

PLOTS = ("breakdown", "metric_vs_key", "latency_throughput", "tornado")
GROUP_ORDER = ("moe", "dense", "attention", "comm", "base", "spec")


@attrs.frozen
class PlotOptions:
    id: str = option("an identifier: the SVG file's name")
    plot: str = option("what to draw", choices=PLOTS)
    scenarios: tuple[str, ...] = option("the aliases drawn", default=())
    scenario: str = option("one alias (instead of scenarios)", default="")
    labels: tuple[str, ...] = option("one label per alias", default=())
    key: str = option("the key along the x axis", default="")
    values: tuple[Any, ...] = option("the key's values", default=())
    metric: str = option("metric_vs_key: the metric on the y axis", default="")
    unit: str = option("its unit", default="")
    mark: tuple[str, ...] = option("derivations marked as vertical lines (by id)", default=())
    logx: bool = option("a logarithmic x axis", default=False)
    title: str = option("the figure's title", default="")
    xlabel: str = option("the x axis label (default: the key)", default="")
    ylabel: str = option("the y axis label (default: the metric)", default="")
    caption: str = option("shown under the figure", default="")
    derivation: str = option("tornado: the id of the tornado derivation drawn", default="")


def compute(report: Report, o: PlotOptions, at: str) -> bytes | None:
    """The figure, where it depends only on the models and the block's options (no marked
    derivations, no placeholders in its title); None where it needs other blocks."""
    if o.plot == "tornado" or o.mark or "{" in o.title:
        return None
    return _figure(report, o, at)


def render(report: Report, o: PlotOptions, at: str) -> list[str]:
    report.claim(o.id, at + "id")
    if o.plot == "tornado":
        return _tornado(report, o, at)
    svg = report.computed(at, lambda: None) or _figure(report, o, at)
    title = fill(o.title, report.ns, report.where, at + "title")
    report.outputs[f"{o.id}.svg"] = svg
    lines = [f"![{title or o.id}]({o.id}.svg)"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


def _figure(report: Report, o: PlotOptions, at: str) -> bytes:
    """The SVG of a plot block: a time breakdown, a metric against a key, or throughput against
    interactivity.

    Stays whole: one case per plot kind, after the scenario and label checks the three share.
    """
    aliases = list(o.scenarios or ([o.scenario] if o.scenario else []))
    if not aliases:
        raise report.err(at + "scenarios", "missing", "a list of aliases")
    for a in aliases:
        report.alias(a, at + "scenarios")
    labels = list(o.labels or [report.label(a) for a in aliases])
    if len(labels) != len(aliases):
        raise report.err(at + "labels", f"{len(labels)} labels for {len(aliases)} scenarios",
                         "one label per scenario")  # fmt: skip
    title = fill(o.title, report.ns, report.where, at + "title")
    key, values = o.key or None, list(o.values)
    if o.plot == "breakdown":
        groups = sorted(
            {t.group for a in aliases for t in report.alias(a, at + "scenarios").terms},
            key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else 99, g),
        )
        names = [f"group.{g}" for g in groups]
        bars, stacks = [], []
        for a, lab in zip(aliases, labels, strict=True):
            present = [n for n in names if n in metric_names(report.alias(a, at + "scenarios"))]
            if key:
                data = report.series(a, key, values, present, at + "key")
                for j, v in enumerate(values):
                    bars.append(f"{lab}\n{key.split('.')[-1]}={v}")
                    stacks.append([float(data[n][j]) * 1e3 if n in data else 0.0 for n in names])
            else:
                data = report.series(a, None, [], present, at)
                bars.append(lab)
                stacks.append([float(data[n][0]) * 1e3 if n in data else 0.0 for n in names])
        svg = plot_breakdown(bars, groups, stacks, title)
    elif o.plot == "metric_vs_key":
        if not o.metric:
            raise report.err(at + "metric", "missing", "a metric")
        lines_ = []
        for a, lab in zip(aliases, labels, strict=True):
            report.metric(report.alias(a, at + "scenarios"), o.metric, at + "metric")
            scale = unit_scale(o.unit, o.metric, report.where, at + "unit")
            data = report.series(a, key, values, [o.metric], at + "key")
            lines_.append((lab, [float(x) / scale for x in data[o.metric]]))
        marks = []
        for m in o.mark:
            ref = f"{m}.value" if "." not in m else m
            marks.append((m.split(".")[0], float(report.ns.get(ref, report.where, at + "mark"))))
        ylabel = o.ylabel or o.metric
        ylabel = f"{ylabel} [{o.unit}]" if o.unit else ylabel
        xs = [float(sweep_value(v)) for v in values]
        if o.logx and min(xs) <= 0:  # a log axis would drop the point, not show it
            raise report.err(at + "logx", f"the values include {min(xs):g}, not > 0",
                             "values > 0 on a logarithmic axis, or logx = false")  # fmt: skip
        svg = plot_metric_vs_key(
            xs, lines_, marks, o.xlabel or key or "",
            ylabel, title, o.logx,
        )  # fmt: skip
    else:
        pts = []
        for a, lab in zip(aliases, labels, strict=True):
            data = report.series(
                a, key, values, ["tokens_per_s_per_gpu", "tokens_per_s_per_user"], at + "key"
            )
            pts.append((lab, list(data["tokens_per_s_per_gpu"]),
                        list(data["tokens_per_s_per_user"]), [str(v) for v in values]))  # fmt: skip
        svg = plot_latency_throughput(pts, title, o.xlabel or key or "")
    return svg


def _tornado(report: Report, o: PlotOptions, at: str) -> list[str]:
    """The bars of a tornado derivation (by id): the metric at each input's low and high
    end, in the block's unit."""

    results = report.derivations.get(o.derivation)
    if not isinstance(results, list) or not results or results[0].kind != "tornado":
        raise report.err(at + "derivation", f"{o.derivation!r} is not a tornado derivation",
                         "the id of a derivation block with derive = \"tornado\"")  # fmt: skip
    d0 = results[0].details
    scale = unit_scale(o.unit, d0["metric"], report.where, at + "unit")
    bars = [(d.key, d.details["value_at_low"] / scale, d.details["value_at_high"] / scale)
            for d in results if d.value]  # fmt: skip
    title = fill(o.title, report.ns, report.where, at + "title")
    label = o.xlabel or d0["metric"]
    svg = plot_tornado(bars, d0["metric_value"] / scale,
                       f"{label} [{o.unit}]" if o.unit else label, title)  # fmt: skip
    report.outputs[f"{o.id}.svg"] = svg
    lines = [f"![{title or o.id}]({o.id}.svg)"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


BLOCK = BlockKind("plot", "an SVG figure: breakdown, metric against a key, speed against "
                  "throughput, or a tornado of ranged inputs", PlotOptions, render,
                  compute=compute)  # fmt: skip
