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

from stepwall.core.errors import SpecError, UnitError, did_you_mean
from stepwall.core.units import parse_unit
from stepwall.model.metrics import METRIC_UNITS


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


MAX_WIDTH, MAX_PRECISION = 200, 50  # a format's width and digits: more is a typo or an attack
_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?")


def formatted(value: Any, spec: str, where: str, key: str) -> str:
    """`fmt`, with a format spec that does not apply to ``value`` a `SpecError`."""
    check_format(spec, where, key)
    try:
        return fmt(value, spec)
    except (ValueError, TypeError) as e:
        kind = "text" if isinstance(value, str) else "a number"
        raise SpecError(where, key, f"format {spec!r} cannot show {kind}: {e}",
                        "a format such as .1f, ,.0f, .2e or .0%") from None  # fmt: skip


def check_format(spec: str, where: str, key: str) -> None:
    """A format spec that is not a Python format, or wider than `MAX_WIDTH` or more precise
    than `MAX_PRECISION`, is a `SpecError` (checked before any work)."""
    m = _SPEC.fullmatch(spec)
    width, digits = (int(g) if g else 0 for g in (m.groups() if m else ("", "")))
    if m is None or width > MAX_WIDTH or digits > MAX_PRECISION:
        what = ("is not a format" if m is None else f"asks for width {width}"
                if width > MAX_WIDTH else f"asks for precision {digits}")  # fmt: skip
        raise SpecError(where, key, f"format {spec!r} {what}",
                        f"a Python format such as .1f or >8,.0f, width at most {MAX_WIDTH} "
                        f"and precision at most {MAX_PRECISION}")  # fmt: skip


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


def _power(a: Any, b: Any) -> Any:
    out = a**b
    if isinstance(out, complex):
        raise ValueError("a negative number to a fractional power is not a real number")
    return out


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: _power,
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

    try:
        return _evaluate(tree.body, ns, where, key)
    except ZeroDivisionError:
        raise SpecError(where, key, f"placeholder {{{text}}} divides by zero") from None
    except OverflowError:
        raise SpecError(where, key, f"placeholder {{{text}}} exceeds the range of a number",
                        "values within ±1.8e308 (a 64-bit float)") from None  # fmt: skip
    except (ValueError, TypeError) as e:
        raise SpecError(where, key, f"placeholder {{{text}}} cannot be computed: {e}") from None
    except RecursionError:
        raise SpecError(where, key, f"placeholder {{{text[:40]}…}} nests too deep",
                        "a flatter expression") from None  # fmt: skip


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` as text, or None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _evaluate(node: ast.AST, ns: Namespace, where: str, key: str) -> Any:
    """The value of one node of a placeholder expression (`evaluate_expression`).

    Stays whole: a recursive-descent evaluator: one case per node type.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return _real(node.value)
    if isinstance(node, ast.Name | ast.Attribute):
        path = _dotted(node)
        if path is None:
            raise SpecError(where, key, f"cannot read {ast.unparse(node)!r}")
        return ns.get(path, where, key)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _evaluate(node.left, ns, where, key), _evaluate(node.right, ns, where, key)
        out = _BINOPS[type(node.op)](left, right)
        if _infinite(out) and not (_infinite(left) or _infinite(right)):
            raise OverflowError  # 1e308 * 10: past the range, not a number
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _evaluate(node.operand, ns, where, key)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPS:
        return _CMPS[type(node.ops[0])](
            _evaluate(node.left, ns, where, key), _evaluate(node.comparators[0], ns, where, key)
        )
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _real(_FUNCS[node.func.id](*(_evaluate(a, ns, where, key) for a in node.args)))
    if isinstance(node, ast.Subscript):
        return _table_cell(node, ns, where, key)
    raise SpecError(
        where,
        key,
        f"placeholder uses {type(node).__name__}, not allowed",
        "arithmetic, comparisons, min/max/abs/round/choose and references",
    )


def _table_cell(node: ast.Subscript, ns: Namespace, where: str, key: str) -> Any:
    """A table lookup ``TABLE[row][column]``: the cell's value."""
    inner: ast.expr = node
    labels: list[Any] = []
    while isinstance(inner, ast.Subscript):  # a literal label as written: t[8] is "8"
        given = inner.slice
        labels.insert(
            0, given.value if isinstance(given, ast.Constant) else _evaluate(given, ns, where, key)
        )
        inner = inner.value
    name = _dotted(inner)
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


def _infinite(value: Any) -> bool:
    return isinstance(value, float) and math.isinf(value)


def _real(value: Any) -> Any:
    """Numbers are floats (constant work per operation: no 10**10**10 as an exact integer,
    no text repeated a billion times); text and booleans stay."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


_ESCAPED = re.compile(r"\{\{|\{[^{}]*\}|\}\}")  # an escape, or a placeholder left as it is
_ESCAPES = {"{{": "\x00", "}}": "\x01"}
_TOKEN = re.compile(r"\{([^{}]*)\}|[{}]")  # a placeholder, or a brace that opens or closes none
_FORMAT = re.compile(r":([<>^]?[+-]?[#0]?\d*[,_]?(?:\.\d+)?[a-zA-Z%]?)$")
MAX_PLACEHOLDER = 1000  # characters in one placeholder; the shipped reports use at most ~300


def fill(text: str, ns: Namespace, where: str, key: str) -> str:
    """Replace each ``{expr[ as unit][:format]}``; ``{{`` and ``}}`` are literal braces, and
    a brace that opens or closes no placeholder is an error.

    Stays whole: its nested `one` is the `re.sub` callback and needs the text it reports an
    unclosed brace in.
    """
    # literal braces as Python's format reads them, left to right: "{{{x}}}" is "{" x "}"
    text = _ESCAPED.sub(lambda m: _ESCAPES.get(m.group(), m.group()), text)

    def one(m: re.Match[str]) -> str:
        """The text of one placeholder match.

        Stays whole: the format, the unit and the value of one placeholder are read in turn
        from one body.
        """
        if m.group(1) is None or not m.group(1).strip():
            shown = text[m.start() : m.start() + 40].split("\n")[0].translate(_LITERAL)
            problem = (f"placeholder {shown!r} is not closed" if m.group(0) == "{" else
                       f"{shown[:1]!r} closes no placeholder" if m.group(0) == "}" else
                       "placeholder {} is empty")  # fmt: skip
            raise SpecError(where, key, problem, "{EXPR} or {EXPR:FORMAT}; {{ and }} for "
                            "literal braces")  # fmt: skip
        body = m.group(1)
        if len(body) > MAX_PLACEHOLDER:
            raise SpecError(where, key, f"placeholder {{{body[:40]}…}} is longer than "
                            f"{MAX_PLACEHOLDER} characters", "a shorter expression")  # fmt: skip
        spec = ""
        f = _FORMAT.search(body)
        if f:
            body, spec = body[: f.start()], f.group(1)
            check_format(spec, where, key)  # the limits, before any work
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
        return formatted(value, spec, where, key)

    out = _TOKEN.sub(one, text)
    return out.translate(_LITERAL)


_LITERAL = str.maketrans({"\x00": "{", "\x01": "}"})
