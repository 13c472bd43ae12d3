"""Report plots as deterministic SVG: fixed fonts, hash salt and metadata, no timestamps, and
element ids that do not depend on float bits. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

import io
import math
import re
from typing import Any

import numpy as np

_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "svg.hashsalt": "stepwall",
    "svg.fonttype": "none",
    "path.simplify": False,
    "axes.prop_cycle": None,
}
_COLORS = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


def _figure(width: float = 7.0, height: float = 4.0) -> Any:
    import matplotlib  # matplotlib (~0.5 s to import) only when a figure is drawn

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # matplotlib (~0.5 s to import) only when a figure is drawn
    from cycler import cycler  # matplotlib (~0.5 s to import) only when a figure is drawn

    rc: dict[str, Any] = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=_COLORS)
    plt.rcdefaults()
    params: Any = plt.rcParams  # its stub types keys as a Literal of every rc name
    params.update(rc)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


# matplotlib names clip paths, markers, hatches and path collections by a hash of their
# geometry at full float precision (`_make_id`), so a last-bit difference between CPUs (a
# numpy SIMD path) changes the id while every printed coordinate agrees. Such ids are renamed
# by order of first appearance: the bytes then depend only on what is drawn.
_HASHED_ID = re.compile(rb'(?<=id=")((?:[a-zA-Z]+|C\d+_\d+_)[0-9a-f]{10})(?=")')


def stable_svg_ids(svg: bytes) -> bytes:
    """``svg`` with each hashed element id renamed ``<prefix>_<n>`` in order of first
    appearance, and every reference to it (``#id``) renamed alike."""
    names: dict[bytes, bytes] = {}
    for match in _HASHED_ID.finditer(svg):
        old = match.group(1)
        if old not in names:
            prefix = old[:-10]
            names[old] = b"%sid%d" % (prefix, len(names) + 1)
    if not names:
        return svg
    pattern = re.compile(rb'(?<=[#"])(' + b"|".join(map(re.escape, names)) + rb')(?=[")])')
    return pattern.sub(lambda m: names[m.group(1)], svg)


def _labelled(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, legend: int) -> bytes:
    """The figure's SVG once its axes are labelled, its legend drawn (``legend`` pt) and its
    title set (if any)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=legend)
    if title:
        ax.set_title(title)
    return _svg(fig)


def _svg(fig: Any) -> bytes:
    import matplotlib.pyplot as plt  # matplotlib (~0.5 s to import) only when a figure is drawn

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return stable_svg_ids(buf.getvalue())


def plot_breakdown(
    bars: list[str], groups: list[str], stacks: list[list[float]], title: str
) -> bytes:
    """Stacked bars of step time (ms) by term group, one bar per scenario or key value; an
    infeasible configuration (NaN times) gets no bar and the word "infeasible"."""
    fig, ax = _figure(max(5.0, 1.0 + 0.9 * len(bars)), 4.2)
    x = np.arange(len(bars))
    data = np.array(stacks, dtype=float).reshape(len(bars), len(groups))
    bad = np.isnan(data).any(axis=1)
    data[bad] = 0.0
    bottom = np.zeros(len(bars))
    for j, g in enumerate(groups):
        h = data[:, j]
        ax.bar(x, h, 0.6, bottom=bottom, label=g, color=_COLORS[j % len(_COLORS)])
        bottom += h
    for xi, total, no in zip(x, bottom, bad, strict=True):
        ax.text(xi, total, "infeasible" if no else f"{total:.1f}", ha="center", va="bottom",
                fontsize=8)  # fmt: skip
    ax.set_xticks(x, bars, fontsize=7)
    ax.set_ylabel("step time [ms]")
    top = float(bottom.max()) if len(bars) else 0.0
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    ax.legend(
        fontsize=7,
        ncols=min(len(groups), 6),
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        frameon=False,
    )
    if title:
        ax.set_title(title)
    return _svg(fig)


def plot_metric_vs_key(
    xs: list[float],
    lines: list[tuple[str, list[float]]],
    marks: list[tuple[str, float]],
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool,
) -> bytes:
    """A metric against a key's values, one line per scenario, derived points marked."""
    fig, ax = _figure()
    for label, ys in lines:
        ax.plot(xs, ys, marker="o", markersize=3.5, label=label)
    for name, v in marks:
        ax.axvline(v, color="#444444", linestyle="--", linewidth=0.9)
        ax.annotate(
            f"{name} = {v:.3g}",
            (v, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            fontsize=8,
        )
    if logx:
        ax.set_xscale("log")
    return _labelled(fig, ax, xlabel, ylabel, title, 8)


def plot_latency_throughput(
    points: list[tuple[str, list[float], list[float], list[str]]], title: str, what: str
) -> bytes:
    """Per-user speed against per-GPU throughput as a key (usually concurrency) varies."""
    fig, ax = _figure()
    for label, x, y, tags in points:
        ax.plot(x, y, marker="o", markersize=3.5, label=label)
        for xi, yi, t in zip(x, y, tags, strict=True):
            if math.isfinite(xi) and math.isfinite(yi):  # infeasible points are gaps
                ax.annotate(t, (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("tokens/s per GPU")
    ax.set_ylabel("tokens/s per user")
    ax.legend(fontsize=8, title=f"labels: {what}" if what else None, title_fontsize=7)
    if title:
        ax.set_title(title)
    return _svg(fig)


def plot_predicted_vs_measured(
    groups: list[tuple[str, list[float], list[float]]], band: float, title: str, unit: str
) -> bytes:
    """Predicted against measured, log-log, one marker colour per group, the diagonal and a
    ±band shaded around it; each axis spans the points."""
    fig, ax = _figure(6.0, 5.2)
    finite = [v for _, xs, ys in groups for v in (*xs, *ys) if math.isfinite(v) and v > 0]
    lo, hi = (min(finite) / 2, max(finite) * 2) if finite else (0.1, 10.0)
    line = np.geomspace(lo, hi, 64)
    ax.fill_between(line, line * (1 - band), line * (1 + band), color="#dddddd",
                    label=f"±{band:.0%}", linewidth=0)  # fmt: skip
    ax.plot(line, line, color="#444444", linewidth=0.8)
    markers = ("o", "s", "^", "D", "v", "P", "X")
    for i, (label, xs, ys) in enumerate(groups):
        ax.scatter(xs, ys, s=22, marker=markers[i % len(markers)], label=label,
                   color=_COLORS[i % len(_COLORS)], zorder=3)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"measured [{unit}]" if unit else "measured")
    ax.set_ylabel(f"predicted [{unit}]" if unit else "predicted")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _svg(fig)


def plot_tornado(
    bars: list[tuple[str, float, float]], nominal: float, xlabel: str, title: str
) -> bytes:
    """A tornado chart: one horizontal bar per input, from the metric at the input's low end
    to its value at the high end (other inputs nominal), largest swing on top; the nominal
    value as a vertical line."""
    fig, ax = _figure(7.0, max(3.0, 1.8 + 0.42 * len(bars)))
    y = np.arange(len(bars))[::-1]
    for yi, (_, at_low, at_high) in zip(y, bars, strict=True):
        ax.barh(yi, at_low - nominal, left=nominal, height=0.6, color=_COLORS[0])
        ax.barh(yi, at_high - nominal, left=nominal, height=0.6, color=_COLORS[1])
    ax.set_yticks(y, [b[0] for b in bars], fontsize=8)
    ax.axvline(nominal, color="#444444", linewidth=0.9)
    # matplotlib (~0.5 s to import) only when a figure is drawn
    from matplotlib.patches import Patch

    handles = [Patch(color=_COLORS[0], label="input at its low end"),
               Patch(color=_COLORS[1], label="input at its high end")]  # fmt: skip
    ax.legend(handles=handles, fontsize=7, ncols=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.3), frameon=False)  # fmt: skip
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return _svg(fig)


Curve = tuple[str, list[float], list[float]]  # label, x, y (a frontier, by x)


def plot_frontier_band(
    curves: list[tuple[Curve, Curve | None, Curve | None]],
    measured: list[tuple[int, float, float]],
    xlabel: str,
    ylabel: str,
    title: str,
) -> bytes:
    """Predicted frontiers as lines, each with its band (the frontier at the pessimistic and
    the optimistic ends of the ranged inputs) shaded between them, and measured points
    (curve index, x, y) overlaid in their curve's colour; log-log."""
    fig, ax = _figure(7.0, 4.6)
    for i, ((label, x, y), low, high) in enumerate(curves):
        color = _COLORS[i % len(_COLORS)]
        ax.plot(x, y, color=color, linewidth=1.4, marker="o", markersize=2.5, label=label)
        if low is not None and high is not None and low[1] and high[1]:
            xs, ys = [*low[1], *reversed(high[1])], [*low[2], *reversed(high[2])]
            ax.fill(xs, ys, color=color, alpha=0.18, linewidth=0)
    for i, mx, my in measured:
        ax.scatter([mx], [my], s=36, marker="X", color=_COLORS[i % len(_COLORS)],
                   edgecolors="black", linewidths=0.5, zorder=4)  # fmt: skip
    ax.scatter([], [], s=36, marker="X", color="#ffffff", edgecolors="black", linewidths=0.5,
               label="measured best at its target")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    return _labelled(fig, ax, xlabel, ylabel, title, 7)
