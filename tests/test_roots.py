"""Closed-form roots and their sensitivities on synthetic equations whose answers are known by
construction (issue 15).

Each equation is built around roots chosen beforehand (x = 5, the pair 2 and 12, …), so the
expected values come from the construction, never from the code under test; asymptotic roots
and errors are checked against bisection on plain Python functions, sensitivities against
derivatives of the closed form taken by central differences.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import sympy as sp
from conftest import toy_factory

from stepwall.analyses import Derivation, Equation
from stepwall.analyses import roots as R
from stepwall.analyses.base import AnalysisOptions, Context, run
from stepwall.analyses.common import bisect
from stepwall.analyses.crossover import crossover
from stepwall.analyses.sensitivity import attach, gradient, sensitivities
from stepwall.core.units import TIME
from stepwall.model.compose import StepModel
from stepwall.plugin.entries import Analysis
from stepwall.plugin.hookspecs import hookimpl
from stepwall.testing import model as build

X = sp.Symbol("x", positive=True)


def root_of(fn: Callable[[float], float], a: float, b: float) -> float:
    """An independent numeric root: bisection on a plain function."""
    assert (fn(a) > 0) != (fn(b) > 0), "the bracket must hold a sign change"
    return bisect(fn, a, b)


def value(cr: R.ClosedRoot | None) -> float:
    assert cr is not None
    return float(sp.N(cr.root.expr, 30))


# ---------------------------------------------------------------- exact forms


def test_linear_and_rational_roots() -> None:
    cr, why = R.closed_root(3 * X - 6, X, 2.0)
    assert why == "" and cr is not None and cr.root.form == "polynomial" and value(cr) == 2.0
    # x/(1 + x) = 1/3 at x = 1/2: a rational equation, denominators cleared
    cr, _ = R.closed_root(X / (1 + X) - sp.Rational(1, 3), X, 0.5)
    assert cr is not None and cr.root.form == "polynomial"
    assert value(cr) == pytest.approx(0.5, rel=1e-14)


def test_lambert_w_one_root_on_w0() -> None:
    # x + 2·1.1^x = 5 + 2·1.1^5 holds at x = 5 by construction; F increases everywhere
    # (z > 0): one real root
    q = sp.Rational(11, 10)
    eq = X + 2 * q**X - (5 + 2 * q**5)
    cr, why = R.closed_root(eq, X, 5.0)
    assert why == "" and cr is not None and cr.approximation is None
    assert cr.root.form == "Lambert W" and cr.root.branch == "W0"
    assert cr.root.expr.has(sp.LambertW)
    assert value(cr) == pytest.approx(5.0, rel=1e-12)
    assert cr.residual < 1e-12  # the closed form solves the equation at the point
    assert "z = " in cr.root.conditions and "≥ 0" in cr.root.conditions


def test_lambert_w_two_roots_one_per_branch() -> None:
    # a + b·x + e^{−0.3x} = 0 through x = 2 and x = 12: a and b from those two conditions
    lam, x1, x2 = -0.3, 2.0, 12.0
    b = -(math.exp(lam * x2) - math.exp(lam * x1)) / (x2 - x1)
    a = -math.exp(lam * x1) - b * x1
    eq = a + b * X + sp.exp(sp.Float(lam) * X)
    low, _ = R.closed_root(eq, X, x1)
    high, _ = R.closed_root(eq, X, x2)
    assert low is not None and high is not None
    assert {low.root.branch, high.root.branch} == {"W0", "W-1"}
    assert value(low) == pytest.approx(x1, rel=1e-10)
    assert value(high) == pytest.approx(x2, rel=1e-10)
    assert "two real roots" in low.root.conditions


def test_lambert_w_with_x_times_the_exponential() -> None:
    # a + (c + d·x)·e^{λx} = 0 with its root at x = 3
    c, d, lam = 1.0, 2.0, -0.5
    a = -(c + d * 3.0) * math.exp(lam * 3.0)
    eq = a + (c + d * X) * sp.exp(sp.Float(lam) * X)
    cr, _ = R.closed_root(eq, X, 3.0)
    assert cr is not None and cr.root.form == "Lambert W"
    assert value(cr) == pytest.approx(3.0, rel=1e-10)


def test_one_exponential_alone_is_a_logarithm() -> None:
    cr, _ = R.closed_root(4 - 2 * sp.Float(0.5) ** (-X), X, 1.0)  # 2^x = 2
    assert cr is not None and cr.root.form == "logarithm"
    assert value(cr) == pytest.approx(1.0, rel=1e-12)


def test_lambert_w_with_symbols_evaluates_to_the_root() -> None:
    a, b, c, q = sp.symbols("a b c q", positive=True)
    vals = {a: 5.0, b: 1.0, c: 2.0, q: 0.9}
    eq = b * X + c * q**X - a

    def fn(v: float) -> float:
        return vals[b] * v + vals[c] * vals[q] ** v - vals[a]

    r = root_of(fn, 0.0, 10.0)
    cr, _ = R.closed_root(eq, X, r, vals)
    assert cr is not None and cr.root.form == "Lambert W"
    assert {a, b, c, q} <= cr.root.expr.free_symbols  # symbolic in every parameter
    assert float(cr.root.expr.xreplace(vals).evalf()) == pytest.approx(r, rel=1e-12)


def test_no_real_root_below_minus_one_over_e() -> None:
    found = R.exact_roots(X + 5 * sp.exp(-X) + 1, X)  # x + 1 = −5e^{−x} never holds
    assert isinstance(found, str) and "no real root" in found and "−1/e" in found


# ---------------------------------------------------------------- asymptotic forms


def test_saturated_regime_keeps_the_slow_exponential_exact() -> None:
    # −1 + x/20 + 3·0.8^x + 0.5·0.3^x: at the first root (≈ 7) 0.3^x ≈ 2e−4 has saturated
    def fn(v: float) -> float:
        return -1 + v / 20 + 3 * 0.8**v + 0.5 * 0.3**v

    def without(v: float) -> float:  # the same with 0.3^x → 0
        return -1 + v / 20 + 3 * 0.8**v

    r = root_of(fn, 2.0, 10.0)
    eq = -1 + X / 20 + 3 * sp.Float(0.8) ** X + sp.Float(0.5) * sp.Float(0.3) ** X
    assert "2 exponentials" in str(R.exact_roots(eq, X))
    cr, why = R.closed_root(eq, X, r)
    assert "no exact closed form" in why and "2 exponentials" in why
    assert cr is not None and cr.approximation is not None
    ap = cr.approximation
    assert ap.regime == "saturated" and "0.3**x → 0" in ap.approximation
    assert "kept exact" in ap.approximation and cr.root.form == "Lambert W"
    assert ap.value == pytest.approx(root_of(without, 2.0, 10.0), rel=1e-10)
    assert ap.error == pytest.approx(abs(ap.value - r) / r, rel=1e-9)
    assert ap.error < 1e-3 and ap.measure == pytest.approx(0.3**r, rel=1e-9)
    assert ap.estimate == pytest.approx(ap.error, rel=0.05)  # one Newton step ≈ the error


def test_first_order_regime_where_both_exponentials_vary_slowly() -> None:
    # 0.999^x and 0.998^x at x ≈ 10: |λx| ≈ 0.01–0.02, neither saturated; to first order
    # the equation is linear, and the error is second order
    def fn(v: float) -> float:
        return 1.0 - v / 5 + 0.999**v + 0.998**v

    r = root_of(fn, 1.0, 30.0)
    eq = 1 - X / 5 + sp.Float(0.999) ** X + sp.Float(0.998) ** X
    cr, _ = R.closed_root(eq, X, r)
    assert cr is not None and cr.approximation is not None
    ap = cr.approximation
    assert "first order" in ap.regime
    assert ap.error == pytest.approx(abs(ap.value - r) / r, rel=1e-9)
    assert ap.error < 1e-3 and ap.measure < 0.03


def test_no_regime_close_enough_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    eq = -1 + X / 20 + 3 * sp.Float(0.8) ** X + sp.Float(0.5) * sp.Float(0.3) ** X
    r = root_of(lambda v: -1 + v / 20 + 3 * 0.8**v + 0.3**v / 2, 2.0, 10.0)
    monkeypatch.setattr(R, "MAX_ERROR", 1e-9)  # the saturated root (error ~1e-4) is refused
    cr, why = R.closed_root(eq, X, r)
    assert cr is None and "no regime" in why and "within 0%" in why
    many = sum(sp.Float(b) ** X for b in (0.2, 0.4, 0.6, 0.8)) - X / 10
    cr, why = R.closed_root(many, X, 5.0)
    assert cr is None and "4 exponentials" in why


def test_law_regime_names_come_from_the_symbolic_equation() -> None:
    k, E = (
        sp.Symbol("model.experts_per_token", positive=True),
        sp.Symbol("model.n_experts", positive=True),
    )
    F = 1 - X / 300 + (1 - k / E) ** (9 * X) + (1 - k / E) ** X
    vals = {k: 8.0, E: 384.0}
    name = R.rate_namer(F, X, vals)
    q = 1 - 8 / 384
    sat, lin, text = name(R.Rate(sp.Float(9 * math.log(q)), sp.Float(q) ** (9 * X)))
    assert (sat, lin) == ("all experts hit", "few experts hit") and "x" in text


# ---------------------------------------------------------------- implicit differentiation


def test_wall_sensitivities_are_plus_and_minus_one() -> None:
    # F = a/x − ε·b: x* = a/(ε·b), so ∂ln x*/∂ln a = 1 and ∂ln x*/∂ln b = −1
    a, b = sp.symbols("wall.a wall.b", positive=True)
    eq = Equation(a / X - sp.Float(0.15) * b, X, {a: 8.0, b: 2.0}, "a/x − εb")
    rows, why = sensitivities(eq, 8.0 / (0.15 * 2.0))
    assert why == ""
    by = {r.parameter: r for r in rows}
    assert by["wall.a"].elasticity == pytest.approx(1.0, rel=1e-12)
    assert by["wall.b"].elasticity == pytest.approx(-1.0, rel=1e-12)
    assert by["wall.a"].derivative == pytest.approx(1 / (0.15 * 2.0), rel=1e-12)


def test_sensitivities_of_a_lambert_w_root_match_its_closed_form() -> None:
    # x* = −a/b − W(z)/λ for a + b·x + c·q^x: differentiate that formula by central
    # differences and compare with −(p/x*)·F_p/F_x
    a, b, c, q = sp.symbols("p.a p.b p.c p.q", positive=True)
    vals = {a: 5.0, b: 1.0, c: 2.0, q: 0.9}
    F = b * X + c * q**X - a

    def closed(v: dict[sp.Symbol, float]) -> float:
        lam = math.log(v[q])
        z = lam * v[c] / v[b] * math.exp(-lam * -v[a] / v[b])
        return float(v[a] / v[b] - sp.LambertW(z).evalf() / lam)

    r = closed(vals)
    assert r == pytest.approx(root_of(lambda u: u + 2 * 0.9**u - 5, 0, 10), rel=1e-12)
    rows, _ = sensitivities(Equation(F, X, vals, "F"), r)
    h = 1e-5
    for row in rows:
        p = next(s for s in vals if s.name == row.parameter)
        up = closed({**vals, p: vals[p] * (1 + h)})
        dn = closed({**vals, p: vals[p] * (1 - h)})
        assert row.elasticity == pytest.approx((up - dn) / (2 * h * r), rel=1e-6), row


P, Q, S = sp.symbols("p.p p.q p.s", positive=True)
Values = dict[sp.Symbol, float]


def quadratic_root(v: Values) -> float:
    """x² + q·x − p = 0: the positive root."""
    return (-v[Q] + math.sqrt(v[Q] ** 2 + 4 * v[P])) / 2


def lambert_root(v: Values) -> float:
    """(1 + q·x)·e^{−s·x} = p: with w = −s·(x + 1/q), w·e^w = −(p·s/q)·e^{−s/q}; the
    positive root is on the branch W−1."""
    z = -v[P] * v[S] / v[Q] * math.exp(-v[S] / v[Q])
    return float(-sp.LambertW(z, -1).evalf()) / v[S] - 1 / v[Q]


KNOWN: list[tuple[str, sp.Expr, Values, Callable[[Values], float], str]] = [
    ("linear", Q * X - P, {P: 6.0, Q: 1.5}, lambda v: v[P] / v[Q], "polynomial"),
    # x/(s + x) = p: x* = p·s/(1 − p)
    ("rational", X / (S + X) - P, {P: 0.3, S: 2.0}, lambda v: v[P] * v[S] / (1 - v[P]),
     "polynomial"),
    ("quadratic", X**2 + Q * X - P, {P: 10.0, Q: 3.0}, quadratic_root, "polynomial"),
    # p = s·q^x: x* = ln(p/s)/ln q
    ("logarithm", P - S * Q**X, {P: 8.0, Q: 1.3, S: 2.0},
     lambda v: math.log(v[P] / v[S]) / math.log(v[Q]), "logarithm"),
    ("lambert-w", (1 + Q * X) * sp.exp(-S * X) - P, {P: 0.5, Q: 2.0, S: 0.7}, lambert_root,
     "Lambert W"),
]  # fmt: skip


@pytest.mark.parametrize(("F", "vals", "known", "form"), [k[1:] for k in KNOWN],
                         ids=[k[0] for k in KNOWN])  # fmt: skip
def test_roots_and_sensitivities_of_known_forms(
    F: sp.Expr, vals: Values, known: Callable[[Values], float], form: str
) -> None:
    """The closed form found is the known one, and each elasticity from implicit
    differentiation equals the central difference of the known x*(p) within 1e-6."""
    r = known(vals)
    assert r > 0 and abs(float(F.xreplace({**vals, X: r}))) < 1e-9  # the formula is a root
    cr, why = R.closed_root(F, X, r, vals)
    assert why == "" and cr is not None and cr.approximation is None and cr.root.form == form
    assert float(cr.root.expr.xreplace(vals).evalf()) == pytest.approx(r, rel=1e-10)
    rows, why = sensitivities(Equation(F, X, vals, "F"), r)
    assert why == "" and {row.parameter for row in rows} == {s.name for s in vals}
    h = 1e-5
    for row in rows:
        p = next(s for s in vals if s.name == row.parameter)
        up, dn = known({**vals, p: vals[p] * (1 + h)}), known({**vals, p: vals[p] * (1 - h)})
        fd = (math.log(up) - math.log(dn)) / (math.log(1 + h) - math.log(1 - h))
        assert row.elasticity == pytest.approx(fd, rel=1e-6, abs=1e-9), row
        assert row.derivative == pytest.approx((up - dn) / (2 * h * vals[p]), rel=1e-5), row


def test_gradient_is_the_chain_rule() -> None:
    y, z = sp.symbols("y z", positive=True)
    F = y**2 * sp.exp(z / y) + sp.log(y * z) * z ** sp.Rational(3, 2) - 3 / (y + z)
    at: dict[sp.Basic, float] = {y: 1.7, z: 0.4}
    val, grad = gradient(F, at)
    assert val == pytest.approx(float(F.subs(at)), rel=1e-13)
    for s in (y, z):
        assert grad[s] == pytest.approx(float(sp.diff(F, s).subs(at)), rel=1e-12)


def test_both_sides_add_and_a_common_unit_cancels() -> None:
    # F = t₁(x) − t₂(x), both in the same unit u (u on each side its own symbol): scaling u
    # alike on both sides cannot move the crossing
    u1, u2, a = sp.symbols("u1 u2 a", positive=True)
    F = u1 * (1 + 4 / X) - u2 * (a + 1 / X)
    names = {u1: ("unit", "first"), u2: ("unit", "second"), a: ("a", "second")}
    rows, _ = sensitivities(Equation(F, X, {u1: 1.0, u2: 1.0, a: 2.0}, "F", names), 3.0)
    by = {(r.parameter, r.side): r.elasticity for r in rows}
    assert by[("unit", "first")] == pytest.approx(-by[("unit", "second")])
    assert by[("unit", "both")] == 0.0
    assert by[("a", "second")] == pytest.approx(-2.0)  # x* = 3/(a − 1): −a/(a − 1)


def test_no_sensitivities_off_the_root_or_at_a_double_root() -> None:
    a = sp.Symbol("a", positive=True)
    rows, why = sensitivities(Equation(X - a, X, {a: 2.0}, "x − a"), 3.0)
    assert rows == () and "not a root" in why
    rows, why = sensitivities(Equation((X - a) ** 2, X, {a: 2.0}, "(x − a)²"), 2.0)
    assert rows == () and "∂F/∂x = 0" in why


# ---------------------------------------------------------------- through the analyses


Toy = Callable[..., StepModel]


def UNIT(model: StepModel) -> Any:
    """The toy's unit of time: the first time-valued parameter of the scenario, by path."""
    return min((p for p in model.values if p.dim == TIME and model.values[p] > 0),
               key=lambda p: p.name)  # fmt: skip


