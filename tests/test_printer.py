"""Generated model functions (`stepwall.numeric.printer`) compute what sympy's own ``lambdify``
computes for the same expressions, define each shared subexpression once before its first
use, and keep none that nothing reads."""

from __future__ import annotations

import re

import numpy as np
import pytest
import sympy as sp

from stepwall.model.compose import METRICS, build_model
from stepwall.numeric.printer import (
    compile_function,
    function_source,
    read_definitions,
    shared_subexpressions,
)


def _outputs(m):
    exprs = [m.metrics.get(x, sp.nan) for x in METRICS] + [t.expr for t in m.terms]
    exprs += [e for op in m.workload.ops for e in (op.bytes, op.flops)]
    return exprs + [c.relation for c in m.constraints]


# the two largest models take minutes on 2 cores: they run in the slow tier
@pytest.mark.parametrize("name", [pytest.param("k26-gb300nvl72-ep72", marks=pytest.mark.slow),
                                  pytest.param("dsv3-b200-tp8-mtp", marks=pytest.mark.slow),
                                  "gptoss-h100-tp8"])  # fmt: skip
def test_model_function_equals_sympy_lambdify(name: str) -> None:
    m = build_model(name)
    params, exprs = list(m.parameters), _outputs(m)
    ours = compile_function(params, exprs, "numpy", cse=True)
    dummies = [sp.Dummy() for _ in params]
    # sympy's own common-subexpression pass: the model's expressions share subtrees (the
    # queueing and in-flight batching laws reuse the step time), which printed as trees
    # without it grow past any time limit
    theirs = sp.lambdify(dummies, [sp.sympify(e).xreplace(dict(zip(params, dummies, strict=True)))
                                   for e in exprs], "numpy", cse=True)  # fmt: skip
    rng = np.random.default_rng(1)
    args = [float(m.values[p]) * rng.uniform(0.5, 2.0, 64) for p in params]
    with np.errstate(all="ignore"):
        a = [np.broadcast_to(np.asarray(v, dtype=float), (64,)) for v in ours(*args)]
        b = [np.broadcast_to(np.asarray(v, dtype=float), (64,)) for v in theirs(*args)]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        np.testing.assert_allclose(x, y, rtol=1e-12, equal_nan=True, err_msg=str(exprs[i])[:80])


def test_each_shared_subexpression_is_defined_once_before_use_and_read() -> None:
    m = build_model("k26-b300-tp8-ddtree")
    source, _ = function_source(list(m.parameters), _outputs(m), "numpy")
    defined: set[str] = set()
    body = [ln.strip() for ln in source.splitlines()[1:]]
    for line in body:
        if line.startswith("del "):
            continue
        rhs = line.removeprefix("return ") if line.startswith("return") else line.split(" = ")[1]
        assert set(re.findall(r"\bx\d+\b", rhs)) <= defined, line[:80]
        if not line.startswith("return"):
            name = line.split(" = ")[0]
            assert name not in defined
            defined.add(name)
    read = {n for ln in body if not ln.startswith("del ") for n in
            re.findall(r"\bx\d+\b", ln.split(" = ", 1)[-1])}  # fmt: skip
    assert defined <= read, f"defined, never read: {sorted(defined - read)[:5]}"


def test_shared_subexpressions_are_the_repeated_nodes() -> None:
    x, y = sp.symbols("x y", positive=True)
    shared_node = sp.Max(x, y)
    e1, e2 = shared_node + 1, 2 * shared_node
    names = shared_subexpressions([e1, e2, x])
    assert names == {shared_node: "x0"}
    assert shared_subexpressions([e1]) == {}  # once is not shared
    # definitions read only through what is read
    kept = read_definitions([("x0", "a"), ("x1", "x0 + 1"), ("x2", "b")], ["x1 * 2"])
    assert kept == [("x0", "a"), ("x1", "x0 + 1")]
