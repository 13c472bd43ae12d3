"""Bad inputs to search, sweep and validate: conditions checked against their metric's
dimension, contradictory filters, Dask options, the up-front limits on the size of a run, an
empty search that says why, infeasible validation rows, and progress on stderr.

Each case runs in-process from an empty working folder (the corpus helpers of
test_bad_inputs) and must end with its exit code, one line on stderr containing the fragment,
nothing on stdout and nothing written.
"""

from __future__ import annotations

import io
import time
import tracemalloc
from pathlib import Path

import pytest
from test_bad_inputs import BASE, REFUSE, _check, _outcome, place  # noqa: F401 (a fixture)

from stepwall.core import progress

SEARCH = ["search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster", "hgx-h200-ib"]
SMALL = [*SEARCH, "--gpus", "8", "--batch", "1,8,64,512"]
AXIS = "0.5..0.9:1000lin"  # 1000 values
KEYS = ("hardware.hbm_efficiency", "hardware.bf16.efficiency", "hardware.fp8.efficiency")
THREE_AXES = [a for k in KEYS for a in ("--vary", f"{k}={AXIS}")]

CASES: list[tuple[str, list[str], int, str]] = [
    # conditions: the value in the metric's dimension, and > 0
    ("at-time-for-rate", [*SMALL, "--at", "tokens_per_s_per_user>=50ms"], REFUSE,
     "--at:tokens_per_s_per_user>=50ms: '50ms' is not tokens/s"),
    ("ttft-bytes", [*SMALL, "--ttft", "<=2GB"], REFUSE, "--ttft:<=2GB: '2GB' is not s"),
    ("ttft-negative", [*SMALL, "--ttft", "<=-1s"], REFUSE, "--ttft:<=-1s"),
    ("ttft-zero", [*SMALL, "--ttft", "<=0s"], REFUSE, "a value > 0 in s"),
    # a percentile that is not priced is named as such, not read as an unknown metric
    ("ttft-p95", [*SMALL, "--ttft", "p95<=2s"], REFUSE,
     "--ttft: p95 is not a percentile stepwall prices (expected one of p50, median, p90, p99"),
    ("ttft-p99.9", [*SMALL, "--ttft", "p99.9<=2s"], REFUSE, "p99.9 is not a percentile"),
    ("ttft-p900", [*SMALL, "--ttft", "p900 <= 2s"], REFUSE, "p900 is not a percentile"),
    ("tpot-p90", [*SMALL, "--tpot", "p90<=30ms"], REFUSE,
     "p90 is not a percentile stepwall prices (expected one of p50, median, or none for the "
     "median, e.g. <=30ms)"),
    ("where-bytes-for-time", [*SMALL, "--where", "e2e_latency_s<=60GB"], REFUSE, "is not s"),
    ("where-unit-for-count", [*SMALL, "--where", "gpus<=8s"], REFUSE, "--where:gpus<=8s"),
    # contradictory conditions
    ("where-contradiction", [*SMALL, "--where", "tokens_per_s_per_user>=10", "--where",
     "tokens_per_s_per_user<=5"], REFUSE, "--where:tokens_per_s_per_user>=10 and "
     "tokens_per_s_per_user<=5: no value meets both"),
    ("where-strict-equal", [*SMALL, "--where", "ttft_s>1s", "--where", "ttft_s<=1s"], REFUSE,
     "no value meets both"),
    ("ttft-against-where", [*SMALL, "--ttft", "<=1s", "--where", "ttft_s>=2s"], REFUSE,
     "ttft_s>=2s and ttft_s<=1s"),
    ("target-against-where", [*SMALL, "--at", "tokens_per_s_per_user>=50", "--where",
     "tokens_per_s_per_user<=10"], REFUSE, "--at:"),
    # Dask options
    ("dask-workers-0", [*SMALL, "--dask", "--workers", "0"], REFUSE, "--workers: 0 worker"),
    ("dask-workers-negative", [*SMALL, "--dask", "--workers", "-2"], REFUSE, "at least 1"),
    ("workers-without-dask", [*SMALL, "--workers", "2"], REFUSE, "without --dask"),
    ("spread-too-big", [*SMALL, "--spread", "2"], REFUSE, "--spread"),
    # --vary and --gpus blamed on themselves
    ("vary-no-such-key", [*SMALL, "--vary", "no.such_key=1,2"], REFUSE, "--vary:no.such_key"),
    ("vary-typo", [*SMALL, "--vary", "hardware.hbm_bandwith=8TB/s"], REFUSE,
     "--vary:hardware.hbm_bandwith"),
    ("vary-and-set", [*SMALL, "--vary", "hardware.hbm_bandwidth=4TB/s,5TB/s", "--set",
     "hardware.hbm_bandwidth=4TB/s"], REFUSE, "also given with --set"),
    ("decoding-unknown", [*SMALL, "--decoding", "beam"], REFUSE, "--decoding:beam"),
    ("gpus-backwards", [*SEARCH, "--gpus", "8..1"], REFUSE, "--gpus:8..1"),
    ("gpus-nan", [*SEARCH, "--gpus", "nan"], REFUSE, "--gpus"),
    ("gpus-empty", [*SEARCH, "--gpus", ""], REFUSE, "--gpus: '' is not a list"),
    ("batch-empty", [*SEARCH, "--gpus", "8", "--batch", ""], REFUSE, "--batch: '' is not a list"),
    ("gpus-overflow", [*SEARCH, "--gpus", "1e400"], REFUSE, "--gpus"),
    ("batch-bad-step", [*SEARCH, "--gpus", "8", "--batch", "1..8:x"], REFUSE, "--batch:1..8:x"),
    # the size of the work, up front
    ("gpus-too-many", [*SEARCH, "--gpus", "8..100000:8"], REFUSE,
     "--gpus: 100,000 GPUs in one deployment (expected at most 65,536)"),
    ("batch-too-many", [*SEARCH, "--gpus", "8", "--batch", "1..100000000"], REFUSE,
     "--batch:1..100000000: a range of 1e+08 points (expected at most 1,000,000"),
    ("search-too-many-points", [*SMALL, *THREE_AXES], REFUSE,
     "search: would evaluate 4e+10 points (limit 2e+08; narrow --batch, --gpus or --vary)"),
    ("sweep-too-many-points", ["sweep", BASE, "--vary", "workload.context=1..1000", "--vary",
     "workload.concurrency=1..1000", "--vary", "hardware.hbm_bandwidth=1TB/s..1000TB/s:1TB/s", "-o",
     "x.csv"], REFUSE, "sweep: would evaluate 1e+09 points (limit 2e+08"),
    ("sweep-axis-too-long", ["sweep", BASE, "--vary", "workload.context=1..1e7", "-o", "x.csv"],
     REFUSE, "at most 1,000,000 on one axis"),
    # an empty search names what removed everything (and writes nothing)
    ("empty-search", [*SEARCH, "--gpus", "7", "-o", "f.json"], REFUSE,
     "none of 66 configurations is feasible; the constraint that fails most often is "
     "memory_fits"),
    # the prefill pools' flags, named as given (the prefill search reads them as its own)
    ("prefill-only-no-layout", [*SMALL, "--disagg", "--prefill-only", "parallel.tp=3"], REFUSE,
     "search --disagg:--prefill-only: parallel.tp=3 leaves no layout of 8 GPUs"),
    ("prefill-only-bad-key", [*SMALL, "--disagg", "--prefill-only", "tp=1"], REFUSE,
     "--prefill-only: tp is not a degree"),
    ("prefill-hardware-unknown", [*SMALL, "--disagg", "--prefill-hardware", "nosuch",
     "--prefill-cluster", "hgx-h200-ib"], REFUSE, "--prefill-hardware:nosuch: no hardware"),
    ("prefill-cluster-unknown", [*SMALL, "--disagg", "--prefill-hardware", "h100",
     "--prefill-cluster", "nosuch"], REFUSE, "--prefill-cluster:nosuch: no clusters"),
    ("prefill-engine-unknown", [*SMALL, "--disagg", "--prefill-engine", "nosuch"], REFUSE,
     "--prefill-engine:nosuch: no engines"),
    ("empty-after-filters", [*SMALL, "--ttft", "<=1us"], REFUSE,
     "ttft_s<=1us removes"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "expect", "fragment"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_bad_search_arguments(name, argv, expect, fragment, place, capsys) -> None:  # noqa: F811
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, expect, fragment, set(), Path(place["work"]))
    assert err.count("\n") == 1, err


def test_a_scheduler_that_is_not_an_address_is_one_line(place, capsys) -> None:  # noqa: F811
    pytest.importorskip("distributed")
    code, out, err = _outcome([*SMALL, "--scheduler", "notanaddress"], capsys)
    _check(code, out, err, REFUSE, "--scheduler: cannot connect to notanaddress", set(),
           Path(place["work"]))  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [THREE_AXES, ["--batch", "1..100000000"], ["--gpus", "8..65536:8", "--batch", "1..1e5"]],
    ids=["three-1000-value-axes", "1e8-batches", "8192-sizes-1e5-batches"],
)
def test_a_huge_search_is_refused_before_it_allocates(extra, capsys) -> None:
    """The refusal comes from counting, not from making the space: quick, in little memory."""
    argv = [*SEARCH, "--gpus", "8", *extra] if "--gpus" not in extra else [*SEARCH, *extra]
    start = time.monotonic()
    tracemalloc.start()
    try:
        code, out, err = _outcome(argv, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "points" in err or "values" in err, err
    assert time.monotonic() - start < 60, "the refusal took a normal search's time"
    assert peak < 200e6, f"{peak / 1e6:.0f} MB allocated before refusing"


# ---------------------------------------------------------------- progress


class _Clock:
    """A fake `stepwall.core.progress._now`: each reading is ``step`` seconds after the last."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_progress_is_a_line_every_five_seconds_off_a_terminal(monkeypatch) -> None:
    clock = _Clock(1.0)
    monkeypatch.setattr(progress, "_now", clock)
    stream = io.StringIO()
    bar = progress.ProgressBar(stream)  # the clock reads 1
    for done in range(1, 21):  # calls at 2, 3, …, 21 s
        bar(done * 10, 200)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4, lines  # at 6, 11, 16 and 21 s
    assert lines[0] == "stepwall: 50/200 points (25%), 10 points/s"
    assert lines[-1].startswith("stepwall: 200/200 points (100%)")
    quiet = io.StringIO()
    bar = progress.ProgressBar(quiet, quiet=True)
    for done in range(1, 21):
        bar(done, 20)
    assert quiet.getvalue() == ""


def test_a_quick_run_prints_no_progress(monkeypatch) -> None:
    monkeypatch.setattr(progress, "_now", _Clock(0.1))
    stream = io.StringIO()
    bar = progress.ProgressBar(stream)
    for done in range(1, 40):  # 3.9 s in all
        bar(done, 39)
    assert stream.getvalue() == ""


def test_search_progress_on_stderr_only_and_not_with_quiet(monkeypatch, capsys) -> None:
    """A long search (a fake clock: 3 s per reading) reports on stderr, not on stdout; with
    --quiet it reports nothing, and stdout is the same."""
    argv = [*SMALL, "--chunk", "4", "--spread", "0"]
    monkeypatch.setattr(progress, "_now", _Clock(3.0))
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) >= 3 and all(line.startswith("stepwall: ") for line in lines), err
    assert all("/40 points (" in line and "points/s" in line for line in lines), err
    monkeypatch.setattr(progress, "_now", _Clock(3.0))
    code, quiet_out, quiet_err = _outcome([*argv, "--quiet"], capsys)
    assert code == 0 and quiet_err == "" and quiet_out == out


def test_search_progress_counts_the_robustness_passes(monkeypatch, capsys) -> None:
    """With a target, the ranking is evaluated twice more (efficiencies low and high): the
    progress total is three passes over the space, and it ends at that total."""
    monkeypatch.setattr(progress, "_now", _Clock(5.0))
    argv = [*SMALL, "--chunk", "4", "--at", "tokens_per_s_per_user>=20"]
    code, _, err = _outcome(argv, capsys)
    assert code == 0, err
    lines = err.splitlines()
    assert all("/120 points (" in line for line in lines), err
    assert lines[-1].startswith("stepwall: 120/120 points (100%)"), err


def test_sweep_and_validate_take_quiet(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(progress, "_now", _Clock(3.0))
    table = _table(tmp_path, feasible=2)
    code, _, err = _outcome(["validate", str(table)], capsys)
    assert code == 0 and err == "stepwall: 2/2 rows (100%), 0.33 rows/s\n", err
    code, _, err = _outcome(["validate", str(table), "--quiet"], capsys)
    assert code == 0 and err == "", err
    code, _, err = _outcome(["sweep", BASE, "--vary", "parallel.tp=8,16", "--quiet"], capsys)
    assert code == 0 and err == "", err


# ---------------------------------------------------------------- validate: infeasible rows

ROW = """
[[row]]
id = "{id}"
class = "tp_batch1"
scenario = "{scenario}"
metric = "tokens_per_s_per_gpu"
measured = "100 tokens/s"
source = "a test"
url = "https://example.org"
set = [{set}]
"""


def _table(tmp_path: Path, feasible: int = 1, infeasible: int = 0) -> Path:
    rows = [ROW.format(id=f"ok{i}", scenario="gptoss-h100-tp8", set="") for i in range(feasible)]
    rows += [ROW.format(id=f"bad{i}", scenario="dsv3-h200-tp8-prefill", set='"parallel.tp=1"')
             for i in range(infeasible)]  # fmt: skip
    path = tmp_path / "t.toml"
    path.write_text("".join(rows))
    return path


def test_an_infeasible_row_is_left_out_of_the_summary(tmp_path, capsys) -> None:
    from stepwall.cli import main

    table = _table(tmp_path, feasible=1, infeasible=1)
    assert main(["validate", str(table), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "inf%" not in out and "nan%" not in out, out
    assert "bad0  tp_batch1" in out and "infeasible" in out
    assert "1 infeasible row has no prediction: left out of the median" in out, out
    only_ok = main(["validate", str(table), "--row", "ok0", "--json", "--quiet"])
    import json

    ok_summary = json.loads(capsys.readouterr().out)["summary"]
    assert main(["validate", str(table), "--json", "--quiet"]) == only_ok == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["infeasible"] == 1 and summary["rows"] == 2
    assert summary["median_abs_error"] == ok_summary["median_abs_error"]  # the feasible row's
    assert summary["worst_row"] == "ok0"
    # a gate does not pass over a row it cannot predict
    assert main(["validate", str(table), "--max-worst", "1000%", "--quiet"]) == 1


def test_no_feasible_row_is_said_so(tmp_path, capsys) -> None:
    from stepwall.cli import main

    table = _table(tmp_path, feasible=0, infeasible=2)
    assert main(["validate", str(table), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "inf%" not in out and "nan%" not in out, out
    assert "none feasible" in out and "2 infeasible rows have no prediction" in out, out
    assert main(["validate", str(table), "--max-median", "50%", "--quiet"]) == 1


# ---------------------------------------------------------------- why a search is empty


def _small_result(
    chunk: int, where: tuple[str, ...] = (), gpus: tuple[int, ...] = (7, 8)
) -> object:
    from stepwall.apps import search

    spec = search.Spec(where=tuple(search.parse_condition(w, "--where") for w in where))
    plan = search.plan_search("deepseek-v3-fp8", ["h200"], ["hgx-h200-ib"], gpus=list(gpus),
                              batch=[1, 64, 4096], spec=spec)  # fmt: skip
    return search.run_search(plan, chunk=chunk)


def test_constraint_and_filter_counts_do_not_depend_on_chunking() -> None:
    """Where nothing is feasible (7 GPUs), each constraint's failures are counted over every
    point, whatever the chunks; a filter's removals are counted wherever points pass."""
    one, many = _small_result(1 << 16, gpus=(7,)), _small_result(3, gpus=(7,))
    assert one.feasible == 0 and one.failed == many.failed
    assert one.failed["memory_fits"] > 0 and max(one.failed.values()) <= one.evaluated
    assert one.evaluated <= sum(one.failed.values())  # every point breaks at least one
    one = _small_result(1 << 16, ("tokens_per_s_per_user>=40",))
    many = _small_result(3, ("tokens_per_s_per_user>=40",))
    assert one.filtered == many.filtered and 0 < one.filtered[0] <= one.feasible


def test_empty_error_names_what_removed_everything() -> None:
    import attrs

    from stepwall.apps import search

    empty = _small_result(1 << 16, gpus=(7,))
    worst = max(empty.failed, key=empty.failed.__getitem__)
    assert f"the constraint that fails most often is {worst}" in str(search.empty_error(empty))
    res = _small_result(1 << 16, ("ttft_s<=1s", "e2e_latency_s<=1h"))
    assert search.empty_error(res) is None
    filtered = attrs.evolve(res, passed=0, filtered=(3, 9))
    assert "e2e_latency_s<=1h removes 9 of them" in str(search.empty_error(filtered))
    not_finite = attrs.evolve(res, passed=0, filtered=(0, 0))
    assert "none has a finite" in str(search.empty_error(not_finite))
