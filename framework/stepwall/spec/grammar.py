"""The grammar of values in specs and on the command line beyond a plain quantity (which is
`stepwall.core.units.parse_quantity`): a range ``"LOW..HIGH [(NOMINAL)] UNIT"`` (docs/ranges.md)
and a sweep's span ``LO..HI[:STEP|:xFACTOR|:Nlog|:Nlin]``. In both, an end written without a
unit takes the other end's.
"""

from __future__ import annotations

import math
import re

from stepwall.core.errors import SpecError, UnitError
from stepwall.core.units import Dim, parse_unit, split_quantity

SEPARATOR = ".."
SYNTAX = 'LOW..HIGH [(NOMINAL)] UNIT, e.g. "7.2..8 TB/s" or "0.70..0.92 (0.70)"'
SPAN_SYNTAX = "LO..HI, LO..HI:STEP, LO..HI:xFACTOR or LO..HI:Nlog / Nlin, e.g. 1..256:x2"
_PAREN = re.compile(r"\(([^()]*)\)")
_BY = re.compile(r"^(?:x(?P<factor>.+)|(?P<n>.*?)(?P<kind>log|lin)|(?P<step>.+))$")


def is_range(value: object) -> bool:
    """Whether a spec value is written as a range (a string with ``..``)."""
    return isinstance(value, str) and SEPARATOR in value


def _ends(low: str, high: str) -> tuple[tuple[float, str], tuple[float, str]]:
    """The ends of ``LOW..HIGH`` as (number, unit); an end without a unit takes the other's.
    Raises UnitError for an end that is no quantity."""
    (lo_n, lo_u), (hi_n, hi_u) = split_quantity(low.strip()), split_quantity(high.strip())
    return (lo_n, lo_u or hi_u), (hi_n, hi_u or lo_u)


def parse_range(text: str) -> tuple[float, float, float, Dim]:
    """``"7.2..8 (7.6) TB/s"`` -> (low, nominal, high, dimension) in SI. The nominal value is
    the midpoint unless given in parentheses; an end without a unit takes the other's (the
    nominal takes the high end's). Raises UnitError (a message) for anything malformed.

    Stays whole: the grammar read left to right (parentheses, ends, units), then the checks on
    the numbers.
    """
    parens = _PAREN.findall(text)
    if len(parens) > 1 or text.count("(") != len(parens) or text.count(")") != len(parens):
        raise UnitError(f"cannot read range {text!r}: at most one (nominal) value")
    rest = _PAREN.sub(" ", text)
    parts = rest.split(SEPARATOR)
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        raise UnitError(f"cannot read range {text!r}")
    (lo_n, lo_u), (hi_n, hi_u) = _ends(parts[0], parts[1])
    ends = [(lo_n, lo_u), (hi_n, hi_u)]
    if parens:
        nom_n, nom_u = split_quantity(parens[0].strip())
        ends.append((nom_n, nom_u or hi_u))
    si: list[float] = []
    dims: list[Dim] = []
    for number, unit in ends:
        scale, d = parse_unit(unit)
        si.append(number * scale)
        dims.append(d)
    names = ("the low end", "the high end", "the nominal value")
    for i, d in enumerate(dims[1:], 1):
        if d != dims[0]:
            raise UnitError(
                f"mixed units in range {text!r}: the low end is {dims[0]}, {names[i]} is {d}"
            )
    for i, v in enumerate(si):
        if not math.isfinite(v):
            raise UnitError(f"{names[i]} of range {text!r} is not a finite number")
    low, high = si[0], si[1]
    if low > high:
        raise UnitError(f"range {text!r} has its low end above its high end")
    nominal = si[2] if parens else 0.5 * (low + high)
    if not low <= nominal <= high:
        raise UnitError(f"the nominal value of range {text!r} lies outside it")
    return low, nominal, high, dims[0]


def parse_span(text: str, flag: str, where: str) -> tuple[float, float, str, str, float]:
    """``1..256``, ``8..72:8``, ``1..256:x2``, ``1..4096:20log``, ``7..9TB/s:0.5TB/s`` ->
    (lo, hi, unit, how, by): the ends in ``unit`` (the low end's), ``how`` "step", "factor",
    "log" or "lin" and ``by`` the step (in ``unit``; 1 when none is given), the factor or
    the number of points. Each error is a SpecError naming ``flag`` and ``where``.

    Stays whole: the grammar read left to right: the ends, then one case per kind of step
    (factor, count, step).
    """
    expect = SPAN_SYNTAX
    lo_text, _, rest = text.strip().partition("..")
    hi_text, colon, by_text = rest.partition(":")
    if colon and not by_text.strip():
        raise SpecError(flag, where, "nothing follows ':'", expect)
    try:
        (lo, unit), (hi, hi_unit) = _ends(lo_text, hi_text)
        scale, dim = parse_unit(unit)
        hi_scale, hi_dim = parse_unit(hi_unit)
    except UnitError as e:
        raise SpecError(flag, where, str(e), expect) from None
    if hi_dim != dim:
        raise SpecError(flag, where, f"ends of different dimensions ({dim}, {hi_dim})",
                        "both ends of the same quantity")  # fmt: skip
    hi = hi * hi_scale / scale
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise SpecError(flag, where, "the range runs backwards or is not finite", "LO ≤ HI")
    b = _BY.match(by_text.strip() or "1")
    assert b is not None  # the last alternative matches anything
    if b["factor"]:
        try:
            factor = float(b["factor"])
        except ValueError:
            raise SpecError(flag, where, f"cannot read factor {b['factor']!r}", expect) from None
        if not factor > 1 or lo <= 0:
            raise SpecError(flag, where, "a factor range needs LO > 0 and a factor > 1",
                            "e.g. 1..256:x2")  # fmt: skip
        return lo, hi, unit, "factor", factor
    if b["kind"]:
        n = int(b["n"]) if b["n"].isdigit() else 0  # a count: digits only
        if n < 2 or (b["kind"] == "log" and lo <= 0):
            raise SpecError(flag, where, f"{by_text!r} needs at least 2 points, a whole number "
                            "(and LO > 0 for log spacing)", "e.g. 1..4096:20log")  # fmt: skip
        return lo, hi, unit, b["kind"], n
    try:
        step, step_unit = split_quantity(b["step"].strip())
        step_scale, step_dim = parse_unit(step_unit) if step_unit else (scale, dim)
    except UnitError as e:
        raise SpecError(flag, where, str(e), expect) from None
    if step_dim != dim:
        raise SpecError(flag, where, f"step {b['step']!r} is not of the range's dimension",
                        f"a step like 1{unit}")  # fmt: skip
    step = step * step_scale / scale
    if not (math.isfinite(step) and step > 0):
        raise SpecError(flag, where, "the step must be positive", expect)
    return lo, hi, unit, "step", step
