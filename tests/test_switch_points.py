"""``stepwall search --switch-points`` (issue 24, item 3): where the best layout along a frontier
changes. Each switch point is checked against the crossing found here by brute force over a
fine grid of users per GPU on the two layouts' own models (within 1%), its sensitivities by
finite differences of the crossing itself; a P/D frontier's switch points are checked in
tests/test_disagg.py."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shlex
from typing import Any

import numpy as np
import pytest

from stepwall.analyses.crossover import crossover
from stepwall.apps import switch
from stepwall.cli import main
from stepwall.model.compose import StepModel, build_model
from stepwall.testing import scaled

ARGV = ["search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster", "hgx-h200-ib",
        "--gpus", "8", "--engine", "trtllm", "--switch-points", "--spread", "0", "-q"]  # fmt: skip


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def answer() -> dict[str, Any]:
    code, out, err = run([*ARGV, "--json"])
    assert code == 0, err
    return dict(json.loads(out))


def model(config_point: dict[str, Any], frontier: list[dict[str, Any]], side: str) -> StepModel:
    """The model of a switch's side, from the frontier point of that configuration."""
    p = next(p for p in frontier if p["config"] == config_point[side])
    words = shlex.split(p["command"])
    return build_model(words[2], [words[i + 1] for i, w in enumerate(words) if w == "--set"])


def tokens_per_user(m: StepModel, per_gpu: np.ndarray) -> np.ndarray:
    """tokens/s per user of ``m`` at ``per_gpu`` users per GPU (each replica: that × its
    GPUs), NaN where a constraint fails."""
    gpus = float(np.asarray(m.evaluate()["gpus"], dtype=float))  # all replicas'
    dp = float(m.values[m.scenario.by_path["parallel.dp"]])
    ev = m.evaluate({m.provides["users"]: per_gpu * gpus / dp})
    u = np.asarray(ev["tokens_per_s_per_user"], dtype=float) * np.ones_like(per_gpu)
    return np.where(np.asarray(ev["feasible"], dtype=bool), u, np.nan)


def test_switch_points_are_the_brute_force_crossings(answer) -> None:
    crossed = [s for s in answer["switch_points"] if s["users_per_gpu"] is not None]
    assert crossed, "no switch point crosses: the test checks nothing"
    for s in crossed:
        ma, mb = (model(s, answer["frontier"], side) for side in ("from", "to"))
        grid = np.geomspace(0.05, 2000, 200_001)
        diff = tokens_per_user(ma, grid) - tokens_per_user(mb, grid)
        flips = np.flatnonzero(np.isfinite(diff[:-1]) & np.isfinite(diff[1:])
                               & (np.sign(diff[:-1]) != np.sign(diff[1:])))  # fmt: skip
        assert flips.size, s
        # the metrics step with whole counts (pages, users per rank), so where two curves run
        # within those steps of each other they cross more than once: the first crossing is
        # that cluster of flips, and the root must lie within 1% of one of them
        near = grid[flips][grid[flips] <= 1.05 * grid[flips[0]]]
        c = near[np.argmin(np.abs(near - s["users_per_gpu"]))]
        assert s["users_per_gpu"] == pytest.approx(c, rel=0.01)
        u = float(tokens_per_user(ma, np.array([c]))[0])
        assert s["tokens_per_s_per_user"] == pytest.approx(u, rel=0.01)
        assert s["tokens_per_s_per_gpu"] == pytest.approx(u * c, rel=0.02)


def test_sensitivities_match_finite_differences(answer) -> None:
    s = next(s for s in answer["switch_points"] if s["users_per_gpu"] is not None)
    ma, mb = (model(s, answer["frontier"], side) for side in ("from", "to"))
    key = ma.provides["users"]
    checked = 0
    for row in s["sensitivities"][:3]:
        if row["whole"] or not math.isfinite(row["elasticity"]):
            continue
        h = 1e-3
        roots = []
        for f in (1 + h, 1 - h):
            a = scaled(ma, row["parameter"], f) if row["side"] == "from" else ma
            b = scaled(mb, row["parameter"], f) if row["side"] == "to" else mb
            roots.append(float(crossover(a, b, key, "tokens_per_s_per_user", per_gpu=True).value))
        fd = (math.log(roots[0]) - math.log(roots[1])) / (math.log(1 + h) - math.log(1 - h))
        assert row["elasticity"] == pytest.approx(fd, rel=0.02, abs=1e-3), row
        checked += 1
    assert checked, "no continuous parameter among the largest sensitivities"


def test_switch_points_print() -> None:
    code, out, err = run(ARGV)
    assert code == 0, err
    assert "switch points (where the best layout along the frontier changes):" in out
    assert "→" in out and "∂ln c*/∂ln p" in out


def test_alternating_layouts_give_one_switch() -> None:
    """Two layouts whose batches interleave along the frontier cross once: one switch."""
    frontier = [{"config": {"tp": t, "concurrency": c}} for t, c in
                ((8, 1), (1, 8), (8, 16), (1, 32), (2, 64))]  # fmt: skip
    pairs = switch.neighbours(frontier)
    assert [(a["config"]["tp"], b["config"]["tp"]) for a, b in pairs] == [(8, 1), (1, 2)]


REPORT = """name = "switches"
title = "switch points"
description = "The first switch: {q.s0.tokens_per_s_per_user:.4g} tokens/s per user."

[scenarios]
anchor = "dsv3-h200-tp8"

[[block]]
kind = "pareto"
id = "q"
model = "deepseek-v3-fp8"
hardware = ["h200"]
clusters = ["hgx-h200-ib"]
gpus = [8]
engine = "trtllm"
spread = 0
switch_points = true
"""


def test_a_report_pareto_block_shows_the_switch_points(tmp_path, answer) -> None:
    spec = tmp_path / "switches.toml"
    spec.write_text(REPORT)
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run(["report", str(spec), "-o", str(out / "r.md")])
    assert code == 0, err
    page = (out / "r.md").read_text()
    assert "**Switch points**" in page
    first = answer["switch_points"][0]
    assert f"The first switch: {first['tokens_per_s_per_user']:.4g} tokens/s per user" in page
    rows = [line for line in page.splitlines() if line.startswith("| h200 | tp")]
    assert len(rows) == len(answer["switch_points"])
