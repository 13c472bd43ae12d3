"""The wall: the smallest KEY past which growing it gains less than ε (the TP-8 wall)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import (
    EPS,
    bisect,
    exact,
    feasible,
    feasible_region,
    key_range,
    lambdify1,
    metric_expr,
    no_answer,
    number,
    parameter,
    prepared,
    relax,
    resolution_note,
    resolve_branches,
)
from stepwall.analyses.result import Derivation, Equation
from stepwall.analyses.roots import MAX_OPS
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.core.symbols import latex_names, rebuild
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def freeze_growing(
    f: sp.Expr, sym: sp.Symbol, x0: float, values: Mapping[sp.Symbol, float] | None = None
) -> tuple[sp.Expr, list[str]]:
    """Addends of ``f`` that grow without bound in ``sym`` (ring/tree latency on the branch
    kept) replaced by their value at ``x0``; returns the new f and what was frozen. A growing
    addend that is a product over a sum (n_layers·(latency·log N + bytes/N)) is multiplied
    out first, so that only its growing parts are held, whether f is numeric or symbolic."""
    vals = dict(values or {})

    def grows(a: sp.Expr) -> bool:
        """Still rising between N = 10¹² and 10¹³ by over 1e-6 of its size (log N, N^k; not
        a bounded −c/N, whose rise there is ~1e-12 of its size)."""
        v12, v13, v0 = (number(a, {**vals, sym: x}) for x in (1e12, 1e13, x0))
        return v13 - v12 > 1e-6 * max(abs(v12), abs(v0))

    out, frozen = [], []
    for a in sp.Add.make_args(f):
        if sym not in a.free_symbols or not grows(a):
            out.append(a)
            continue
        parts = sp.Add.make_args(sp.expand_mul(a))
        held = [p for p in parts if sym in p.free_symbols and grows(p)] or [a]
        out += [p for p in parts if p not in held] if held != [a] else []
        for p in held:
            out.append(p.xreplace({sym: sp.Float(x0)}))
            frozen.append(f"{p}" if len(str(p)) < 60 else f"{str(p)[:57]}...")
    return sp.Add(*out), frozen


def _a_and_b(f: sp.Expr, sym: sp.Symbol, x0: float) -> tuple[float, float] | None:
    """(A, B) where t = B + A/N (checked at points around x0, B > 0), else None."""
    x = sp.Dummy("x", positive=True)
    fx = sp.expand(f.xreplace({sym: 1 / x}))
    b_num = fx.xreplace({x: 0})
    a_num = sp.diff(fx, x).xreplace({x: 0})
    if not (b_num.is_finite and a_num.is_finite and float(b_num) > 0):
        return None
    probe = np.array([1.0, 3.0, 17.0, 1000.0]) * max(x0, 1.0)
    got = np.asarray(lambdify1(f, sym)(probe), dtype=float)
    want = float(b_num) + float(a_num) / probe
    if not np.allclose(got, want, rtol=1e-6):
        return None
    return float(a_num), float(b_num)


def _closed_wall(f_sym: sp.Expr | None, sym: sp.Symbol, A: float, B: float) -> tuple[str, str, str]:
    """N* = A/(ε·B) as text, LaTeX and srepr: A and B read from the symbolic step time
    ``f_sym`` where one is given, else their numbers."""
    if f_sym is not None:
        x = sp.Dummy("x", positive=True)
        fsx = sp.expand(f_sym.xreplace({sym: 1 / x}))
        b_s = fsx.xreplace({x: 0})
        a_s = sp.diff(fsx, x).xreplace({x: 0})
        a_str, b_str = str(a_s), str(b_s)
        srepr = sp.srepr(a_s / (EPS * b_s))
        a_tex = sp.latex(a_s, symbol_names=latex_names([a_s]))
        b_tex = sp.latex(b_s, symbol_names=latex_names([b_s]))
    else:
        a_str, b_str = f"{A:.6g}", f"{B:.6g}"
        a_tex, b_tex = a_str, b_str
        srepr = sp.srepr(sp.Float(A) / (EPS * sp.Float(B)))
    closed = f"({a_str})/(epsilon*({b_str}))"
    latex = rf"\frac{{{a_tex}}}{{\epsilon \cdot \left({b_tex}\right)}}"
    return closed, latex, srepr


def _a_by_term(model: StepModel, sym: sp.Symbol, x0: float) -> dict[str, float]:
    """Each term's share of A (its fall from x0 to a far N, times x0), the negligible left out."""
    terms = {}
    for t in model.terms:
        tn = freeze_growing(
            resolve_branches(relax(model.substituted(t.expr, [sym])), {sym: x0}), sym, x0
        )[0]
        val_hi = number(tn, {sym: 1e9})
        val_at = number(tn, {sym: x0})
        share = (val_at - val_hi) * x0
        if abs(share) > 1e-12:
            terms[t.name] = share
    return terms


