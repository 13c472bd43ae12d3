"""Derivations: walls, optima, crossovers, elasticities, regimes and the EP plateau.

Each function takes a `StepModel` and a key (a spec path such as ``parallel.tp``) and returns
`Derivation` results: a closed form (str and LaTeX), its value, the definition used, a
feasible value (rounded to a degree the cluster and model allow) and the method —
``symbolic`` when sympy produced the closed form, ``numeric`` when root finding on the model
had to stand in (always said, with the reason, in ``note``).

Before solving, two things make the step time smooth in the key, and every result says so:

* ``ceiling(x)`` (uneven shards) is relaxed to ``Max(x, 1)``: continuous, but a rank never
  holds less than one head or serves less than one user;
* ``Piecewise`` (which collective branch), ``Min`` (which algorithm) and ``Max`` (roofline)
  are resolved to the branch that holds at the scenario's point, or, over a range, split
  into segments on each of which one branch holds.

Every search runs inside the feasible region: constraints (memory, divisibility, cluster
size, …) are evaluated along the key, the range is cut to where they hold, and a result says
which constraint bounds it. Whether a closed form is attempted is decided by the expression's
structure (a polynomial of low degree after clearing denominators, or linear in log x), never
by elapsed time, so the same command prints the same text on an idle and a busy machine.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall import symbols
from stepwall.errors import SpecError
from stepwall.model import METRICS, StepModel
from stepwall.plugins.moe_transformer import tokens_for_expert_fraction
from stepwall.units import TIME

MAX_OPS = 3000  # larger equations are not handed to sympy: bisection answers, and says so
EPS = sp.Symbol("epsilon", positive=True)
RELAXED = "ceilings relaxed (ceiling(x) -> Max(x, 1))"


@attrs.frozen
class Derivation:
    """One derived result. ``value`` is the continuous answer; ``feasible_value`` the degree
    a cluster/model allows (None when none does); ``details`` is JSON-able."""

    kind: str
    key: str
    value: float | None
    feasible_value: float | int | None
    closed_form: str
    latex: str
    definition: str
    method: str
    note: str = ""
    scenario: str = ""
    details: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scenario": self.scenario,
            "key": self.key,
            "value": self.value,
            "feasible_value": self.feasible_value,
            "closed_form": self.closed_form,
            "latex": self.latex,
            "definition": self.definition,
            "method": self.method,
            "note": self.note,
            "details": _jsonable(self.details),
        }

    def render(self) -> str:
        """Legible text: what, closed form, value, definition, method."""
        val = "none" if self.value is None else f"{self.value:.6g}"
        feas = "none" if self.feasible_value is None else f"{self.feasible_value:g}"
        lines = [
            f"{self.kind} {self.key}  [{self.scenario}]",
            f"  value          {val}   (feasible: {feas})",
            f"  closed form    {self.closed_form}",
            f"  definition     {self.definition}",
            f"  method         {self.method}",
        ]
        if self.note:
            lines.append(f"  note           {self.note}")
        return "\n".join(lines)


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, bool | str) or x is None:
        return x
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating | sp.Number):
        f = float(x)
        return f if math.isfinite(f) else None
    return str(x)


# ---------------------------------------------------------------------------- helpers


def _solve(
    eq: sp.Expr, sym: sp.Symbol, check: Mapping[sp.Basic, float] | None = None
) -> tuple[list[sp.Expr], str]:
    """Closed-form real, positive roots of eq = 0 where one exists by construction, or
    ([], why not).

    Tried, by structure alone: a numerator polynomial in ``sym`` after clearing denominators
    (degree ≤ 4 with numeric coefficients, ≤ 2 with symbols), and ``a + b·log(sym)``. Roots
    are checked at ``check`` (the other symbols' values); a root whose value cannot be judged
    there is kept for the caller to match numerically."""
    eq = sp.sympify(eq)
    if sp.count_ops(eq) > MAX_OPS:
        return [], f"the equation has over {MAX_OPS} operations: no closed form attempted"
    if eq.has(sp.Piecewise, sp.Min, sp.Max, sp.ceiling, sp.floor):
        return [], "branches remain in the equation: no closed form attempted"
    sols = _roots_polynomial(eq, sym)
    if sols is None:
        sols = _roots_log_linear(eq, sym)
    if sols is None:
        return [], (
            f"not polynomial in {sym} after clearing denominators, nor linear in log({sym}) "
            "(e.g. an exponential in it)"
        )
    if isinstance(sols, str):
        return [], sols
    good = []
    for r in sols:
        try:
            v = complex(r.xreplace({EPS: 0.15, **(check or {})}).evalf())
        except (TypeError, ValueError):
            good.append(r)
            continue
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)) and v.real > 0:
            good.append(r)
    return good, "" if good else "no real positive root"


def _roots_polynomial(eq: sp.Expr, sym: sp.Symbol) -> list[sp.Expr] | str | None:
    num, _ = eq.as_numer_denom()
    num = sp.expand(num)
    if not num.is_polynomial(sym):
        return None
    poly = sp.Poly(num, sym)
    deg = poly.degree()
    has_symbols = bool(num.free_symbols - {sym})
    if deg < 1:
        return f"the equation does not depend on {sym}"
    if deg > (2 if has_symbols else 4):
        return f"a polynomial of degree {deg} in {sym}: no closed form attempted"
    return list(sp.roots(poly, multiple=True))


def _roots_log_linear(eq: sp.Expr, sym: sp.Symbol) -> list[sp.Expr] | None:
    """a + b·log(x) = 0 -> x = exp(-a/b) (a tree collective's log2 N against a constant)."""
    u = sp.Dummy("u")
    e = sp.expand(sp.expand_log(eq, force=True)).subs(sp.log(sym), u)
    if sym in e.free_symbols or not e.is_polynomial(u) or sp.Poly(e, u).degree() != 1:
        return None
    b, a = sp.Poly(e, u).all_coeffs()
    return [sp.exp(-a / b)]


def parameter(model: StepModel, key: str) -> sp.Symbol:
    """The Symbol of ``key``; a SpecError naming the closest parameter if there is none, or
    saying that the key is structural (the model's terms depend on its value)."""
    sym = model.parameter(key, "derive")
    _check_key(model, sym)
    return sym


def _metric(model: StepModel, metric: str) -> sp.Expr:
    if metric not in model.metrics:
        raise SpecError("derive", "--metric", f"unknown metric {metric!r}", " | ".join(METRICS))
    return sp.sympify(model.metrics[metric])


def relax(expr: sp.Expr) -> sp.Expr:
    """ceiling(x) -> Max(x, 1) and floor(x) -> x: uneven shards made continuous, but no rank
    holds less than one unit (a head, a user) of a ceiling'd count."""
    return expr.replace(
        lambda e: isinstance(e, sp.ceiling | sp.floor),
        lambda e: sp.Max(e.args[0], 1) if isinstance(e, sp.ceiling) else e.args[0],
    )


def _num(expr: sp.Expr, vals: Mapping[sp.Symbol, float]) -> float:
    out = sp.sympify(expr).xreplace(vals)
    return float(out) if isinstance(out, float | int) else float(out.evalf())


def resolve(expr: sp.Expr, vals: Mapping[sp.Symbol, float], choices: list[str] | None = None):
    """``expr`` with every Piecewise, Min and Max replaced by the branch active at ``vals``
    (numbers for every free symbol). ``choices`` collects what was picked."""
    if not isinstance(expr, sp.Basic) or not expr.args:
        return expr
    if isinstance(expr, sp.Piecewise):
        for e, c in expr.args:
            if c == sp.true or bool(c.xreplace(vals)):
                if choices is not None and c != sp.true:
                    choices.append(f"Piecewise: {c}")
                elif choices is not None:
                    choices.append("Piecewise: last branch (otherwise)")
                return resolve(e, vals, choices)
        raise ValueError("no Piecewise branch holds")
    if isinstance(expr, sp.Min | sp.Max):
        vs = [_num(a, vals) for a in expr.args]
        best = min(vs) if isinstance(expr, sp.Min) else max(vs)
        tied = [j for j, v in enumerate(vs) if v == best]
        # at a tie prefer a constant argument: its side holds for the feasible direction
        # (e.g. Max(C/ep, 1) at C = ep: more ranks still serve at least one user each)
        i = next((j for j in tied if not expr.args[j].free_symbols), tied[0])
        if choices is not None:
            choices.append(f"{type(expr).__name__}: argument {i + 1} of {len(vs)}")
        return resolve(expr.args[i], vals, choices)
    if not expr.free_symbols:
        return expr
    return expr.func(*(resolve(a, vals, choices) for a in expr.args))


def _choice_nodes(expr: sp.Expr) -> list[sp.Basic]:
    return [n for n in sp.preorder_traversal(expr) if isinstance(n, sp.Piecewise | sp.Min | sp.Max)]


def _signature_fn(expr: sp.Expr, sym: sp.Symbol) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorized: which branch of each Piecewise/Min/Max holds at each x (one row per x).
    Every condition and argument is compiled in one lambdify."""
    kinds: list[tuple[str, int]] = []  # (kind, how many entries of the flat list it owns)
    flat: list[sp.Basic] = []
    for node in _choice_nodes(expr):
        if isinstance(node, sp.Piecewise):
            kinds.append(("pw", len(node.args)))
            flat += [c for _, c in node.args]
        else:
            kinds.append(("min" if isinstance(node, sp.Min) else "max", len(node.args)))
            flat += list(node.args)
    compiled = sp.lambdify(sym, flat, "numpy", cse=True) if flat else None

    def sig(x: np.ndarray) -> np.ndarray:
        x = np.atleast_1d(np.asarray(x, dtype=float))
        if compiled is None:
            return np.zeros((x.size, 0), dtype=int)
        with np.errstate(all="ignore"):
            out = [np.broadcast_to(np.asarray(v, dtype=float), x.shape) for v in compiled(x)]
        cols, at = [], 0
        for kind, n in kinds:
            vals = np.vstack(out[at : at + n])
            at += n
            if kind == "pw":
                cols.append(np.argmax(vals > 0.5, axis=0))
            elif kind == "min":
                cols.append(np.argmin(vals, axis=0))
            else:
                cols.append(np.argmax(vals, axis=0))
        return np.vstack(cols).T

    return sig


@attrs.frozen
class _Segment:
    lo: float
    hi: float
    expr: sp.Expr  # resolved, one variable
    choices: tuple[str, ...]


def _grid(lo: float, hi: float, n: int = 600) -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(lo, hi, n), np.geomspace(lo, hi, n)]))


def _segments(f: sp.Expr, sym: sp.Symbol, lo: float, hi: float) -> list[_Segment]:
    """Split [lo, hi] where the active branch of any Piecewise/Min/Max changes (boundaries by
    bisection to 1e-9 relative); each segment carries ``f`` resolved on it."""
    sig = _signature_fn(f, sym)
    x = _grid(lo, hi)
    s = sig(x)
    edges = [lo]
    for i in range(1, len(x)):
        if not np.array_equal(s[i], s[i - 1]):
            a, b = x[i - 1], x[i]
            sa = s[i - 1]
            for _ in range(60):
                m = 0.5 * (a + b)
                if np.array_equal(sig(np.array([m]))[0], sa):
                    a = m
                else:
                    b = m
                if b - a <= 1e-9 * max(1.0, abs(b)):
                    break
            edges.append(0.5 * (a + b))
    edges.append(hi)
    segs = []
    for a, b in itertools.pairwise(edges):
        mid = 0.5 * (a + b)
        ch: list[str] = []
        segs.append(_Segment(a, b, resolve(f, {sym: mid}, ch), tuple(ch)))
    return segs


def _is_integer_key(model: StepModel, sym: sp.Symbol) -> bool:
    v = model.values[sym]
    dim = symbols.lookup(sym).dim
    return float(v).is_integer() and dim == symbols.dim(sp.Integer(1))


def _val(model: StepModel, path: str, default: float = 1.0) -> float:
    try:
        return float(model.values[symbols.lookup(path).symbol])
    except KeyError:
        return default


def _check_key(model: StepModel, sym: sp.Symbol) -> None:
    if sym.name in model.structural_keys:
        raise SpecError(
            "derive",
            sym.name,
            "decides which terms the model has (a plugin reads its value while building it): "
            "the step time is not one expression in it",
            "a key the model stays symbolic in, such as parallel.tp",
        )


def key_range(model: StepModel, sym: sp.Symbol) -> tuple[float, float]:
    """The range a derivation scans before constraints cut it: [1, 4·cluster GPUs] for
    parallel degrees, [1, 4096] users for concurrency, [1, 16·x] for other counts, [x/16, 16·x]
    otherwise."""
    x0 = float(model.values[sym])
    if sym.name.startswith("parallel.") and _is_integer_key(model, sym):
        gpus = _val(model, "cluster.nodes") * _val(model, "cluster.gpus_per_node")
        return 1.0, float(max(4 * gpus, 16 * x0))
    if sym.name == "workload.concurrency":
        return 1.0, max(4096.0, 16 * x0)
    if _is_integer_key(model, sym):
        return 1.0, max(16 * x0, 16.0)
    return x0 / 16, x0 * 16


@attrs.frozen
class Region:
    """Where along a key every constraint holds.

    ``lo``/``hi`` bound the values where the ordering constraints hold (memory, cluster size,
    …; the continuous analysis runs there); ``lo_by``/``hi_by`` name the constraint that sets
    each end ("" when the scan range does). ``whole`` lists, for integer keys, the values where
    every constraint holds, divisibility included (None for continuous keys). ``empty`` when
    no value is feasible."""

    lo: float
    hi: float
    lo_by: str
    hi_by: str
    whole: np.ndarray | None
    empty: bool = False

    def describe(self, key: str) -> str:
        if self.empty:
            return f"no feasible {key} in the range scanned"
        bits = []
        if self.lo_by:
            bits.append(f"{key} ≥ {self.lo:g} ({self.lo_by})")
        if self.hi_by:
            bits.append(f"{key} ≤ {self.hi:g} ({self.hi_by})")
        if self.whole is not None and self.whole.size <= 12:
            bits.append(f"feasible values {', '.join(f'{v:g}' for v in self.whole)}")
        return "; ".join(bits)

    def contains(self, x: float) -> bool:
        return not self.empty and self.lo - 1e-9 * max(1.0, abs(self.lo)) <= x <= self.hi * (
            1 + 1e-9
        )


def _constraint_masks(
    model: StepModel, sym: sp.Symbol, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, np.ndarray]]]:
    """Along ``x``: where the ordering constraints hold, where all hold, and each ordering
    constraint's own mask (divisibility needs whole values: it is left to ``all``)."""
    ev = model.evaluate({sym: x})
    order = np.ones(x.shape, dtype=bool)
    each = []
    for c in model.constraints:
        holds = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), x.shape)
        if not c.relation.has(sp.Mod):
            order &= holds
            each.append((c.name, holds))
    every = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), x.shape)
    return order, every & order, each


