"""One grammar for ``..``: ranges in specs and sweep spans on the command line read their
ends by the same rule (an end without a unit takes the other's)."""

from __future__ import annotations

import pytest

from stepwall.apps.sweep import Span, parse_span
from stepwall.core.errors import SpecError
from stepwall.spec import grammar


def test_an_end_without_a_unit_takes_the_others() -> None:
    want = (7.0, 9.0, "TB/s", "step", 0.5)
    for text in ("7TB/s..9TB/s:0.5TB/s", "7..9TB/s:0.5TB/s", "7TB/s..9:0.5"):
        assert grammar.parse_span(text, "--vary", text) == want
    low, _, high, _ = grammar.parse_range("7..9 TB/s")
    assert (low, high) == (7e12, 9e12)  # the same rule as a range's


def test_spans_as_before() -> None:
    assert grammar.parse_span("1..256:x2", "-f", "w") == (1.0, 256.0, "", "factor", 2.0)
    assert grammar.parse_span("1..4096:20log", "-f", "w") == (1.0, 4096.0, "", "log", 20)
    assert grammar.parse_span("8..72:8", "-f", "w") == (8.0, 72.0, "", "step", 8.0)
    assert grammar.parse_span("1..3", "-f", "w") == (1.0, 3.0, "", "step", 1.0)
    # the high end in the low end's unit
    assert grammar.parse_span("500GB/s..1TB/s:250GB/s", "-f", "w") == (
        500.0, 1000.0, "GB/s", "step", 250.0
    )  # fmt: skip


def test_sweep_builds_its_span_from_the_grammar() -> None:
    span = parse_span("hardware.hbm_bandwidth", "7..8TB/s:0.5TB/s")
    assert span == Span("hardware.hbm_bandwidth=7..8TB/s:0.5TB/s", 7.0, 8.0, "TB/s", "step", 0.5)
    assert span.labels(False) == ["7TB/s", "7.5TB/s", "8TB/s"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1TB/s..2TB", "ends of different dimensions"),
        ("7TB/s..9TB/s:1s", "not of the range's dimension"),
        ("8..1", "the range runs backwards"),
        ("1..8:", "nothing follows ':'"),
        ("1..2:x0.5", "a factor > 1"),
    ],
)
def test_bad_spans(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as e:
        grammar.parse_span(text, "--vary", f"k={text}")
    assert str(e.value).startswith(f"--vary:k={text}: ")
