"""The grammar of values in specs and on the command line beyond a plain quantity (which is
`stepwall.core.units.parse_quantity`): a range ``"LOW..HIGH [(NOMINAL)] UNIT"`` (docs/ranges.md).
"""

from __future__ import annotations

import math
import re

from stepwall.core.errors import UnitError
from stepwall.core.units import Dim, parse_unit, split_quantity

SEPARATOR = ".."
SYNTAX = 'LOW..HIGH [(NOMINAL)] UNIT, e.g. "7.2..8 TB/s" or "0.70..0.92 (0.70)"'
_PAREN = re.compile(r"\(([^()]*)\)")


def is_range(value: object) -> bool:
    """Whether a spec value is written as a range (a string with ``..``)."""
    return isinstance(value, str) and SEPARATOR in value


def parse_range(text: str) -> tuple[float, float, float, Dim]:
    """``"7.2..8 (7.6) TB/s"`` -> (low, nominal, high, dimension) in SI. The nominal value is
    the midpoint unless given in parentheses; an end without a unit takes the other's (the
    nominal takes the high end's). Raises UnitError (a message) for anything malformed."""
    parens = _PAREN.findall(text)
    if len(parens) > 1 or text.count("(") != len(parens) or text.count(")") != len(parens):
        raise UnitError(f"cannot read range {text!r}: at most one (nominal) value")
    rest = _PAREN.sub(" ", text)
    parts = rest.split(SEPARATOR)
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        raise UnitError(f"cannot read range {text!r}")
    (lo_n, lo_u), (hi_n, hi_u) = (split_quantity(p.strip()) for p in parts)
    lo_u, hi_u = lo_u or hi_u, hi_u or lo_u
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