@pytest.fixture(scope="module")
def toy() -> Toy:
    """A real scenario's parameters with chosen terms in N = parallel.tp (as in
    test_analysis_algorithms): each term is a number of the toy's unit of time."""
    base = build("k26-b300-tp8-ddtree")
    return toy_factory(base, UNIT(base))


def test_crossover_in_closed_form_by_lambert_w(toy: Toy) -> None:
    # t₁ = 1 + N/10 + 3·0.8^N against t₂ = 2 + N/20: equal where −1 + N/20 + 3·0.8^N = 0
    q = sp.Rational(4, 5)
    one, two = toy(lambda n: 1 + n / 10 + 3 * q**n), toy(lambda n: 2 + n / 20)
    d = attach(crossover(one, two, "parallel.tp", metric="step_time_s"))
    r = root_of(lambda v: -1 + v / 20 + 3 * 0.8**v, 1.0, 10.0)
    assert d.value == pytest.approx(r, rel=1e-9)
    assert d.method == "symbolic" and d.form is not None and d.form["form"] == "Lambert W"
    assert d.srepr.startswith("Add(") and "LambertW" in d.srepr
    assert float(sp.sympify(d.closed_form).evalf()) == pytest.approx(r, rel=1e-5)
    # the toy's unit of time is one symbol on each side: scaled alike, nothing moves
    by = {(s.parameter, s.side): s.elasticity for s in d.sensitivities}
    assert by[(UNIT(one).name, "both")] == 0.0


