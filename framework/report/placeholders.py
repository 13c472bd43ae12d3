"""Placeholders in report prose: ``{tp8.tokens_per_s_per_user:.0f}``,
``{(hgx_tp72.step_time_s / tp8.step_time_s - 1) * 100 as %:.0f}``, ``{table["row"]["col"]}``.

An expression may use numbers, strings, + − × ÷ **, comparisons, min/max/abs/round/choose/
log/exp/ceil/floor, dotted references and table lookups; nothing else (no attribute calls).
``{expr as UNIT:FORMAT}`` shows a metric in a unit of its dimension.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

from stepwall.compiled import METRIC_UNITS
from stepwall.errors import SpecError, UnitError, did_you_mean
from stepwall.units import parse_unit


def csv_number(value: float | bool | str | None) -> str:
    """Numbers in CSV cells to 10 significant digits: the last bits of a float differ with
    the order sympy's common-subexpression pass happens to pick, the figures do not."""
    if value is None:
        return ""
    if isinstance(value, bool | str):
        return str(value)
    return f"{float(value):.10g}"


# ---------------------------------------------------------------- units and formats


def unit_scale(unit: str, metric: str, where: str, key: str) -> float:
    """The factor a metric's SI value is divided by to show it in ``unit``; the unit must
    have the metric's dimension (``ms`` for a time, ``GB`` for bytes, ``tokens/s``)."""
    if unit in ("", "%"):
        return 0.01 if unit == "%" else 1.0
    try:
        scale, dim = parse_unit(unit)
        _, want = parse_unit(metric_unit(metric) or "1")
    except UnitError as e:
        raise SpecError(where, key, str(e), "a unit such as ms, GB or tokens/s") from None
    if dim != want:
        raise SpecError(
            where,
            key,
            f"unit {unit!r} is a {dim} unit but {metric} is {want}",
            f"a unit of dimension {want}",
        )
    return scale


def fmt(value: Any, spec: str) -> str:
    if isinstance(value, str):
        return format(value, spec) if spec else value
    v = float(value)
    if not math.isfinite(v):
        return "—"
    out = format(v, spec or ".4g")
    return "0" if re.fullmatch(r"-0\.?0*", out) else out


# ---------------------------------------------------------------- placeholders


def metric_unit(name: str) -> str:
    """The SI unit of a metric, a ``group.G`` or ``term.T`` (seconds), as text."""
    return METRIC_UNITS.get(name, "s")


class Infeasible:
    """What a placeholder finds for a performance metric of an infeasible scenario."""

    def __init__(self, why: str) -> None:
        self.why = why


INFEASIBLE = "infeasible"


class Namespace:
    """What placeholders can name: ``alias.METRIC`` / ``alias.group.G`` / ``alias.term.T`` /
    ``alias.param.KEY`` / ``alias.fits``; ``DERIV.value`` and the other Derivation fields;
    ``TABLE["row label"]["column label"]``."""

    def __init__(self) -> None:
        self.scalars: dict[str, Any] = {}
        self.tables: dict[str, dict[str, dict[str, float]]] = {}

    def get(self, path: str, where: str, key: str) -> Any:
        if path in self.scalars:
            value = self.scalars[path]
            if isinstance(value, Infeasible):
                raise SpecError(where, key, f"{path} has no value: {value.why}",
                                "a feasible scenario (see its violations)")  # fmt: skip
            return value

        dym = did_you_mean(path, sorted(self.scalars))
        raise SpecError(
            where,
            key,
            f"placeholder names unknown value {path!r}{dym}",
            "alias.metric, alias.group.G, alias.term.T, alias.param.KEY, "
            "derivation.value or table[row][column]",
        )


_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "choose": lambda cond, a, b: a if cond else b,
    "log": math.log,
    "exp": math.exp,
    "ceil": math.ceil,
    "floor": math.floor,
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_CMPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
}


def evaluate_expression(text: str, ns: Namespace, where: str, key: str) -> Any:
    """A placeholder expression: numbers, strings, + − × ÷ **, comparisons, min/max/abs/
    round/choose, dotted references and table lookups. Nothing else (no attribute calls)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise SpecError(
            where,
            key,
            f"placeholder {{{text}}} is not an expression",
            "e.g. {tp8.tokens_per_s_per_user:.0f}",
        ) from None

    def dotted(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            base = dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            path = dotted(node)
            if path is None:
                raise SpecError(where, key, f"cannot read {ast.unparse(node)!r}")
            return ns.get(path, where, key)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPS:
            return _CMPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        if isinstance(node, ast.Subscript):
            inner: ast.expr = node
            labels: list[Any] = []
            while isinstance(inner, ast.Subscript):
                labels.insert(0, ev(inner.slice))
                inner = inner.value
            name = dotted(inner)
            if name not in ns.tables or len(labels) != 2:
                raise SpecError(
                    where,
                    key,
                    f"{ast.unparse(node)!r} is not TABLE[row][column]",
                    f"a table id among: {', '.join(sorted(ns.tables)) or 'none'}",
                )
            table = ns.tables[name]
            row, col = (str(x) for x in labels)
            cell = table.get(row, {}).get(col)
            if isinstance(cell, Infeasible):
                raise SpecError(where, key, f"{ast.unparse(node)} has no value: {cell.why}",
                                "a feasible cell")  # fmt: skip
            if row not in table or col not in table[row]:
                raise SpecError(
                    where,
                    key,
                    f"table {name} has no cell [{row!r}][{col!r}]",
                    f"rows {list(table)}, columns {list(next(iter(table.values())))}",
                )
            return table[row][col]
        raise SpecError(
            where,
            key,
            f"placeholder uses {type(node).__name__}, not allowed",
            "arithmetic, comparisons, min/max/abs/round/choose and references",
        )

    try:
        return ev(tree.body)
    except ZeroDivisionError:
        raise SpecError(where, key, f"placeholder {{{text}}} divides by zero") from None


_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_FORMAT = re.compile(r":([<>^]?[+-]?[#0]?\d*[,_]?(?:\.\d+)?[a-zA-Z%]?)$")


def fill(text: str, ns: Namespace, where: str, key: str) -> str:
    """Replace each ``{expr[ as unit][:format]}``; ``{{`` and ``}}`` are literal braces."""
    text = text.replace("{{", "\x00").replace("}}", "\x01")

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        spec = ""
        f = _FORMAT.search(body)
        if f:
            body, spec = body[: f.start()], f.group(1)
        scale = 1.0
        expr, sep, unit = body.rpartition(" as ")
        if sep:
            unit = unit.strip()
            path = expr.strip()
            metric = path.split(".", 1)[1] if "." in path else ""
            if unit == "%":
                scale = 0.01
            elif metric and (metric in METRIC_UNITS or metric.split(".")[0] in ("group", "term")):
                scale = unit_scale(unit, metric, where, key)
            else:
                try:
                    scale = parse_unit(unit)[0]
                except UnitError as e:
                    raise SpecError(where, key, str(e), "a unit such as ms or GB") from None
        else:
            expr = body
        value = evaluate_expression(expr, ns, where, key)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if not isinstance(value, str):
            value = float(value) / scale
        return fmt(value, spec)

    out = _PLACEHOLDER.sub(one, text)
    return out.replace("\x00", "{").replace("\x01", "}")