def feasible_region(model: StepModel, sym: sp.Symbol, lo: float, hi: float) -> Region:
    """The part of [lo, hi] where the constraints hold (see `Region`)."""
    integer = _is_integer_key(model, sym)
    if integer and hi - lo <= 200_000:
        x = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=float)
    else:
        x = _grid(lo, hi, 2000)
    order, every, each = _constraint_masks(model, sym, x)
    whole = x[every] if integer else None
    inside = np.flatnonzero(order)
    if not inside.size:
        return Region(lo, hi, "", "", whole, True)
    i0, i1 = int(inside[0]), int(inside[-1])

    def blame(i: int) -> str:
        return next((name for name, m in each if not m[i]), "")

    a, b = float(x[i0]), float(x[i1])
    lo_by = blame(i0 - 1) if i0 > 0 else ""
    hi_by = blame(i1 + 1) if i1 + 1 < x.size else ""
    if not integer:  # refine the ends between grid points
        if lo_by:
            a = _edge(model, sym, float(x[i0 - 1]), a)
        if hi_by:
            b = _edge(model, sym, float(x[i1 + 1]), b)
    return Region(a, b, lo_by, hi_by, whole)


def _edge(model: StepModel, sym: sp.Symbol, bad: float, good: float) -> float:
    """The boundary between an infeasible and a feasible value, by bisection."""
    for _ in range(60):
        m = 0.5 * (bad + good)
        ok = bool(_constraint_masks(model, sym, np.array([m]))[0][0])
        bad, good = (bad, m) if ok else (m, good)
        if abs(good - bad) <= 1e-9 * max(1.0, abs(good)):
            break
    return good


