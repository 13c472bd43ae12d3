"""Ranges: a spec value given as an interval, carried to every metric and term as exact bounds.

Syntax (docs/ranges.md): ``"LOW..HIGH UNIT"`` with an optional nominal value in parentheses,
``"7.2..8 TB/s"`` (nominal: the midpoint), ``"7.2..8 (7.6) TB/s"``, ``"0.70..0.92 (0.70)"``;
either end may carry its own unit (``"7200 GB/s..8 TB/s"``). The ends and the nominal value
are checked like a scalar of the field (dimension, bounds); a range whose ends have different
dimensions, are not finite, or come in the wrong order is a one-line `SpecError`. Only
continuous quantities take a range: a whole-number key (a parallel degree, a count) and a key
that decides the model's shape take one value (sweep them instead).

Bounds. The model's expressions stay symbolic in every parameter; for each output (metric or
term) the values of the parameters without a range are substituted and the expression's
monotonicity in each ranged parameter is decided symbolically over the whole box:

1. by structure (a sum of nondecreasing terms is nondecreasing; a product of factors of known
   sign combines their directions; ``x^k`` with ``x > 0`` follows the sign of ``k``; Max, Min,
   ceiling, log and exp keep their arguments' direction), the signs of subexpressions taken
   from interval arithmetic over the box;
2. else by the sign of the partial derivative ∂f/∂x over the box (interval arithmetic on the
   derivative, then on the numerator and denominator of it over one denominator).

Monotone in every ranged parameter: the bounds are the values at two corners of the box
(method ``exact``). Not monotone in one parameter: the others sit at their corners and the
extremes along that one are found where its derivative changes sign (method ``split``: a
grid along the parameter, each sign change refined by golden-section search). Not monotone in
several: a dense vectorized grid over those parameters, refined around its extremes (method
``sampled``). Every bound is the model evaluated at an actual point of the box, so it is
attained.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall.analyses.base import Context, run
from stepwall.core.errors import SpecError, StepwallError, shown_path
from stepwall.core.symbols import rebuild
from stepwall.core.units import (
    BANDWIDTH,
    COMPUTE_RATE,
    INFORMATION,
    OPERATION,
    TIME,
    format_quantity,
)
from stepwall.model.compose import build_model
from stepwall.model.metrics import METRIC_UNITS, METRICS

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel
    from stepwall.plugin.registry import Registry

# ---------------------------------------------------------------- parsing


# ---------------------------------------------------------------- ranged inputs


@attrs.frozen
class RangedInput:
    """A ranged parameter: its path, symbol, SI ends and nominal value, the file that set
    it, and the unit it reads in."""

    path: str
    symbol: Any
    low: float
    high: float
    nominal: float
    file: str
    unit: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "low": self.low, "high": self.high, "nominal": self.nominal,
                "unit": self.unit, "file": self.file}  # fmt: skip


def inputs(model: StepModel, registry: Registry | None = None) -> list[RangedInput]:
    """The model's ranged parameters, by path; a SpecError for a range on a key that decides
    the model's shape (its terms depend on the value: one model cannot span the range)."""

    sc = model.scenario
    out = []
    for path, (low, high) in sorted(sc.ranges.items()):
        sym = sc.parameter(path)
        if sym is None:
            continue
        if path in model.structural_keys and not same_shape(model, path, (low, high), registry):
            raise SpecError(sc.file_of(path), path,
                            "decides which terms the model has (a plugin reads its value while "
                            "building it), so it cannot take a range",
                            "one value (sweep it with --vary)")  # fmt: skip
        unit = "" if sym.dim.dimensionless else str(sym.dim)
        out.append(RangedInput(path, sym, low, high, float(sc.values[sym]),
                               shown_path(sc.file_of(path)), unit))  # fmt: skip
    return out


def same_shape(
    model: StepModel, path: str, values: Sequence[float], registry: Registry | None = None
) -> bool:
    """Whether the model built with ``path`` at each of ``values`` has the same terms,
    metrics and constraints. A plugin that reads a value while building (even only to see
    that it is given) marks the key structural; this checks that the range does not change
    the expressions (two builds of a model of known shape)."""
    return all(same_shape_at(model, {path: v}, registry) for v in values)


