"""Units: dimensions and a unit-string grammar for specs (the dimension of a sympy expression
is `stepwall.core.dimensions`; this module does not import sympy).

Why our own: sympy.physics.units' checkers skip addends with free symbols, read only the
first addend of a sum, make ``Max`` dimensionless and silently ignore mismatches in
``convert_to`` (sympy 1.14). Here a dimension is a vector of rational exponents over
base dimensions, magnitudes are SI floats, and expressions never carry units: symbols carry
dimensions from the symbol catalog and every number in an expression is dimensionless.

Base dimensions: ``time`` (s), ``information`` (B, byte), ``operation`` (FLOP),
``mass`` (kg) and ``length`` (m) — the last two only so that W and J are expressible — and
``currency`` (USD), so that a price per GPU-hour (``"2.69 USD/h"``) is checked like the rest.
Counts (tokens, users, experts, layers) are dimensionless; ``tokens`` is accepted in unit
strings for readability and has magnitude 1.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from stepwall.core.errors import DimensionError, UnitError

BASES = ("time", "information", "operation", "mass", "length", "currency")
_SYMBOL = {"time": "s", "information": "B", "operation": "FLOP", "mass": "kg", "length": "m",
           "currency": "USD"}  # fmt: skip


class Dim:
    """A physical dimension: rational exponents over BASES. Immutable and hashable."""

    __slots__ = ("_exp",)

    def __init__(self, **exponents: int | Fraction) -> None:
        unknown = set(exponents) - set(BASES)
        if unknown:
            raise ValueError(f"unknown base dimension(s) {sorted(unknown)}")
        self._exp = tuple(Fraction(exponents.get(b, 0)) for b in BASES)

    @classmethod
    def _of(cls, exp: tuple[Fraction, ...]) -> Dim:
        d = cls.__new__(cls)
        d._exp = exp
        return d

    def __mul__(self, other: Dim) -> Dim:
        return Dim._of(tuple(a + b for a, b in zip(self._exp, other._exp, strict=True)))

    def __truediv__(self, other: Dim) -> Dim:
        return Dim._of(tuple(a - b for a, b in zip(self._exp, other._exp, strict=True)))

    def __pow__(self, p: int | Fraction) -> Dim:
        return Dim._of(tuple(a * Fraction(p) for a in self._exp))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and self._exp == other._exp

    def __hash__(self) -> int:
        return hash(self._exp)

    def __lt__(self, other: Dim) -> bool:  # an order, so sympy can sort symbols carrying one
        return self._exp < other._exp

    @property
    def dimensionless(self) -> bool:
        return not any(self._exp)

    def __str__(self) -> str:
        if self.dimensionless:
            return "dimensionless"
        if self._exp in _NAMED:  # W and J, not kg·m^2/s^3
            return _NAMED[self._exp]
        num = [_fmt(_SYMBOL[b], e) for b, e in zip(BASES, self._exp, strict=True) if e > 0]
        den = [_fmt(_SYMBOL[b], -e) for b, e in zip(BASES, self._exp, strict=True) if e < 0]
        top = "·".join(num) or "1"
        return f"{top}/{'·'.join(den)}" if den else top

    __repr__ = __str__


def _fmt(sym: str, e: Fraction) -> str:
    if e == 1:
        return sym
    return f"{sym}^{e}" if e.denominator == 1 else f"{sym}^({e})"


DIMENSIONLESS = Dim()
TIME = Dim(time=1)
INFORMATION = Dim(information=1)
OPERATION = Dim(operation=1)
BANDWIDTH = INFORMATION / TIME
COMPUTE_RATE = OPERATION / TIME
FREQUENCY = DIMENSIONLESS / TIME
ENERGY = Dim(mass=1, length=2, time=-2)
POWER = ENERGY / TIME
_NAMED = {POWER._exp: "W", ENERGY._exp: "J"}  # derived units printed by their name
CURRENCY = Dim(currency=1)
PRICE_RATE = CURRENCY / TIME  # a rental price: USD per GPU-hour

# Named dimensions that spec fields declare (`dim="bandwidth"`), and how they read in errors.
NAMED: dict[str, Dim] = {
    "dimensionless": DIMENSIONLESS,
    "time": TIME,
    "information": INFORMATION,
    "operation": OPERATION,
    "bandwidth": BANDWIDTH,
    "compute_rate": COMPUTE_RATE,
    "frequency": FREQUENCY,
    "energy": ENERGY,
    "power": POWER,
    "price_rate": PRICE_RATE,
}
_EXAMPLE = {
    DIMENSIONLESS: "a plain number",
    TIME: 'a time such as "5 us"',
    INFORMATION: 'a size such as "275 GB" or "4 bit"',
    OPERATION: 'an operation count such as "1 GFLOP"',
    BANDWIDTH: 'a bandwidth such as "8 TB/s" or "400 Gb/s"',
    COMPUTE_RATE: 'a compute rate such as "2250 TFLOP/s"',
    FREQUENCY: 'a rate such as "1 Hz"',
    ENERGY: 'an energy such as "1 J"',
    POWER: 'a power such as "700 W"',
    PRICE_RATE: 'a price per hour such as "2.69 USD/h"',
}


# The range a value of each quantity can physically take in this field (widely: a part from a
# PCIe card to a rack). A value outside is computed, with a warning: it is almost always a
# typo or a unit slip ("1e-30 B/s", "8 TB/ms").
PLAUSIBLE: dict[Dim, tuple[str, str]] = {
    BANDWIDTH: ("1 MB/s", "100 PB/s"),
    COMPUTE_RATE: ("1 GFLOP/s", "1000 PFLOP/s"),
    INFORMATION: ("1 bit", "100 PB"),
    TIME: ("1 ps", "1000 s"),
    POWER: ("1 W", "100 MW"),
    PRICE_RATE: ("0.01 USD/h", "100000 USD/h"),
}


def implausible(magnitude: float, dim: Dim, field: tuple[str, str] | None = None) -> str:
    """Why an SI value is far outside its quantity's physical range, or "" (zero passes).
    ``field`` is the range a field declares for itself (an efficiency: 0.001 to 1), which
    replaces its dimension's."""
    bounds = field or PLAUSIBLE.get(dim)
    if bounds is None or magnitude == 0:
        return ""
    low, high = (parse_quantity(b)[0] for b in bounds)
    if low <= abs(magnitude) <= high:
        return ""
    what = "this field" if field else describe(dim).split(" such as")[0]
    return f"far outside the plausible range of {what} " + (
        f"({bounds[0]} to {bounds[1]}); computing anyway"
    )


