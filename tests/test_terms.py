"""Terms are unit-checked where they are made: a plugin that mixes dimensions is rejected,
naming itself and the term; and the seed's ×1e3 units bug (BRIEF §2) cannot happen."""

from __future__ import annotations

import pytest
import sympy as sp

from stepwall.cli import main
from stepwall.core.errors import DimensionError, PluginError, SpecError, StepwallError
from stepwall.core.symbols import constant, parameter
from stepwall.core.terms import Op, Term
from stepwall.core.units import (
    BANDWIDTH,
    DIMENSIONLESS,
    INFORMATION,
    TIME,
    format_quantity,
    magnitude,
    parse_quantity,
)
from stepwall.model.compose import build_model
from stepwall.plugin import registry
from stepwall.plugin.hookspecs import hookimpl

SCENARIO = "k26-b300-tp8-ddtree"
# Constants are declared at import time, as the built-in plugins do: a scenario loaded
# afterwards carries their values.
TWO_MS = constant("test_terms.two_ms", "2 ms")


class _Plugin:
    """A throwaway plugin: one fixed term built by ``make(scenario)``."""

    def __init__(self, name: str, make) -> None:
        self.__name__ = name
        self.make = make

    @hookimpl
    def stepwall_fixed_terms(self, scenario, workload, decoding):
        return [self.make(scenario)]


def _bytes_plus_seconds(s):
    hw = s.params.hardware
    return Term("bad.sum", hw.memory_capacity + hw.kernel_floor, "bad_sum", "bytes + seconds")


def _max_bytes_seconds(s):
    hw = s.params.hardware
    return Term("bad.max", sp.Max(hw.memory_capacity, hw.kernel_floor), "bad_max", "Max(B, s)")


def _piecewise_mixed(s):
    hw, p = s.params.hardware, s.params.parallel
    expr = sp.Piecewise((hw.kernel_floor, p.tp <= 1), (hw.memory_capacity, True))
    return Term("bad.piecewise", expr, "bad_piecewise", "s or B")


def _bytes_only(s):
    return Term("bad.bytes", s.params.hardware.memory_capacity, "bad_bytes", "bytes, not time")


@pytest.mark.parametrize(
    ("make", "plugin", "term", "fragment"),
    [
        (_bytes_plus_seconds, "bad_sum", "bad.sum", "sum mixes dimensions"),
        (_max_bytes_seconds, "bad_max", "bad.max", "Max mixes dimensions"),
        (_piecewise_mixed, "bad_piecewise", "bad.piecewise", "Piecewise mixes dimensions"),
        (_bytes_only, "bad_bytes", "bad.bytes", "must have dimension s"),
    ],
)
def test_plugin_mixing_dimensions_is_rejected(make, plugin, term, fragment) -> None:
    hooks = registry.build(extra=(_Plugin(plugin, make),), autoload=False)
    with pytest.raises(DimensionError) as e:
        build_model(SCENARIO, registry=hooks)
    err = e.value
    assert err.plugin == plugin
    assert err.term == term
    assert {err.left, err.right} == {"B", "s"}
    msg = str(err)
    assert f"plugin {plugin}" in msg
    assert f"term {term}" in msg
    assert fragment in msg
    assert "\n" not in msg


def test_cli_reports_a_bad_plugin_in_one_line(capsys) -> None:
    reg = registry.build(extra=(_Plugin("bad_max", _max_bytes_seconds),), autoload=False)
    code = main(["eval", SCENARIO, "--no-cache"], registry=reg)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "plugin bad_max" in err and "term bad.max" in err
    assert "Traceback" not in err


def test_a_good_throwaway_term_is_added() -> None:
    hooks = registry.build(
        extra=(
            _Plugin(
                "good",
                lambda s: Term("extra.wait", TWO_MS, "good", "2 ms"),
            ),
        ),
        autoload=False,
    )
    ev = build_model(SCENARIO, registry=hooks).evaluate()
    assert float(ev["terms"]["extra.wait"]) == pytest.approx(2e-3)


def test_plugin_returning_a_non_term_is_a_plugin_error() -> None:
    hooks = registry.build(extra=(_Plugin("raw", lambda s: sp.Integer(1)),), autoload=False)
    with pytest.raises(PluginError, match="Term"):
        build_model(SCENARIO, registry=hooks)


def test_plugin_raising_is_named() -> None:
    def boom(s):
        raise RuntimeError("kaboom")

    hooks = registry.build(extra=(_Plugin("boom", boom),), autoload=False)
    with pytest.raises(PluginError, match="kaboom") as e:
        build_model(SCENARIO, registry=hooks)
    assert "stepwall_fixed_terms" in str(e.value)


# ---------------------------------------------------------------- Term / Op checks alone


def test_term_accepts_time_and_exact_zero() -> None:
    t = parameter("test_terms.wait", TIME)
    assert Term("w", 3 * t, "p", "why").expr == 3 * t
    assert Term("z", 0, "p", "nothing this step").expr == 0  # zero has every dimension
    assert Op("o", 0, 0, "p", "empty", "base").bytes == 0


def test_term_rejects_bare_number() -> None:
    # Numbers in expressions are dimensionless: "2" meaning "2 ms" is not a time.
    with pytest.raises(DimensionError, match=r"\(dimensionless vs s\)"):
        Term("n", sp.Float(2.0), "p", "a bare number")


