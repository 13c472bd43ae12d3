"""Validity as part of the model: the composer's own constraints, and violations in words.

Plugins state the relations their laws assume (`stepwall_constraints`); the composer adds two
of its own: resident memory fits the usable capacity, and every term is ≥ 0. A violated
constraint at a point becomes one line naming the file and key that hold the bad value::

    …/my-model.toml:model.n_dense_layers: 100 > model.n_layers = 61 (dense layers are a
    subset of the layers)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import sympy as sp

from stepwall.core import symbols
from stepwall.core.errors import DimensionError
from stepwall.core.terms import Constraint, Term
from stepwall.core.units import DIMENSIONLESS, format_quantity

COMPOSER = "stepwall"
MEMORY = "memory_fits"
HINT_LIMIT = 4096  # the largest degree a repair hint tries (a value typed as 1e9 stays quick)
_NEGATED = {"<=": ">", "<": "≥", ">=": "<", ">": "≤", "==": "≠", "!=": "="}


def composer_constraints(
    terms: Sequence[Term],
    resident: sp.Expr,
    capacity: sp.Expr,
    levers: Sequence[str],
    capacity_key: str,
) -> list[Constraint]:
    """Resident memory ≤ usable capacity, and each term ≥ 0 (a time is never negative);
    ``capacity_key``: the spec path that states the device's memory."""
    out = [
        Constraint(
            MEMORY,
            resident <= capacity,
            "weights and KV cache must fit in device memory",
            (*levers, capacity_key),
            COMPOSER,
            ("resident memory per GPU", "usable"),
        )
    ]
    out += [
        Constraint(
            f"{t.name}_nonnegative",
            sp.GreaterThan(t.expr, 0, evaluate=False),  # kept as a relation to explain it
            f"plugin {t.plugin} made term {t.name} negative; a time cannot be negative",
            (),
            t.plugin,
            (f"term {t.name} =", ""),
        )
        for t in terms
    ]
    return out


@attrs.frozen
class Violation:
    """A constraint that does not hold at a point, said in one line."""

    constraint: Constraint
    where: str  # the file that holds the blamed key, or "plugin NAME"
    key: str
    text: str  # the relation with values, e.g. "100 > model.n_layers = 61"
    hint: str = ""

    @property
    def line(self) -> str:
        tail = f"; {self.hint}" if self.hint else ""
        loc = f"{self.where}:{self.key}" if self.key else self.where
        return f"{loc}: {self.text} ({self.constraint.message}{tail})"

    def to_json(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint.name,
            "plugin": self.constraint.plugin,
            "keys": list(self.constraint.keys),
            "message": self.line,
        }


def _fmt(value: float, expr: sp.Basic) -> str:
    if not math.isfinite(value):
        return str(value)
    try:
        dim = symbols.dim(expr)
    except DimensionError:  # a side the walker cannot type: print the bare number
        dim = DIMENSIONLESS
    if dim.dimensionless:
        return str(int(value)) if float(value).is_integer() else f"{value:.4g}"
    return format_quantity(value, dim)


def _value(expr: sp.Basic, values: Mapping[sp.Symbol, float]) -> float:
    """``expr`` at the point; nan where it has no value there (0/0 under a Min, say)."""
    try:
        return float(sp.sympify(expr).xreplace({s: sp.Float(v, 15) for s, v in values.items()}))
    except (TypeError, ValueError):
        return float("nan")


def _side(expr: sp.Basic, values: Mapping[sp.Symbol, float], blamed: str, label: str) -> str:
    v = _fmt(_value(expr, values), expr)
    if label:
        return f"{label} {v}"
    if expr.is_Number or (expr.is_Symbol and expr.name == blamed):
        return v
    return f"{expr} = {v}"


def _holds(rel: sp.Basic, values: Mapping[sp.Symbol, float]) -> bool:
    try:
        out = rel.xreplace({s: sp.Float(v, 15) for s, v in values.items()})
    except (TypeError, ValueError):  # a side without a value (nan) does not hold
        return False
    return bool(out == sp.true)


def explain(
    rel: sp.Basic, values: Mapping[sp.Symbol, float], blamed: str, labels: tuple[str, str]
) -> str:
    """The failing part of a relation with its values, e.g. ``100 > model.n_layers = 61``."""
    if isinstance(rel, sp.And):
        return " and ".join(
            explain(a, values, blamed, labels) for a in rel.args if not _holds(a, values)
        )
    if isinstance(rel, sp.Or):
        return " and ".join(explain(a, values, blamed, labels) for a in rel.args)
    if isinstance(rel, sp.Eq) and isinstance(rel.lhs, sp.Mod) and rel.rhs == 0:
        size, ranks = rel.lhs.args
        if ranks.is_Symbol and ranks.name == blamed:
            return f"{_fmt(_value(ranks, values), ranks)} does not divide " + _side(
                size, values, "", ""
            )
        return f"{_side(size, values, blamed, '')} is not a multiple of " + _side(
            ranks, values, "", ""
        )
    if isinstance(rel, sp.core.relational.Relational):
        op = _NEGATED.get(rel.rel_op, f"violates {rel.rel_op}")
        left = _side(rel.lhs, values, blamed, labels[0])
        right = _side(rel.rhs, values, "", labels[1])
        return f"{left} {op} {right}"
    return "the relation can never hold" if rel == sp.false else f"{rel} does not hold"