def describe(dim: Dim) -> str:
    """How a dimension reads in an error message: its name and an example."""
    return _EXAMPLE.get(dim, f"a quantity in {dim}")


# ---------------------------------------------------------------- unit-string grammar

# base unit -> (SI magnitude, dimension, accepts prefixes)
_BASE_UNITS: dict[str, tuple[float, Dim, bool]] = {
    "s": (1.0, TIME, True),
    "B": (1.0, INFORMATION, True),
    "b": (0.125, INFORMATION, True),
    "bit": (0.125, INFORMATION, True),
    "bits": (0.125, INFORMATION, True),
    "FLOP": (1.0, OPERATION, True),
    "FLOPs": (1.0, OPERATION, True),
    "W": (1.0, POWER, True),
    "J": (1.0, ENERGY, True),
    "Hz": (1.0, FREQUENCY, True),
    "g": (1e-3, Dim(mass=1), True),  # so that str(Dim) of W and J reads back ("kg·m^2/s^3")
    "m": (1.0, Dim(length=1), True),
    "token": (1.0, DIMENSIONLESS, True),
    "tokens": (1.0, DIMENSIONLESS, True),
    "USD": (1.0, CURRENCY, False),
    "h": (3600.0, TIME, False),
}
_PREFIXES: dict[str, float] = {
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "m": 1e-3,
    "u": 1e-6,
    "µ": 1e-6,
    "μ": 1e-6,
    "n": 1e-9,
    "p": 1e-12,
}
_NUMBER = re.compile(
    r"^\s*([+-]?(?:(?:\d[\d_]*\.?\d*|\.\d+)(?:e[+-]?\d+)?|nan|inf(?:inity)?))\s*(.*)$", re.I
)
_TOKEN = re.compile(r"\s*([A-Za-zµμ]+)(?:\^(-?\d+|\(-?\d+/\d+\)))?\s*")


def _unit(name: str) -> tuple[float, Dim]:
    if name in _BASE_UNITS:
        mag, dim, _ = _BASE_UNITS[name]
        return mag, dim
    for plen in (2, 1):
        prefix, base = name[:plen], name[plen:]
        if prefix in _PREFIXES and base in _BASE_UNITS and _BASE_UNITS[base][2]:
            mag, dim, _ = _BASE_UNITS[base]
            return _PREFIXES[prefix] * mag, dim
    raise UnitError(f"unknown unit {name!r}")