def test_crossover_in_an_asymptotic_regime(toy: Toy) -> None:
    q, fast = sp.Rational(4, 5), sp.Rational(3, 10)
    one = toy(lambda n: 1 + n / 10 + 3 * q**n + fast**n / 2)
    two = toy(lambda n: 2 + n / 20)
    d = crossover(one, two, "parallel.tp", metric="step_time_s")
    r = root_of(lambda v: -1 + v / 20 + 3 * 0.8**v + 0.3**v / 2, 1.0, 10.0)
    assert d.value == pytest.approx(r, rel=1e-9) and d.method == "asymptotic"
    assert d.regime is not None and d.regime["name"] == "saturated"
    assert d.regime["error"] == pytest.approx(abs(d.regime["value"] - r) / r, rel=1e-6)
    assert d.regime["error"] < 1e-3


@attrs.frozen
class RatioOptions(AnalysisOptions):
    pass


def ratio(model: StepModel, o: RatioOptions, context: Any) -> Derivation:
    """A third-party root: x* with x·bandwidth = capacity, i.e. x* = capacity/bandwidth."""
    bw = model.parameter("hardware.hbm_bandwidth")
    cap = model.parameter("hardware.memory_capacity")
    x = sp.Symbol("x", positive=True)
    vals = {bw: float(model.values[bw]), cap: float(model.values[cap])}
    root = vals[cap] / vals[bw]
    eq = Equation(x * bw - cap, x, vals, "x·bandwidth − capacity")
    return Derivation("ratio", "x", root, None, "capacity/bandwidth", "", "x·B = C", "symbolic",
                      scenario=model.scenario.label, equation=eq)  # fmt: skip


