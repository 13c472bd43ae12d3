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

sympy is run under a time budget (``SYMPY_BUDGET_S``); past it a numeric fallback answers.
"""

from __future__ import annotations

import itertools
import math
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall import symbols
from stepwall.errors import SpecError
from stepwall.model import METRICS, StepModel
from stepwall.plugins.moe_transformer import expected_distinct_experts
from stepwall.units import TIME

SYMPY_BUDGET_S = 0.5
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


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


@contextmanager
def sympy_budget(seconds: float) -> Iterator[None]:
    """Give sympy ``seconds`` per call inside this block (reports use a generous budget so
    that a slower machine does not turn a closed form into a numeric fallback)."""
    global SYMPY_BUDGET_S
    old, SYMPY_BUDGET_S = SYMPY_BUDGET_S, seconds
    try:
        yield
    finally:
        SYMPY_BUDGET_S = old


@contextmanager
def _budget(seconds: float) -> Iterator[None]:
    """Interrupt sympy after ``seconds`` (main thread on Unix; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def alarm(_signum: int, _frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _solve(
    eq: sp.Expr,
    sym: sp.Symbol,
    seconds: float | None = None,
    check: Mapping[sp.Basic, float] | None = None,
) -> tuple[list, str]:
    """sympy's real, positive solutions of eq = 0 (checked at ``check``, the values of the
    other symbols), or ([], why not)."""
    seconds = SYMPY_BUDGET_S if seconds is None else seconds
    try:
        with _budget(seconds):
            sols = sp.solve(eq, sym)
    except _Timeout:
        return [], f"sympy.solve gave no answer within {seconds:g} s"
    except (NotImplementedError, ValueError, TypeError) as e:
        return [], f"sympy.solve: {type(e).__name__}"
    good = []
    for s in sols:
        try:
            v = complex(s.xreplace({EPS: 0.15, **(check or {})}).evalf())
        except (TypeError, ValueError):
            good.append(s)  # symbols remain: cannot judge here; callers match numerically
            continue
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)) and v.real > 0:
            good.append(s)
    return good, "" if good else "sympy.solve found no real positive root"


def parameter(model: StepModel, key: str) -> sp.Symbol:
    """The Symbol of ``key``; a SpecError naming the closest parameter if there is none."""
    return model.parameter(key, "derive")


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


def _gpus(model: StepModel) -> int:
    return int(model.values[symbols.lookup("cluster.nodes").symbol]) * int(
        model.values[symbols.lookup("cluster.gpus_per_node").symbol]
    )


def _val(model: StepModel, path: str, default: float = 1.0) -> float:
    try:
        return float(model.values[symbols.lookup(path).symbol])
    except KeyError:
        return default