def feasible(
    model: StepModel, sym: sp.Symbol, value: float | None, region: Region
) -> tuple[int | None, str]:
    """The smallest whole value ≥ ``value`` where every constraint holds; None and why when
    there is none."""
    if value is None or not math.isfinite(value) or region.whole is None:
        return None, ""
    above = region.whole[region.whole >= value - 1e-9]
    if above.size:
        return int(above[0]), ""
    if region.empty or not region.whole.size:
        return None, f"no {sym.name} satisfies every constraint"
    return None, f"{math.ceil(value - 1e-9)} is not feasible: {region.describe(sym.name)}"


def _prepared(
    model: StepModel, expr: sp.Expr, sym: sp.Symbol, symbolic: bool, at: float | None = None
) -> tuple[sp.Expr, sp.Expr | None, list[str]]:
    """(numeric one-variable f resolved at the point, symbolic f resolved at the point or
    None, the branch choices)."""
    x0 = float(model.values[sym]) if at is None else at
    relaxed = relax(expr)
    ch: list[str] = []
    f_num = resolve(model.substituted(relaxed, [sym]), {sym: x0}, ch)
    f_sym = None
    if symbolic:
        vals = dict(model.values)
        vals[sym] = x0
        f_sym = resolve(relaxed, vals, [])
    return f_num, f_sym, ch