def wall(
    model: StepModel,
    key: str,
    eps: float = 0.15,
    symbolic: bool = False,
    metric: str = "step_time_s",
) -> Derivation:
    """Smallest KEY with t(KEY)/t(∞) − 1 < ε, with t's branches fixed at the scenario's point.

    Where t = B + A/N (the usual case: work split over N, the rest fixed) the closed form is
    N* = A/(ε·B); otherwise sympy solves t(N)/t(∞) − 1 = ε, or bisection does.

    Stays whole: the B + A/N and the numeric case each fill the value, closed form and details
    that the shared tail (the feasible whole value, the gains at the point) reads.
    """
    if not 0 < eps < 10:
        raise SpecError("derive", "--eps", f"{eps} is not a useful tolerance", "0 < eps < 10")
    sym = parameter(model, key)
    x0 = float(model.values[sym])
    f, f_sym, ch = prepared(model, metric_expr(model, metric), sym, symbolic)
    definition = (
        f"smallest {key} = N with t(N)/t(∞) − 1 < ε (ε = {eps:g}), t = {metric}; "
        + resolution_note(ch, f"at the scenario's point {key} = {x0:g}, kept for all N")
    )
    f, frozen = freeze_growing(f, sym, x0)
    if f_sym is not None and frozen:
        f_sym, _ = freeze_growing(f_sym, sym, x0, model.values)
    if frozen:
        definition += (
            f"; addends growing without bound in {key} ({', '.join(frozen)}) held at their "
            f"value at {key} = {x0:g}"
        )
    details: dict[str, Any] = {"eps": eps, "point": x0, "frozen": frozen}
    method, note, srepr = "symbolic", "", ""
    value: float | None = None
    closed, latex = "", ""
    # the values are rounded to 6 digits (model.substituted); expand at full precision so
    # that A and B agree with t evaluated from the same rounded values
    f = rebuild(f, {c: sp.Float(c, 15) for c in f.atoms(sp.Float)})
    ab = _a_and_b(f, sym, x0)
    linear = ab is not None
    if ab is not None:
        A, B = ab
        details.update({"A": A, "B": B, "t_inf_s": B})
        if A <= 0:
            value, note = None, f"t does not fall with {key} (A = {A:g} ≤ 0): no wall"
        else:
            value = A / (eps * B)
        small = f_sym is not None and sp.count_ops(f_sym) <= MAX_OPS
        closed, latex, srepr = _closed_wall(f_sym if small else None, sym, A, B)
        if f_sym is not None and not small:
            note = f"the symbolic step time has over {MAX_OPS} operations; A, B shown numerically"
        details["shape"] = "A/(epsilon*B): t(N) = B + A/N"
        details["A_by_term"] = _a_by_term(model, sym, x0)
    else:
        # general: t(∞) numerically from a far point, then solve / bisect
        method = "numeric"
        fn = lambdify1(f, sym)
        t_inf = float(fn(1e12))
        if not math.isfinite(t_inf) or t_inf <= 0:
            t_inf_s = "t(∞) is not finite on this branch"
            return no_answer("wall", model, key, f"no wall: {t_inf_s}", definition=definition,
                             closed_form="", details=details)  # fmt: skip

        def g(n: float) -> float:
            return float(fn(n)) / t_inf - 1 - eps

        note = (note + "; " if note else "") + "t is not of the form B + A/N; bisection"
        lo, hi = 1e-6, 1e9
        value = bisect(g, lo, hi) if g(lo) > 0 > g(hi) else None
        details["t_inf_s"] = t_inf
        closed = f"root of t(N)/{t_inf:.6g} - 1 - {eps:g}"
        latex = closed
    region = feasible_region(model, sym, *key_range(model, sym))
    feas, why = feasible(model, sym, value, region)
    details["feasible_region"] = region.describe(key)
    if why:
        note = (note + "; " if note else "") + why
    elif feas is not None and value is not None and feas > math.ceil(value - 1e-9):
        note = (note + "; " if note else "") + (
            f"the first whole {key} ≥ {value:.4g} where every constraint holds is {feas}"
        )
    if value is not None:
        t_inf = details["t_inf_s"]

        def ev(n: float) -> float:
            return float(exact(model, metric, sym, float(n)))

        details["gain_remaining_at_point"] = ev(x0) / t_inf - 1
        details["doubling_gain_at_point"] = ev(x0) / ev(2 * x0) - 1
        if feas is not None:
            details["gain_remaining_at_feasible_exact"] = ev(feas) / t_inf - 1
            details["doubling_gain_at_feasible"] = ev(feas) / ev(2 * feas) - 1
        if linear:
            A, B = details["A"], details["B"]
            # marginal view: doubling N gains A/(2N) / (B + A/(2N)) < eps
            details["marginal_wall"] = A * (1 - eps) / (2 * eps * B)
            details["marginal_definition"] = "smallest N where doubling N gains < ε"
    return Derivation(
        kind="wall",
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
        equation=wall_equation(model, metric_expr(model, metric), sym, x0, eps),
    )


FAR = 1e12  # t(∞) is t at this N, as in the numeric wall


def wall_equation(
    model: StepModel, expr: sp.Expr, sym: sp.Symbol, x0: float, eps: float
) -> Equation:
    """F(N, p) = t(N) − (1 + ε)·t(∞) with every parameter symbolic, the branches fixed at the
    point and growing addends held there (as the wall does); t(∞) is t at N = 10¹², where
    B + A/N is B to 12 digits."""
    f = resolve_branches(relax(expr), {**model.values, sym: x0})
    f, _ = freeze_growing(f, sym, x0, model.values)
    F = f - (1 + sp.Float(eps)) * rebuild(f, {sym: sp.Float(FAR)})
    free = F.free_symbols - {sym}
    return Equation(
        F,
        sym,
        {p: float(v) for p, v in model.values.items() if p in free},
        f"t(N) − (1 + ε)·t(∞), ε = {eps:g}",
    )


@attrs.frozen
class WallOptions(AnalysisOptions):
    key: str = option("the parameter, e.g. parallel.tp", positional=True)
    eps: float = option("remaining-gain tolerance ε: the wall is where t(N)/t(∞) − 1 < ε",
                        default=0.15)  # fmt: skip
    metric: str = option("the metric (a time: smaller is better)", default="step_time_s")


def _run(model: StepModel, o: WallOptions, context: Context) -> Derivation:
    return wall(model, o.key, o.eps, o.symbolic, o.metric)


ANALYSIS = Analysis(
    "wall",
    "the smallest KEY past which growing it gains less than ε: N* = A/(ε·B) when t = B + A/N",
    WallOptions,
    _run,
)
