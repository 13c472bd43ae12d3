"""The dimension of a sympy expression, from the dimensions its symbols carry.

Why our own: sympy.physics.units' checkers skip addends with free symbols, read only the
first addend of a sum, make ``Max`` dimensionless and silently ignore mismatches in
``convert_to`` (sympy 1.14). Expressions never carry units: each symbol carries its
dimension (`stepwall.core.symbols.Parameter`) and every number in an expression is dimensionless.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import reduce

import sympy as sp

from stepwall.core.errors import DimensionError
from stepwall.core.units import DIMENSIONLESS, Dim


def dimension_of(expr: sp.Basic, dims: Mapping[sp.Symbol, Dim] | None = None) -> Dim:
    """The dimension of a sympy expression. Each symbol's dimension is its own ``dim``
    attribute (`stepwall.core.symbols.Parameter`), or its entry in ``dims``.

    Rules: numbers are dimensionless; addends, Max/Min arguments, Piecewise branches and
    both sides of a comparison must agree; Mul multiplies; Pow needs a rational exponent
    (or a dimensionless base and exponent); ceiling/floor keep their argument's dimension;
    Mod needs both sides alike;
    log/exp need dimensionless arguments. Anything else is an error, never a guess.
    """
    return _walk(sp.sympify(expr), dims or {})


def _same(args: tuple[sp.Basic, ...], dims: Mapping[sp.Symbol, Dim], what: str) -> Dim:
    # An exact zero has every dimension ("no time", "no bytes"), so it never conflicts.
    found = [(a, _walk(a, dims)) for a in args if not (a.is_Number and a.is_zero)]
    if not found:
        return DIMENSIONLESS
    first_arg, first = found[0]
    for arg, d in found[1:]:
        if d != first:
            raise DimensionError(
                f"{what} mixes dimensions: {_short(first_arg)} and {_short(arg)}",
                left=str(first),
                right=str(d),
            )
    return first


def _short(e: sp.Basic) -> str:
    s = str(e)
    return s if len(s) <= 60 else s[:57] + "..."


def _walk_pow(e: sp.Pow, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    base, exp = _walk(e.base, dims), _walk(e.exp, dims)
    if not exp.dimensionless:
        raise DimensionError(f"exponent of {_short(e)} has a dimension", left=str(exp))
    if base.dimensionless:
        return base
    if not e.exp.is_Rational:
        raise DimensionError(
            f"{_short(e)} raises a dimensioned base to a symbolic power", left=str(base)
        )
    return base ** Fraction(int(e.exp.p), int(e.exp.q))


def _walk_dimensionless_fn(e: sp.Basic, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    for a in e.args:
        d = _walk(a, dims)
        if not d.dimensionless:
            raise DimensionError(
                f"{type(e).__name__} of a dimensioned quantity: {_short(e)}", left=str(d)
            )
    return DIMENSIONLESS


def _walk_piecewise(e: sp.Piecewise, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    for _, cond in e.args:
        _walk(cond, dims)
    return _same(tuple(ex for ex, _ in e.args), dims, "Piecewise")


def _walk_relational(e: sp.Basic, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    _same(e.args, dims, "comparison")
    return DIMENSIONLESS


def _walk_boolean(e: sp.Basic, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    for a in e.args:
        _walk(a, dims)
    return DIMENSIONLESS


_RULES: list[tuple[type, Callable[[sp.Basic, Mapping[sp.Symbol, Dim]], Dim]]] = [
    (sp.Add, lambda e, d: _same(e.args, d, "sum")),
    (sp.Mul, lambda e, d: reduce(lambda a, b: a * b, (_walk(x, d) for x in e.args))),
    (sp.Pow, _walk_pow),
    (sp.Max, lambda e, d: _same(e.args, d, "Max")),
    (sp.Min, lambda e, d: _same(e.args, d, "Min")),
    (sp.Piecewise, _walk_piecewise),
    (sp.ceiling, lambda e, d: _walk(e.args[0], d)),
    (sp.floor, lambda e, d: _walk(e.args[0], d)),
    (sp.Abs, lambda e, d: _walk(e.args[0], d)),
    (sp.Mod, lambda e, d: _same(e.args, d, "Mod")),
    (sp.log, _walk_dimensionless_fn),
    (sp.exp, _walk_dimensionless_fn),
    (sp.core.relational.Relational, _walk_relational),
    (sp.logic.boolalg.BooleanFunction, _walk_boolean),
]


# Dimensions of the expressions met so far when symbols carry their own (``dims`` empty): a
# Parameter's dimension is part of its identity, so an expression has one dimension for good;
# shared subtrees (a model's expressions are a DAG) are then walked once. Bounded, cleared
# when full.
_KNOWN: dict[sp.Basic, Dim] = {}
_KNOWN_MAX = 200_000


def _walk(e: sp.Basic, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    if dims or not e.args:
        return _walk_node(e, dims)
    found = _KNOWN.get(e)
    if found is None:
        found = _walk_node(e, dims)
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[e] = found
    return found


def _walk_node(e: sp.Basic, dims: Mapping[sp.Symbol, Dim]) -> Dim:
    if e.is_Number or e in (sp.true, sp.false) or isinstance(e, sp.NumberSymbol):
        return DIMENSIONLESS
    if e.is_Symbol:
        found = dims.get(e, getattr(e, "dim", None))
        if not isinstance(found, Dim):
            raise DimensionError(
                f"symbol {e} has no declared dimension "
                "(make it with stepwall.core.symbols.parameter)"
            )
        return found
    for kind, rule in _RULES:
        if isinstance(e, kind):
            return rule(e, dims)
    raise DimensionError(f"cannot check the dimension of {type(e).__name__}: {_short(e)}")