def test_op_checks_its_bytes() -> None:
    t = parameter("test_terms.wait", TIME)
    with pytest.raises(DimensionError) as e:
        Op("op.x", t, 0, "p", "seconds as bytes", "base")
    assert e.value.term == "op.x" and e.value.plugin == "p"


# ---------------------------------------------------------------- the seed's units bug


@pytest.fixture
def plateau():
    """S14: EP-8 all-expert plateau, 507 GB of routed experts over 8 GPUs at 8 TB/s each."""
    w = parameter("test_ep.routed_weights", INFORMATION)
    b = parameter("test_ep.hbm_bandwidth", BANDWIDTH)
    n = parameter("test_ep.gpus", DIMENSIONLESS)
    values = {}
    for sym, text, dim in ((w, "507 GB", INFORMATION), (b, "8 TB/s", BANDWIDTH), (n, 8, None)):
        value, found = parse_quantity(text)
        assert dim is None or found == dim
        values[sym] = value
    return w, b, n, values


def test_ep_plateau_is_7_92_ms(plateau) -> None:
    w, b, n, values = plateau
    term = Term("moe.plateau", w / (n * b), "test_ep", "each GPU streams its 1/N of the experts")
    seconds = float(term.expr.subs(values))
    assert seconds == pytest.approx(7.92e-3, rel=0.02)  # BRIEF S14
    # ms appear only when printing, once, by the formatter: nothing to multiply by 1e3.
    assert format_quantity(seconds, TIME).endswith(" ms")
    assert format_quantity(seconds, TIME).startswith("7.92")


def test_a_ms_conversion_stated_with_units_cannot_scale(plateau) -> None:
    # "GB / (TB/s) is already ms, ×1e3 to get ms": stated with its units, the factor
    # 1e3 ms/s is exactly 1, so it cannot make the step 1000× longer.
    w, b, n, values = plateau
    ms_per_s = constant("test_ep.ms_per_s", "1e3 ms/s")
    assert parse_quantity("1e3 ms/s")[0] == pytest.approx(1.0)
    term = Term("moe.plateau", w / (n * b) * ms_per_s, "test_ep", "with a conversion")
    values = {**values, ms_per_s: parse_quantity("1e3 ms/s")[0]}
    assert float(term.expr.subs(values)) == pytest.approx(7.92e-3, rel=0.02)


def test_a_ms_factor_with_the_wrong_unit_is_caught(plateau) -> None:
    w, b, n, _ = plateau
    ms = constant("test_ep.one_thousand_ms", "1e3 ms")  # forgot the "/s": a time
    with pytest.raises(DimensionError) as e:
        Term("moe.plateau", w / (n * b) * ms, "test_ep", "s × ms")
    assert (e.value.left, e.value.right) == ("s^2", "s")
    assert e.value.plugin == "test_ep" and e.value.term == "moe.plateau"


def test_a_size_where_a_bandwidth_belongs_is_caught(plateau) -> None:
    w, _, n, _ = plateau
    # In code: the quantity is checked against the dimension it is meant to have.
    with pytest.raises(DimensionError, match=r"\(B vs B/s\)"):
        magnitude("8 TB", BANDWIDTH)
    # A parameter declared as a size by mistake makes the term dimensionless: rejected.
    b_as_size = parameter("test_ep.bandwidth_as_size", INFORMATION)
    with pytest.raises(DimensionError, match=r"\(dimensionless vs s\)"):
        Term("moe.plateau", w / (n * b_as_size), "test_ep", "B/B")


def test_adding_a_bare_millisecond_count_is_caught(plateau) -> None:
    w, b, n, _ = plateau
    with pytest.raises(DimensionError, match="sum mixes dimensions"):
        Term("moe.plateau", w / (n * b) + 2, "test_ep", "plus a '2 ms' floor typed as 2")


def test_in_a_spec_a_slip_is_an_error_not_a_scale() -> None:
    # The same slips in a scenario are refused by spec validation (exit 2 elsewhere).
    hooks = registry.build(autoload=False)
    for setting, fragment in [
        ('hardware.hbm_bandwidth="8 TB"', "is a B quantity, not B/s"),
        ("hardware.hbm_bandwidth=8000", "has no unit"),
        ("engine.per_step=2", "has no unit"),
    ]:
        with pytest.raises(SpecError, match=fragment) as e:
            build_model(SCENARIO, [setting], registry=hooks)
        assert isinstance(e.value, StepwallError)
        assert e.value.key == setting.split("=")[0]


def test_a_constant_declared_inside_a_hook_is_evaluated() -> None:
    from stepwall.core import symbols
    from stepwall.core.terms import Term
    from stepwall.plugin.hookspecs import hookimpl

    class LatePlugin:
        @hookimpl
        def stepwall_fixed_terms(self, scenario, workload, decoding):  # type: ignore[no-untyped-def]
            tick = symbols.constant("const.test_late_tick", "3 us")
            return [Term("late.tick", tick, "late", "a constant made inside the hook")]

    from stepwall.model.compose import build_model
    from stepwall.plugin import registry

    m = build_model("k26-b300-tp8-ddtree", registry=registry.build(extra=(LatePlugin(),)))
    assert float(m.evaluate()["terms"]["late.tick"]) == 3e-6


def test_evaluate_rejects_an_unknown_path_as_bad_input() -> None:
    from stepwall.core.errors import SpecError
    from stepwall.model.compose import build_model

    with pytest.raises(SpecError, match=r"no\.such\.path"):
        build_model("k26-b300-tp8-ddtree").evaluate({"no.such.path": 1.0})
