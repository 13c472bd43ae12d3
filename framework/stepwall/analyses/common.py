"""What every analysis shares: the result type, making the step time smooth (ceilings
relaxed, branches resolved), the feasible region along a key, and closed-form roots chosen by
the equation's structure.

Before solving, two things make the step time smooth in the key, and every result says so:

* ``ceiling(x)`` (uneven shards) is relaxed to ``Max(x, 1)``: continuous, but a rank never
  holds less than one head or serves less than one user;
* ``Piecewise`` (which collective branch), ``Min`` (which algorithm) and ``Max`` (roofline)
  are resolved to the branch that holds at the scenario's point, or, over a range, split
  into segments on each of which one branch holds.

Every search runs inside the feasible region: constraints (memory, divisibility, cluster
size, …) are evaluated along the key, the range is cut to where they hold, and a result says
which constraint bounds it. Whether a closed form is attempted is decided by the expression's
structure (a polynomial of low degree after clearing denominators, linear in log x, or one
exponential plus linear terms: Lambert W; `stepwall.analyses.roots`), never by elapsed time,
so the same command prints the same text on an idle and a busy machine.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses.result import Derivation
from stepwall.analyses.roots import exact_roots
from stepwall.core.errors import SpecError
from stepwall.core.symbols import rebuild
from stepwall.core.units import DIMENSIONLESS
from stepwall.model.economics import NEEDS
from stepwall.model.metrics import METRICS, MINIMIZE
from stepwall.numeric.printer import compile_function

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel

EPS = sp.Symbol("epsilon", positive=True)
RELAXED = "ceilings relaxed (ceiling(x) -> Max(x, 1))"


# ---------------------------------------------------------------------------- helpers


def solve(
    eq: sp.Expr, sym: sp.Symbol, check: Mapping[sp.Basic, float] | None = None
) -> tuple[list[sp.Expr], str]:
    """Closed-form real, positive roots of eq = 0 where one exists by construction, or
    ([], why not).

    Tried, by structure alone (`stepwall.analyses.roots.exact_roots`): a numerator polynomial
    in ``sym`` after clearing denominators (degree ≤ 4 with numeric coefficients, ≤ 2 with
    symbols), ``a + b·log(sym)``, and one exponential in ``sym`` with terms linear in it
    (a logarithm or Lambert W). Roots are checked at ``check`` (the other symbols' values); a
    root whose value cannot be judged there is kept for the caller to match numerically."""
    found = exact_roots(eq, sym, check)
    if isinstance(found, str):
        return [], found
    good: list[tuple[sp.Expr, float | None]] = []
    values: list[float] = []
    for root in found:
        r = root.expr
        try:
            v = complex(r.xreplace({EPS: 0.15, **(check or {})}).evalf())
        except (TypeError, ValueError):
            good.append((r, None))
            continue
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)):
            good.append((r, v.real))
            values.append(abs(v.real))
    # a root that is zero up to rounding (x = 2 + W₋₁(−2/e²)) is not a positive one
    tiny = 1e-9 * max(values, default=0.0)
    out = [r for r, v in good if v is None or v > tiny]
    return out, "" if out else "no real positive root"


def parameter(model: StepModel, key: str) -> sp.Symbol:
    """The Symbol of ``key``; a SpecError naming the closest parameter if there is none, or
    saying that the key is structural (the model's terms depend on its value)."""
    sym = model.parameter(key, "derive")
    check_key(model, sym)
    return sym


def metric_expr(model: StepModel, metric: str) -> sp.Expr:
    if metric in NEEDS and metric not in model.metrics:  # energy or cost the specs cannot give
        paths = [model.provides.get(r, r) for r in NEEDS[metric]]  # its kind's field, if any
        key = next((k for k in paths if model.scenario.parameter(k) is None), metric)
        expect = f"--set {key}=… or a spec that states it"
        raise SpecError(model.scenario.origin, key, f"not stated, so {metric} is unknown", expect)
    if metric not in model.metrics:
        raise SpecError("derive", "--metric", f"unknown metric {metric!r}", " | ".join(METRICS))
    return sp.sympify(model.metrics[metric])


def relax(expr: sp.Expr) -> sp.Expr:
    """ceiling(x) -> Max(x, 1) and floor(x) -> x: uneven shards made continuous, but no rank
    holds less than one unit (a head, a user) of a ceiling'd count."""

    def node(e: sp.Basic, args: tuple[sp.Basic, ...]) -> sp.Basic | None:
        if isinstance(e, sp.ceiling):
            return sp.Max(args[0], 1, evaluate=not args[0].free_symbols)
        return args[0] if isinstance(e, sp.floor) else None

    return rebuild(expr, {}, node)


def number(expr: sp.Expr, vals: Mapping[sp.Symbol, float]) -> float:
    out = sp.sympify(expr).xreplace(vals)
    return float(out) if isinstance(out, float | int) else float(out.evalf())


def resolve_branches(
    expr: sp.Expr, vals: Mapping[sp.Symbol, float], choices: list[str] | None = None
) -> Any:
    """``expr`` with every Piecewise, Min and Max replaced by the branch active at ``vals``
    (numbers for every free symbol). ``choices`` collects what was picked.

    Stays whole: a recursive walk with one case per branching node (Piecewise, Min/Max,
    anything else), each recursing into the branch it picks.
    """
    if not isinstance(expr, sp.Basic) or not expr.args:
        return expr
    if isinstance(expr, sp.Piecewise):
        for e, c in expr.args:
            if c == sp.true or bool(c.xreplace(vals)):
                if choices is not None and c != sp.true:
                    choices.append(f"Piecewise: {c}")
                elif choices is not None:
                    choices.append("Piecewise: last branch (otherwise)")
                return resolve_branches(e, vals, choices)
        raise ValueError("no Piecewise branch holds")
    if isinstance(expr, sp.Min | sp.Max):
        vs = [number(a, vals) for a in expr.args]
        best = min(vs) if isinstance(expr, sp.Min) else max(vs)
        tied = [j for j, v in enumerate(vs) if v == best]
        # at a tie prefer a constant argument: its side holds for the feasible direction
        # (e.g. Max(C/ep, 1) at C = ep: more ranks still serve at least one user each)
        i = next((j for j in tied if not expr.args[j].free_symbols), tied[0])
        if choices is not None:
            choices.append(f"{type(expr).__name__}: argument {i + 1} of {len(vs)}")
        return resolve_branches(expr.args[i], vals, choices)
    if not expr.free_symbols:
        return expr
    return expr.func(*(resolve_branches(a, vals, choices) for a in expr.args))


def choice_nodes(expr: sp.Expr) -> list[sp.Basic]:
    return [n for n in sp.preorder_traversal(expr) if isinstance(n, sp.Piecewise | sp.Min | sp.Max)]


def signature_fn(expr: sp.Expr, sym: sp.Symbol) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorized: which branch of each Piecewise/Min/Max holds at each x (one row per x).
    Every condition and argument is compiled in one lambdify."""
    kinds: list[tuple[str, int]] = []  # (kind, how many entries of the flat list it owns)
    flat: list[sp.Basic] = []
    for node in choice_nodes(expr):
        if isinstance(node, sp.Piecewise):
            kinds.append(("pw", len(node.args)))
            flat += [c for _, c in node.args]
        else:
            kinds.append(("min" if isinstance(node, sp.Min) else "max", len(node.args)))
            flat += list(node.args)
    compiled = compile_function([sym], flat, "numpy", cse=True) if flat else None

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
class Segment:
    lo: float
    hi: float
    expr: sp.Expr  # resolved, one variable
    choices: tuple[str, ...]


def scan_grid(lo: float, hi: float, n: int = 600) -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(lo, hi, n), np.geomspace(lo, hi, n)]))


def segments(f: sp.Expr, sym: sp.Symbol, lo: float, hi: float) -> list[Segment]:
    """Split [lo, hi] where the active branch of any Piecewise/Min/Max changes (boundaries by
    bisection to 1e-9 relative); each segment carries ``f`` resolved on it."""
    sig = signature_fn(f, sym)
    x = scan_grid(lo, hi)
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
            edge = 0.5 * (a + b)
            if edge - edges[-1] > 1e-9 * max(1.0, abs(edge)):  # no segment of zero width:
                edges.append(edge)  # a branch that holds only at an end (a tie there)
    if len(edges) > 1 and hi - edges[-1] <= 1e-9 * max(1.0, abs(hi)):
        edges.pop()
    edges.append(hi)
    segs = []
    for a, b in itertools.pairwise(edges):
        mid = 0.5 * (a + b)
        ch: list[str] = []
        segs.append(Segment(a, b, resolve_branches(f, {sym: mid}, ch), tuple(ch)))
    return segs


def is_integer_key(model: StepModel, sym: sp.Symbol) -> bool:
    v = model.values[sym]
    return float(v).is_integer() and getattr(sym, "dim", None) == DIMENSIONLESS


def degree(model: StepModel, name: str) -> float:
    """The value of the layout's ``name`` degree (tp, ep, dp: `Layout`) at the model's values."""
    return float(sp.sympify(getattr(model.layout, name)).xreplace(dict(model.values)))


def value(model: StepModel, path: str, default: float = 1.0) -> float:
    try:
        return float(model.values[model.scenario.by_path[path]])
    except KeyError:
        return default


def check_key(model: StepModel, sym: sp.Symbol, where: str = "derive") -> None:
    """Refuse a structural key (one whose value decides the terms) as a symbol to keep."""
    if sym.name in model.structural_keys:
        raise SpecError(
            where,
            sym.name,
            "decides which terms the model has (a plugin reads its value while building it): "
            "the step time is not one expression in it",
            "a key the model stays symbolic in, such as parallel.tp",
        )


def is_users(model: StepModel, sym: sp.Symbol) -> bool:
    """Whether ``sym`` is the users per replica (the workload's ``users`` requirement: its
    ``concurrency`` for the built-in kinds)."""
    return bool(sym.name == model.provides.get("users"))


def key_range(model: StepModel, sym: sp.Symbol) -> tuple[float, float]:
    """The range a derivation scans before constraints cut it: [1, 4·cluster GPUs] for
    parallel degrees, [1, 4096] for the users per replica, [1, 16·x] for other counts,
    [x/16, 16·x] otherwise."""
    x0 = float(model.values[sym])
    if sym.name.startswith("parallel.") and is_integer_key(model, sym):
        nodes, per_node = (model.provides.get(r, "") for r in ("nodes", "gpus_per_node"))
        gpus = value(model, nodes) * value(model, per_node)
        return 1.0, float(max(4 * gpus, 16 * x0))
    if is_users(model, sym):
        return 1.0, max(4096.0, 16 * x0)
    if is_integer_key(model, sym):
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


def constraint_masks(
    model: StepModel, sym: sp.Symbol, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, np.ndarray]]]:
    """Along ``x``: where the ordering constraints hold, where all hold, and each ordering
    constraint's own mask (divisibility in ``sym`` needs whole values: it is left to ``all``;
    one that ``sym`` does not enter holds or fails all along, like an ordering one)."""
    ev = model.evaluate({sym: x})
    order = np.ones(x.shape, dtype=bool)
    each = []
    for c in model.constraints:
        holds = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), x.shape)
        if not c.relation.has(sp.Mod) or sym not in c.relation.free_symbols:
            order &= holds
            each.append((c.name, holds))
    every = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), x.shape)
    return order, every & order, each


def feasible_region(model: StepModel, sym: sp.Symbol, lo: float, hi: float) -> Region:
    """The part of [lo, hi] where the constraints hold (see `Region`)."""
    integer = is_integer_key(model, sym)
    if integer:  # every whole value up to 200 000 above lo, whole values of a grid beyond
        top = min(math.floor(hi), math.ceil(lo) + 200_000)
        x = np.arange(math.ceil(lo), top + 1, dtype=float)
        if top < hi:
            x = np.unique(np.concatenate([x, np.round(scan_grid(top, hi, 2000))]))
    else:
        x = scan_grid(lo, hi, 2000)
    order, every, each = constraint_masks(model, sym, x)
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
            a = edge(model, sym, float(x[i0 - 1]), a)
        if hi_by:
            b = edge(model, sym, float(x[i1 + 1]), b)
    return Region(a, b, lo_by, hi_by, whole)


def edge(model: StepModel, sym: sp.Symbol, bad: float, good: float) -> float:
    """The boundary between an infeasible and a feasible value, by bisection."""
    for _ in range(60):
        m = 0.5 * (bad + good)
        ok = bool(constraint_masks(model, sym, np.array([m]))[0][0])
        bad, good = (bad, m) if ok else (m, good)
        if abs(good - bad) <= 1e-9 * max(1.0, abs(good)):
            break
    return good


def feasible(
    model: StepModel, sym: sp.Symbol, value: float | None, region: Region
) -> tuple[int | None, str]:
    """The smallest whole value ≥ ``value`` where every constraint holds; None and why when
    there is none."""
    if value is not None and region.empty:
        return None, f"no {sym.name} satisfies every constraint"
    if value is None or not math.isfinite(value) or region.whole is None:
        return None, ""
    above = region.whole[region.whole >= value - 1e-9]
    if above.size:
        return int(above[0]), ""
    if region.empty or not region.whole.size:
        return None, f"no {sym.name} satisfies every constraint"
    return None, f"{math.ceil(value - 1e-9)} is not feasible: {region.describe(sym.name)}"


def prepared(
    model: StepModel, expr: sp.Expr, sym: sp.Symbol, symbolic: bool, at: float | None = None
) -> tuple[sp.Expr, sp.Expr | None, list[str]]:
    """(numeric one-variable f resolved at the point, symbolic f resolved at the point or
    None, the branch choices)."""
    x0 = float(model.values[sym]) if at is None else at
    relaxed = relax(expr)
    ch: list[str] = []
    f_num = resolve_branches(model.substituted(relaxed, [sym]), {sym: x0}, ch)
    f_sym = None
    if symbolic:
        vals = dict(model.values)
        vals[sym] = x0
        f_sym = resolve_branches(relaxed, vals, [])
    return f_num, f_sym, ch


def resolution_note(choices: Sequence[str], where: str) -> str:
    pw = [c.removeprefix("Piecewise: ") for c in choices if c.startswith("Piecewise")]
    mm = sum(1 for c in choices if not c.startswith("Piecewise"))
    bits = [RELAXED]
    if pw:
        bits.append(f"Piecewise resolved {where}: {', '.join(pw)}")
    if mm:
        bits.append(f"{mm} Min/Max resolved to the argument active {where}")
    return "; ".join(bits)


def lambdify1(expr: sp.Expr, sym: sp.Symbol) -> Callable[[Any], Any]:
    fn: Callable[[Any], Any] = compile_function([sym], expr, "numpy")
    return fn


def bisect(fn: Callable[[float], float], a: float, b: float, iters: int = 200) -> float:
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


def exact(model: StepModel, metric: str, sym: sp.Symbol, x: Any) -> Any:
    return model.evaluate({sym: x})[metric]


def no_answer(
    kind: str,
    model: StepModel | None,
    key: str,
    why: str,
    *,
    definition: str | None = None,
    closed_form: str = "none",
    scenario: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> Derivation:
    """A derivation with no answer, and why (e.g. no feasible value, no crossing): its
    definition is ``why`` unless given, its scenario the model's unless given."""
    return Derivation(
        kind=kind,
        key=key,
        value=None,
        feasible_value=None,
        closed_form=closed_form,
        latex="",
        definition=why if definition is None else definition,
        method="numeric",
        note=why,
        scenario=scenario if scenario is not None else model.scenario.label if model else "",
        details=dict(details or {}),
    )


def minimize_sense(metric: str) -> bool:
    """Whether smaller is better (a time, bytes, GPUs, joules or dollars per token: the
    metrics in `MINIMIZE`, as search ranks them); a throughput is better larger."""
    return metric in MINIMIZE
