"""The optimum: where a metric is best along KEY inside the feasible range."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses import Analysis, AnalysisOptions, Context
from stepwall.analyses.common import (
    RELAXED,
    Segment,
    bisect,
    exact,
    feasible_region,
    key_range,
    lambdify1,
    metric_expr,
    minimize_sense,
    no_answer,
    number,
    parameter,
    relax,
    resolve_branches,
    scan_grid,
    segments,
    solve,
)
from stepwall.analyses.result import Derivation
from stepwall.options import option
from stepwall.symbols import latex_names

if TYPE_CHECKING:
    from stepwall.model import StepModel


def boundary_closed_form(
    model: StepModel, sym: sp.Symbol, x: float, symbolic: bool, metric_expr: sp.Expr
) -> sp.Basic | None:
    """A Piecewise condition whose boundary in ``sym`` lies at ``x``: its solution for sym
    (symbolic, e.g. cluster.scale_up.domain_size, or a number)."""
    src = relax(metric_expr) if symbolic else model.substituted(relax(metric_expr), [sym])
    vals = {**model.values, sym: x}
    for node in sp.preorder_traversal(src):
        if isinstance(node, sp.Piecewise):
            for _, c in node.args:
                if isinstance(c, sp.core.relational.Relational) and sym in c.free_symbols:
                    sols, _ = solve(c.lhs - c.rhs, sym)
                    for s in sols:
                        if abs(number(s, vals) - x) <= 1e-6 * max(1.0, abs(x)):
                            return s
    return None


def optimum(
    model: StepModel, key: str, symbolic: bool = False, metric: str = "step_time_s"
) -> Derivation:
    """Where d(metric)/dKEY = 0 inside KEY's feasible range (step time: minimum; throughput:
    maximum), or the kink where a branch changes, or "monotone: best at the bound"."""
    sym = parameter(model, key)
    expr = metric_expr(model, metric)
    minimize = minimize_sense(metric)
    region = feasible_region(model, sym, *key_range(model, sym))
    if region.empty:
        return no_answer("optimum", model, key, f"{metric} has no optimum: " + region.describe(key))
    lo, hi = region.lo, region.hi
    f = model.substituted(relax(expr), [sym])
    segs = segments(f, sym, lo, hi) if hi > lo else [Segment(lo, hi, f, ())]
    fn = lambdify1(f, sym)
    sign = 1.0 if minimize else -1.0

    def cost(v: float) -> float:
        return sign * float(fn(v))

    cands: list[tuple[float, str, Any]] = [(lo, "bound", str(lo)), (hi, "bound", str(hi))]
    cands += [(s.lo, "kink", "") for s in segs[1:]]
    notes: list[str] = []
    numeric_used = False
    for s in segs:
        d = sp.diff(s.expr, sym)
        if d == 0 or sym not in d.free_symbols:
            continue
        sols, why = solve(d, sym)
        found = [(float(sp.re(sp.N(r))), r) for r in sols]
        if not sols:
            # numeric: sign changes of the derivative on the segment
            dfn = lambdify1(d, sym)
            xs = np.linspace(s.lo, s.hi, 200)
            ds = np.asarray(dfn(xs), dtype=float) * np.ones_like(xs)
            for i in range(1, len(xs)):
                if np.sign(ds[i]) != np.sign(ds[i - 1]) and np.isfinite(ds[i - 1 : i + 1]).all():
                    r = bisect(lambda v, g=dfn: float(g(v)), xs[i - 1], xs[i])  # type: ignore[misc]
                    found.append((r, ""))
                    numeric_used = True
            if why and found:
                notes.append(why + "; derivative root found by bisection")
        for r, closed in found:
            if s.lo < r < s.hi:
                cands.append((r, "stationary", closed))
    best = min(cands, key=lambda c: cost(c[0]))
    x, where, closed = best
    grid = scan_grid(lo, hi, 400)
    ys = sign * np.asarray(fn(grid), dtype=float) * np.ones_like(grid)
    monotone = bool(np.all(np.diff(ys) <= 1e-15 * np.abs(ys[1:])) or np.all(np.diff(ys) >= 0))
    method = "numeric" if (where == "stationary" and not closed) else "symbolic"
    definition = (
        f"{key} where d({metric})/d{key} = 0 inside the feasible range [{lo:g}, {hi:g}] "
        f"({'minimum' if minimize else 'maximum'}), else a kink between branches, else the "
        f"bound; {RELAXED}; Piecewise/Min/Max resolved on {len(segs)} segment(s) of the range"
    )
    if where == "bound":
        by = region.lo_by if x == lo else region.hi_by
        note = ("monotone: best at the bound" if monotone else "best at the bound") + (
            f" {key} = {x:g}" + (f", set by constraint {by}" if by else "")
        )
        closed = f"{x:g}"
        value = x
    elif where == "kink":
        bc = boundary_closed_form(model, sym, x, symbolic, expr)
        closed = bc if bc is not None else sp.Float(x, 6)
        value = x
        eps_ = 1e-6 * max(1.0, x)
        dl, dr = (float(fn(x + e)) - float(fn(x)) for e in (-eps_, eps_))
        note = (
            f"at a kink where a branch changes (a collective leaves its domain, or an "
            f"algorithm switches): {metric} rises on both sides ({dl:.3g}, {dr:.3g} over ±"
            f"{eps_:.1g})"
        )
    else:
        value = x
        note = "interior stationary point"
        if symbolic and closed:
            vals = {**model.values, sym: x}
            g = resolve_branches(relax(expr), vals)
            sols, why = solve(sp.diff(g, sym), sym, vals)
            match = [s for s in sols if abs(number(s, vals) - x) <= 1e-4 * max(1.0, x)]
            if match:
                closed = match[0]
            else:
                notes.append(
                    f"symbolic form not found ({why or 'no matching root'}); numeric shown"
                )
    if numeric_used and where == "stationary" and not closed:
        closed = f"root of d({metric})/d{key} = 0 near {x:.6g}"
    if notes:
        note += "; " + "; ".join(notes)
    latex = (
        sp.latex(closed, symbol_names=latex_names([closed]))
        if isinstance(closed, sp.Basic)
        else str(closed)
    )
    closed = str(closed)
    details: dict[str, Any] = {
        "where": where,
        "range": [lo, hi],
        "monotone": monotone,
        "segments": [[s.lo, s.hi, list(s.choices)] for s in segs],
        "metric": metric,
        "metric_at_value_relaxed": float(fn(value)),
    }
    details["feasible_region"] = region.describe(key)
    feas = None
    if region.whole is not None:
        if region.whole.size:
            ints = region.whole
            ev = np.asarray(exact(model, metric, sym, ints), dtype=float) * np.ones_like(ints)
            best_i = int(np.argmin(ev if minimize else -ev))
            feas = int(ints[best_i])
            details["metric_at_feasible_exact"] = float(ev[best_i])
            if feas not in (math.floor(value), math.ceil(value)):
                note += (
                    f"; the best whole {key} where every constraint holds is {feas} "
                    f"({region.describe(key)})"
                )
        else:
            note += f"; no whole {key} satisfies every constraint"
    return Derivation(
        "optimum",
        key,
        value,
        feas,
        closed,
        latex,
        definition,
        method,
        note,
        model.scenario.label,
        details,
    )


@attrs.frozen
class OptimumOptions(AnalysisOptions):
    key: str = option("the parameter, e.g. parallel.tp", positional=True)
    metric: str = option("the metric: times are minimized, throughputs maximized",
                         default="step_time_s")  # fmt: skip


def _run(model: StepModel, o: OptimumOptions, context: Context) -> Derivation:
    return optimum(model, o.key, o.symbolic, o.metric)


ANALYSIS = Analysis(
    "optimum",
    "where a metric is best along KEY inside the feasible range (stationary point, kink or bound)",
    OptimumOptions,
    _run,
)
