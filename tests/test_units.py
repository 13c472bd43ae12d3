"""The unit grammar for spec strings and the dimension walker (DESIGN.md, "Units").

Expected magnitudes are hand arithmetic: 1 TB = 1e12 B, 1 Gb = 1e9/8 B, 1 GiB = 2**30 B.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from stepwall.core.dimensions import dimension_of
from stepwall.core.errors import DimensionError, StepwallError, UnitError
from stepwall.core.units import (
    BANDWIDTH,
    COMPUTE_RATE,
    DIMENSIONLESS,
    ENERGY,
    FREQUENCY,
    INFORMATION,
    OPERATION,
    POWER,
    TIME,
    Dim,
    format_quantity,
    magnitude,
    parse_quantity,
    parse_unit,
)

# ---------------------------------------------------------------- the grammar

EXAMPLES = [
    # (text, SI magnitude by hand, dimension)
    ("8 TB/s", 8e12, BANDWIDTH),
    ("400 Gb/s", 50e9, BANDWIDTH),  # 400e9 bits / 8
    ("275 GB", 275e9, INFORMATION),
    ("5 us", 5e-6, TIME),
    ("5 µs", 5e-6, TIME),  # U+00B5 micro sign
    ("5 μs", 5e-6, TIME),  # U+03BC Greek mu
    ("3 ms", 3e-3, TIME),
    ("7 ns", 7e-9, TIME),
    ("2 s", 2.0, TIME),
    ("2250 TFLOP/s", 2.25e15, COMPUTE_RATE),
    ("1 GFLOP", 1e9, OPERATION),
    ("1.2 GiB", 1.2 * 2**30, INFORMATION),
    ("1 KiB", 1024.0, INFORMATION),
    ("1 MiB", 2.0**20, INFORMATION),
    ("1 TiB", 2.0**40, INFORMATION),
    ("1 kB", 1e3, INFORMATION),
    ("1 MB", 1e6, INFORMATION),
    ("1 PB", 1e15, INFORMATION),
    ("8 b", 1.0, INFORMATION),  # 8 bits = 1 byte
    ("4 bit", 0.5, INFORMATION),
    ("1 Gb", 1.25e8, INFORMATION),
    ("1 GB", 1e9, INFORMATION),  # B vs b: 8x apart
    ("700 W", 700.0, POWER),
    ("1 kW", 1e3, POWER),
    ("3 J", 3.0, ENERGY),
    ("2 GHz", 2e9, FREQUENCY),
    ("16 tokens", 16.0, DIMENSIONLESS),
    ("1 token", 1.0, DIMENSIONLESS),
    ("72 kB/token", 72e3, INFORMATION),
    ("0.7", 0.7, DIMENSIONLESS),
    ("1e3 ms", 1.0, TIME),
    ("1_000 B", 1000.0, INFORMATION),
    ("303 /s", 303.0, FREQUENCY),
    ("1/s", 1.0, FREQUENCY),
    ("2 B*FLOP/s", 2.0, INFORMATION * OPERATION / TIME),
    ("1 J/s", 1.0, POWER),
]


@pytest.mark.parametrize(("text", "si", "dim"), EXAMPLES)
def test_parse_quantity_examples(text: str, si: float, dim: Dim) -> None:
    value, found = parse_quantity(text)
    assert found == dim
    assert value == pytest.approx(si, rel=1e-12)


def test_bits_and_bytes_differ_by_eight() -> None:
    assert parse_quantity("400 GB/s")[0] == pytest.approx(8 * parse_quantity("400 Gb/s")[0])


def test_binary_and_decimal_prefixes_differ() -> None:
    assert parse_quantity("1 GiB")[0] == 1073741824.0
    assert parse_quantity("1 GB")[0] == 1e9


def test_plain_numbers_are_dimensionless() -> None:
    assert parse_quantity(8) == (8.0, DIMENSIONLESS)
    assert parse_quantity(0.5) == (0.5, DIMENSIONLESS)


@pytest.mark.parametrize("text", ["nan TB/s", "inf TB/s", "-inf s", "+nan", "infinity"])
def test_non_finite_values_are_returned_for_the_caller_to_reject(text: str) -> None:
    value, _ = parse_quantity(text)
    assert not math.isfinite(value)


@pytest.mark.parametrize(
    "text",
    ["8 TQ/s", "8 furlongs", "5 KB", "8 TB/", "8 TB s", "TB/s", "", "8 TB//s", "8 TB+s"],
)
def test_unreadable_units_raise_unit_error(text: str) -> None:
    with pytest.raises(UnitError) as e:
        parse_quantity(text)
    assert isinstance(e.value, StepwallError)
    assert isinstance(e.value, ValueError)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("value", [True, None, [8], {"a": 1}])
def test_non_quantities_raise_unit_error(value: object) -> None:
    with pytest.raises(UnitError):
        parse_quantity(value)


def test_unknown_unit_is_named() -> None:
    with pytest.raises(UnitError, match="TQ"):
        parse_quantity("8 TQ/s")


def test_quantity_checks_the_dimension() -> None:
    assert magnitude("4 us", TIME) == pytest.approx(4e-6)
    with pytest.raises(DimensionError) as e:
        magnitude("8 TB", BANDWIDTH)  # a size where a bandwidth is expected
    assert e.value.left == "B"
    assert e.value.right == "B/s"
    assert "(B vs B/s)" in str(e.value)


def test_product_inside_denominator_stays_there() -> None:
    # "B/s·FLOP" is how Dim prints bytes per (second·FLOP); it must read back the same.
    d = INFORMATION / (TIME * OPERATION)
    assert parse_unit(str(d))[1] == d
    # "*" starts a new numerator factor.
    assert parse_unit("B/s*FLOP")[1] == INFORMATION * OPERATION / TIME


# ---------------------------------------------------------------- Dim algebra

exponents = st.one_of(
    st.integers(-3, 3).map(Fraction), st.sampled_from([Fraction(1, 2), Fraction(-3, 2)])
)
dims = st.builds(
    Dim,
    time=exponents,
    information=exponents,
    operation=exponents,
    mass=exponents,
    length=exponents,
)


@given(dims, dims, dims)
def test_dim_algebra_laws(a: Dim, b: Dim, c: Dim) -> None:
    assert a * b == b * a
    assert (a * b) * c == a * (b * c)
    assert (a * b) / b == a
    assert a / a == DIMENSIONLESS
    assert a * DIMENSIONLESS == a
    assert a**2 == a * a
    assert (a**2) ** Fraction(1, 2) == a
    if a == b:
        assert hash(a) == hash(b)


@given(dims)
def test_dim_str_reads_back(d: Dim) -> None:
    if d.dimensionless:
        assert str(d) == "dimensionless"
        return
    assert parse_unit(str(d))[1] == d


SI_DIMS = [
    TIME,
    INFORMATION,
    OPERATION,
    BANDWIDTH,
    COMPUTE_RATE,
    FREQUENCY,
    POWER,
    ENERGY,
    DIMENSIONLESS,
]


@given(
    st.floats(min_value=1e-12, max_value=1e20, allow_nan=False, allow_infinity=False),
    st.sampled_from(SI_DIMS),
)
def test_format_then_parse_round_trips(value: float, dim: Dim) -> None:
    text = format_quantity(value, dim)
    back, found = parse_quantity(text)
    assert found == dim, text
    assert back == pytest.approx(value, rel=1e-3), text  # 4 significant digits


PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 1024.0}
PREFIX.update({"Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40})


@given(
    st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    st.sampled_from(sorted(PREFIX)),
    st.sampled_from([("B", 1.0), ("b", 0.125)]),
)
def test_prefix_times_base(number: float, prefix: str, base: tuple[str, float]) -> None:
    unit, per = base
    value, dim = parse_quantity(f"{number!r} {prefix}{unit}/s")
    assert dim == BANDWIDTH
    assert value == pytest.approx(number * PREFIX[prefix] * per, rel=1e-12)


# ---------------------------------------------------------------- the dimension walker

b, b2, t, t0, f, n = sp.symbols("b b2 t t0 f n", positive=True)
DIMS = {b: INFORMATION, b2: INFORMATION, t: TIME, t0: TIME, f: COMPUTE_RATE, n: DIMENSIONLESS}
BW = sp.Symbol("bw", positive=True)
DIMS[BW] = BANDWIDTH


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (b / BW, TIME),
        (b / BW + t, TIME),
        (2 * t + 3 * t0, TIME),
        (b * t, INFORMATION * TIME),
        (t**2, TIME**2),
        (sp.sqrt(b), INFORMATION ** Fraction(1, 2)),
        (1 / t, FREQUENCY),
        (sp.Max(b / BW, t), TIME),
        (sp.Min(b / BW, t, t0), TIME),
        (sp.Max(0, t), TIME),  # an exact zero has every dimension
        (sp.Piecewise((0, n <= 1), (t, n <= 8), (t0 * n, True)), TIME),
        (sp.ceiling(b / b2) * t, TIME),
        (sp.floor(n / 2) * t, TIME),
        (sp.ceiling(b), INFORMATION),
        (sp.log(b / b2) * t, TIME),
        (sp.log(n, 2) * t, TIME),
        (sp.exp(-t / t0) * b, INFORMATION),
        (n**n, DIMENSIONLESS),
        (sp.pi * t, TIME),
        (sp.Integer(7), DIMENSIONLESS),
        (sp.Abs(t - t0), TIME),
    ],
)
def test_walker_dimensions(expr: sp.Expr, want: Dim) -> None:
    assert dimension_of(expr, DIMS) == want


@pytest.mark.parametrize(
    ("expr", "what"),
    [
        (b + t, "sum"),
        (sp.Max(b, t), "Max"),
        (sp.Min(b / BW, b), "Min"),
        (sp.Piecewise((b, n > 1), (t, True)), "Piecewise"),
        (sp.Piecewise((t, b > t0), (t0, True)), "comparison"),
        (sp.ceiling(b) + t, "sum"),
        (sp.floor(t) + b, "sum"),
    ],
)
def test_walker_mismatch_states_both_dimensions(expr: sp.Expr, what: str) -> None:
    with pytest.raises(DimensionError) as e:
        dimension_of(expr, DIMS)
    msg = str(e.value)
    assert what in msg
    sides = {e.value.left, e.value.right}
    assert sides in ({"B", "s"}, {"B", "B/s"})
    assert f"({e.value.left} vs {e.value.right})" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        (sp.log(b), "log"),
        (sp.exp(t), "exp"),
        (b**n, "symbolic power"),
        (n**t, "exponent"),
        (sp.Function("g")(t), "cannot check"),
        (sp.Symbol("undeclared") * t, "no declared dimension"),
    ],
)
def test_walker_rejects(expr: sp.Expr, fragment: str) -> None:
    with pytest.raises(DimensionError, match=fragment) as e:
        dimension_of(expr, DIMS)
    assert " vs )" not in str(e.value)  # a one-sided error does not print an empty side


def test_dimension_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        dimension_of(b + t, DIMS)


symbols_ = st.sampled_from([b, b2, t, t0, f, n, BW])


@given(symbols_, symbols_, st.integers(-3, 3))
def test_walker_algebra_laws(x: sp.Symbol, y: sp.Symbol, k: int) -> None:
    dx, dy = DIMS[x], DIMS[y]
    assert dimension_of(x * y, DIMS) == dx * dy
    assert dimension_of(x / y, DIMS) == dx / dy
    assert dimension_of(x**k, DIMS) == dx**k
    assert dimension_of(3 * x + x * 2, DIMS) == dx
    assert dimension_of(sp.Max(x, 2 * x), DIMS) == dx
    if dx != dy:
        with pytest.raises(DimensionError):
            dimension_of(x + y, DIMS)
        with pytest.raises(DimensionError):
            dimension_of(sp.Max(x, y), DIMS)
    else:
        assert dimension_of(x + y, DIMS) == dx
