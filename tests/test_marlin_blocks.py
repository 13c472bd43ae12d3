"""Marlin's MoE m-blocks (issue 22, item 8: where one law cannot fit its table, the law's form
changes): W4A16 grouped GEMMs on Hopper take each expert's rows in blocks of 8 to 64 that the
kernel picks from its own count of rows per expert, pad the rows to whole blocks and stream
the expert's weights once per block (`stepwall.core.laws.marlin_expert_blocks`).

Checked on its own terms: the law against the kernel's selection loop written out here, and
against the steps of H200's Marlin table (specs/calibration/h200-moe.csv, aiconfigurator's
sglang_marlin_moe rows), which a law without blocks misses; then in the model, a step whose
experts hold more than 64 rows each streams their weights twice.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import sympy as sp

from stepwall.apps.calibrate import build_problem, load_entry, read_data
from stepwall.cli import main
from stepwall.core.laws import marlin_expert_blocks
from stepwall.core.symbols import parameter
from stepwall.core.units import DIMENSIONLESS
from stepwall.model.compose import build_model
from stepwall.plugin import registry

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "specs" / "calibration" / "h200-moe.csv"
H200 = ROOT / "specs" / "hardware" / "h200.toml"


def _by_the_loop(counted: float, rows: float) -> tuple[int, int]:
    """fused_marlin_moe's selection, written out: the first block with counted/block < 0.9,
    else the last; the rows padded to whole blocks."""
    for block in (8, 16, 32, 48, 64):
        if counted / block < 0.9:
            break
    passes = math.ceil(rows / block)
    return block * passes, passes


COUNTED = [0.2, 1.0, 7.19, 7.2, 10.0, 14.4, 20.0, 28.8, 40.0, 43.2, 50.0, 200.0, 1000.0]
ROWS = [1.0, 1.5, 7.2, 8.0, 9.0, 33.0, 64.0, 64.5, 130.0, 341.3]


def test_the_law_is_the_kernels_selection_loop() -> None:
    c, r = parameter("counted", DIMENSIONLESS), parameter("rows", DIMENSIONLESS)
    computed, passes = marlin_expert_blocks(c, r)
    f = sp.lambdify((c, r), (computed, passes), "numpy")
    for counted in COUNTED:
        for rows in ROWS:
            got = tuple(float(v) for v in f(counted, rows))
            assert got == _by_the_loop(counted, rows), (counted, rows)


def _priced(spec: Path) -> dict[tuple[int, int, int], tuple[float, float]]:
    """(ep, inter per rank, tokens) -> (the moe law's time at the spec's values, measured) of
    each W4A16 row of the table."""
    reg = registry.build(autoload=False)
    entry = load_entry(spec, reg.kinds)
    problem = build_problem(entry, [read_data(TABLE, reg.primitives, "hardware")],
                            reg.primitives)  # fmt: skip
    model = problem.model(problem.values)
    out = {}
    for row, t, measured in zip(problem.rows, model, problem.measured, strict=True):
        if row.texts["precision"] == "wna16":
            key = (int(row.numbers["ep"]), int(row.numbers["inter"]), int(row.numbers["tokens"]))
            out[key] = (float(t), float(measured))
    return out


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """The table's W4A16 rows priced with h200.toml's blocks and without them (the law as it
    was), each built once for the module."""
    text = H200.read_text(encoding="utf-8")
    assert 'moe_row_blocks = "marlin"\n' in text
    out = tmp_path_factory.mktemp("h200") / "h200.toml"
    out.write_text(text.replace('moe_row_blocks = "marlin"\n', "", 1), encoding="utf-8")
    return _priced(H200), _priced(out)


# (ep, inter per rank, fewer tokens, more tokens): TP-8 from 5.3 rows per expert (8-row
# blocks) to 21.3 (32-row blocks); EP-8 from a counted 10.7 rows (16-row blocks) to 42.7
# (48-row blocks) while each expert holds 1.3 and 5.3: the weights are read once in both
STEPS = [(1, 256, 256, 1024), (8, 2048, 64, 256)]


@pytest.mark.parametrize(("ep", "inter", "low", "high"), STEPS)
def test_the_blocks_give_the_tables_steps(priced: tuple[dict[Any, Any], dict[Any, Any]], ep: int,
                                          inter: int, low: int, high: int) -> None:  # fmt: skip
    blocked, plain = priced
    hi, lo = (ep, inter, high), (ep, inter, low)
    measured = blocked[hi][1] / blocked[lo][1]
    assert blocked[hi][0] / blocked[lo][0] == pytest.approx(measured, rel=0.15)
    without = plain[hi][0] / plain[lo][0]
    assert abs(without / measured - 1) > 0.25  # the law without blocks cannot show the step


K25_H200 = "k25-int4-h200-tp8-vllm"


def _routed(chunk: int) -> float:
    """Time of the routed experts in a prefill pass of ``chunk`` prompt tokens at TP-8."""
    base = ["workload.kind=prefill", f"workload.input_tokens={chunk}", "workload.concurrency=1"]
    terms = build_model(K25_H200, base).evaluate()["terms"]
    return float(terms["moe.routed_experts"])


def test_more_than_64_rows_stream_the_weights_again() -> None:
    """Kimi K2.5 (384 experts, top-8) at TP-8: 3,072 prompt tokens give each expert 64 rows
    (one 64-row block), 4,096 give 85 (two): the padded work doubles and the time with it,
    where 3,072 → 4,096 tokens is a third more work."""
    assert _routed(4096) / _routed(3072) == pytest.approx(2.0, rel=0.1)


def test_an_unknown_blocking_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["eval", K25_H200, "--set", "hardware.wna16.moe_row_blocks=triton"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "moe_row_blocks" in err and "marlin" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