def same_shape_at(
    model: StepModel, values: Mapping[str, float], registry: Registry | None = None
) -> bool:
    """Whether the model built with the keys of ``values`` (paths) at those values has the
    same terms, metrics and constraints as ``model``."""
    sc = model.scenario
    changed = {p: v for p, v in values.items() if v != sc.values[sc.by_path[p]]}
    if not changed:
        return True
    sections = dict(sc.sections)
    new_values = dict(sc.values)
    for path, v in changed.items():
        section, _, name = path.rpartition(".")
        sections[section] = attrs.evolve(sections[section], **{name: v})
        new_values[sc.by_path[path]] = v
    other = attrs.evolve(sc, sections=sections, values=new_values, reads=set())
    m = build_model(other, registry=registry)
    return not (
        [t.name for t in m.terms] != [t.name for t in model.terms]
        or any(a.expr != b.expr for a, b in zip(m.terms, model.terms, strict=True))
        or any(m.metrics[k] != model.metrics[k] for k in model.metrics)
        or [c.relation for c in m.constraints] != [c.relation for c in model.constraints]
    )


def at_point(model: StepModel, values: Mapping[str, float], origin: str = "") -> StepModel:
    """The same model with some parameters (by path) at other values (a corner of a box);
    ``origin`` (``--at``) becomes where those values came from, which errors name."""
    sc = model.scenario
    new = dict(sc.values)
    for path, v in values.items():
        new[sc.by_path[path]] = float(v)
    stated = {**sc.provenance, **dict.fromkeys(values, origin)} if origin else sc.provenance
    return attrs.evolve(model, scenario=attrs.evolve(sc, values=new, provenance=stated))


# ---------------------------------------------------------------- interval arithmetic

Interval = tuple[float, float]
_ALL: Interval = (-math.inf, math.inf)


def _mul(a: Interval, b: Interval) -> Interval:
    ps = []
    for x in a:
        for y in b:
            p = x * y
            ps.append(0.0 if math.isnan(p) else p)  # 0·inf: the zero end wins
    return min(ps), max(ps)


def _pow_number(b: Interval, k: float) -> Interval:
    lo, hi = b
    if k == 0:
        return 1.0, 1.0
    if float(k).is_integer():
        n = int(k)
        if n > 0:
            ends = [lo**n, hi**n]
            if n % 2 == 0 and lo < 0 < hi:
                return 0.0, max(ends)
            return min(ends), max(ends)
        if lo > 0 or hi < 0:
            return _pow_number((1 / hi, 1 / lo) if hi != 0 else _ALL, -n)
        return _ALL
    if lo < 0:
        return _ALL
    if k < 0 and lo == 0:
        return (hi**k if hi > 0 else math.inf), math.inf
    ends = [lo**k, hi**k]
    return min(ends), max(ends)