def parse_unit(text: str) -> tuple[float, Dim]:
    """Parse a unit expression such as ``TB/s``, ``FLOP/s``, ``B/token``, ``GiB``.

    Grammar: ``['1'] ['/'] term (('*' | '·' | '/') term)*`` with
    ``term = [prefix] base ['^' int | '^(' int '/' int ')']``; everything after a ``/`` up to
    the next ``*`` is in the denominator (``B/s·FLOP`` is B/(s·FLOP), as `Dim` prints it).
    A leading ``1/`` or ``/`` starts in the denominator (``1/s``).
    """
    mag, dim = 1.0, DIMENSIONLESS
    rest = text.strip()
    if not rest:
        return mag, dim
    sign = 1
    if rest.startswith(("1/", "/")):
        rest, sign = rest.split("/", 1)[1], -1
        if not rest.strip():
            raise UnitError(f"cannot read unit {text!r}: nothing after '/'")
    while rest:
        m = _TOKEN.match(rest)
        if not m:
            raise UnitError(f"cannot read unit {text!r} at {rest!r}")
        m_u, d_u = _unit(m.group(1))
        p = Fraction(m.group(2).strip("()") if m.group(2) else 1) * sign
        mag *= m_u ** float(p)
        dim = dim * d_u**p
        rest = rest[m.end() :]
        if not rest:
            break
        op, rest = rest[0], rest[1:]
        if not rest.strip():
            raise UnitError(f"cannot read unit {text!r}: nothing after {op!r}")
        if op == "/":
            sign = -1
        elif op == "*":
            sign = 1
        elif op == "·":
            pass  # a product inside a denominator stays there
        else:
            raise UnitError(f"cannot read unit {text!r}: unexpected {op!r}")
    return mag, dim


def split_quantity(text: str) -> tuple[float, str]:
    """``"8 TB/s"`` -> (8.0, "TB/s"): the number as written and the unit text after it."""
    m = _NUMBER.match(text)
    if not m:
        raise UnitError(f'cannot read quantity {text!r} (a number then a unit, like "8 TB/s")')
    return float(m.group(1).replace("_", "")), m.group(2).strip()


def parse_quantity(value: object) -> tuple[float, Dim]:
    """``"8 TB/s"`` -> (8e12, bandwidth). Bare numbers are dimensionless.

    Raises UnitError for unparsable text; NaN and infinities are returned as such so the
    caller can say which key holds them.
    """
    if isinstance(value, bool):
        raise UnitError(f"expected a number or a quantity, got {value!r}")
    if isinstance(value, int | float):
        return float(value), DIMENSIONLESS
    if not isinstance(value, str):
        raise UnitError(f"expected a number or a quantity string, got {type(value).__name__}")
    m = _NUMBER.match(value)
    if not m:
        raise UnitError(f'cannot read quantity {value!r} (a number then a unit, like "8 TB/s")')
    number = float(m.group(1).replace("_", ""))
    mag, dim = parse_unit(m.group(2))
    return number * mag, dim


def parse_dim(text: str) -> Dim:
    """A dimension from the text `Dim` prints (``"B/s"``, ``"kg·m^2/s^3"``, ``"dimensionless"``):
    how a cache keeps a field's dimension."""
    return DIMENSIONLESS if text == str(DIMENSIONLESS) else parse_unit(text)[1]


def magnitude(text: str, expected: Dim | None = None) -> float:
    """SI magnitude of a quantity string, optionally checked against a dimension:
    ``magnitude("4 us", TIME)`` is 4e-6.
    """
    mag, dim = parse_quantity(text)
    if expected is not None and dim != expected:
        raise DimensionError(
            f"quantity {text!r} has the wrong dimension", left=str(dim), right=str(expected)
        )
    return mag


def format_quantity(value: float, dim: Dim) -> str:
    """A readable string for an SI magnitude: ``7.92 ms``, ``11.9 GB``, ``303 /s``."""
    if not math.isfinite(value):
        return str(value)
    unit = {
        TIME: "s",
        INFORMATION: "B",
        BANDWIDTH: "B/s",
        OPERATION: "FLOP",
        COMPUTE_RATE: "FLOP/s",
    }.get(dim)
    if unit is None:
        return f"{value:.4g}" if dim.dimensionless else f"{value:.4g} {dim}"
    if unit == "s":
        for scale, pre in ((1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
            if abs(value) >= scale or scale == 1e-9:
                return f"{value / scale:.4g} {pre}s"
    for scale, pre in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(value) >= scale or scale == 1:
            return f"{value / scale:.4g} {pre}{unit}"
    raise AssertionError("unreachable")
