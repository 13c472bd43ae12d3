"""The crossover: where two scenarios' metrics are equal along KEY."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import (
    RELAXED,
    bisect,
    degree,
    feasible_region,
    is_integer_key,
    is_users,
    key_range,
    lambdify1,
    metric_expr,
    minimize_sense,
    no_answer,
    parameter,
    relax,
    resolve_branches,
    scan_grid,
)
from stepwall.analyses.result import Derivation, Equation
from stepwall.analyses.roots import closed_for
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.core.symbols import is_constant, rebuild
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def share(model: StepModel, per_gpu: bool = False, besides: float = 0.0) -> float:
    """What the shared axis x is divided by for one replica's users: its dp replicas (x: the
    total users), or, ``per_gpu``, 1/(GPUs per replica + ``besides``) (x: users per GPU, each
    replica charged ``besides`` GPUs more: a P/D decode instance's share of its prefill
    pool)."""
    if per_gpu:
        own = float(sp.sympify(model.layout.gpus_per_replica).xreplace(dict(model.values)))
        return 1.0 / (own + besides)
    return degree(model, "dp")


def shared_axis(
    model: StepModel, sym: sp.Symbol, expr: sp.Expr, x: sp.Symbol, per_gpu: bool = False,
    besides: float = 0.0,
) -> tuple[sp.Expr, str]:  # fmt: skip
    """The metric as a function of the shared axis x: for the users per replica
    (`is_users`), x is the total users over all DP replicas (each replica serves x/dp), or,
    ``per_gpu``, the users per GPU (each replica serves x·(its GPUs + ``besides``))."""
    if is_users(model, sym):
        s = share(model, per_gpu, besides)
        f = rebuild(model.substituted(relax(expr), [sym]), {sym: x / s})
        each = f"x·{1 / s:g}" if per_gpu else f"x/{s:g}"
        many = f"{degree(model, 'dp'):g} replica(s)"
        return f, f"{model.scenario.label}: {many}, each {each} users"
    return rebuild(model.substituted(relax(expr), [sym]), {sym: x}), ""


def crossover(
    model: StepModel,
    other: StepModel,
    key: str,
    metric: str = "tokens_per_s_per_gpu",
    symbolic: bool = False,
    per_gpu: bool = False,
    besides: tuple[float, float] = (0.0, 0.0),
) -> Derivation:
    """Where the two scenarios' metrics are equal along KEY (for the users per replica,
    `is_users`, such as workload.concurrency: total users across each scenario's DP replicas,
    or, ``per_gpu``, users per GPU, each side's replica charged ``besides`` GPUs more than
    its own).

    Stays whole: one scan of the shared range finds the roots and the infeasible crossings, and
    which of the five answers it gives (no feasible range, infeasible crossings only, equal
    metrics, one leads, a crossing) depends on them all.
    """
    sym = parameter(model, key)
    parameter(other, key)
    e1, e2 = metric_expr(model, metric), metric_expr(other, metric)
    x = sym
    f1, d1 = shared_axis(model, sym, e1, x, per_gpu, besides[0])
    f2, d2 = shared_axis(other, sym, e2, x, per_gpu, besides[1])
    lo1, hi1 = key_range(model, sym)
    lo2, hi2 = key_range(other, sym)
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    scale1 = scale2 = 1.0
    if is_users(model, sym):
        scale1, scale2 = share(model, per_gpu, besides[0]), share(other, per_gpu, besides[1])
        lo, hi = (min(scale1, scale2), max(hi1 * scale1, hi2 * scale2)) if per_gpu else (
            1.0, max(hi1, hi2))  # fmt: skip
    r1 = feasible_region(model, sym, lo / scale1, hi / scale1)
    r2 = feasible_region(other, sym, lo / scale2, hi / scale2)
    g1, g2 = lambdify1(f1, x), lambdify1(f2, x)

    def diff_fn(v: float) -> float:
        return float(g1(v)) - float(g2(v))

    grid = scan_grid(lo, hi, 800)
    with np.errstate(all="ignore"):
        dv = (np.asarray(g1(grid), dtype=float) - np.asarray(g2(grid), dtype=float)) * np.ones_like(
            grid
        )
    roots: list[float] = []
    dropped: list[float] = []
    for i in range(1, len(grid)):
        if np.sign(dv[i]) != np.sign(dv[i - 1]) and np.sign(dv[i]) != 0:
            r = bisect(diff_fn, grid[i - 1], grid[i])
            ok = r1.contains(r / scale1) and r2.contains(r / scale2)
            (roots if ok else dropped).append(r)
    n1, n2 = model.scenario.label, other.scenario.label
    axis_note = "; ".join(d for d in (d1, d2) if d)
    definition = (
        f"{key} = x where {metric}[{n1}](x) = {metric}[{n2}](x), x in [{lo:g}, {hi:g}]; "
        f"{RELAXED}; Piecewise/Min/Max resolved at the crossing"
        + (f"; axis: {axis_note}" if axis_note else "")
    )
    details: dict[str, Any] = {
        "against": n2,
        "metric": metric,
        "range": [lo, hi],
        "roots": roots,
        "at_lo": {n1: float(g1(lo)), n2: float(g2(lo))},
        "at_hi": {n1: float(g1(hi)), n2: float(g2(hi))},
        "feasible_region": {n1: r1.describe(key), n2: r2.describe(key)},
        "infeasible_crossings": dropped,
    }
    # no crossing, and why (the first model's name as the scenario)
    nothing = partial(no_answer, "crossover", None, key, definition=definition, scenario=n1,
                      details=details)  # fmt: skip
    if r1.empty or r2.empty:  # one side holds nowhere along the axis: nothing to compare
        why = f"no feasible {key}: {n1}: {r1.describe(key)}; {n2}: {r2.describe(key)}"
        return nothing(why)
    if not roots and dropped:
        why = (
            f"the metrics cross only where a constraint fails (x = "
            f"{', '.join(f'{d:.4g}' for d in dropped)}): {n1}: {r1.describe(key)}; "
            f"{n2}: {r2.describe(key)}"
        )
        return nothing(why)
    if not roots and not np.any(dv):
        why = f"{metric} is the same for both over the whole range [{lo:g}, {hi:g}]: no crossing"
        return nothing(why)
    if not roots:
        lead = n1 if dv[len(dv) // 2] > 0 else n2
        ratio_lo = float(g1(lo)) / float(g2(lo))
        ratio_hi = float(g1(hi)) / float(g2(hi))
        sense = "higher" if not minimize_sense(metric) else "lower"
        why = (
            f"{lead} leads over the whole range [{lo:g}, {hi:g}] ({sense} is better is not "
            f"assumed: {n1}/{n2} = {ratio_lo:.3g} at {lo:g}, {ratio_hi:.3g} at {hi:g}); "
            "the sign of the difference never changes, so there is no crossover"
        )
        return nothing(why)
    r = roots[0]
    eq = crossing_equation(model, other, sym, e1, e2, r, metric, per_gpu, besides)
    cr, why, shown = closed_for(eq, r, symbolic)
    if dropped:
        why = (why + "; " if why else "") + (
            f"{len(dropped)} crossing(s) where a constraint fails left out"
        )
    srepr, form, regime = "", None, None
    if cr is not None:
        closed, latex, srepr, form, regime = shown
        method = "symbolic" if cr.approximation is None else "asymptotic"
        note = why
    else:
        method = "numeric"
        closed = f"root of {metric}[{n1}] - {metric}[{n2}] in [{lo:g}, {hi:g}]"
        latex = ""
        note = f"{why or 'sympy found no matching root'}: bisection on the resolved metrics"
    if len(roots) > 1:
        note = (note + "; " if note else "") + f"{len(roots)} crossings; the first is shown"
    before = n1 if diff_fn(max(lo, r * 0.9)) > 0 else n2
    note = (note + "; " if note else "") + f"{before} leads below x = {r:.4g}"
    feas = math.ceil(r - 1e-9) if is_integer_key(model, sym) and not per_gpu else None
    if feas is not None and not (r1.contains(feas / scale1) and r2.contains(feas / scale2)):
        feas = None
    return Derivation(
        kind="crossover", key=key, value=r, feasible_value=feas, closed_form=closed,
        latex=latex, definition=definition, method=method, note=note, scenario=n1,
        details=details, srepr=srepr, form=form, regime=regime, equation=eq,
    )  # fmt: skip


def side_names(model: StepModel, other: StepModel) -> tuple[str, str]:
    """How a crossover's rows name its two sides: the scenarios' names, or their labels
    (with the overrides) where the names are the same."""
    n1, n2 = model.scenario.name, other.scenario.name
    if n1 == n2:
        n1, n2 = model.scenario.label, other.scenario.label
    return (n1, n2) if n1 != n2 else ("first", "second")


def along(
    model: StepModel,
    sym: sp.Symbol,
    expr: sp.Expr,
    r: float,
    rename: dict[sp.Basic, sp.Basic],
    per_gpu: bool = False,
    besides: float = 0.0,
) -> sp.Expr:
    """The metric along the shared axis, symbolic in every parameter, branches resolved at
    x = r; for concurrency each of dp replicas serves x/dp (dp symbolic), or, ``per_gpu``,
    x·(its GPUs + ``besides``). ``rename`` gives the other scenario's parameters symbols of
    their own."""
    vals = dict(model.values)
    relaxed = relax(expr)
    if is_users(model, sym):
        gpus = sp.sympify(model.layout.gpus_per_replica)
        gpus = gpus + sp.Float(besides) if besides else gpus
        s = 1 / gpus if per_gpu else sp.sympify(model.layout.dp)
        vals[sym] = r / share(model, per_gpu, besides)
        f = rebuild(resolve_branches(relaxed, vals), {sym: sym / s})
    else:
        vals[sym] = r
        f = resolve_branches(relaxed, vals)
    return rebuild(f, rename) if rename else f


def crossing_equation(
    model: StepModel,
    other: StepModel,
    sym: sp.Symbol,
    e1: sp.Expr,
    e2: sp.Expr,
    r: float,
    metric: str,
    per_gpu: bool = False,
    besides: tuple[float, float] = (0.0, 0.0),
) -> Equation:
    """F(x, p) = metric₁(x) − metric₂(x), branches resolved at the crossing r, every
    parameter symbolic: the second scenario's as primed symbols of their own, so that each
    side's parameters are levers apart (constants, such as FLOPs per MAC, stay shared)."""
    s1, s2 = side_names(model, other)
    rename = {
        p: sp.Symbol(p.name + "'", positive=True)
        for p in other.values
        if p != sym and not is_constant(p)
    }
    F = (along(model, sym, e1, r, {}, per_gpu, besides[0])
         - along(other, sym, e2, r, rename, per_gpu, besides[1]))  # fmt: skip
    values: dict[sp.Symbol, float] = {p: float(v) for p, v in model.values.items() if p != sym}
    names: dict[sp.Symbol, tuple[str, str]] = {p: (p.name, s1) for p in values}
    for p, q in rename.items():
        values[q] = float(other.values[p])
        names[q] = (p.name, s2)
    free = F.free_symbols
    return Equation(
        F,
        sym,
        {k: v for k, v in values.items() if k in free},
        f"{metric}[{s1}](x) − {metric}[{s2}](x)",
        {k: v for k, v in names.items() if k in free},
    )


@attrs.frozen
class CrossoverOptions(AnalysisOptions):
    key: str = option("the shared axis, e.g. workload.concurrency (total users)", positional=True)
    against: str = option("the other scenario (a catalog name or a path; in a report, an alias)",
                          metavar="SCENARIO2")  # fmt: skip
    metric: str = option("the metric compared", default="tokens_per_s_per_gpu")


def _run(model: StepModel, o: CrossoverOptions, context: Context) -> Derivation:
    if not o.against.strip():
        raise SpecError("derive", "--against", "is empty", "the other scenario: a name or a path")
    return crossover(model, context.model_of(o.against, "against"), o.key, o.metric, o.symbolic)


ANALYSIS = Analysis(
    "crossover",
    "where two scenarios' metrics are equal along KEY (--against the other scenario)",
    CrossoverOptions,
    _run,
)