class _Analyzer:
    """Interval bounds and monotonicity of expressions over one box (memoized)."""

    def __init__(self, box: Mapping[Any, Interval]) -> None:
        self.box = box
        self._iv: dict[Any, Interval] = {}
        self._mono: dict[tuple[Any, Any], int | None] = {}

    def interval(self, e: Any) -> Interval:
        hit = self._iv.get(e)
        if hit is None:
            try:
                hit = self._interval(e)
            except (OverflowError, ZeroDivisionError, ValueError, TypeError):
                hit = _ALL
            if math.isnan(hit[0]) or math.isnan(hit[1]):
                hit = _ALL
            self._iv[e] = hit
        return hit

    def _interval(self, e: Any) -> Interval:
        """The interval of ``e``'s values over the box (interval arithmetic).

        Stays whole: interval arithmetic with one case per sympy node type.
        """
        if e.is_Number:
            v = float(e)
            return v, v
        if e.is_Symbol:
            return self.box.get(e, _ALL)
        if e in (sp.true, sp.false) or e.is_Relational or isinstance(e, sp.logic.boolalg.Boolean):
            return _ALL
        args = [self.interval(a) for a in e.args]
        if isinstance(e, sp.Add):
            return sum(a[0] for a in args), sum(a[1] for a in args)
        if isinstance(e, sp.Mul):
            out: Interval = (1.0, 1.0)
            for a in args:
                out = _mul(out, a)
            return out
        if isinstance(e, sp.Pow):
            base, ex = args
            if ex[0] == ex[1]:
                return _pow_number(base, ex[0])
            if base[0] > 0:
                cands = [b**x for b in base for x in ex]
                return min(cands), max(cands)
            return _ALL
        if isinstance(e, sp.Max):
            return max(a[0] for a in args), max(a[1] for a in args)
        if isinstance(e, sp.Min):
            return min(a[0] for a in args), min(a[1] for a in args)
        if isinstance(e, sp.ceiling):
            return float(math.ceil(args[0][0])), float(math.ceil(args[0][1]))
        if isinstance(e, sp.floor):
            return float(math.floor(args[0][0])), float(math.floor(args[0][1]))
        if isinstance(e, sp.exp):
            return math.exp(args[0][0]), math.exp(args[0][1])
        if isinstance(e, sp.log) and len(args) == 1 and args[0][0] > 0:
            return math.log(args[0][0]), math.log(args[0][1])
        if isinstance(e, sp.Abs):
            lo, hi = args[0]
            if lo >= 0:
                return lo, hi
            if hi <= 0:
                return -hi, -lo
            return 0.0, max(-lo, hi)
        if isinstance(e, sp.Piecewise):
            branches = [self.interval(b) for b, _ in e.args]
            return min(b[0] for b in branches), max(b[1] for b in branches)
        return _ALL

    def sign(self, e: Any) -> int | None:
        """+1 where ``e`` ≥ 0 over the box, −1 where ≤ 0, None when it may take both signs."""
        lo, hi = self.interval(e)
        if lo >= 0:
            return 1
        if hi <= 0:
            return -1
        return None

    def monotone(self, e: Any, x: Any) -> int | None:
        """+1 (nondecreasing in ``x`` over the box), −1 (nonincreasing), 0 (constant) or None
        (not shown), by the expression's structure."""
        k = (e, x)
        if k not in self._mono:
            self._mono[k] = self._monotone(e, x)
        return self._mono[k]

    def _monotone(self, e: Any, x: Any) -> int | None:
        """The direction of ``e`` in ``x`` over the box: 1 rising, -1 falling, 0 constant, None
        not known.

        Stays whole: one case per sympy node type, each recursing into its arguments.
        """
        if x not in e.free_symbols:
            return 0
        if e == x:
            return 1
        if isinstance(e, sp.Add | sp.Max | sp.Min):
            return _combine([self.monotone(a, x) for a in e.args])
        if isinstance(e, sp.Mul):
            total, parts = 1, []
            for a in e.args:
                s = self.sign(a)
                if s is None:
                    return None
                total *= s
                if x in a.free_symbols:
                    m = self.monotone(a, x)
                    if m is None:
                        return None
                    parts.append(s * m)  # the direction of |a|
            c = _combine(parts)
            return None if c is None else total * c
        if isinstance(e, sp.Pow):
            base, ex = e.args
            if x not in ex.free_symbols:
                lo = self.interval(base)[0]
                s = self.sign(ex)
                if s is None or lo < 0 or (lo == 0 and s < 0):
                    return None
                m = self.monotone(base, x)
                return None if m is None else s * m
            if x not in base.free_symbols:
                lo, hi = self.interval(base)
                m = self.monotone(ex, x)
                if m is None:
                    return None
                if lo > 1:
                    return m
                if lo > 0 and hi < 1:
                    return -m
            return None
        if isinstance(e, sp.ceiling | sp.floor | sp.exp | sp.log) and len(e.args) == 1:
            return self.monotone(e.args[0], x)
        if isinstance(e, sp.Piecewise):
            if any(x in c.free_symbols for _, c in e.args):
                return None
            return _combine([self.monotone(b, x) for b, _ in e.args])
        return None

    def derivative_sign(self, e: Any, x: Any) -> int | None:
        """The sign of ∂e/∂x over the box, where ``e`` is smooth in ``x`` (no Max, Min,
        Piecewise, ceiling or floor holding it): interval arithmetic on the derivative, then
        on its numerator and denominator over one denominator."""

        for node in sp.preorder_traversal(e):
            if isinstance(node, sp.Max | sp.Min | sp.Piecewise | sp.ceiling | sp.floor) and (
                x in node.free_symbols
            ):
                return None
        d = sp.diff(e, x)
        s = self._strict(d)
        if s is not None or sp.count_ops(d) > 400:
            return s
        num, den = sp.fraction(sp.together(d))
        sn, sd = self._strict(num), self.sign(den)
        return None if sn is None or sd is None else sn * sd

    def _strict(self, e: Any) -> int | None:
        if e.is_Number:
            try:
                v = float(e)
            except (TypeError, ValueError):  # zoo, nan: no sign
                return None
            return None if math.isnan(v) else (0 if v == 0 else (1 if v > 0 else -1))
        return self.sign(e)


