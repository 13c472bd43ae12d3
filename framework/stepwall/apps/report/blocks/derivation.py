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

from stepwall.analyses import Derivation
from stepwall.analyses.base import Context, run
from stepwall.analyses.ranges import root_interval
from stepwall.analyses.result import describe_form, describe_regime
from stepwall.apps.report.placeholders import csv_number, fill, fmt
from stepwall.apps.report.render import flatten_numbers
from stepwall.core.errors import SpecError, StepwallError, did_you_mean
from stepwall.core.options import option, structure_options
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report

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
    sensitivities: int = option(
        "how many of each root's sensitivities (∂ln x*/∂ln p, largest first) to show beside it; "
        "all are in ID.sensitivities.csv; 0 shows none",
        default=5,
    )
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


def compute(
    report: Report, o: DerivationOptions, at: str
) -> tuple[list[Derivation], list[float] | None]:
    """The analysis's results and, over a ranged box, the interval of its one result: the
    block's work, which depends only on the models and the options."""
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
        # an option's own error (derive:--eps, derive:KEY) names the block's key for it
        given = {f"--{k}": k for k in o.analysis} | {v: k for k, v in o.analysis.items()
                                                     if isinstance(v, str)}  # fmt: skip
        if e.where == "derive" and e.key in given:
            said = e.problem if e.key.startswith("--") else f"{e.key}: {e.problem}"
            raise report.err(at + given[e.key], said, e.expected) from None
        raise report.err(at + "derive", str(e)) from None
    except StepwallError as e:
        raise report.err(at + "derive", str(e)) from None
    ranged = [model] + [report.alias(v, at) for v in o.analysis.values()
                        if isinstance(v, str) and v in report.refs]  # fmt: skip
    if not analysis.many and any(m.scenario.ranges for m in ranged):  # an interval over the box
        try:
            results = [root_interval(analysis, model, o.analysis,
                                     Context(report.registry, model_of), results[0],
                                     report.where, at)]  # fmt: skip
        except StepwallError as e:
            raise report.err(at + "derive", str(e)) from None
        return results, results[0].details.get("range")
    return results, None


def render(report: Report, o: DerivationOptions, at: str) -> list[str]:
    """A derivation block: the analysis's result (computed here, or by the job started with
    the report), its fields published as scalars, and its text.

    Stays whole: one result's fields published and written in the order the block shows them.
    """
    report.claim(o.id, at + "id")
    analysis = report.registry.analyses[o.derive]
    results, span = report.computed(at, lambda: compute(report, o, at))
    if span:
        report.ns.scalars[f"{o.id}.low"], report.ns.scalars[f"{o.id}.high"] = span
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
    if result.form:
        lines += ["", f"Form: {describe_form(result.form, bool(result.regime))}"]
    if result.regime:
        lines += ["", f"Regime: {describe_regime(result.regime)}"]
    if result.note:
        lines += ["", f"Note: {result.note}"]
    lines += _sensitivities(report, o, result, _aliases(report, o))
    if o.caption:
        lines += ["", fill(o.caption.strip(), report.ns, report.where, at + "caption")]
    return lines


def _aliases(report: Report, o: DerivationOptions) -> dict[str, str]:
    """Scenario names and labels -> the report's aliases (a crossover's sides)."""
    out: dict[str, str] = {}
    for alias in (o.scenario, *(v for v in o.analysis.values() if isinstance(v, str))):
        if alias in report.models:
            sc = report.models[alias].scenario
            out.setdefault(sc.name, alias)
            out.setdefault(sc.label, alias)
    return out


def _sensitivities(report: Report, o: DerivationOptions, result: Derivation,
                   aliases: dict[str, str]) -> list[str]:  # fmt: skip
    """The root's sensitivities: scalars ``ID.sensitivity[.ALIAS].PARAMETER``, all in
    ``ID.sensitivities.csv``, the largest ``o.sensitivities`` of the parameters that take any
    value (not whole-number counts) as a table.

    Stays whole: the CSV and the scalars are written in one pass over the rows, and the table
    shows the first of the same rows.
    """
    if result.equation is None and not result.sensitivity_note:
        return []
    s = report.ns.scalars
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["parameter", "side", "elasticity", "derivative", "value", "whole"])
    for r in result.sensitivities:
        side = aliases.get(r.side, r.side)
        w.writerow([r.parameter, side, csv_number(r.elasticity), csv_number(r.derivative),
                    csv_number(r.value), "yes" if r.whole else "no"])  # fmt: skip
        name = r.parameter if r.side in ("", "both") else f"{side}.{r.parameter}"
        if r.side != "both" or f"{o.id}.sensitivity.{name}" not in s:
            s[f"{o.id}.sensitivity.{name}"] = float(r.elasticity)
    if not o.sensitivities:
        return []
    if not result.sensitivities:
        return ["", f"Sensitivities: none ({result.sensitivity_note})."]
    report.outputs[f"{o.id}.sensitivities.csv"] = buf.getvalue().encode()
    shown = [r for r in result.sensitivities if r.elasticity and not r.whole][: o.sensitivities]
    what = result.equation.what if result.equation is not None else ""
    for name, alias in sorted(aliases.items(), key=lambda kv: -len(kv[0])):
        what = what.replace(f"[{name}]", f"[{alias}]")
    sided = any(r.side for r in shown)
    lines = ["", f"Sensitivities of the root, ∂ln x\\*/∂ln p = −(p/x\\*)·(∂F/∂p)/(∂F/∂x) with "
                 f"F = {what}: the largest among parameters that take any value (whole-number "
                 "counts and degrees are in the CSV):", ""]  # fmt: skip
    lines.append("| parameter |" + (" side |" if sided else "") + " elasticity |")
    lines.append("|:---|" + (":---|" if sided else "") + "---:|")
    for r in shown:
        side = f" {aliases.get(r.side, r.side)} |" if sided else ""
        lines.append(f"| `{r.parameter}` |{side} {r.elasticity:+.3f} |")
    more = len(result.sensitivities) - len(shown)
    link = f"[{o.id}.sensitivities.csv]({o.id}.sensitivities.csv)"
    lines += ["", f"({more} more in {link})" if more else f"Data: {link}"]
    return lines


def _list(report: Report, o: DerivationOptions, at: str, analysis: Any, results: list[Any],
          title: str) -> list[str]:  # fmt: skip
    """Many results (elasticities, regimes) as a table, the first ``top`` shown.

    Stays whole: the markdown table and its CSV are written row by row in one loop, after the
    scalars.
    """
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
    if o.sensitivities and len(rows) == len(results) and any(r.sensitivities for r in results):
        aliases = _aliases(report, o)
        head = [*head, "largest sensitivities"]
        rows = [[*row, _levers(r, min(o.sensitivities, 3), aliases)]
                for row, r in zip(rows, results, strict=True)]  # fmt: skip
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


def _levers(result: Derivation, n: int, aliases: dict[str, str]) -> str:
    """A result's largest sensitivities among parameters that take any value, in one cell."""
    top = [r for r in result.sensitivities if r.elasticity and not r.whole][:n]
    side = {r.side: f" ({aliases.get(r.side, r.side)})" if r.side else "" for r in top}
    return "; ".join(f"{r.parameter}{side[r.side]} {r.elasticity:+.2f}" for r in top)


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
    compute=compute,
)
