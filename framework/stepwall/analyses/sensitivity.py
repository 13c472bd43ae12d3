"""Sensitivities of a root by implicit differentiation, for any analysis that records its
defining `Equation`.

A root x* of F(x, p) = 0 moves with a parameter p as dx*/dp = −(∂F/∂p)/(∂F/∂x) (the implicit
function theorem; it needs ∂F/∂x ≠ 0, a simple root). Its elasticity is

    ∂ln x*/∂ln p = −(p/x*)·(∂F/∂p)/(∂F/∂x),

symbolic in every parameter: F is the symbolic equation as recorded (branches resolved at
the root), its partials the chain rule applied to F's expression tree at the point (reverse
mode, every partial in one pass: `gradient`; exact, not a finite difference), and with
--symbolic each elasticity is also printed as an expression (``sp.diff``). Where one equation holds
two scenarios (a crossover), each side's parameters are distinct symbols, so each side gets
its own row, plus a row ``both``: the parameter scaled by the same factor on both sides (the
sum of the two elasticities). `attach` is what `stepwall.analyses.base.run` calls on every result.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

import attrs
import sympy as sp

from stepwall.analyses.result import Derivation, Equation, Sensitivity
from stepwall.core.symbols import is_constant, post_order
from stepwall.numeric.printer import compile_function

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MAX_OPS = 20_000  # F larger than this is not differentiated (the note says so)
OFF_ROOT = 1e-3  # |F/F_x| beyond this fraction of x*: the value is not a root of F
EXPRESSION_CHARS = 4000  # a symbolic elasticity longer than this is cut (with " ...")


def sensitivities(
    eq: Equation, root: float, symbolic: bool = False
) -> tuple[tuple[Sensitivity, ...], str]:
    """The root's elasticity to every parameter in F, largest magnitude first (ties by name
    and side), and "" — or no rows and why (F too large, x* not a root of F, ∂F/∂x = 0).

    Stays whole: a sequence of refusals, each with its why, on the way to the partial
    derivatives, then one row per parameter from them.
    """
    F = sp.sympify(eq.F)
    if F.has(sp.Piecewise, sp.Min, sp.Max, sp.ceiling, sp.floor):
        return (), "branches remain in the defining equation"
    if sp.count_ops(F) > MAX_OPS:
        return (), f"the defining equation has over {MAX_OPS} operations: not differentiated"
    x = eq.x
    params = sorted(
        (s for s in F.free_symbols if s != x and not is_constant(s)),
        key=lambda s: (eq.names.get(s, (s.name, ""))[::-1], s.name),
    )
    others = sorted((s for s in F.free_symbols if s != x and s not in params), key=str)
    values = {**{s: s.value for s in others}, **eq.values}  # constants carry their value
    missing = [s for s in (*params, *others) if values.get(s) is None]
    if missing:
        return (), f"no value for {', '.join(map(str, missing[:3]))}"
    point = {**{s: float(values[s]) for s in (*params, *others)}, x: float(root)}
    grad = gradient(F, point)
    if grad is None:  # a function the chain rule below does not know: sympy differentiates
        args = [x, *params, *others]
        fn = compile_function(args, [F, *(sp.diff(F, s) for s in (x, *params))], "math", cse=True)
        try:
            f0, fx, *fp = fn(*(point[s] for s in args))
        except (ValueError, ZeroDivisionError, OverflowError, TypeError) as e:
            return (), f"the partial derivatives cannot be evaluated at the root ({e})"
    else:
        f0, partial = grad
        fx, fp = partial.get(x, 0.0), [partial.get(p, 0.0) for p in params]
    if not (math.isfinite(fx) and fx != 0):
        return (), "∂F/∂x = 0 at the root (not a simple root): the sensitivities are not defined"
    if abs(f0 / fx) > OFF_ROOT * max(abs(root), 1e-300):
        return (), (
            f"the value is not a root of F (F/(∂F/∂x) = {f0 / fx:.3g} at x* = {root:.6g}, "
            "e.g. a bound on whole values): no sensitivities"
        )
    fx_expr = sp.diff(F, x) if symbolic else sp.Integer(0)
    rows: list[Sensitivity] = []
    for p, g_p in zip(params, fp, strict=True):
        path, side = eq.names.get(p, (p.name, ""))
        pv = float(eq.values[p])
        deriv = -g_p / fx
        expression = ""
        if symbolic:
            text = str(-(p / x) * sp.diff(F, p) / fx_expr)
            expression = text if len(text) <= EXPRESSION_CHARS else text[:EXPRESSION_CHARS] + " ..."
        rows.append(Sensitivity(path, side, pv * deriv / root, deriv, pv, expression))
    rows += _both(rows)
    rows.sort(key=lambda s: (-round(abs(s.elasticity), 9), s.parameter, s.side))
    return tuple(rows), ""


def _both(rows: Sequence[Sensitivity]) -> list[Sensitivity]:
    """A parameter on two sides, scaled alike: elasticities add; derivatives add where the
    two values are equal (otherwise ∂x*/∂p of a common p has no meaning)."""
    by: dict[str, list[Sensitivity]] = defaultdict(list)
    for s in rows:
        if s.side:
            by[s.parameter].append(s)
    out = []
    for path, group in by.items():
        if len(group) < 2 or not all(s.elasticity for s in group):
            continue
        same = len({s.value for s in group}) == 1
        total = sum(s.elasticity for s in group)
        if abs(total) <= 1e-9 * max(abs(s.elasticity) for s in group):
            total = 0.0  # the two sides cancel (a term common to both): exactly no effect
        deriv = (0.0 if total == 0 else sum(s.derivative or 0.0 for s in group)) if same else None
        out.append(Sensitivity(path, "both", total, deriv, group[0].value if same else None))
    return out


def gradient(F: sp.Expr, at: dict[sp.Basic, float]) -> tuple[float, dict[sp.Basic, float]] | None:
    """F and ∂F/∂s for every symbol s at ``at``, by the chain rule on F's expression tree in
    reverse (one forward pass for the values, one backward pass for the adjoints; a subtree
    shared by several parents is visited once). None when F holds a function other than
    +, ×, power, exp and log, or a value leaves the reals.

    Stays whole: reverse-mode differentiation: one case per node type in the forward pass and
    again in the backward pass, over one shared order.
    """
    order = post_order([F])  # every node after its arguments
    val: dict[sp.Basic, float] = {}
    try:
        for n in order:
            if n.is_Symbol:
                val[n] = at[n]
            elif n.is_Number:
                val[n] = float(n)
            elif n.is_Add:
                val[n] = math.fsum(val[a] for a in n.args)
            elif n.is_Mul:
                val[n] = math.prod(val[a] for a in n.args)
            elif n.is_Pow:
                val[n] = math.pow(val[n.args[0]], val[n.args[1]])
            elif isinstance(n, sp.exp):
                val[n] = math.exp(val[n.args[0]])
            elif isinstance(n, sp.log) and len(n.args) == 1:
                val[n] = math.log(val[n.args[0]])
            else:
                return None
        adj: dict[sp.Basic, float] = defaultdict(float)
        adj[F] = 1.0
        for n in reversed(order):
            a = adj.get(n, 0.0)
            if a == 0.0 or not n.args:
                continue
            if n.is_Add:
                for c in n.args:
                    adj[c] += a
            elif n.is_Mul:
                vs = [val[c] for c in n.args]
                for i, c in enumerate(n.args):
                    adj[c] += a * math.prod(vs[:i] + vs[i + 1 :])
            elif n.is_Pow:
                b, e = n.args
                adj[b] += a * val[e] * math.pow(val[b], val[e] - 1)
                if e.free_symbols:
                    adj[e] += a * val[n] * math.log(val[b])
            elif isinstance(n, sp.exp):
                adj[n.args[0]] += a * val[n]
            else:  # log
                adj[n.args[0]] += a / val[n.args[0]]
    except (ValueError, ZeroDivisionError, OverflowError, KeyError):
        return None
    return val[F], {s: adj.get(s, 0.0) for s in F.free_symbols}


def attach(
    d: Derivation,
    symbolic: bool = False,
    show: bool = False,
    whole: Callable[[str], bool] | None = None,
) -> Derivation:
    """``d`` with the sensitivities of its root, when it records an `Equation` and has a
    value; ``show`` makes ``render`` print them all; ``whole(path)`` says whether the specs
    take a parameter in whole numbers."""
    if d.equation is None:
        if not show or d.value is None:
            return d
        why = d.sensitivity_note or "the analysis records no equation that defines its value"
        return attrs.evolve(d, sensitivity_note=why, sensitivity_rows=1)
    if d.value is None:
        return attrs.evolve(d, sensitivity_note="there is no root")
    rows, why = sensitivities(d.equation, float(d.value), symbolic)
    if whole is not None:
        rows = tuple(attrs.evolve(r, whole=whole(r.parameter)) for r in rows)
    return attrs.evolve(
        d,
        sensitivities=rows,
        sensitivity_note=why,
        sensitivity_rows=max(len(rows), 1) if show else 0,
    )