def _combine(ms: Sequence[int | None]) -> int | None:
    if any(m is None for m in ms):
        return None
    nonzero = {m for m in ms if m}
    if not nonzero:
        return 0
    return nonzero.pop() if len(nonzero) == 1 else None


# ---------------------------------------------------------------- bounds


@attrs.frozen
class Bound:
    """An output's nominal value and [low, high] over the box, how they were found
    (``method``: exact, split or sampled, and a word on it), and the points attaining them
    (parameter path -> SI value)."""

    nominal: float
    low: float
    high: float
    method: str
    how: str
    at_low: Mapping[str, float]
    at_high: Mapping[str, float]

    def to_json(self) -> list[float]:
        return [self.low, self.high]


GRID_1D = 2001  # points along one non-monotone parameter before refining
GRID_ND = 40_000  # points over several non-monotone parameters before refining


def outputs(model: StepModel) -> dict[str, Any]:
    """Every output whose range `bounds` reports: the metrics, then ``term.NAME``."""

    out: dict[str, Any] = {m: model.metrics[m] for m in METRICS if m in model.metrics}
    out.update({f"term.{t.name}": t.expr for t in model.terms})
    return out


def bounds(
    model: StepModel,
    ranged: Sequence[RangedInput] | None = None,
    exprs: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
) -> dict[str, Bound]:
    """The bounds of each output (default: `outputs`) over the box of ``ranged`` (default:
    the model's ranged inputs), every other parameter at its value."""

    ranged = list(inputs(model, registry) if ranged is None else ranged)
    exprs = dict(outputs(model) if exprs is None else exprs)
    names = list(exprs)
    box = {r.symbol: (r.low, r.high) for r in ranged}
    fixed = {s: sp.Float(v, 17) for s, v in model.values.items() if s not in box}
    substituted = rebuild(sp.Tuple(*(sp.sympify(exprs[n]) for n in names)), fixed).args
    an = _Analyzer(box)
    syms = [r.symbol for r in ranged]
    plans: dict[str, tuple[str, str, dict[Any, float], dict[Any, float]]] = {}
    for name, g in zip(names, substituted, strict=True):
        plans[name] = _plan(an, g, syms, box, model, name)
    # evaluate every candidate point at once, vectorized
    points: list[dict[Any, float]] = []
    index: dict[tuple[float, ...], int] = {}

    def slot(p: Mapping[Any, float]) -> int:
        k = tuple(float(p[s]) for s in syms)
        if k not in index:
            index[k] = len(points)
            points.append(dict(p))
        return index[k]

    nominal_pt = {r.symbol: r.nominal for r in ranged}
    slots = {n: (slot(lo), slot(hi)) for n, (_, _, lo, hi) in plans.items()}
    nominal_slot = slot(nominal_pt)
    ev = model.evaluate({s: np.array([p[s] for p in points], dtype=float) for s in syms})
    out: dict[str, Bound] = {}
    for n in names:
        vals = _values(ev, n, len(points))
        i_lo, i_hi = slots[n]
        method, how, p_lo, p_hi = plans[n]
        a, b = float(vals[i_lo]), float(vals[i_hi])
        if a > b:  # a constant output: the two corners tie up to rounding
            (a, p_lo), (b, p_hi) = (b, p_hi), (a, p_lo)
        out[n] = Bound(float(vals[nominal_slot]), a, b, method, how,
                       {s.name: float(v) for s, v in p_lo.items()},
                       {s.name: float(v) for s, v in p_hi.items()})  # fmt: skip
    return out


def _values(ev: Mapping[str, Any], name: str, n: int) -> np.ndarray:
    raw = ev["terms"][name[5:]] if name.startswith("term.") else ev[name]
    return np.broadcast_to(np.asarray(raw, dtype=float), (n,))


