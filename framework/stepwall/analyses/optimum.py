"""The optimum: where a metric is best along KEY inside the feasible range."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import (
    RELAXED,
    Segment,
    bisect,
    exact,
    feasible_region,
    is_integer_key,
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
from stepwall.analyses.result import Derivation, Equation
from stepwall.core.options import option
from stepwall.core.symbols import latex_names
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def boundary_closed_form(
    model: StepModel, sym: sp.Symbol, x: float, symbolic: bool, metric_expr: sp.Expr
) -> sp.Basic | None:
    """The branch boundary at a kink ``x`` (`kink_equation`) solved for sym: symbolic (e.g.
    cluster.scale_up.domain_size) or a number; None when sympy has no closed form."""
    src = relax(metric_expr) if symbolic else model.substituted(relax(metric_expr), [sym])
    vals = {**model.values} if symbolic else {}
    found = kink_equation(src, sym, x, vals)
    if found is None:
        return None
    sols, _ = solve(found[0], sym)
    for s in sols:
        if abs(number(s, {**model.values, sym: x}) - x) <= 1e-6 * max(1.0, abs(x)):
            return s
    return None


def optimum(
    model: StepModel, key: str, symbolic: bool = False, metric: str = "step_time_s"
) -> Derivation:
    """Where d(metric)/dKEY = 0 inside KEY's feasible range (step time: minimum; throughput:
    maximum), or the kink where a branch changes, or "monotone: best at the bound".

    Stays whole: the bound, kink and stationary cases each set the closed form, value and note
    that the shared tail (LaTeX, details, the best whole value, the equation) then reports.
    """
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
    stationary, numeric_used = _stationary_points(segs, sym, notes)
    cands += stationary
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
        note = _kink_note(fn, x, metric)
    else:
        value = x
        note = "interior stationary point"
        if symbolic and closed:
            root = _symbolic_root(model, expr, sym, x, notes)
            closed = root if root is not None else closed
    if numeric_used and where == "stationary" and not closed:
        closed = f"root of d({metric})/d{key} = 0 near {x:.6g}"
    if notes:
        note += "; " + "; ".join(notes)
    latex = (
        sp.latex(closed, symbol_names=latex_names([closed]))
        if isinstance(closed, sp.Basic)
        else str(closed)
    )
    srepr = sp.srepr(closed) if isinstance(closed, sp.Basic) else ""
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
            feas, details["metric_at_feasible_exact"] = _best_whole(
                model, metric, sym, region.whole, minimize
            )
            if feas not in (math.floor(value), math.ceil(value)):
                note += (
                    f"; the best whole {key} where every constraint holds is {feas} "
                    f"({region.describe(key)})"
                )
        else:
            note += f"; no whole {key} satisfies every constraint"
    eq, why = optimum_equation(model, expr, sym, value, where, metric,
                               region.lo_by if value == lo else region.hi_by)  # fmt: skip
    return Derivation(
        kind="optimum",
        key=key,
        value=value,
        feasible_value=feas,
        closed_form=closed,
        latex=latex,
        definition=definition,
        method=method,
        note=note,
        scenario=model.scenario.label,
        details=details,
        srepr=srepr,
        equation=eq,
        sensitivity_note=why,
    )


def _kink_note(fn: Any, x: float, metric: str) -> str:
    """The note at a kink: how the relaxed metric `fn` rises on both sides of x."""
    eps_ = 1e-6 * max(1.0, x)
    dl, dr = (float(fn(x + e)) - float(fn(x)) for e in (-eps_, eps_))
    return (
        f"at a kink where a branch changes (a collective leaves its domain, or an "
        f"algorithm switches): {metric} rises on both sides ({dl:.3g}, {dr:.3g} over ±"
        f"{eps_:.1g})"
    )


def _symbolic_root(
    model: StepModel, expr: sp.Expr, sym: sp.Symbol, x: float, notes: list[str]
) -> sp.Basic | None:
    """The symbolic root of d(expr)/dsym = 0 (the other keys symbols) that is the stationary
    point x, or None with why in `notes`."""
    vals = {**model.values, sym: x}
    g = resolve_branches(relax(expr), vals)
    sols, why = solve(sp.diff(g, sym), sym, vals)
    match = [s for s in sols if abs(number(s, vals) - x) <= 1e-4 * max(1.0, x)]
    if match:
        return match[0]
    notes.append(f"symbolic form not found ({why or 'no matching root'}); numeric shown")
    return None


def _stationary_points(
    segs: list[Segment], sym: sp.Symbol, notes: list[str]
) -> tuple[list[tuple[float, str, Any]], bool]:
    """The candidates where d(metric)/dKEY = 0 inside each segment (closed form, else the
    derivative's sign changes bisected, noted in `notes`), and whether bisection was used."""
    cands: list[tuple[float, str, Any]] = []
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
    return cands, numeric_used


def _best_whole(
    model: StepModel, metric: str, sym: sp.Symbol, ints: np.ndarray, minimize: bool
) -> tuple[int, float]:
    """The best of the whole values where every constraint holds, and its exact metric."""
    ev = np.asarray(exact(model, metric, sym, ints), dtype=float) * np.ones_like(ints)
    best_i = int(np.argmin(ev if minimize else -ev))
    return int(ints[best_i]), float(ev[best_i])


def optimum_equation(
    model: StepModel, expr: sp.Expr, sym: sp.Symbol, x: float, where: str, metric: str, by: str
) -> tuple[Equation | None, str]:
    """What defines the optimum, for its sensitivities: ∂f/∂x = 0 at a stationary point; the
    boundary where the branch changes at a kink; the constraint that sets a bound (a bound on
    whole values, or the scanned range, defines none: (None, why))."""
    vals = {**model.values, sym: x}
    relaxed = relax(expr)
    if where == "stationary":
        F, what = sp.diff(resolve_branches(relaxed, vals), sym), f"∂{metric}/∂x"
    elif where == "kink":
        found = kink_equation(relaxed, sym, x, model.values)
        if found is None:
            return None, "no branch boundary found at the kink"
        F, what = found
    elif not by:
        return None, "the optimum is at the end of the scanned range: no equation defines it"
    elif is_integer_key(model, sym):
        return None, (
            f"a bound on whole values of {sym.name} (set by constraint {by}): it moves in steps"
        )
    else:
        c = next(c for c in model.constraints if c.name == by)
        if not isinstance(c.relation, sp.core.relational.Relational):
            return None, f"constraint {by} is not one comparison"
        F = resolve_branches(relax(c.relation.lhs - c.relation.rhs), vals)
        what = f"the two sides of constraint {by}"
    F = resolve_branches(F, vals)
    free = F.free_symbols - {sym}
    return Equation(F, sym, {p: float(v) for p, v in model.values.items() if p in free}, what), ""


def kink_equation(
    expr: sp.Expr, sym: sp.Symbol, x: float, values: Mapping[sp.Symbol, float]
) -> tuple[sp.Expr, str] | None:
    """At a kink x: the boundary between the branches active just below and just above x, as
    an expression that is zero there (a Piecewise condition's lhs − rhs, or the difference of
    the two Min/Max arguments), found along the active branches only.

    Stays whole: its nested helpers share the two sides of the kink (`left`, `right`) and walk
    one expression tree together.
    """
    d = 1e-6 * max(1.0, abs(x))
    left, right = {**values, sym: x - d}, {**values, sym: x + d}

    def active(e: sp.Basic, at: Mapping[sp.Symbol, float]) -> int:
        if isinstance(e, sp.Piecewise):
            return next(
                i for i, (_, c) in enumerate(e.args) if c == sp.true or bool(c.xreplace(at))
            )
        vs = [number(a, at) for a in e.args]
        return vs.index(min(vs) if isinstance(e, sp.Min) else max(vs))

    def sided(g: sp.Expr) -> sp.Expr | None:
        """g with its own branches resolved on the side of x where it depends on sym
        (``tp − Min(D, tp)`` is 0 below D and tp − D above)."""
        for at in (right, left):
            h = resolve_branches(g, at)
            if sym in sp.sympify(h).free_symbols:
                return h
        return None

    def walk(e: sp.Basic) -> tuple[sp.Expr, str] | None:
        if not e.args or sym not in e.free_symbols:
            return None
        if isinstance(e, sp.Piecewise | sp.Min | sp.Max):
            il, ir = active(e, left), active(e, right)
            if il != ir and isinstance(e, sp.Piecewise):
                c = e.args[min(il, ir)][1]
                g = sided(c.lhs - c.rhs) if isinstance(c, sp.core.relational.Relational) else None
                return None if g is None else (g, f"the branch boundary {c}")
            if il != ir:
                kind = type(e).__name__
                g = sided(e.args[il] - e.args[ir])
                what = f"{kind} argument {il + 1} = argument {ir + 1}"
                return None if g is None else (g, what)
            return walk(e.args[il][0] if isinstance(e, sp.Piecewise) else e.args[il])
        for a in e.args:
            found = walk(a)
            if found is not None:
                return found
        return None

    return walk(expr)


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