def allowed_max(model: StepModel, sym: sp.Symbol) -> tuple[float | None, str]:
    """The largest value of a parallel degree the cluster and model allow, and why."""
    g = _gpus(model)
    tp, ep, dp = (_val(model, f"parallel.{k}") for k in ("tp", "ep", "dp"))
    name = sym.name
    if name == "parallel.tp":
        cap = g // int(ep * dp)
        return cap, f"tp·ep·dp ≤ {g} cluster GPUs"
    if name == "parallel.ep":
        cap = min(g // int(tp * dp), int(_val(model, "model.n_experts", g)))
        return cap, f"tp·ep·dp ≤ {g} cluster GPUs and ep ≤ routed experts"
    if name == "parallel.dp":
        return g // int(tp * ep), f"tp·ep·dp ≤ {g} cluster GPUs"
    return None, ""


def key_range(model: StepModel, sym: sp.Symbol) -> tuple[float, float]:
    """The range a derivation scans: [1, allowed max] for degrees, [1, 4096] users for
    concurrency, [x/16, 16·x] otherwise."""
    x0 = float(model.values[sym])
    cap, _ = allowed_max(model, sym)
    if cap is not None:
        return 1.0, float(max(cap, 1))
    if sym.name == "workload.concurrency":
        return 1.0, max(4096.0, 16 * x0)
    if _is_integer_key(model, sym):
        return 1.0, max(16 * x0, 16.0)
    return x0 / 16, x0 * 16


def feasible(model: StepModel, sym: sp.Symbol, value: float | None) -> tuple[int | None, str]:
    """``value`` rounded up to a whole degree; None (and why) if the cluster cannot host it."""
    if value is None or not math.isfinite(value):
        return None, ""
    if not _is_integer_key(model, sym):
        return None, ""
    n = max(1, math.ceil(value - 1e-9))
    cap, why = allowed_max(model, sym)
    if cap is not None and n > cap:
        return None, f"{n} exceeds what the cluster allows ({why}: ≤ {cap})"
    return n, ""


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
    try:
        with _budget(SYMPY_BUDGET_S):
            fx = sp.expand(f.xreplace({sym: 1 / x}))
            b_num = fx.xreplace({x: 0})
            a_num = sp.diff(fx, x).xreplace({x: 0})
    except _Timeout:
        b_num = a_num = sp.nan
        note = f"sympy.expand gave no answer within {SYMPY_BUDGET_S:g} s"
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
        if f_sym is not None:
            try:
                with _budget(SYMPY_BUDGET_S * 2):
                    fsx = sp.expand(f_sym.xreplace({sym: 1 / x}))
                    b_s = fsx.xreplace({x: 0})
                    a_s = sp.diff(fsx, x).xreplace({x: 0})
                a_str, b_str = str(a_s), str(b_s)
                a_tex = sp.latex(a_s, symbol_names=symbols.latex_names())
                b_tex = sp.latex(b_s, symbol_names=symbols.latex_names())
            except (_Timeout, ValueError, TypeError):
                a_str, b_str = f"{A:.6g}", f"{B:.6g}"
                a_tex, b_tex = a_str, b_str
                note = "symbolic A, B not found within the budget; shown numerically"
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
                model.scenario.name,
                details,
            )
        g = lambda n: float(fn(n)) / t_inf - 1 - eps  # noqa: E731
        note = (note + "; " if note else "") + "t is not of the form B + A/N; bisection"
        lo, hi = 1e-6, 1e9
        value = _bisect(g, lo, hi) if g(lo) > 0 > g(hi) else None
        details["t_inf_s"] = t_inf
        closed = f"root of t(N)/{t_inf:.6g} - 1 - {eps:g}"
        latex = closed
    feas, why = feasible(model, sym, value)
    if why:
        note = (note + "; " if note else "") + why
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
        model.scenario.name,
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
    lo, hi = key_range(model, sym)
    f = model.substituted(relax(expr), [sym])
    segs = _segments(f, sym, lo, hi)
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
        f"{key} where d({metric})/d{key} = 0 inside [{lo:g}, {hi:g}] "
        f"({'minimum' if minimize else 'maximum'}), else a kink between branches, else the "
        f"bound; {RELAXED}; Piecewise/Min/Max resolved on {len(segs)} segment(s) of the range"
    )
    if where == "bound":
        note = ("monotone: best at the bound" if monotone else "best at the bound") + (
            f" {key} = {x:g}"
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
            sols, why = _solve(sp.diff(g, sym), sym, SYMPY_BUDGET_S * 2)
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
    feas = None
    if _is_integer_key(model, sym):
        ints = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=float)
        ev = np.asarray(_exact(model, metric, sym, ints), dtype=float) * np.ones_like(ints)
        order = ev if minimize else -ev
        details["best_integer_exact"] = int(ints[int(np.argmin(order))])
        near = [n for n in (math.floor(value), math.ceil(value)) if lo <= n <= hi]
        feas = min(near, key=lambda n: sign * float(ev[int(n - ints[0])])) if near else None
        details["metric_at_feasible_exact"] = (
            float(ev[int(feas - ints[0])]) if feas is not None else None
        )
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
        model.scenario.name,
        details,
    )


# ---------------------------------------------------------------------------- crossover


