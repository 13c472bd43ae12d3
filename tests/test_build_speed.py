"""Min/Max built without sympy's evaluation (`stepwall.core.symbols.unevaluated`) are the
nodes sympy's ``evaluate=False`` builds, and `constants_in` finds what ``free_symbols`` does,
on expressions whose subtrees are shared (a model's DAG)."""

from __future__ import annotations

import random

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwall.core.symbols import Parameter, constant, constants_in, max_of, min_of, unevaluated
from stepwall.core.units import DIMENSIONLESS

LEAVES = [Parameter(f"t.p{i}", DIMENSIONLESS) for i in range(4)]
CONSTANTS = [constant(f"const.c{i}", f"{i + 2}") for i in range(3)]


def _dag(seed: int, nodes: int) -> list[sp.Expr]:
    """Expressions that reuse earlier ones: sums, products, powers, Min/Max and Floats."""
    rng = random.Random(seed)
    pool: list[sp.Expr] = [*LEAVES, *CONSTANTS, sp.Float(0.5), sp.Integer(3)]
    for _ in range(nodes):
        a, b = rng.choice(pool), rng.choice(pool)
        op = rng.randrange(5)
        if op == 0:
            pool.append(a + b)
        elif op == 1:
            pool.append(a * b)
        elif op == 2:
            pool.append(a / (1 + b))
        else:
            pool.append(sp.Max(a, b, evaluate=False) if op == 3 else sp.Min(a, b, evaluate=False))
    return pool


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4))
def test_unevaluated_is_sympys_unevaluated_node(seed: int, width: int) -> None:
    pool = _dag(seed, 40)
    rng = random.Random(seed + 1)
    args = [rng.choice(pool[-20:]) for _ in range(width)] + [LEAVES[0]]
    for func in (sp.Max, sp.Min):
        ours, sympys = unevaluated(func, args), func(*args, evaluate=False)
        assert ours == sympys and ours.args == sympys.args
        assert hash(ours) == hash(sympys)


def test_numbers_and_one_argument_evaluate() -> None:
    x = LEAVES[1]
    assert max_of(2, sp.Rational(7, 2), 1) == sp.Rational(7, 2)
    assert min_of(x, x) == x
    assert isinstance(max_of(0, x - 1), sp.Max)  # symbolic: left as it is, not analysed


def test_unevaluated_orders_deep_shared_trees_like_sympy() -> None:
    """A chain where each node uses the previous twice: 2^depth paths, depth distinct nodes."""
    e: sp.Expr = LEAVES[0]
    for i in range(14):
        e = sp.Max(e + LEAVES[i % 4], 2 * e, evaluate=False)
    f = e + 1
    assert (
        unevaluated(sp.Max, [f, e, LEAVES[2]]).args == sp.Max(f, e, LEAVES[2], evaluate=False).args
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_constants_in_finds_the_free_constants(seed: int) -> None:
    pool = _dag(seed, 30)
    exprs = pool[-5:]
    want = {
        s: float(s.value)
        for e in exprs
        for s in e.free_symbols
        if isinstance(s, Parameter) and s.value is not None
    }
    assert constants_in(exprs) == want