def _plan(
    an: _Analyzer,
    g: Any,
    syms: Sequence[Any],
    box: Mapping[Any, Interval],
    model: StepModel,
    name: str,
) -> tuple[str, str, dict[Any, float], dict[Any, float]]:
    """How one output's bounds are found and the two points that attain them (``g`` is the
    output ``name`` with every unranged parameter substituted).

    Stays whole: the directions found first decide among the three outcomes (exact at the
    corners, split in the one unknown variable, sampled over several), which all start from the
    same corner points.
    """
    directions: dict[Any, int | None] = {}
    for x in syms:
        d = an.monotone(g, x)
        if d is None:
            d = an.derivative_sign(g, x)
        directions[x] = d
    unknown = [x for x in syms if directions[x] is None]
    lo_pt: dict[Any, float] = {}
    hi_pt: dict[Any, float] = {}
    for x in syms:
        d = directions[x] or 0
        a, b = box[x]
        lo_pt[x], hi_pt[x] = (b, a) if d < 0 else (a, b)
    ups = [x.name for x in syms if directions[x] == 1]
    downs = [x.name for x in syms if directions[x] == -1]
    words = []
    if ups:
        words.append(f"rises with {', '.join(ups)}")
    if downs:
        words.append(f"falls with {', '.join(downs)}")
    if not unknown:
        how = "; ".join(words) if words else "constant over the box"
        return "exact", f"monotone: {how} (box corners)", lo_pt, hi_pt
    fn = _evaluated(model, name, syms)
    if len(unknown) == 1:
        x = unknown[0]
        lo_pt[x], hi_pt[x] = _extremes_1d(fn, syms, x, box[x], lo_pt, hi_pt)
        how = f"not monotone in {x.name}: split where its derivative changes sign"
        if words:
            how += f"; {'; '.join(words)}"
        return "split", how, lo_pt, hi_pt
    lo_pt, hi_pt = _extremes_nd(fn, syms, unknown, box, lo_pt, hi_pt)
    n = max(3, int(GRID_ND ** (1 / len(unknown))))
    over = (f"dense grid of {n}^{len(unknown)} points" if n ** len(unknown) <= GRID_ND
            else f"seeded sample of {GRID_ND:,} points")  # fmt: skip
    how = (f"not monotone in {', '.join(x.name for x in unknown)}: {over} over them, "
           "refined around the extremes")  # fmt: skip
    if words:
        how += f"; {'; '.join(words)}"
    return "sampled", how, lo_pt, hi_pt


def _evaluated(model: StepModel, name: str, syms: Sequence[Any]) -> Callable[..., Any]:
    """Output ``name`` at arrays of the ranged values, through the model's compiled function
    (built once for the model), not a new lambdify of each output."""

    def fn(*args: Any) -> np.ndarray:
        shape = np.broadcast(*args).shape if args else ()
        ev = model.evaluate({s: np.broadcast_to(np.asarray(a, dtype=float), shape)
                             for s, a in zip(syms, args, strict=True)})  # fmt: skip
        raw = ev["terms"][name[5:]] if name.startswith("term.") else ev[name]
        return np.broadcast_to(np.asarray(raw, dtype=float), shape)

    return fn


def _call(fn: Callable[..., Any], syms: Sequence[Any], base: Mapping[Any, float],
          x: Any, xs: np.ndarray) -> np.ndarray:  # fmt: skip
    return np.asarray(fn(*(xs if s == x else np.full(xs.shape, base[s]) for s in syms)))


def _extremes_1d(
    fn: Callable[..., Any],
    syms: Sequence[Any],
    x: Any,
    span: Interval,
    lo_pt: Mapping[Any, float],
    hi_pt: Mapping[Any, float],
) -> tuple[float, float]:
    """Where along ``x`` the minimum (others at ``lo_pt``) and the maximum (others at
    ``hi_pt``) lie: the ends, and each interior extremum of a grid refined by golden-section
    search between its neighbours."""
    a, b = span
    grid = np.linspace(a, b, GRID_1D)
    found = []
    for base, sense in ((lo_pt, 1.0), (hi_pt, -1.0)):

        def f(t: float, base: Mapping[Any, float] = base, sense: float = sense) -> float:
            return sense * float(_call(fn, syms, base, x, np.array([t]))[0])

        ys = sense * _call(fn, syms, base, x, grid)
        ys = np.where(np.isfinite(ys), ys, np.inf)
        i = int(np.argmin(ys))
        best_x, best_y = float(grid[i]), float(ys[i])
        if 0 < i < len(grid) - 1:
            xr = _golden(f, float(grid[i - 1]), float(grid[i + 1]))
            if f(xr) < best_y:
                best_x = xr
        found.append(best_x)
    return found[0], found[1]