def _axis(model: StepModel, sym: sp.Symbol, expr: sp.Expr, x: sp.Symbol) -> tuple[sp.Expr, str]:
    """The metric as a function of the shared axis x: for concurrency, x is the total users
    over all DP replicas (each replica serves x/dp)."""
    if sym.name == "workload.concurrency":
        dp = _val(model, "parallel.dp")
        f = model.substituted(relax(expr), [sym]).xreplace({sym: x / dp})
        return f, f"{model.scenario.name}: {dp:g} replica(s), each x/{dp:g} users"
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
    if sym.name == "workload.concurrency":
        lo, hi = 1.0, max(hi1, hi2)
    g1, g2 = _f(f1, x), _f(f2, x)
    diff_fn = lambda v: float(g1(v)) - float(g2(v))  # noqa: E731
    grid = _grid(lo, hi, 800)
    with np.errstate(all="ignore"):
        dv = (np.asarray(g1(grid), dtype=float) - np.asarray(g2(grid), dtype=float)) * np.ones_like(
            grid
        )
    roots = []
    for i in range(1, len(grid)):
        if np.sign(dv[i]) != np.sign(dv[i - 1]) and np.sign(dv[i]) != 0:
            roots.append(_bisect(diff_fn, grid[i - 1], grid[i]))
    n1, n2 = model.scenario.name, other.scenario.name
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
    }
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
    if match:
        method, closed = "symbolic", str(match[0])
        latex = sp.latex(match[0])
        note = ""
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
                model.scenario.name,
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
    lo, hi = key_range(model, sym)
    rel = [model.substituted(relax(t.expr), [sym]) for t in model.terms]
    fns = [_f(e, sym) for e in rel]
    grid = _grid(lo, hi, 600)
    with np.errstate(all="ignore"):
        vals = np.vstack([np.asarray(g(grid), dtype=float) * np.ones_like(grid) for g in fns])
    dom = np.argmax(vals, axis=0)
    names = [t.name for t in model.terms]
    definition = (
        f"{key} where the largest step-time term changes, over [{lo:g}, {hi:g}]; "
        f"{RELAXED}; Piecewise/Min/Max resolved at each change"
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
            ss, _ = _solve(hs, sym, SYMPY_BUDGET_S * 2)
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
                math.ceil(r - 1e-9) if _is_integer_key(model, sym) else None,
                closed,
                sp.latex(match[0]) if match else "",
                definition,
                method,
                note,
                model.scenario.name,
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
                model.scenario.name,
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
    C = symbols.lookup("workload.concurrency").symbol
    phi = sp.Symbol("phi", positive=True)
    M = sp.sympify(model.decoding.verify_tokens)
    m_ = sp.Symbol("M", positive=True)
    eq = expected_distinct_experts(E, k, C * m_) / E - phi
    probe = {**model.values, phi: fraction, m_: 1.0}
    sols, why = _solve(eq, C, SYMPY_BUDGET_S * 3, probe)
    method, note = "symbolic", ""
    if sols:
        general = sols[0]
    else:  # the law inverted by hand; say so
        general = sp.log(1 - phi) / (m_ * sp.log(1 - k / E))
        note = f"{why}; the law inverted by hand"
    cstar = general.xreplace({m_: M})
    ar = general.xreplace({m_: sp.Integer(1)})
    vals = {**model.values, phi: fraction}
    value = _num(cstar, vals)
    ratio = sp.simplify(ar / cstar)
    closed_expr = cstar if symbolic else cstar.xreplace({phi: sp.Float(fraction)})
    definition = (
        "C* where expected distinct experts hit per step E·(1 − (1 − k/E)^(C·M)) reaches "
        f"φ·E (φ = {fraction:g}); T = C·M tokens per replica per step (M verify tokens per "
        "user), uniform top-k routing"
    )
    ratio_note = (
        f"C*(autoregressive)/C* = {ratio} = {_num(ratio, vals):g} (the verify width M); "
        "the law's symbols E, k, M are kept, φ substituted unless --symbolic"
    )
    note = f"{note}; {ratio_note}" if note else ratio_note
    details = {
        "fraction": fraction,
        "verify_tokens": _num(M, vals),
        "verify_tokens_expr": str(M),
        "general": str(general),
        "tokens_per_step": value * _num(M, vals),
        "autoregressive_cstar": _num(ar, vals),
        "ratio_autoregressive_over_this": str(ratio),
        "ratio_value": _num(ratio, vals),
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
        model.scenario.name,
        details,
    )
