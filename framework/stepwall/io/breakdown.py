"""``stepwall eval``'s text: the breakdown of a step by term, then the metrics."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from stepwall.core.terminal import visible
from stepwall.core.units import TIME, format_quantity
from stepwall.numeric.compiled import MetricInfo


class _Line(string.Formatter):
    """A metric's line template (`stepwall.plugin.entries.Metric.line`) filled from eval's
    JSON: dotted field names reach into its objects; the specs ``time``, ``SPEC/DIVISOR``
    and ``YES|NO`` beside Python's own."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        return _at(kwargs, field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "time":
            return format_quantity(value, TIME)
        if "|" in format_spec:
            yes, no = format_spec.split("|")
            return yes if value else no
        if "/" in format_spec:
            spec, divisor = format_spec.split("/")
            return format(value / float(divisor), spec)
        return format(value, format_spec)


def _at(s: Mapping[str, Any], key: str) -> Any:
    """The value at ``key`` of eval's JSON, one dot reaching into an object."""
    obj, _, key = key.rpartition(".")
    return (s[obj] if obj else s)[key]


def metric_lines(s: Mapping[str, Any], metrics: Sequence[MetricInfo]) -> list[str]:
    """Each metric's line in declaration order: its template where it has one and its value
    is known; for one listed under ``plugin_metrics``, its label, value, unit and plugin."""
    listed = {m["name"]: m for m in s.get("plugin_metrics", [])}
    lines = []
    for m in metrics:
        if m.line and _at(s, m.key) is not None:
            lines.append(_Line().vformat(m.line, (), s))
        elif not m.key:  # declared by a plugin (stepwall_metrics)
            e = listed[m.name]
            value = "unknown" if e["value"] is None else f"{e['value']:.4g}"
            unit = f" {e['unit']}" if e["unit"] else ""
            lines.append(
                f"{visible(e['label']):<21} {value}{unit}   (plugin {visible(e['plugin'])})"
            )
    return lines


def render_breakdown(s: dict[str, Any], metrics: Sequence[MetricInfo]) -> str:
    """The breakdown table (term, plugin, time, share), then the metrics' lines
    (`metric_lines`), as text."""
    t = s["step_time_s"]
    rows = [("term", "group", "plugin", "time", "share")]
    zero = [term for term in s["terms"] if term["seconds"] == 0]
    for term in s["terms"]:
        if term["seconds"] == 0:
            continue
        share = f"{100 * term['seconds'] / t:.1f}%"
        time = format_quantity(term["seconds"], TIME)
        name, group, plugin = (visible(term[k]) for k in ("name", "group", "plugin"))
        rows.append((name, group, plugin, time, share))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"scenario {visible(s['scenario'])}"]
    if s.get("overrides"):
        lines.append(f"overrides {visible(', '.join(s['overrides']))}")
    lines.append("")
    for i, r in enumerate(rows):
        lines.append(
            "  ".join(
                c.rjust(w) if j >= 3 else c.ljust(w)
                for j, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += [
        "",
        "by group              "
        + ", ".join(f"{g} {format_quantity(v, TIME)}" for g, v in s["groups"].items()),
    ]
    lines += metric_lines(s, metrics)
    if zero:
        names = visible(", ".join(term["name"] for term in zero))
        lines.append(f"zero here ({len(zero)})       {names}")
    if any(term["overlap"] for term in s["terms"]):
        lines.append("overlapped terms (same overlap tag) count once in the step, as their Max")
    for v in s.get("violations", []):
        lines.append(f"INFEASIBLE            {visible(v['message'])}")
    return "\n".join(lines)
