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
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sp

from stepwall import symbols
from stepwall.errors import DimensionError, shown_path
from stepwall.terms import Constraint, Term
from stepwall.units import DIMENSIONLESS, format_quantity

if TYPE_CHECKING:
    from stepwall.model import StepModel

COMPOSER = "stepwall"
MEMORY = "memory_fits"
HINT_LIMIT = 4096  # the largest degree a repair hint tries (a value typed as 1e9 stays quick)
_NEGATED = {"<=": ">", "<": "≥", ">=": "<", ">": "≤", "==": "≠", "!=": "="}


def composer_constraints(
    terms: Sequence[Term], resident: sp.Expr, capacity: sp.Expr, levers: Sequence[str]
) -> list[Constraint]:
    """Resident memory ≤ usable capacity, and each term ≥ 0 (a time is never negative)."""
    out = [
        Constraint(
            MEMORY,
            resident <= capacity,
            "weights and KV cache must fit in device memory",
            (*levers, "hardware.memory_capacity"),
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


def _explain(
    rel: sp.Basic, values: Mapping[sp.Symbol, float], blamed: str, labels: tuple[str, str]
) -> str:
    """The failing part of a relation with its values, e.g. ``100 > model.n_layers = 61``."""
    if isinstance(rel, sp.And):
        return " and ".join(
            _explain(a, values, blamed, labels) for a in rel.args if not _holds(a, values)
        )
    if isinstance(rel, sp.Or):
        return " and ".join(_explain(a, values, blamed, labels) for a in rel.args)
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


def violation(
    model: StepModel, c: Constraint, values: Mapping[sp.Symbol, float] | None = None
) -> Violation:
    """``c`` (known not to hold) said with the values at the point, and what would fix it."""
    vals = dict(values if values is not None else model.values)
    if c.keys:
        key = _blamed(model, c)
        where = shown_path(model.scenario.file_of(key))
    else:
        key, where = "", f"plugin {c.plugin}"
    text = _explain(c.relation, vals, key, c.labels)
    return Violation(c, where, key, text, repair_hint(model, c, vals))


def _blamed(model: StepModel, c: Constraint) -> str:
    """The key to name: one the user set on the command line (among the constraint's keys,
    else among the parameters its relation depends on), else one a file states, else the
    constraint's first (a plugin default nobody wrote down is the last thing to blame)."""
    stated, keys = model.scenario.provenance, c.keys
    held = sorted(s.name for s in c.relation.free_symbols if isinstance(s, sp.Symbol))
    on_command_line = [k for k in (*keys, *held) if stated.get(k) in ("--set", "--at")]
    in_a_file = [k for k in keys if k in stated]
    return (on_command_line or in_a_file or list(keys))[0]


def repair_hint(model: StepModel, c: Constraint, values: Mapping[sp.Symbol, float]) -> str:
    """For a constraint a parallel degree can fix: the nearest degree up to `HINT_LIMIT` at
    which every constraint holds (the smallest one that fits, for memory)."""
    for key in c.keys:
        if not key.startswith("parallel."):
            continue
        try:
            sym = model.parameter(key)
        except Exception:
            continue
        now = int(values[sym])
        limit = min(max(_cluster_gpus(model, values), 2 * now, 8), HINT_LIMIT)
        cand = np.arange(1, limit + 1, dtype=float)
        ev = model.evaluate({**{s: v for s, v in values.items() if s != sym}, sym: cand})
        ok = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), cand.shape)
        alone = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), cand.shape)
        if ok.any():
            best = min(cand[ok], key=lambda v: (abs(v - now), -v))
            return f"{key} = {int(best)} satisfies every constraint"
        if alone.any():
            best = min(cand[alone], key=lambda v: (abs(v - now), -v))
            return f"{key} = {int(best)} would satisfy this, but not every other constraint"
    return ""


def _cluster_gpus(model: StepModel, values: Mapping[sp.Symbol, float]) -> int:
    by_name = {s.name: v for s, v in values.items()}
    try:
        return int(by_name["cluster.nodes"] * by_name["cluster.gpus_per_node"])
    except KeyError:
        return 0