def _resolution_note(choices: Sequence[str], where: str) -> str:
    pw = [c.removeprefix("Piecewise: ") for c in choices if c.startswith("Piecewise")]
    mm = sum(1 for c in choices if not c.startswith("Piecewise"))
    bits = [RELAXED]
    if pw:
        bits.append(f"Piecewise resolved {where}: {', '.join(pw)}")
    if mm:
        bits.append(f"{mm} Min/Max resolved to the argument active {where}")
    return "; ".join(bits)


def _f(expr: sp.Expr, sym: sp.Symbol) -> Callable[[Any], Any]:
    return sp.lambdify(sym, expr, "numpy")


def _bisect(fn: Callable[[float], float], a: float, b: float, iters: int = 200) -> float:
    fa = fn(a)
    for _ in range(iters):
        m = 0.5 * (a + b)
        fm = fn(m)
        if (fm > 0) == (fa > 0):
            a, fa = m, fm
        else:
            b = m
        if b - a <= 1e-12 * max(1.0, abs(b)):
            break
    return 0.5 * (a + b)


def _exact(model: StepModel, metric: str, sym: sp.Symbol, x: Any) -> Any:
    return model.evaluate({sym: x})[metric]


# ---------------------------------------------------------------------------- wall


def _freeze_growing(
    f: sp.Expr, sym: sp.Symbol, x0: float, values: Mapping[sp.Symbol, float] | None = None
) -> tuple[sp.Expr, list[str]]:
    """Addends of ``f`` that grow without bound in ``sym`` (ring/tree latency on the branch
    kept) replaced by their value at ``x0``; returns the new f and what was frozen."""
    vals = dict(values or {})
    out, frozen = [], []
    for a in sp.Add.make_args(f):
        if sym not in a.free_symbols:
            out.append(a)
            continue
        v12, v13, v0 = (_num(a, {**vals, sym: x}) for x in (1e12, 1e13, x0))
        if v13 > v12 * (1 + 1e-6) and v13 > v0:
            out.append(a.xreplace({sym: sp.Float(x0)}))
            frozen.append(f"{a}" if len(str(a)) < 60 else f"{str(a)[:57]}...")
        else:
            out.append(a)
    return sp.Add(*out), frozen


