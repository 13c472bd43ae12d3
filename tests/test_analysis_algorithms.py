"""Each derivation algorithm on small synthetic step times whose answers are known by hand.

A toy model keeps a real scenario's parameters (so keys, ranges and compilation work as
usual) but replaces its terms with a few chosen expressions in N = parallel.tp and drops the
constraints: t(N) = 2 + 8/N has its wall at A/(εB) = 8/(0.15·2), 1 + 4/N + N/100 its optimum
at √400 = 20, and so on. The scenario's own physics is tested elsewhere (test_physics,
test_derive); here a wrong algorithm cannot hide behind K2.6's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import sympy as sp
from conftest import toy_factory

from stepwall.analyses import common
from stepwall.analyses.crossover import crossover
from stepwall.analyses.elasticity import elasticity
from stepwall.analyses.optimum import optimum
from stepwall.analyses.regime import regime
from stepwall.analyses.wall import wall
from stepwall.model.compose import StepModel
from stepwall.testing import model as build

Toy = Callable[..., StepModel]


@pytest.fixture(scope="module")
def toy() -> Toy:
    base = build("k26-b300-tp8-ddtree")
    return toy_factory(base, base.parameter("engine.launch_overhead"))


def close(a: float | None, b: float, rel: float = 1e-6) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=rel)


# ---------------------------------------------------------------- roots


X = sp.Symbol("x", positive=True)
A, B = sp.symbols("a b", positive=True)


@pytest.mark.parametrize(
    ("eq", "roots"),
    [
        (3 * X - 6, [2.0]),  # linear
        (A / X - B, [2.0]),  # rational: x = a/b
        (2 - X**2, [math.sqrt(2)]),  # the negative root is dropped
        (sp.log(X) - 2, [math.exp(2)]),  # linear in log x
        (2 * sp.log(X, 2) - 6, [8.0]),  # a tree's log2 N: 2·log2 x = 6
        (sp.exp(X) - 3, [math.log(3)]),  # one exponential alone: a logarithm
        (X + 2 * sp.exp(-X) - 2, [2 + float(sp.LambertW(-2 * math.exp(-2)))]),  # Lambert W
    ],
)
def test_solve_finds_the_closed_form_roots(eq: sp.Expr, roots: list[float]) -> None:
    found, why = common.solve(eq, X, {A: 4.0, B: 2.0})
    assert why == ""
    values = sorted(float(r.xreplace({A: 4.0, B: 2.0})) for r in found)
    assert values == pytest.approx(roots)


@pytest.mark.parametrize(
    ("eq", "reason"),
    [
        (sp.exp(X**2) - 3, "not polynomial"),  # an exponent not linear in x
        (sp.exp(X) + sp.exp(2 * X) - 3 * X, "2 exponentials"),
        (1 + X + X * sp.exp(-X), "generalised Lambert W"),
        (X**5 - X - 1, "degree 5"),
        (X + 1, "no real positive root"),
        (sp.Max(X, 2) - 3, "branches remain"),
    ],
)
def test_solve_says_why_there_is_no_closed_form(eq: sp.Expr, reason: str) -> None:
    found, why = common.solve(eq, X)
    assert found == [] and reason in why


def test_branches_resolve_to_the_active_argument() -> None:
    f = sp.Max(4 / X, X / 100) + sp.Piecewise((1, X < 8), (X, True))
    picked: list[str] = []
    assert common.resolve_branches(f, {X: 2.0}, picked) == 4 / X + 1
    assert common.resolve_branches(f, {X: 50.0}) == X / 100 + X
    assert len(picked) == 2


def test_segments_split_where_a_branch_changes() -> None:
    segs = common.segments(sp.Max(4 / X, X / 100) + sp.Piecewise((1, X < 8), (X, True)), X, 1, 64)
    assert [round(s.lo, 6) for s in segs] == [1, 8, 20]
    assert [s.expr for s in segs] == [4 / X + 1, 4 / X + X, X / 100 + X]


def test_bisect_finds_a_sign_change() -> None:
    assert common.bisect(lambda v: v**3 - 27, 0.0, 10.0) == pytest.approx(3.0, rel=1e-12)


# ---------------------------------------------------------------- analyses


def test_wall_of_b_plus_a_over_n_is_a_over_eps_b(toy: Toy) -> None:
    d = wall(toy(lambda n: sp.Integer(2), lambda n: 8 / n), "parallel.tp", eps=0.15)
    assert d.method == "symbolic"
    assert close(d.value, 8 / (0.15 * 2))
    assert d.details["A"] == pytest.approx(8) and d.details["B"] == pytest.approx(2)
    assert d.feasible_value == 27  # the first whole N past 26.67
    assert d.details["A_by_term"] == {"part1": pytest.approx(8)}


def test_wall_of_another_shape_is_found_by_bisection(toy: Toy) -> None:
    d = wall(toy(lambda n: sp.Integer(2), lambda n: 8 / n**2), "parallel.tp", eps=0.15)
    assert d.method == "numeric"
    assert close(d.value, math.sqrt(8 / (0.15 * 2)), 1e-6)


def test_wall_that_never_pays_says_so(toy: Toy) -> None:
    d = wall(toy(lambda n: 2 + n / 100), "parallel.tp")
    assert d.value is None


def test_optimum_at_a_stationary_point(toy: Toy) -> None:
    d = optimum(toy(lambda n: 1 + 4 / n + n / 100), "parallel.tp")
    assert d.details["where"] == "stationary" and d.method == "symbolic"
    assert close(d.value, 20.0)
    assert d.feasible_value == 20


def test_optimum_at_a_kink(toy: Toy) -> None:
    d = optimum(toy(lambda n: sp.Max(4 / n, n / 100)), "parallel.tp")
    assert d.details["where"] == "kink"
    assert close(d.value, 20.0, 1e-8)


def test_optimum_of_a_monotone_metric_is_the_bound(toy: Toy) -> None:
    model = toy(lambda n: 1 + 4 / n)
    d = optimum(model, "parallel.tp")
    assert d.details["where"] == "bound" and d.details["monotone"]
    assert d.value == common.key_range(model, model.parameter("parallel.tp"))[1]


def test_optimum_maximizes_a_throughput(toy: Toy) -> None:
    d = optimum(toy(lambda n: 1 + 4 / n + n / 100), "parallel.tp", metric="tokens_per_s_per_user")
    assert close(d.value, 20.0)


def test_crossover_where_two_step_times_meet(toy: Toy) -> None:
    # 1 + 4/N = 2 + 1/N at N = 3; below it the second is faster (higher throughput)
    fast_small, fast_large = toy(lambda n: 1 + 4 / n), toy(lambda n: 2 + 1 / n)
    d = crossover(fast_small, fast_large, "parallel.tp", metric="step_time_s")
    assert close(d.value, 3.0, 1e-8)
    assert d.method == "symbolic"


def test_elasticity_of_a_power_law_is_its_exponent(toy: Toy) -> None:
    results = elasticity(toy(lambda n: 3 * n ** sp.Rational(-1, 2)))
    by_key = {d.key: d.value for d in results}
    assert by_key.pop("engine.launch_overhead") == pytest.approx(1)  # the toy's unit of time
    assert by_key.pop("parallel.tp") == pytest.approx(-0.5)
    assert all(v == pytest.approx(0) for v in by_key.values())  # nothing else enters t


def test_regime_changes_where_the_largest_term_does(toy: Toy) -> None:
    results = regime(toy(lambda n: 4 / n, lambda n: n / 100), "parallel.tp")
    changes = [d for d in results if d.value is not None]
    assert [round(float(d.value), 6) for d in changes] == [20.0]
