"""`stepwall sweep`: the grid, evaluated through one model, equals point-by-point evaluation."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from stepwall.apps import sweep
from stepwall.cli import main
from stepwall.core import progress
from stepwall.core.errors import SpecError
from stepwall.core.progress import ProgressBar
from stepwall.model.compose import build_model

SCENARIO = "k26-b300-tp8-ddtree"


def test_grid_equals_per_point_builds():
    vary = [("parallel.tp", [8, 16, 72]), ("hardware.hbm_bandwidth", ["8 TB/s", "9TB/s"])]
    res = sweep.run_sweep(
        SCENARIO, vary, metrics=["step_time_s", "tokens_per_s_per_user", "group.moe"]
    )
    assert res.shape == (3, 2)
    np.testing.assert_allclose(res.si[1], [8e12, 9e12])
    for i, tp in enumerate([8, 16, 72]):
        for j, bw in enumerate(["8TB/s", "9TB/s"]):
            m = build_model(SCENARIO, [f"parallel.tp={tp}", f"hardware.hbm_bandwidth={bw}"])
            ev = m.evaluate()
            assert res.results["step_time_s"][i, j] == pytest.approx(float(ev["step_time_s"]))
            assert res.results["group.moe"][i, j] == pytest.approx(m.group_times(ev)["moe"])


def test_csv_and_json_outputs(tmp_path):
    out = tmp_path / "s.csv"
    rc = main(
        ["sweep", SCENARIO, "--vary", "parallel.tp=8,16", "--metric", "step_time_s", "-o", str(out)]
    )
    assert rc == 0
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == ["parallel.tp", "step_time_s [s]", "feasible", "violation"]
    assert [r[0] for r in rows[1:]] == ["8", "16"]  # an integer key is written as integers
    assert [r[2:] for r in rows[1:]] == [["true", ""], ["true", ""]]
    js = tmp_path / "s.json"
    assert main(["sweep", SCENARIO, "--vary", "workload.concurrency=1,2", "-o", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["title"] == SCENARIO and doc["columns"][0] == "workload.concurrency"
    assert doc["units"]["tokens_per_s"] == "tokens/s"
    assert len(doc["rows"]) == 2
    assert doc["rows"][1]["tokens_per_s"] > doc["rows"][0]["tokens_per_s"]


def test_table_output(capsys):
    """The text table: a header with units, one row per point, each value the model's at
    that point (to the 6 significant digits the table prints)."""
    assert main(["sweep", SCENARIO, "--vary", "parallel.tp=8,16"]) == 0
    head, rule, *rows = capsys.readouterr().out.splitlines()
    names = head.split()
    assert names[:2] == ["parallel.tp", "step_time_s"] and set(rule) <= {"-", " "}
    assert len(rows) == 2
    model = build_model(SCENARIO)
    for row, tp in zip(rows, (8, 16), strict=True):
        cells = row.split()
        assert int(cells[0]) == tp
        want = model.evaluate({"parallel.tp": tp})
        assert float(cells[1]) == pytest.approx(float(want["step_time_s"]), rel=1e-5)
        col = names.index("tokens_per_s_per_user") - 1  # "[s]" after step_time_s is one token
        assert float(cells[col]) == pytest.approx(float(want["tokens_per_s_per_user"]), rel=1e-5)


@pytest.mark.parametrize(
    ("vary", "needle"),
    [
        ("hardware.hbm_bandwidth=8s", "not B/s"),  # dimension check on the value
        ("hardware.hbm_bandwith=8TB/s", "not a numeric key"),
        ("parallel.tp=8.5", "whole number"),
        ("parallel.tp", "not a sweep"),
    ],
)
def test_bad_sweeps_are_one_line_errors(vary, needle, capsys):
    assert main(["sweep", SCENARIO, "--vary", vary]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_infeasible_rows_are_marked_not_refused(capsys):
    """More GPUs than the cluster, heads that do not split: the row says so; the rest stands."""
    res = sweep.run_sweep(
        SCENARIO, [("parallel.tp", [8, 9, 144])], metrics=["tokens_per_s_per_user"]
    )
    assert res.feasible.tolist() == [True, False, False]
    assert res.violation.tolist() == ["", "heads_by_tp", "layout_fits_cluster"]
    assert main(["sweep", SCENARIO, "--vary", "parallel.tp=8,9,144", "--feasible-only"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].split()[0] == "8"


def test_each_infeasible_row_matches_eval():
    """The feasible column agrees with `stepwall eval` point by point."""
    vals = [1, 2, 3, 4, 8, 16, 24, 72]
    res = sweep.run_sweep(SCENARIO, [("parallel.tp", vals)], metrics=["step_time_s"])
    for tp, ok in zip(vals, res.feasible.tolist(), strict=True):
        assert main(["eval", SCENARIO, "--set", f"parallel.tp={tp}", "--json"]) == (0 if ok else 2)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1..5", [1, 2, 3, 4, 5]),
        ("8..40:8", [8, 16, 24, 32, 40]),
        ("1..64:x4", [1, 4, 16, 64]),
        ("1..1000:4log", [1, 10, 100, 1000]),
        ("2..3:3lin", [2, 2.5, 3]),
    ],
)
def test_range_syntax(text, want):
    key, span = sweep.parse_vary(f"workload.context={text}")
    axis = sweep.axis_values(build_model(SCENARIO).scenario, key, span, [])
    np.testing.assert_allclose(axis.si, want)


def test_range_with_units_and_integer_rounding():
    sc = build_model(SCENARIO).scenario
    bw = sweep.axis_values(
        sc, "hardware.hbm_bandwidth", sweep.parse_vary("k=7TB/s..8TB/s:500GB/s")[1], []
    )
    np.testing.assert_allclose(bw.si, [7e12, 7.5e12, 8e12])
    tp = sweep.axis_values(sc, "parallel.tp", sweep.parse_vary("k=1..64:5log")[1], [])
    assert tp.si.tolist() == [1, 3, 8, 23, 64]  # log-spaced, rounded to whole degrees


@pytest.mark.parametrize(
    ("vary", "needle"),
    [
        ("parallel.tp=8..1", "runs backwards"),
        ("parallel.tp=1..8:x1", "factor > 1"),
        ("parallel.tp=1..8:0", "must be positive"),
        ("parallel.tp=1..8:1log", "at least 2 points"),
        ("hardware.hbm_bandwidth=1TB/s..2TB:1TB/s", "different dimensions"),
        ("hardware.hbm_bandwidth=1TB/s..2TB/s:1s", "not of the range's dimension"),
        ("workload.context=1..1e12", "points"),
        ("parallel.tp=1..8:1.5", "whole number"),
    ],
)
def test_bad_ranges(vary, needle, capsys):
    assert main(["sweep", SCENARIO, "--vary", vary]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_structural_key_builds_one_model_per_value():
    """model.n_dense_layers decides whether a dense-FFN term exists: the sweep builds a model
    per value, and each row equals a fresh build."""
    assert "model.n_dense_layers" in build_model(SCENARIO).structural_keys
    vals = [0, 1, 3]
    res = sweep.run_sweep(SCENARIO, [("model.n_dense_layers", vals), ("parallel.tp", [4, 8])],
                    metrics=["step_time_s"])  # fmt: skip
    for i, n in enumerate(vals):
        for j, tp in enumerate([4, 8]):
            ev = build_model(
                SCENARIO, [f"model.n_dense_layers={n}", f"parallel.tp={tp}"]
            ).evaluate()
            assert res.results["step_time_s"][i, j] == pytest.approx(float(ev["step_time_s"]))


def test_unknown_metric():
    with pytest.raises(SpecError, match="unknown metric"):
        sweep.run_sweep(SCENARIO, [("parallel.tp", [8])], metrics=["tokens_per_second"])


def test_vectorized_large_grid_is_one_model():
    vary = [("workload.concurrency", list(range(1, 201))), ("parallel.tp", [1, 2, 4, 8])]
    res = sweep.run_sweep(SCENARIO, vary, metrics=["tokens_per_s"])
    assert res.results["tokens_per_s"].shape == (200, 4)
    assert np.all(np.diff(res.results["tokens_per_s"][:, 3]) > 0)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal():
    tty, pipe = _Tty(), io.StringIO()
    sweep.run_sweep(SCENARIO, [("parallel.tp", [8, 16])], progress=ProgressBar(tty, after=0.0))
    sweep.run_sweep(SCENARIO, [("parallel.tp", [8, 16])], progress=ProgressBar(pipe, after=0.0))
    assert "2/2" in tty.getvalue() and pipe.getvalue() == ""


@pytest.mark.parametrize(("done", "total", "seconds"), [(5, 5, 6.2), (1024, 2048, 5.0),
                                                        (3_000_000, 9_000_000, 7.5)])  # fmt: skip
def test_every_progress_line_is_one_the_docs_tool_leaves_out(done, total, seconds) -> None:
    """Off a terminal progress comes as a line every few seconds, so whether one appears
    depends on the machine's speed: tools/docs_console.py drops lines matching PROGRESS_LINE,
    which must match every line ProgressBar writes."""
    clock = iter([0.0, seconds])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(progress, "_now", lambda: next(clock))
        out = io.StringIO()
        ProgressBar(out)(done, total)
    line = out.getvalue()
    assert line and progress.PROGRESS_LINE.fullmatch(line.rstrip("\n")), line
