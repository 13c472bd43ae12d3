"""Block ``explorer``: an interactive page of one scenario (`stepwall.apps.explore`), written beside
the report as ``explorer-<id>.html`` and linked from it."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import attrs

from stepwall.apps.explore import explorer_html
from stepwall.apps.report.placeholders import fill
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report


@attrs.frozen
class ExplorerOptions:
    id: str = option("an identifier: the page is explorer-<id>.html")
    scenario: str = option("the alias explored")
    free: tuple[str, ...] = option("the parameters given controls (default: parallel degrees, "
                                   "concurrency and the most elastic)", default=())  # fmt: skip
    top: int = option("how many of the most elastic parameters the default adds", default=6)
    chart: str = option("the parameter on the chart's x axis at first", default="")
    eps: float = option("the wall's tolerance ε", default=0.15)
    text: str = option("the link's text (placeholders allowed; default names the scenario)",
                       default="")  # fmt: skip
    caption: str = option("shown under the link", default="")


def render(report: Report, o: ExplorerOptions, at: str) -> list[str]:
    name = f"explorer-{o.id}.html"
    report.claim(o.id, at + "id")
    model = report.alias(o.scenario, at + "scenario")
    cmd = ["stepwall", "report", report.ref, *(a for s in report.sets for a in ("--set", s))]
    title = f"{report.label(o.scenario)} ({model.scenario.label})"
    try:
        page = explorer_html(model, list(o.free) or None, registry=report.registry,
                             command=shlex.join(cmd), top=o.top, eps=o.eps, chart_key=o.chart,
                             title=title)  # fmt: skip
    except SpecError as e:
        key = {"--free": "free", "--chart": "chart", "--eps": "eps", "--top": "top"}.get(
            e.where if e.where.startswith("--") else e.key, "free"
        )
        raise report.err(at + key, f"{e.key}: {e.problem}", e.expected) from None
    report.outputs[name] = page
    text = fill(o.text, report.ns, report.where, at + "text") if o.text else (
        f"Open the interactive explorer of {report.label(o.scenario)}"
    )  # fmt: skip
    lines = [f"[{text}]({name}) (one HTML file; it runs the model in the browser, offline)"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


BLOCK = BlockKind("explorer", "an interactive HTML page of a scenario, written beside the "
                  "report and linked", ExplorerOptions, render)  # fmt: skip
