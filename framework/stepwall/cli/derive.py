"""``stepwall derive``: an analysis of the registry (a wall, an optimum, elasticities, …) in
closed form; each analysis is a subcommand with its own options."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.analyses.base import Context
from stepwall.analyses.base import run as run_analysis
from stepwall.analyses.ranges import root_interval
from stepwall.cli.common import emit, load
from stepwall.cli.options import add_arguments, from_namespace
from stepwall.cli.parser import Parser, set_key
from stepwall.core.errors import SpecError
from stepwall.core.terminal import visible
from stepwall.io.formats import Column, Table

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def _derive_common(p: argparse.ArgumentParser, registry: Registry, after: bool) -> None:
    """Options every analysis takes; given after the analysis's name too."""
    p.add_argument("--set", dest="sets_after" if after else "sets", action="append",
                   default=argparse.SUPPRESS if after else [], metavar="KEY=VALUE",
                   help="override a spec value, e.g. parallel.tp=16 (repeatable)")  # fmt: skip
    names = sorted(registry.formats)
    keep: dict[str, Any] = {"default": argparse.SUPPRESS} if after else {"default": None}
    p.add_argument("--format", choices=names, help="how to print the results (default text)",
                   **keep)  # fmt: skip
    p.add_argument("--json", action="store_const", const="json", dest="format",
                   help="the same as --format json: one JSON document", **keep)  # fmt: skip
    p.add_argument("--allow-infeasible", action="store_true",
                   help="derive even at a point where a constraint does not hold",
                   **(keep if after else {}))  # fmt: skip


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall derive``: one subcommand per analysis."""
    p.add_argument("scenario", metavar="SCENARIO", help="catalog name or path to a .toml")
    _derive_common(p, registry, after=False)
    sub = p.add_subparsers(dest="what", metavar="ANALYSIS", parser_class=Parser, required=True)
    for name, analysis in sorted(registry.analyses.items()):
        sp_ = sub.add_parser(name, help=analysis.doc, description=f"{analysis.doc}.",
                             formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        add_arguments(sp_, analysis.options)
        _derive_common(sp_, registry, after=True)


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Run the analysis and print its results as text, JSON or a table.

    Stays whole: load, run and print one analysis: the checks, then one case per output format.
    """
    analysis = registry.analyses[ns.what]
    before = {set_key(s) for s in ns.sets}
    twice = [k for k in map(set_key, getattr(ns, "sets_after", [])) if k and k in before]
    if twice:  # before and after ANALYSIS: two parsers, one rule
        raise SpecError("--set", twice[0], "given twice", "each key set once")
    ns.sets = [*ns.sets, *getattr(ns, "sets_after", [])]
    model = load(ns, registry)
    if analysis.at_point and not ns.allow_infeasible:
        model.check()  # a sensitivity at an impossible point means nothing
    given = from_namespace(ns, analysis.options)
    positional = [f.name for f in attrs.fields(analysis.options)
                  if f.metadata.get("positional") and f.default is attrs.NOTHING]  # fmt: skip
    for name in positional:
        if given.get(name) is None:
            raise SpecError("derive", ns.what, f"needs a {name.upper()}", "e.g. parallel.tp")
    context = Context(registry, lambda ref, _name: load(ns, registry, ref), ns.allow_infeasible)
    results = run_analysis(analysis, model, given, context, "derive", "--")
    if not analysis.many and model.scenario.ranges:  # a root over the ranges' box: an interval
        results = [root_interval(analysis, model, given, context, results[0], "derive", "--")]
    if ns.format in (None, "text"):
        print(visible(analysis.text(results), lines=True))
        return 0
    if ns.format == "json":
        doc: Any = (
            {"kind": ns.what, "scenario": model.scenario.label,
             "results": [d.to_json() for d in results]}
            if analysis.many else results[0].to_json()
        )  # fmt: skip
        emit(registry, "json", doc)
        return 0
    head, rows = analysis.table(results)
    kinds = ["text" if any(isinstance(r[i], str) or r[i] is None for r in rows) else "float"
             for i in range(len(head))]  # fmt: skip
    emit(registry, ns.format, Table.of_rows([Column(h, kind=k) for h, k in zip(head, kinds,
                                             strict=True)], rows))  # fmt: skip
    return 0