def _golden(f: Callable[[float], float], a: float, b: float, iters: int = 80) -> float:
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
        if b - a <= 1e-13 * max(1.0, abs(b)):
            break
    return 0.5 * (a + b)


def _extremes_nd(
    fn: Callable[..., Any],
    syms: Sequence[Any],
    unknown: Sequence[Any],
    box: Mapping[Any, Interval],
    lo_pt: dict[Any, float],
    hi_pt: dict[Any, float],
) -> tuple[dict[Any, float], dict[Any, float]]:
    """The minimum and maximum over the non-monotone parameters (the monotone ones at their
    corners): a grid, then three rounds of finer grids around each extreme."""
    n = max(3, int(GRID_ND ** (1 / len(unknown))))
    out = []
    for base, sense in ((lo_pt, 1.0), (hi_pt, -1.0)):
        spans = {x: box[x] for x in unknown}
        best: dict[Any, float] = dict(base)
        best_y = math.inf
        rng = np.random.default_rng(0)  # a fixed sample: the same bounds on every run
        for _ in range(4):
            mesh = _grid(spans, unknown, n, rng)
            args = []
            for s in syms:
                if s in unknown:
                    args.append(mesh[unknown.index(s)])
                else:
                    args.append(np.full(mesh[0].size, base[s]))
            ys = sense * np.asarray(fn(*args), dtype=float)
            ys = np.where(np.isfinite(ys), ys, np.inf)
            i = int(np.argmin(ys))
            if ys[i] < best_y:
                best_y = float(ys[i])
                best = {**base, **{x: float(mesh[j][i]) for j, x in enumerate(unknown)}}
            for x in unknown:  # zoom: two cells either side of the best point
                lo, hi = spans[x]
                step = (hi - lo) / (n - 1) if n > 1 else 0.0
                a, b = box[x]
                spans[x] = (max(a, best[x] - 2 * step), min(b, best[x] + 2 * step))
        out.append(best)
    return out[0], out[1]


def _grid(spans: Mapping[Any, Interval], unknown: Sequence[Any], n: int,
          rng: np.random.Generator) -> list[np.ndarray]:  # fmt: skip
    """Points over the non-monotone parameters, one flat array per parameter: the n^k grid
    while it has at most `GRID_ND` points, else `GRID_ND` points drawn uniformly (seeded) with
    the box's 2^k corners where they fit (many parameters: a full grid would not fit memory)."""
    if n ** len(unknown) <= GRID_ND:
        axes = [np.linspace(*spans[x], n) for x in unknown]
        return [m.ravel() for m in np.meshgrid(*axes, indexing="ij")]
    drawn = [rng.uniform(*spans[x], GRID_ND) for x in unknown]
    if 2 ** len(unknown) <= GRID_ND // 2:  # the corners first
        ends = np.array(list(itertools.product((0, 1), repeat=len(unknown))), dtype=float)
        for j, x in enumerate(unknown):
            lo, hi = spans[x]
            drawn[j][: len(ends)] = lo + ends[:, j] * (hi - lo)
    return drawn


def corners(ranged: Sequence[RangedInput]) -> list[dict[str, float]]:
    """Every corner of the box (2^k points, parameter path -> value)."""
    return [
        {r.path: v for r, v in zip(ranged, pick, strict=True)}
        for pick in itertools.product(*((r.low, r.high) for r in ranged))
    ]


def check_box(model: StepModel, ranged: Sequence[RangedInput]) -> None:
    """Raise a one-line SpecError when a constraint fails at a corner of the box (the
    constraints — memory, divisibility, τ ≤ M — are monotone in one value at a time, so a
    box whose corners hold holds inside): no range may span impossible configurations."""
    pts = corners(ranged)
    ev = model.evaluate({r.symbol: np.array([p[r.path] for p in pts], dtype=float)
                         for r in ranged})  # fmt: skip
    ok = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), (len(pts),))
    if ok.all():
        return
    corner = pts[int(np.argmin(ok))]
    at = model.evaluate({r.symbol: corner[r.path] for r in ranged})
    found = [c for c in model.constraints if not bool(np.all(at["constraints"][c.name]))]
    why = f"{found[0].name} fails ({found[0].message})" if found else "a metric is not finite"
    where = ", ".join(f"{r.path} = {shown(corner[r.path], r.unit)}" for r in ranged)
    first = ranged[0]
    raise SpecError(first.file, first.path,
                    f"the box of ranged values holds an impossible configuration: at its corner "
                    f"{where}, {why}",
                    "ranges whose every point is feasible (or --allow-infeasible)")  # fmt: skip