def wall(
    model: StepModel,
    key: str,
    eps: float = 0.15,
    symbolic: bool = False,
    metric: str = "step_time_s",
) -> Derivation:
    """Smallest KEY with t(KEY)/t(∞) − 1 < ε, with t's branches fixed at the scenario's point.

    Where t = B + A/N (the usual case: work split over N, the rest fixed) the closed form is
    N* = A/(ε·B); otherwise sympy solves t(N)/t(∞) − 1 = ε, or bisection does."""
    if not 0 < eps < 10:
        raise SpecError("derive", "--eps", f"{eps} is not a useful tolerance", "0 < eps < 10")
    sym = parameter(model, key)
    x0 = float(model.values[sym])
    f, f_sym, ch = _prepared(model, _metric(model, metric), sym, symbolic)
    definition = (
        f"smallest {key} = N with t(N)/t(∞) − 1 < ε (ε = {eps:g}), t = {metric}; "
        + _resolution_note(ch, f"at the scenario's point {key} = {x0:g}, kept for all N")
    )
    f, frozen = _freeze_growing(f, sym, x0)
    if f_sym is not None and frozen:
        f_sym, _ = _freeze_growing(f_sym, sym, x0, model.values)
    if frozen:
        definition += (
            f"; addends growing without bound in {key} ({', '.join(frozen)}) held at their "
            f"value at {key} = {x0:g}"
        )
    x = sp.Dummy("x", positive=True)
    details: dict[str, Any] = {"eps": eps, "point": x0, "frozen": frozen}
    method, note = "symbolic", ""
    value: float | None = None
    closed, latex = "", ""
    fx = sp.expand(f.xreplace({sym: 1 / x}))
    b_num = fx.xreplace({x: 0})
    a_num = sp.diff(fx, x).xreplace({x: 0})
    linear = False
    if b_num.is_finite and a_num.is_finite and float(b_num) > 0:
        probe = np.array([1.0, 3.0, 17.0, 1000.0]) * max(x0, 1.0)
        got = np.asarray(_f(f, sym)(probe), dtype=float)
        want = float(b_num) + float(a_num) / probe
        linear = bool(np.allclose(got, want, rtol=1e-6))
    if linear:
        A, B = float(a_num), float(b_num)
        details.update({"A": A, "B": B, "t_inf_s": B})
        if A <= 0:
            value, note = None, f"t does not fall with {key} (A = {A:g} ≤ 0): no wall"
        else:
            value = A / (eps * B)
        if f_sym is not None and sp.count_ops(f_sym) <= MAX_OPS:
            fsx = sp.expand(f_sym.xreplace({sym: 1 / x}))
            b_s = fsx.xreplace({x: 0})
            a_s = sp.diff(fsx, x).xreplace({x: 0})
            a_str, b_str = str(a_s), str(b_s)
            a_tex = sp.latex(a_s, symbol_names=symbols.latex_names())
            b_tex = sp.latex(b_s, symbol_names=symbols.latex_names())
        elif f_sym is not None:
            a_str, b_str = f"{A:.6g}", f"{B:.6g}"
            a_tex, b_tex = a_str, b_str
            note = f"the symbolic step time has over {MAX_OPS} operations; A, B shown numerically"
        else:
            a_str, b_str = f"{A:.6g}", f"{B:.6g}"
            a_tex, b_tex = a_str, b_str
        closed = f"({a_str})/(epsilon*({b_str}))"
        latex = rf"\frac{{{a_tex}}}{{\epsilon \cdot \left({b_tex}\right)}}"
        details["shape"] = "A/(epsilon*B): t(N) = B + A/N"
        terms = {}
        for t in model.terms:
            tn = _freeze_growing(
                resolve(relax(model.substituted(t.expr, [sym])), {sym: x0}), sym, x0
            )[0]
            val_hi = _num(tn, {sym: 1e9})
            val_at = _num(tn, {sym: x0})
            share = (val_at - val_hi) * x0
            if abs(share) > 1e-12:
                terms[t.name] = share
        details["A_by_term"] = terms
    else:
        # general: t(∞) numerically from a far point, then solve / bisect
        method = "numeric"
        fn = _f(f, sym)
        t_inf = float(fn(1e12))
        if not math.isfinite(t_inf) or t_inf <= 0:
            t_inf_s = "t(∞) is not finite on this branch"
            return Derivation(
                "wall",
                key,
                None,
                None,
                "",
                "",
                definition,
                "numeric",
                f"no wall: {t_inf_s}",
                model.scenario.label,
                details,
            )
        g = lambda n: float(fn(n)) / t_inf - 1 - eps  # noqa: E731
        note = (note + "; " if note else "") + "t is not of the form B + A/N; bisection"
        lo, hi = 1e-6, 1e9
        value = _bisect(g, lo, hi) if g(lo) > 0 > g(hi) else None
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
        ev = lambda n: float(_exact(model, metric, sym, float(n)))  # noqa: E731
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
        "wall",
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


# ---------------------------------------------------------------------------- optimum


def _minimize_sense(metric: str) -> bool:
    return metric.endswith("_s") or "bytes" in metric


