"""``stepwall eval``: a scenario's step-time breakdown and metrics (a repeated one is
answered by `stepwall.cli.cached_eval` before this module is imported)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stepwall.analyses import ranges
from stepwall.cli.common import cache_arg, emit, feasibility_arg, format_args, scenario_args
from stepwall.core.terminal import warn
from stepwall.io.breakdown import render_breakdown
from stepwall.io.formats import Column, Table
from stepwall.model.compose import build_model, compile_scenario, summary
from stepwall.numeric import point_cache
from stepwall.spec.validation import load_scenario

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall eval``."""
    scenario_args(p)
    format_args(p, registry, "the result (csv and markdown: the terms)")
    feasibility_arg(p)
    cache_arg(p)


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Evaluate the scenario through its compiled model; explain a violated constraint."""
    warn(registry.slow_imports())
    scenario = load_scenario(ns.scenario, registry.kinds, ns.sets)
    warn(scenario.warnings)
    numeric = compile_scenario(scenario, registry, cache=not ns.no_cache, scalar=True)
    ev = numeric.evaluate({s.name: v for s, v in scenario.values.items()})
    violations = []
    if not ev["feasible"]:  # explain it: that needs the symbolic model
        model = build_model(scenario, registry=registry)
        if not ns.allow_infeasible:
            model.check()
        violations = model.violations(ev)
    doc = summary(scenario, numeric, violations, ev)
    if scenario.ranges:  # ranged values: each metric and term as [low, high] (docs/ranges.md)
        model = build_model(scenario, registry=registry)
        if not ns.allow_infeasible:
            ranges.check_box(model, ranges.inputs(model, registry))
        ranges.annotate(doc, model, registry)
    elif not violations and not ns.no_cache and registry.is_default:
        point_cache.remember(ns.scenario, ns.sets, scenario, numeric)
    if ns.format in (None, "text"):
        print(
            render_breakdown(doc, numeric.metric_info)
            + (ranges.render(doc) if scenario.ranges else "")
        )
    elif ns.format == "json":
        emit(registry, "json", doc)
    else:
        emit(registry, ns.format, _terms_table(doc))
    return 0


def _terms_table(doc: dict[str, Any]) -> Table:
    t = doc["step_time_s"]
    cols = (Column("term", kind="text"), Column("group", kind="text"),
            Column("plugin", kind="text"), Column("time", "s"), Column("share", "%"))  # fmt: skip
    rows = [[x["name"], x["group"], x["plugin"], x["seconds"], 100 * x["seconds"] / t]
            for x in doc["terms"]]  # fmt: skip
    return Table.of_rows(cols, rows, document=doc)
