"""`stepwall sweep`: the grid, evaluated through one model, equals point-by-point evaluation."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from stepwall import sweep
from stepwall.cli import main
from stepwall.errors import SpecError
from stepwall.model import build_model

SCENARIO = "k26-b300-tp8-ddtree"


def test_grid_equals_per_point_builds():
    vary = [("parallel.tp", [8, 16, 72]), ("hardware.hbm_bandwidth", ["8 TB/s", "9TB/s"])]
    res = sweep.run(SCENARIO, vary, metrics=["step_time_s", "tokens_per_s_per_user", "group.moe"])
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
    assert rows[0] == ["parallel.tp", "step_time_s [s]"]
    assert [r[0] for r in rows[1:]] == ["8.0", "16.0"]
    js = tmp_path / "s.json"
    assert main(["sweep", SCENARIO, "--vary", "workload.concurrency=1,2", "-o", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["axes"][0]["key"] == "workload.concurrency"
    assert len(doc["rows"]) == 2
    assert doc["rows"][1]["tokens_per_s"] > doc["rows"][0]["tokens_per_s"]


def test_table_output(capsys):
    assert main(["sweep", SCENARIO, "--vary", "parallel.tp=8,16"]) == 0
    out = capsys.readouterr().out
    assert "parallel.tp" in out and "tokens_per_s_per_user" in out


@pytest.mark.parametrize(
    ("vary", "needle"),
    [
        ("parallel.tp=8,144", "sweep corner parallel.tp=144"),  # build-time check at the max
        ("hardware.hbm_bandwidth=8s", "not B/s"),  # dimension check on the value
        ("hardware.hbm_bandwith=8TB/s", "no such key"),
        ("parallel.tp=8.5", "whole number"),
        ("parallel.tp", "not a sweep"),
    ],
)
def test_bad_sweeps_are_one_line_errors(vary, needle, capsys):
    assert main(["sweep", SCENARIO, "--vary", vary]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_unknown_metric():
    with pytest.raises(SpecError, match="unknown metric"):
        sweep.run(SCENARIO, [("parallel.tp", [8])], metrics=["tokens_per_second"])


def test_vectorized_large_grid_is_one_model():
    vary = [("workload.concurrency", list(range(1, 201))), ("parallel.tp", [1, 2, 4, 8])]
    res = sweep.run(SCENARIO, vary, metrics=["tokens_per_s"])
    assert res.results["tokens_per_s"].shape == (200, 4)
    assert np.all(np.diff(res.results["tokens_per_s"][:, 3]) > 0)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal():
    tty, pipe = _Tty(), io.StringIO()
    sweep.run(SCENARIO, [("parallel.tp", [8, 16])], progress=sweep.ProgressBar(tty, after=0.0))
    sweep.run(SCENARIO, [("parallel.tp", [8, 16])], progress=sweep.ProgressBar(pipe, after=0.0))
    assert "2/2" in tty.getvalue() and pipe.getvalue() == ""