def _boundary_closed_form(
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
                    sols, _ = _solve(c.lhs - c.rhs, sym)
                    for s in sols:
                        if abs(_num(s, vals) - x) <= 1e-6 * max(1.0, abs(x)):
                            return s
    return None


def optimum(
    model: StepModel, key: str, symbolic: bool = False, metric: str = "step_time_s"
) -> Derivation:
    """Where d(metric)/dKEY = 0 inside KEY's feasible range (step time: minimum; throughput:
    maximum), or the kink where a branch changes, or "monotone: best at the bound"."""
    sym = parameter(model, key)
    expr = _metric(model, metric)
    minimize = _minimize_sense(metric)
    region = feasible_region(model, sym, *key_range(model, sym))
    if region.empty:
        return _none("optimum", model, key, f"{metric} has no optimum: " + region.describe(key))
    lo, hi = region.lo, region.hi
    f = model.substituted(relax(expr), [sym])
    segs = _segments(f, sym, lo, hi) if hi > lo else [_Segment(lo, hi, f, ())]
    fn = _f(f, sym)
    sign = 1.0 if minimize else -1.0
    cost = lambda v: sign * float(fn(v))  # noqa: E731
    cands: list[tuple[float, str, Any]] = [(lo, "bound", str(lo)), (hi, "bound", str(hi))]
    cands += [(s.lo, "kink", "") for s in segs[1:]]
    notes: list[str] = []
    numeric_used = False
    for s in segs:
        d = sp.diff(s.expr, sym)
        if d == 0 or sym not in d.free_symbols:
            continue
        sols, why = _solve(d, sym)
        found = [(float(sp.re(sp.N(r))), r) for r in sols]
        if not sols:
            # numeric: sign changes of the derivative on the segment
            dfn = _f(d, sym)
            xs = np.linspace(s.lo, s.hi, 200)
            ds = np.asarray(dfn(xs), dtype=float) * np.ones_like(xs)
            for i in range(1, len(xs)):
                if np.sign(ds[i]) != np.sign(ds[i - 1]) and np.isfinite(ds[i - 1 : i + 1]).all():
                    r = _bisect(lambda v, g=dfn: float(g(v)), xs[i - 1], xs[i])
                    found.append((r, ""))
                    numeric_used = True
            if why and found:
                notes.append(why + "; derivative root found by bisection")
        for r, closed in found:
            if s.lo < r < s.hi:
                cands.append((r, "stationary", closed))
    best = min(cands, key=lambda c: cost(c[0]))
    x, where, closed = best
    grid = _grid(lo, hi, 400)
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
        bc = _boundary_closed_form(model, sym, x, symbolic, expr)
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
            g = resolve(relax(expr), vals)
            sols, why = _solve(sp.diff(g, sym), sym, vals)
            match = [s for s in sols if abs(_num(s, vals) - x) <= 1e-4 * max(1.0, x)]
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
        sp.latex(closed, symbol_names=symbols.latex_names())
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
            ev = np.asarray(_exact(model, metric, sym, ints), dtype=float) * np.ones_like(ints)
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


def _none(kind: str, model: StepModel, key: str, why: str) -> Derivation:
    """A derivation with no answer, and why (e.g. no feasible value)."""
    return Derivation(kind, key, None, None, "none", "", why, "numeric", why, model.scenario.label)


# ---------------------------------------------------------------------------- crossover


def _axis(model: StepModel, sym: sp.Symbol, expr: sp.Expr, x: sp.Symbol) -> tuple[sp.Expr, str]:
    """The metric as a function of the shared axis x: for concurrency, x is the total users
    over all DP replicas (each replica serves x/dp)."""
    if sym.name == "workload.concurrency":
        dp = _val(model, "parallel.dp")
        f = model.substituted(relax(expr), [sym]).xreplace({sym: x / dp})
        return f, f"{model.scenario.label}: {dp:g} replica(s), each x/{dp:g} users"
    return model.substituted(relax(expr), [sym]).xreplace({sym: x}), ""


def crossover(
    model: StepModel,
    other: StepModel,
    key: str,
    metric: str = "tokens_per_s_per_gpu",
    symbolic: bool = False,
) -> Derivation:
    """Where the two scenarios' metrics are equal along KEY (for workload.concurrency: total
    users across each scenario's DP replicas)."""
    sym = parameter(model, key)
    parameter(other, key)
    e1, e2 = _metric(model, metric), _metric(other, metric)
    x = sym
    f1, d1 = _axis(model, sym, e1, x)
    f2, d2 = _axis(other, sym, e2, x)
    lo1, hi1 = key_range(model, sym)
    lo2, hi2 = key_range(other, sym)
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    scale1 = scale2 = 1.0
    if sym.name == "workload.concurrency":
        lo, hi = 1.0, max(hi1, hi2)
        scale1, scale2 = _val(model, "parallel.dp"), _val(other, "parallel.dp")
    r1 = feasible_region(model, sym, lo / scale1, hi / scale1)
    r2 = feasible_region(other, sym, lo / scale2, hi / scale2)
    g1, g2 = _f(f1, x), _f(f2, x)
    diff_fn = lambda v: float(g1(v)) - float(g2(v))  # noqa: E731
    grid = _grid(lo, hi, 800)
    with np.errstate(all="ignore"):
        dv = (np.asarray(g1(grid), dtype=float) - np.asarray(g2(grid), dtype=float)) * np.ones_like(
            grid
        )
    roots, dropped = [], []
    for i in range(1, len(grid)):
        if np.sign(dv[i]) != np.sign(dv[i - 1]) and np.sign(dv[i]) != 0:
            r = _bisect(diff_fn, grid[i - 1], grid[i])
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
    if not roots and dropped:
        why = (
            f"the metrics cross only where a constraint fails (x = "
            f"{', '.join(f'{d:.4g}' for d in dropped)}): {n1}: {r1.describe(key)}; "
            f"{n2}: {r2.describe(key)}"
        )
        return Derivation(
            "crossover", key, None, None, "none", "", definition, "numeric", why, n1, details
        )
    if not roots:
        lead = n1 if dv[len(dv) // 2] > 0 else n2
        ratio_lo = float(g1(lo)) / float(g2(lo))
        ratio_hi = float(g1(hi)) / float(g2(hi))
        sense = "higher" if not _minimize_sense(metric) else "lower"
        why = (
            f"{lead} leads over the whole range [{lo:g}, {hi:g}] ({sense} is better is not "
            f"assumed: {n1}/{n2} = {ratio_lo:.3g} at {lo:g}, {ratio_hi:.3g} at {hi:g}); "
            "the sign of the difference never changes, so there is no crossover"
        )
        return Derivation(
            "crossover", key, None, None, "none", "", definition, "numeric", why, n1, details
        )
    r = roots[0]
    vals = {x: r}
    h = resolve(f1, vals) - resolve(f2, vals)
    sols, why = _solve(h, x)
    match = [s for s in sols if abs(_num(s, {}) - r) <= 1e-4 * max(1.0, r)]
    if dropped:
        why = (why + "; " if why else "") + (
            f"{len(dropped)} crossing(s) where a constraint fails left out"
        )
    if match:
        method, closed = "symbolic", str(match[0])
        latex = sp.latex(match[0])
        note = why if dropped else ""
    else:
        method = "numeric"
        closed = f"root of {metric}[{n1}] - {metric}[{n2}] in [{lo:g}, {hi:g}]"
        latex = ""
        note = f"{why or 'sympy found no matching root'}: bisection on the resolved metrics"
    if len(roots) > 1:
        note = (note + "; " if note else "") + f"{len(roots)} crossings; the first is shown"
    before = n1 if diff_fn(max(lo, r * 0.9)) > 0 else n2
    note = (note + "; " if note else "") + f"{before} leads below x = {r:.4g}"
    feas = math.ceil(r - 1e-9) if _is_integer_key(model, sym) else None
    if feas is not None and not (r1.contains(feas / scale1) and r2.contains(feas / scale2)):
        feas = None
    return Derivation(
        "crossover", key, r, feas, closed, latex, definition, method, note, n1, details
    )


# ---------------------------------------------------------------------------- elasticity


def elasticity(
    model: StepModel,
    metric: str = "step_time_s",
    at: Mapping[str, float] | None = None,
    symbolic: bool = False,
) -> list[Derivation]:
    """∂ln(metric)/∂ln(p) = p·∂f/∂p / f for every parameter p, sorted by magnitude."""
    expr = _metric(model, metric)
    vals = dict(model.values)
    for k, v in (at or {}).items():
        vals[parameter(model, k)] = float(v)
    ch: list[str] = []
    f = resolve(relax(expr), vals, ch)
    f0 = _num(f, vals)
    where = ", ".join(f"{k} = {v:g}" for k, v in (at or {}).items()) or "the scenario's point"
    definition = f"∂ln({metric})/∂ln(p) = p·(∂f/∂p)/f at {where}; " + _resolution_note(
        ch, "at that point"
    )
    out = []
    free = f.free_symbols
    for p in sorted(vals, key=lambda s: s.name):
        if p.name.startswith("const."):
            continue
        if p not in free:
            e_val, closed = 0.0, "0"
        else:
            others = {s: sp.Float(v, 15) for s, v in vals.items() if s != p}
            fp = f.xreplace(others)
            e = p * sp.diff(fp, p) / fp
            e_val = float(e.xreplace({p: sp.Float(vals[p], 15)}).evalf())
            closed = str(p * sp.diff(f, p) / f) if symbolic else str(e)
        dim = symbols.lookup(p).dim
        out.append(
            Derivation(
                "elasticity",
                p.name,
                e_val,
                None,
                closed if len(closed) < 4000 else closed[:4000] + " ...",
                "",
                definition,
                "symbolic",
                "",
                model.scenario.label,
                {
                    "metric": metric,
                    "metric_value": f0,
                    "dimension": str(dim),
                    "is_time": dim == TIME,
                    "value_of_parameter": vals[p],
                },
            )
        )
    out.sort(key=lambda d: (-round(abs(d.value or 0.0), 9), d.key))  # ties: by name
    return out


# ---------------------------------------------------------------------------- regime


def regime(model: StepModel, key: str, symbolic: bool = False) -> list[Derivation]:
    """Which step-time term is largest over KEY's range, and where that changes."""
    sym = parameter(model, key)
    region = feasible_region(model, sym, *key_range(model, sym))
    if region.empty:
        return [_none("regime", model, key, region.describe(key))]
    lo, hi = region.lo, region.hi
    rel = [model.substituted(relax(t.expr), [sym]) for t in model.terms]
    fns = [_f(e, sym) for e in rel]
    grid = _grid(lo, hi, 600)
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
                r = _bisect(
                    lambda v, a=a, b=b: float(fns[a](v)) - float(fns[b](v)), grid[i - 1], grid[i]
                )
                changes.append((r, a, b))
            s0 = i
    details_common = {"range": [lo, hi], "spans": spans}
    out = []
    for r, a, b in changes:
        vals_r = {sym: r}
        h = resolve(rel[a], vals_r) - resolve(rel[b], vals_r)
        sols, why = _solve(h, sym)
        match = [s for s in sols if abs(_num(s, {}) - r) <= 1e-4 * max(1.0, r)]
        if symbolic and match:
            full = {**model.values, sym: r}
            hs = resolve(relax(model.terms[a].expr), full) - resolve(
                relax(model.terms[b].expr), full
            )
            ss, _ = _solve(hs, sym, full)
            sm = [s for s in ss if abs(_num(s, full) - r) <= 1e-4 * max(1.0, r)]
            if sm:
                match = sm
        method = "symbolic" if match else "numeric"
        closed = str(match[0]) if match else f"root of {names[a]} = {names[b]}"
        note = f"{names[a]} dominates below, {names[b]} above" + (
            "" if match else f"; {why or 'no matching root'}: bisection"
        )
        out.append(
            Derivation(
                "regime",
                key,
                r,
                feasible(model, sym, r, region)[0],
                closed,
                sp.latex(match[0]) if match else "",
                definition,
                method,
                note,
                model.scenario.label,
                {**details_common, "from": names[a], "to": names[b]},
            )
        )
    if not out:
        out.append(
            Derivation(
                "regime",
                key,
                None,
                None,
                "none",
                "",
                definition,
                "numeric",
                f"{names[dom[0]]} dominates over the whole range [{lo:g}, {hi:g}]",
                model.scenario.label,
                {**details_common, "from": names[dom[0]], "to": None},
            )
        )
    return out


# ---------------------------------------------------------------------------- plateau


def plateau(model: StepModel, fraction: float = 0.9, symbolic: bool = False) -> Derivation:
    """Concurrency C* at which the expected fraction of routed experts hit per step reaches
    ``fraction``: E·(1 − (1 − k/E)^(C·M)) = φ·E, so C* = ln(1 − φ) / (M·ln(1 − k/E))."""
    if not 0 < fraction < 1:
        raise SpecError("derive", "--fraction", f"{fraction} is not in (0, 1)", "0 < F < 1")
    if _val(model, "model.n_experts", 0.0) <= 0:
        raise SpecError("derive", "model.n_experts", "the model has no routed experts")
    E = symbols.lookup("model.n_experts").symbol
    k = symbols.lookup("model.experts_per_token").symbol
    phi = sp.Symbol("phi", positive=True)
    M = sp.sympify(model.decoding.verify_tokens)
    m_ = sp.Symbol("M", positive=True)
    # T = C·M tokens hit φ·E experts in expectation: the law inverted for T, divided by M
    general = tokens_for_expert_fraction(E, k, phi) / m_
    method, note = "symbolic", ""
    cstar = general.xreplace({m_: M})
    ar = general.xreplace({m_: sp.Integer(1)})
    vals = {**model.values, phi: fraction}
    value = _num(cstar, vals)
    ratio = M  # C*(M = 1) / C*(M): the law depends on C only through T = C·M
    closed_expr = cstar if symbolic else cstar.xreplace({phi: sp.Float(fraction)})
    definition = (
        "C* where expected distinct experts hit per step E·(1 − (1 − k/E)^(C·M)) reaches "
        f"φ·E (φ = {fraction:g}); T = C·M tokens per replica per step (M verify tokens per "
        "user), uniform top-k routing"
    )
    m_value = _num(M, vals)
    if m_value == 1:
        ratio_note = (
            "this scenario verifies one token per user (M = 1): C* is the autoregressive "
            "plateau itself"
        )
    else:
        ratio_note = (
            f"C*(autoregressive)/C* = M = {ratio} = {m_value:g}: verifying M tokens per user "
            "reaches the plateau with M times fewer users"
        )
    note = ratio_note + "; the law's symbols E, k, M are kept, φ substituted unless --symbolic"
    details = {
        "fraction": fraction,
        "verify_tokens": _num(M, vals),
        "verify_tokens_expr": str(M),
        "general": str(general),
        "tokens_per_step": value * _num(M, vals),
        "autoregressive_cstar": _num(ar, vals),
        "ratio_autoregressive_over_this": str(ratio),
        "ratio_value": m_value,
    }
    return Derivation(
        "plateau",
        "workload.concurrency",
        value,
        math.ceil(value - 1e-9),
        str(closed_expr),
        sp.latex(closed_expr, symbol_names=symbols.latex_names()),
        definition,
        method,
        note,
        model.scenario.label,
        details,
    )
