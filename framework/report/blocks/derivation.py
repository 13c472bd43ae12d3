"""Block ``derivation``: an analysis from the registry (wall, optimum, crossover, …) on an
alias, with its definition, closed form and value; a list of results (elasticities, regimes)
as a table and CSV. The block's keys other than its own are the analysis's options
(``key``, ``eps``, ``against`` — an alias here, …), validated by the analysis's class; a key
both declare (an analysis with its own ``top``) goes to both."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses import Context, run
from stepwall.errors import SpecError, StepwallError, did_you_mean
from stepwall.options import option, structure_options
from stepwall.report.blocks import BlockKind
from stepwall.report.placeholders import csv_number, fill, fmt

if TYPE_CHECKING:
    from stepwall.report.render import Report

FIELDS = ("value", "feasible_value", "closed_form", "latex", "definition", "method", "note",
          "kind", "key")  # fmt: skip


@attrs.frozen
class DerivationOptions:
    id: str = option("an identifier: what placeholders and plot marks call the result")
    derive: str = option("the analysis (stepwall derive --help lists them)")
    scenario: str = option("the alias it runs on")
    title: str = option("shown above the result", default="")
    caption: str = option("shown under it", default="")
    top: int | None = option("a list of results: how many rows to show", default=None)
    analysis: dict[str, Any] = option("the analysis's own options", default={})


def prepare(report: Report, given: dict[str, Any], at: str) -> DerivationOptions:
    own = {f.name for f in attrs.fields(DerivationOptions)} - {"analysis"}
    mine = {k: v for k, v in given.items() if k in own}
    o: DerivationOptions = structure_options(
        DerivationOptions, {**mine, "analysis": {}}, report.where, at
    )
    analyses = report.registry.analyses
    if o.derive not in analyses:
        dym = did_you_mean(o.derive, sorted(analyses))
        raise report.err(at + "derive", f"unknown analysis {o.derive!r}{dym}",
                         f"one of: {', '.join(sorted(analyses))}")  # fmt: skip
    theirs = {f.name for f in attrs.fields(analyses[o.derive].options)}
    rest = {k: v for k, v in given.items() if k not in own or k in theirs}
    structure_options(analyses[o.derive].options, rest, report.where, at)  # checked now
    return attrs.evolve(o, analysis=rest)


def render(report: Report, o: DerivationOptions, at: str) -> list[str]:
    from stepwall.report.render import IDENT, flatten_numbers

    if not IDENT.fullmatch(o.id) or o.id in report.derivations:
        raise report.err(at + "id", f"{o.id!r} is not a new identifier", "a unique identifier")
    model = report.alias(o.scenario, at + "scenario")
    analysis = report.registry.analyses[o.derive]
    if "metric" in o.analysis:
        report.metric(model, o.analysis["metric"], at + "metric")

    def model_of(alias: str, name: str) -> Any:
        return report.alias(alias, at + name)

    try:
        results = run(analysis, model, o.analysis, Context(report.registry, model_of),
                      report.where, at)  # fmt: skip
    except SpecError as e:
        if e.where == report.where:
            raise
        raise report.err(at + "derive", str(e)) from None
    except StepwallError as e:
        raise report.err(at + "derive", str(e)) from None
    report.derivations[o.id] = results if analysis.many else results[0]
    title = fill(o.title or f"{o.derive} of {o.scenario}", report.ns, report.where, at + "title")
    if analysis.many:
        return _list(report, o, at, analysis, results, title)
    result = results[0]
    s = report.ns.scalars
    for field in FIELDS:
        v = getattr(result, field, None)
        if v is None:
            continue
        number = isinstance(v, int | float | np.floating | np.integer) and not isinstance(v, bool)
        s[f"{o.id}.{field}"] = float(v) if number or (isinstance(v, sp.Basic) and v.is_number) \
            else str(v)  # fmt: skip
    flatten_numbers(result.details or {}, f"{o.id}.details", s)
    lines = [f"**{title}**", ""]
    if result.definition:
        lines += [f"Definition: {result.definition}", ""]
    if result.latex:
        lines += ["$$", str(result.latex), "$$", ""]
    facts = []
    for field, label in (("value", "value"), ("feasible_value", "feasible value"),
                         ("method", "method")):  # fmt: skip
        v = getattr(result, field, None)
        if v is not None and v != "":
            facts.append(f"{label}: {fmt(v, '.4g') if not isinstance(v, str) else v}")
    if facts:
        lines.append("; ".join(facts))
    if result.note:
        lines += ["", f"Note: {result.note}"]
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


def _list(report: Report, o: DerivationOptions, at: str, analysis: Any, results: list[Any],
          title: str) -> list[str]:  # fmt: skip
    """Many results (elasticities, regimes) as a table, the first ``top`` shown."""
    shown = results[: o.top if o.top is not None else len(results)]
    s = report.ns.scalars
    s[f"{o.id}.count"] = float(len(results))
    keys = [r.key for r in results]
    if len(set(keys)) == len(keys):  # one result per key: each by name
        for r in results:
            if r.value is not None:
                s[f"{o.id}.{r.key}"] = float(r.value)
    if results and results[0].value is not None:
        s[f"{o.id}.value"] = float(results[0].value)
    lines = [f"**{title}**", ""]
    if results and results[0].definition:
        lines += [f"Definition: {results[0].definition}", ""]
    head, rows = analysis.table(results)
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join([":---", *["---:"] * (len(head) > 1), *[":---"] *
                                 max(0, len(head) - 2)]) + "|")  # fmt: skip
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for i, row in enumerate(rows):
        cells = [f"`{row[0]}`", *(_cell(v, analysis.number_format) for v in row[1:])]
        if i < len(shown):
            lines.append("| " + " | ".join(cells) + " |")
        w.writerow([row[0], *(csv_number(v) if not isinstance(v, str) else v for v in row[1:])])
    if len(shown) < len(results):
        lines += ["", f"({len(results) - len(shown)} more with smaller magnitude in "
                      f"[{o.id}.csv]({o.id}.csv))"]  # fmt: skip
    else:
        lines += ["", f"Data: [{o.id}.csv]({o.id}.csv)"]
    report.outputs[f"{o.id}.csv"] = buf.getvalue().encode()
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


def _cell(v: Any, spec: str) -> str:
    if isinstance(v, str):
        return v
    return "—" if v is None else fmt(v, spec)


BLOCK = BlockKind(
    "derivation",
    "an analysis (wall, optimum, crossover, …) with its closed form",
    DerivationOptions,
    render,
    early=True,
    prepare=prepare,
)
