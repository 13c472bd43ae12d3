"""search --only: a benchmark that ran one layout family is searched over that family alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stepwall.apps import search
from stepwall.core.errors import SpecError


def _plan(**kw: object) -> search.Plan:
    return search.plan_search(
        "deepseek-v3-fp8",
        ["h200"],
        ["hgx-h200-ib"],
        gpus=[8, 16],
        engines=["trtllm"],
        batch=[1, 8],
        **kw,
    )  # type: ignore[arg-type]


def _layouts(plan: search.Plan) -> set[tuple[int, ...]]:
    out = set()
    for v in plan.variants:
        keys = list(v.layouts.degrees)
        for i in range(len(v.layouts.gpus)):
            out.add((int(v.layouts.gpus[i]), *(int(v.layouts.degrees[k][i]) for k in keys)))
    return out


def test_only_keeps_exactly_the_layouts_with_those_degrees() -> None:
    every = _layouts(_plan())
    kept = _layouts(_plan(only=[("parallel.tp", (8,)), ("parallel.ep", (1, 2))]))
    # (gpus, tp, ep, dp) in the layouts' key order
    assert kept == {row for row in every if row[1] == 8 and row[2] in (1, 2)}
    assert kept and kept < every


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("parallel.tp", "is not KEY=VALUES"),
        ("parallel.tp=eight", "are not whole numbers"),
        ("parallel.tp=0", "has a degree below 1"),
    ],
)
def test_bad_only_text(text: str, problem: str) -> None:
    with pytest.raises(SpecError, match=problem):
        search.parse_only(text)


def test_only_names_a_degree_and_leaves_a_layout() -> None:
    with pytest.raises(SpecError, match=r"did you mean 'parallel\.tp'"):
        _plan(only=[("parallel.tq", (8,))])
    with pytest.raises(SpecError, match="leaves no layout of 8, 16 GPUs"):
        _plan(only=[("parallel.tp", (3,))])


def test_cli_only_is_one_line_exit_2() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "stepwall.cli", "search", "deepseek-v3-fp8", "--hardware", "h200",
         "--cluster", "hgx-h200-ib", "--gpus", "8", "--only", "parallel.tp=3", "-q"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "stepwall: error: search:--only: parallel.tp=3 leaves no layout of 8 GPUs "
        "(expected degrees the layouts have)"
    ]