class Ratio:
    @hookimpl
    def stepwall_analyses(self) -> list[Analysis]:
        return [Analysis("ratio", "the time to read the memory once", RatioOptions, ratio)]


def test_a_third_party_analysis_gets_sensitivities_for_free(stepwall_plugin: Any) -> None:
    kit = stepwall_plugin(Ratio())
    model = kit.model("k26-b300-tp8-ddtree")
    (d,) = run(kit.registry.analyses["ratio"], model, {}, Context(kit.registry, kit.model))
    by = {s.parameter: s.elasticity for s in d.sensitivities}
    assert by == {"hardware.memory_capacity": pytest.approx(1.0),
                  "hardware.hbm_bandwidth": pytest.approx(-1.0)}  # fmt: skip
    code, out, err = kit.cli("derive", "k26-b300-tp8-ddtree", "ratio", "--sensitivity")
    assert code == 0, err
    assert "-1.0000  hardware.hbm_bandwidth" in out and "+1.0000  hardware.memory_capacity" in out
    code, out, _ = kit.cli("derive", "k26-b300-tp8-ddtree", "ratio", "--json")
    doc = json.loads(out)
    assert doc["equation"] == "x·bandwidth − capacity"
    assert {s["parameter"] for s in doc["sensitivities"]} == {
        "hardware.memory_capacity", "hardware.hbm_bandwidth"}  # fmt: skip


def test_an_exponential_inside_an_exponent_is_no_rate() -> None:
    """b^(x + x/(1 − e^(−x/k))) (a share of iterations inside the experts-touched power law)
    is not b^(αx + β): split says so, at a root or without one, instead of failing."""
    x = sp.Symbol("x", positive=True)
    eq = sp.Float(0.96875) ** (x + x / (2 * (1 - sp.exp(-x / 2048)))) - sp.Rational(1, 2)
    for values in (None, {x: 100.0}):
        why = R.split(eq, x, values)
        assert isinstance(why, str) and "not b^" in why
