"""Regimes: where the largest step-time term changes along KEY."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import (
    RELAXED,
    bisect,
    feasible,
    feasible_region,
    key_range,
    lambdify1,
    no_answer,
    parameter,
    relax,
    resolve_branches,
    scan_grid,
)
from stepwall.analyses.result import Derivation, Equation
from stepwall.analyses.roots import closed_for
from stepwall.core.options import option
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def regime(model: StepModel, key: str, symbolic: bool = False) -> list[Derivation]:
    """Which step-time term is largest over KEY's range, and where that changes.

    Stays whole: one scan of the grid finds the spans and the changes, and each change's
    derivation shares the definition and the spans.
    """
    sym = parameter(model, key)
    region = feasible_region(model, sym, *key_range(model, sym))
    if region.empty:
        return [no_answer("regime", model, key, region.describe(key))]
    lo, hi = region.lo, region.hi
    rel = [model.substituted(relax(t.expr), [sym]) for t in model.terms]
    fns = [lambdify1(e, sym) for e in rel]
    grid = scan_grid(lo, hi, 600)
    with np.errstate(all="ignore"):
        vals = np.vstack([np.asarray(g(grid), dtype=float) * np.ones_like(grid) for g in fns])
    dom = np.argmax(vals, axis=0)
    names = [t.name for t in model.terms]
    definition = (
        f"{key} where the largest step-time term changes, over the feasible range "
        f"[{lo:g}, {hi:g}]; {RELAXED}; Piecewise/Min/Max resolved at each change"
    )
    spans: list[list[Any]] = []
    changes = []
    s0 = 0
    for i in range(1, len(grid) + 1):
        if i == len(grid) or dom[i] != dom[i - 1]:
            spans.append([float(grid[s0]), float(grid[i - 1]), names[dom[s0]]])
            if i < len(grid):
                a, b = dom[i - 1], dom[i]

                def gap(v: float, a: Any = a, b: Any = b) -> float:
                    return float(fns[a](v)) - float(fns[b](v))

                r = bisect(gap, grid[i - 1], grid[i])
                changes.append((r, a, b))
            s0 = i
    details_common = {"range": [lo, hi], "spans": spans}
    out = []
    for r, a, b in changes:
        full = {**model.values, sym: r}
        F = resolve_branches(relax(model.terms[a].expr), full) - resolve_branches(
            relax(model.terms[b].expr), full
        )
        free = F.free_symbols - {sym}
        eq = Equation(
            F, sym, {p: float(v) for p, v in model.values.items() if p in free},
            f"{names[a]}(x) − {names[b]}(x)",
        )  # fmt: skip
        cr, why, shown = closed_for(eq, r, symbolic)
        srepr, form, approx = "", None, None
        if cr is not None:
            closed, latex, srepr, form, approx = shown
            method = "symbolic" if cr.approximation is None else "asymptotic"
        else:
            method, closed, latex = "numeric", f"root of {names[a]} = {names[b]}", ""
        note = (
            f"{names[a]} dominates below, {names[b]} above"
            + (f"; {why}" if cr is not None and why else "")
            + ("" if cr is not None else f"; {why or 'no matching root'}: bisection")
        )
        out.append(
            Derivation(
                kind="regime",
                key=key,
                value=r,
                feasible_value=feasible(model, sym, r, region)[0],
                closed_form=closed,
                latex=latex,
                definition=definition,
                method=method,
                note=note,
                scenario=model.scenario.label,
                details={**details_common, "from": names[a], "to": names[b]},
                srepr=srepr,
                form=form,
                regime=approx,
                equation=eq,
            )
        )
    if not out:
        out.append(
            no_answer(
                "regime",
                model,
                key,
                f"{names[dom[0]]} dominates over the whole range [{lo:g}, {hi:g}]",
                definition=definition,
                details={**details_common, "from": names[dom[0]], "to": None},
            )
        )
    return out


@attrs.frozen
class RegimeOptions(AnalysisOptions):
    key: str = option("the parameter, e.g. parallel.tp", positional=True)


def _run(model: StepModel, o: RegimeOptions, context: Context) -> list[Derivation]:
    return regime(model, o.key, o.symbolic)


def _table(results: Sequence[Derivation]) -> tuple[list[str], list[list[Any]]]:
    return ["key", "value", "note"], [[d.key, d.value, d.note] for d in results]


ANALYSIS = Analysis(
    "regime",
    "where the largest step-time term changes along KEY",
    RegimeOptions,
    _run,
    many=True,
    table=_table,
)
