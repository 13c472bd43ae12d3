"""Block ``formula``: a metric, group or term of a scenario in closed form (LaTeX), with
chosen parameters left symbolic."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import sympy as sp

from stepwall.apps.report.placeholders import fill
from stepwall.core.options import option
from stepwall.core.symbols import latex_names
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report


@attrs.frozen
class FormulaOptions:
    scenario: str = option("the alias")
    metric: str = option("a metric, group.G or term.NAME")
    free: tuple[str, ...] = option("parameters kept symbolic, e.g. [parallel.tp]", default=())
    title: str = option("shown above the formula", default="")
    caption: str = option("shown under it", default="")


def render(report: Report, o: FormulaOptions, at: str) -> list[str]:
    model = report.alias(o.scenario, at + "scenario")
    name = report.metric(model, o.metric, at + "metric")
    if name.startswith("term."):
        expr = next(t.expr for t in model.terms if t.name == name[5:])
    elif name.startswith("group."):
        expr = sp.Add(*(t.expr for t in model.terms if t.group == name[6:]))
    else:
        expr = model.metrics[name]
    free = []
    for k in o.free:
        sym = model.scenario.parameter(k)
        if sym is None:
            raise report.err(at + "free", f"{k!r} is not a parameter of this scenario",
                             "a numeric key such as parallel.tp")  # fmt: skip
        free.append(sym)
    shown = model.substituted(expr, free)
    lines = []
    if o.title:
        lines += [f"**{fill(o.title, report.ns, report.where, at + 'title')}**", ""]
    lines += ["$$", sp.latex(shown, symbol_names=latex_names([shown])), "$$"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


BLOCK = BlockKind("formula", "a metric or term in closed form (LaTeX)", FormulaOptions, render)