# ---------------------------------------------------------------- eval output

METHODS = {
    "exact": "monotone in every ranged input over the box: the ends are its values at two "
    "of the box's corners",
    "split": "not monotone in one ranged input: its range split where the derivative changes "
    "sign, the others at their corners",
    "sampled": "not monotone in several ranged inputs: a dense vectorized grid over them, "
    "refined around its extremes",
}


def annotate(doc: dict[str, Any], model: StepModel, registry: Registry | None = None) -> None:
    """Add the ranges to an eval document (`stepwall.model.compose.summary`): ``ranges`` (metric ->
    [low, high]), ``range_methods`` (metric or ``term.NAME`` -> how), ``range_inputs``, and a
    ``range`` on each term. Today's fields are left as they are."""
    ranged = inputs(model, registry)
    found = bounds(model, ranged, registry=registry)
    doc["ranges"] = {k: b.to_json() for k, b in found.items() if not k.startswith("term.")}
    doc["range_nominal"] = {k: b.nominal for k, b in found.items() if not k.startswith("term.")}
    doc["range_methods"] = {k: f"{b.method}: {b.how}" for k, b in found.items()}
    doc["range_inputs"] = [r.to_json() for r in ranged]
    for term in doc["terms"]:
        b = found.get(f"term.{term['name']}")
        if b is not None:
            term["range"] = b.to_json()


_LABELS = {
    "step_time_s": "step time",
    "tokens_per_s_per_user": "tokens/s per user",
    "tokens_per_s": "tokens/s",
    "tokens_per_s_per_gpu": "tokens/s per GPU",
    "ttft_s": "time to first token",
    "e2e_latency_s": "request latency",
}


def shown(value: float, unit: str) -> str:
    """A value in an eval table: times and sizes with a prefix, rates to 4 digits."""

    dims = {"s": TIME, "B": INFORMATION, "B/s": BANDWIDTH, "FLOP": OPERATION,
            "FLOP/s": COMPUTE_RATE}  # fmt: skip
    dim = dims.get(unit)
    if dim is not None:
        return format_quantity(value, dim)
    return f"{value:.4g}" + (f" {unit}" if unit and unit != "tokens/s" else "")


def render(doc: Mapping[str, Any]) -> str:
    """The ranges of an annotated eval document as text (printed after the breakdown)."""

    ins = doc["range_inputs"]
    methods = doc["range_methods"]
    lines = ["", "", f"ranges ({len(ins)} inputs; nominal and [low, high] over their box)"]
    rows = []
    for r in ins:
        unit = r["unit"]
        span = f"[{shown(r['low'], unit)}, {shown(r['high'], unit)}]"
        rows.append((f"  {r['path']}", shown(r["nominal"], unit), span, r["file"]))
    lines += _table(rows)
    lines.append("")
    rows = [("metric", "nominal", "[low, high]", "method")]
    for name, (lo, hi) in doc["ranges"].items():
        unit = METRIC_UNITS.get(name, "")
        if lo == hi and name not in _LABELS:
            continue  # what the ranges do not move (GPUs, memory): as printed above
        nom = shown(float(doc["range_nominal"][name]), unit)
        rows.append((_LABELS.get(name, name), nom, f"[{shown(lo, unit)}, {shown(hi, unit)}]",
                     methods[name].split(":")[0]))  # fmt: skip
    lines += _table(rows, header=True)
    lines.append("")
    rows = [("term", "nominal", "[low, high]", "method")]
    still = 0
    for t in doc["terms"]:
        lo, hi = t["range"]
        if lo == hi:
            still += 1
            continue
        rows.append((t["name"], shown(t["seconds"], "s"), f"[{shown(lo, 's')}, {shown(hi, 's')}]",
                     methods[f"term.{t['name']}"].split(":")[0]))  # fmt: skip
    lines += _table(rows, header=True)
    if still:
        lines.append(f"({still} terms the ranges do not move are not listed)")
    used = sorted({m.split(":")[0] for m in methods.values()})
    lines += [f"{m:<8}{METHODS[m]}" for m in used]
    return "\n".join(lines)


