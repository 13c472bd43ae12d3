"""``stepwall eval``'s text: the breakdown of a step by term, then the metrics."""

from __future__ import annotations

from typing import Any

from stepwall.core.terminal import visible
from stepwall.core.units import TIME, format_quantity


def render_breakdown(s: dict[str, Any]) -> str:
    """The breakdown table (term, plugin, time, share) and the metrics, as text.

    Stays whole: the lines in the order eval prints them, each optional metric one `if`.
    """
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
    mem = s["memory"]
    lines += [
        "",
        "by group              "
        + ", ".join(f"{g} {format_quantity(v, TIME)}" for g, v in s["groups"].items()),
        f"step time             {format_quantity(t, TIME)}",
        f"tokens/s per user     {s['tokens_per_s_per_user']:.1f}",
        f"tokens/s              {s['tokens_per_s']:.1f}",
        f"tokens/s per GPU      {s['tokens_per_s_per_gpu']:.1f}   ({s['gpus']} GPUs)",
        f"time to first token   {format_quantity(s['ttft_s'], TIME)}   (one prompt alone; "
        f"prefill {s['prefill_tokens_per_s_per_gpu']:.0f} tokens/s per GPU)",
        f"memory per GPU        {mem['bytes_per_gpu'] / 1e9:.1f} GB of "
        f"{mem['capacity_per_gpu'] / 1e9:.1f} GB usable: "
        f"{'fits' if mem['fits'] else 'DOES NOT FIT'}",
    ]
    # energy and cost: shown only where the specs state board power, PUE or price
    if s.get("joules_per_token") is not None:
        lines.append(f"energy per token      {s['joules_per_token']:.3g} J   (GPU board power)")
    if s.get("tokens_per_s_per_mw") is not None:
        lines.append(f"tokens/s per MW       {s['tokens_per_s_per_mw']:.4g}   (board power × PUE)")
    if s.get("usd_per_million_tokens") is not None:
        lines.append(f"USD per 1M tokens     {s['usd_per_million_tokens']:.3g}")
    for m in s.get("plugin_metrics", []):  # declared by plugins (stepwall_metrics)
        value = "unknown" if m["value"] is None else f"{m['value']:.4g}"
        unit = f" {m['unit']}" if m["unit"] else ""
        lines.append(f"{visible(m['label']):<21} {value}{unit}   (plugin {visible(m['plugin'])})")
    if zero:
        names = visible(", ".join(term["name"] for term in zero))
        lines.append(f"zero here ({len(zero)})       {names}")
    if any(term["overlap"] for term in s["terms"]):
        lines.append("overlapped terms (same overlap tag) count once in the step, as their Max")
    for v in s.get("violations", []):
        lines.append(f"INFEASIBLE            {visible(v['message'])}")
    return "\n".join(lines)