def _table(rows: Sequence[tuple[str, ...]], header: bool = False) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for i, r in enumerate(rows):
        cells = [c.ljust(w) if j in (0, len(r) - 1) else c.rjust(w)
                 for j, (c, w) in enumerate(zip(r, widths, strict=True))]  # fmt: skip
        out.append("  ".join(cells).rstrip())
        if header and i == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


# ---------------------------------------------------------------- derivations over a box

MAX_CORNERS = 32  # a derivation's interval runs the analysis at every corner of the box


def root_interval(
    analysis: Any,
    model: StepModel,
    given: Mapping[str, Any],
    context: Any,
    result: Any,
    where: str = "derive",
    prefix: str = "",
) -> Any:
    """``result`` (a wall, crossover, optimum, … of ``model``) with the interval its value
    spans over the box of the ranged inputs: the analysis run at every corner of the box
    (the ranged inputs of ``model`` and of any other scenario it compares against), in
    ``details["range"]`` and said in the note. A root that depends monotonically on each
    input has its extremes at corners; ``definition`` is unchanged.

    Stays whole: one loop over the box's corners collects the values and misses that the note
    and details built after it report.
    """

    seen: dict[tuple[str, str], StepModel] = {}

    def record(ref: str, name: str) -> StepModel:
        if (ref, name) not in seen:
            seen[(ref, name)] = context.model_of(ref, name)
        return seen[(ref, name)]

    run(analysis, model, given, Context(context.registry, record), where, prefix)  # which sides
    sides: dict[Any, StepModel] = {None: model, **seen}
    flat = [(side, r) for side, m in sides.items() if m.scenario.ranges
            for r in inputs(m, context.registry)]  # fmt: skip
    if not flat:
        return result
    n = 2 ** len(flat)
    if n > MAX_CORNERS:
        raise SpecError(where, analysis.name, f"{len(flat)} ranged inputs: a derivation's interval "
                        f"runs the analysis at each of 2^{len(flat)} corners",
                        "at most 5 ranged inputs")  # fmt: skip
    values: list[float] = []
    missing = 0
    for pick in itertools.product(*((r.low, r.high) for _, r in flat)):
        chosen = list(zip(flat, pick, strict=True))
        moved = {
            side: at_point(m, {r.path: v for (s, r), v in chosen if s == side})
            for side, m in sides.items()
        }

        def model_of(ref: str, name: str, moved: dict[Any, StepModel] = moved) -> StepModel:
            return moved[(ref, name)] if (ref, name) in moved else context.model_of(ref, name)

        try:
            out = run(analysis, moved[None], given, Context(context.registry, model_of), where,
                      prefix)  # fmt: skip
        except StepwallError:
            out = []
        v = out[0].value if out else None
        if v is None or not math.isfinite(float(v)):
            missing += 1
        else:
            values.append(float(v))
    names = sorted({r.path if side is None else f"{side[0]}:{r.path}" for side, r in flat})
    if not values:
        note = f"no value at any of the {n} corners of the ranged inputs' box"
        details = {**result.details, "range": None, "range_corners": n, "range_inputs": names}
    else:
        lo, hi = min(values), max(values)
        note = (f"over the box of {len(flat)} ranged inputs ({', '.join(names)}): "
                f"[{lo:.6g}, {hi:.6g}] ({n} corners)")  # fmt: skip
        if missing:
            note += f"; no value at {missing} of them"
        details = {**result.details, "range": [lo, hi], "range_corners": n, "range_inputs": names}
    return attrs.evolve(result, note=f"{result.note}; {note}" if result.note else note,
                        details=details)  # fmt: skip


def publish(scalars: dict[str, Any], alias: str, model: StepModel, registry: Any = None) -> None:
    """A report alias's ranges as placeholders ``ALIAS.METRIC.low`` / ``.high`` (also
    ``ALIAS.term.NAME.low``, …)."""
    for name, b in bounds(model, registry=registry).items():
        scalars[f"{alias}.{name}.low"] = b.low
        scalars[f"{alias}.{name}.high"] = b.high
