"""Configuration search: the frontier against brute force through ``stepwall eval``, the
constraints of every reported point, energy and cost against hand computation from the spec
files, and dask against a single process."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepwall.apps import search as search_app
from stepwall.apps.report.render import Report
from stepwall.cli import main
from stepwall.core.catalog import catalog_root
from stepwall.core.units import parse_quantity

MODEL, HW, CLUSTER = "deepseek-v3-fp8", "h200", "hgx-h200-ib"
BATCH = (1, 8, 64, 512)
SMALL = ["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, "--gpus", "8",
         "--batch", ",".join(map(str, BATCH)), "--engine", "trtllm"]  # fmt: skip


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def search_json(*extra: str) -> dict:
    code, out, err = run([*SMALL, *extra, "--json"])
    assert code == 0, err
    return json.loads(out)


def eval_json(argv: list[str]) -> dict | None:
    """``stepwall eval … --json`` through the command line; None where it refuses the point
    (a constraint does not hold: exit 2)."""
    code, out, err = run([*argv, "--json"])
    if code == 2:
        assert "error" in err and len(err.strip().splitlines()) == 1
        return None
    assert code == 0, err
    return json.loads(out)


def layout_argv(tp: int, ep: int, dp: int, c: int) -> list[str]:
    """The eval of one point, composed here (not from the search's commands)."""
    ref = f"model={MODEL},hardware={HW},cluster={CLUSTER},engine=trtllm"
    sets = ["workload.kind=serving", "workload.input_tokens=1024", "workload.output_tokens=1024",
            f"parallel.tp={tp}", f"parallel.ep={ep}", f"parallel.dp={dp}",
            f"workload.concurrency={c}"]  # fmt: skip
    return ["eval", ref, *(a for s in sets for a in ("--set", s))]


@pytest.fixture(scope="module")
def small() -> dict:
    return search_json("--at", "tokens_per_s_per_user>=50", "--ttft", "<=2s")


@pytest.fixture(scope="module")
def brute() -> dict[tuple[int, int, int, int], dict | None]:
    """Every point of the small space, each through ``stepwall eval``."""
    out = {}
    for tp in (1, 2, 4, 8):
        for ep in (1, 2, 4, 8):
            if 8 % (tp * ep):
                continue
            for b in BATCH:
                key = (tp, ep, 8 // (tp * ep), b * ep)
                out[key] = eval_json(layout_argv(*key))
    return out


def pareto_brute(points: dict) -> set:
    """Non-dominated keys (both maximised; ties to the first in enumeration order)."""
    items = [(k, v["tokens_per_s_per_user"], v["tokens_per_s_per_gpu"]) for k, v in points.items()]
    keep = set()
    for i, (k, x, y) in enumerate(items):
        dominated = any(
            (x2 >= x and y2 >= y and (x2, y2) != (x, y)) or ((x2, y2) == (x, y) and j < i)
            for j, (_, x2, y2) in enumerate(items)
        )
        if not dominated:
            keep.add(k)
    return keep


def test_frontier_equals_brute_force_with_eval(small, brute) -> None:
    feasible = {k: v for k, v in brute.items() if v is not None and v["ttft_s"] <= 2.0}
    assert 0 < len(feasible) < len(brute)  # the space has infeasible points to prune
    assert small["evaluated"] == len(brute)
    assert small["passed_filters"] == len(feasible)
    expected = pareto_brute(feasible)
    got = {(p["config"]["tp"], p["config"]["ep"], p["config"]["dp"], p["config"]["concurrency"]): p
           for p in small["frontier"]}  # fmt: skip
    assert set(got) == expected
    for key, p in got.items():
        for m in ("tokens_per_s_per_user", "tokens_per_s_per_gpu", "ttft_s", "step_time_s",
                  "joules_per_token", "usd_per_million_tokens"):  # fmt: skip
            assert p[m] == pytest.approx(feasible[key][m], rel=1e-9), (key, m)


def test_best_at_target_is_the_brute_force_best(small, brute) -> None:
    ok = {k: v for k, v in brute.items()
          if v is not None and v["ttft_s"] <= 2.0 and v["tokens_per_s_per_user"] >= 50}  # fmt: skip
    best = max(ok.values(), key=lambda v: v["tokens_per_s_per_gpu"])
    (entry,) = small["targets"]
    (opt,) = entry["options"]
    assert opt["point"]["tokens_per_s_per_gpu"] == pytest.approx(best["tokens_per_s_per_gpu"])
    assert opt["binding"]  # says what stops it
    assert entry["ranking"] == [HW]


@pytest.mark.parametrize(
    ("at", "metric", "nearest"),
    [("tokens_per_s_per_user>=100000", "tokens_per_s_per_user", max),
     ("ttft_s<=1us", "ttft_s", min)],
)  # fmt: skip
def test_an_unmet_target_names_its_nearest_configuration(brute, at, metric, nearest) -> None:
    """A target beyond reach names the configuration closest to it: over every configuration
    that passes the filters (here: every feasible one, each through ``stepwall eval``), the
    largest value of the target's metric for ``>=``, the smallest for ``<=``, and the gap."""
    doc = search_json("--at", at)
    (entry,) = doc["targets"]
    (opt,) = entry["options"]
    assert opt["point"] is None
    want = nearest(v[metric] for v in brute.values() if v is not None)
    near = opt["nearest"]
    assert near["metric"] == metric and near["value"] == pytest.approx(want, rel=1e-9)
    target = 100_000 if metric == "tokens_per_s_per_user" else 1e-6
    assert near["gap"] == pytest.approx(want / target - 1, rel=1e-9)
    assert opt["binding"].startswith("no configuration meets the target (the nearest gives")
    code, out, _ = run([*SMALL, "--at", at])
    assert code == 0 and f"the nearest gives {metric} {want:.4g}" in out


@pytest.mark.parametrize(
    ("value", "target", "says"),
    [(90.0, 100.0, "m 90, 10.0% short"), (1.5, 1.0, "m 1.5, 50.0% over"),
     (3.0, 1.0, "m 3, 3× the target"), (2.0, 2.0, "m 2, the bound itself")],
)  # fmt: skip
def test_the_gap_to_a_target_is_worded_by_its_size(value, target, says) -> None:
    near = {"metric": "m", "value": value, "gap": value / target - 1}
    assert search_app.nearest_text(near) == says


def test_every_reported_point_satisfies_every_constraint(small) -> None:
    reported = [*small["frontier"], *(o["point"] for t in small["targets"] for o in t["options"])]
    assert reported
    for p in reported:
        assert p["feasible"] and p["ttft_s"] <= 2.0
        doc = eval_json(shlex.split(p["command"])[1:])  # eval refuses an infeasible point
        assert doc is not None and doc["feasible"] and not doc["violations"]
        assert doc["tokens_per_s_per_gpu"] == pytest.approx(p["tokens_per_s_per_gpu"], rel=1e-12)
        assert doc["memory"]["fits"]
        c = p["config"]
        assert c["tp"] * c["ep"] * c["dp"] == c["gpus"] == 8


def _spec_value(folder: str, name: str, key: str) -> float:
    doc = tomllib.loads((catalog_root() / folder / f"{name}.toml").read_text())
    return parse_quantity(doc[key])[0]


def test_energy_and_cost_by_hand_from_the_spec_files(small) -> None:
    power = _spec_value("hardware", HW, "board_power")  # W
    pue = _spec_value("clusters", CLUSTER, "pue")
    price = _spec_value("clusters", CLUSTER, "price_per_gpu_hour")  # USD/s
    assert power == 700 and price == pytest.approx(3.59 / 3600)
    for p in small["frontier"]:
        r = p["tokens_per_s_per_gpu"]
        assert p["joules_per_token"] == pytest.approx(power / r, rel=1e-12)
        assert p["tokens_per_s_per_mw"] == pytest.approx(r * 1e6 / (power * pue), rel=1e-12)
        assert p["usd_per_million_tokens"] == pytest.approx(price * 1e6 / r, rel=1e-12)


def test_unknown_energy_is_null_never_a_number(tmp_path: Path) -> None:
    # a cluster without a price: cost unknown (null), energy known, the point still feasible
    doc = eval_json(["eval", "dsv3-mi300x-tp8"])
    assert doc is not None and doc["feasible"]
    assert doc["usd_per_million_tokens"] is None
    assert doc["joules_per_token"] > 0
    code, out, _ = run(["eval", "dsv3-mi300x-tp8"])
    assert code == 0 and "energy per token" in out and "USD per 1M" not in out
    # a GPU spec without a board power: no energy metric, the cost still known
    text = (catalog_root() / "hardware" / f"{HW}.toml").read_text()
    bare = tmp_path / "gpu.toml"
    bare.write_text("".join(line for line in text.splitlines(keepends=True)
                            if not line.startswith("board_power")))  # fmt: skip
    argv = layout_argv(8, 1, 1, 8)
    argv[1] = argv[1].replace(f"hardware={HW}", f"hardware={bare}")
    doc = eval_json(argv)
    assert doc is not None and doc["feasible"]
    assert doc["joules_per_token"] is None and doc["tokens_per_s_per_mw"] is None
    assert doc["usd_per_million_tokens"] > 0
    code, out, _ = run(argv)
    assert code == 0 and "energy per token" not in out and "USD per 1M" in out


def test_derive_crossover_on_cost() -> None:
    """Two layouts on the same cluster pay the same price per GPU-hour, so their cost per
    token crosses where their tokens/s per GPU does; a spec without a price is an error."""
    base = ["derive", "dsr1-fp4-b200-tp8", "crossover", "workload.concurrency", "--against",
            "dsr1-fp4-b200-adp-ep8", "--json", "--metric"]  # fmt: skip
    values = []
    for metric in ("usd_per_million_tokens", "tokens_per_s_per_gpu"):
        code, out, err = run([*base, metric])
        assert code == 0, err
        values.append(json.loads(out)["value"])
    assert values[0] == pytest.approx(values[1], rel=1e-6) and values[0] > 1
    unknown = ["derive", "dsv3-mi300x-tp8", "crossover", "workload.concurrency", "--against",
               "dsv3-mi300x-tp8", "--metric", "usd_per_million_tokens"]  # fmt: skip
    code, out, err = run(unknown)
    assert code == 2 and err.count("\n") == 1 and "cluster.price_per_gpu_hour" in err


def test_search_refuses_a_cost_objective_without_a_price() -> None:
    code, out, err = run(["search", MODEL, "--hardware", "mi300x", "--cluster", "mi300x-8",
                          "--objective", "usd_per_million_tokens", "--batch", "1"])  # fmt: skip
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "price_per_gpu_hour" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--x", "tokens_per_user"], "unknown metric"),
        (["--at", "tokens_per_s_per_user=50"], "not a condition"),
        (["--gpus", "0"], "--gpus"),
        (["--set", "parallel.tp=8"], "searched"),
    ],
)
def test_bad_options_are_one_line_errors(argv, says) -> None:
    code, out, err = run([*SMALL, *argv])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err


def test_chunking_does_not_change_the_answer(small) -> None:
    assert search_json("--at", "tokens_per_s_per_user>=50", "--ttft", "<=2s",
                       "--chunk", "7") == small  # fmt: skip


def test_pareto_is_independent_of_grouping() -> None:
    from stepwall.apps.search import pareto

    rng = np.random.default_rng(0)
    x = rng.integers(0, 20, 500).astype(float)
    y = rng.integers(0, 20, 500).astype(float)
    ids = np.arange(500)
    whole = set(ids[pareto(x, y, ids)])
    parts = [np.arange(i, min(500, i + 37)) for i in range(0, 500, 37)]
    kept = np.concatenate([p[pareto(x[p], y[p], ids[p])] for p in parts])
    assert set(kept[pareto(x[kept], y[kept], ids[kept])]) == whole


def test_several_hardware_on_one_chart(tmp_path: Path) -> None:
    svg, doc = tmp_path / "f.svg", tmp_path / "f.json"
    argv = ["search", MODEL, "--hardware", "h200,b200", "--cluster", "hgx-h200-ib,hgx-b200-ib",
            "--gpus", "8", "--batch", "1,16,256", "--at", "tokens_per_s_per_user>=40",
            "--plot", str(svg), "-o", str(doc)]  # fmt: skip
    code, _, err = run(argv)
    assert code == 0, err
    d = json.loads(doc.read_text())
    assert {p["option"] for p in d["frontier"]} == {"h200", "b200"}
    assert sorted(d["targets"][0]["ranking"]) == ["b200", "h200"]
    text = svg.read_text()
    assert "h200" in text and "b200" in text
    code, _, _ = run(argv)
    assert svg.read_text() == text  # deterministic


def test_decoding_kinds_and_varied_keys_reproduce() -> None:
    """MTP beside autoregressive, its draft count varied: each frontier point's command
    reproduces it, its decoding settings included."""
    argv = ["search", MODEL, "--hardware", "b200", "--cluster", "hgx-b200-ib", "--gpus", "8",
            "--batch", "1,64", "--decoding", "autoregressive,mtp", "--set",
            "decoding.acceptance=0.7", "--vary", "decoding.drafts=1,3", "--json"]  # fmt: skip
    code, out, err = run(argv)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["evaluated"] == 10 * 2 + 10 * 2 * 2  # layouts × batches (× drafts for mtp)
    kinds = {p["config"]["decoding"] for p in doc["frontier"]}
    assert "mtp" in kinds
    for p in doc["frontier"]:
        got = eval_json(shlex.split(p["command"])[1:])
        assert got is not None and got["feasible"]
        assert got["tokens_per_s_per_user"] == pytest.approx(p["tokens_per_s_per_user"], rel=1e-12)


@pytest.mark.slow  # starts a 2-worker LocalCluster
def test_dask_equals_single_process() -> None:
    """A 2-worker LocalCluster of processes gives the same document, byte for byte."""
    pytest.importorskip("distributed")
    extra = ["--at", "tokens_per_s_per_user>=50", "--chunk", "16"]
    code, one, err = run([*SMALL, *extra, "--json"])
    assert code == 0, err
    code, many, err = run([*SMALL, *extra, "--json", "--dask", "--workers", "2"])
    assert code == 0, err
    assert many == one


def test_commands_carry_the_deployments_nodes_not_the_clusters() -> None:
    """An 8-GPU deployment on HGX (8 GPUs a node, an 8-GPU domain) runs on 1 node; on GB200
    NVL72 (4 a node) its command keeps the whole 72-GPU domain, 18 nodes; the clusters' own
    specs say 9 and 18. Each command reproduces its point."""
    argv = ["search", "llama-3.1-70b", "--hardware", "h200,gb200", "--cluster",
            "hgx-h200-ib,gb200-nvl72", "--gpus", "8,16", "--batch", "8,64",
            "--json", "-q"]  # fmt: skip
    code, out, err = run(argv)
    assert code == 0, err
    doc = json.loads(out)
    want = {("h200", 8): 1, ("h200", 16): 2, ("gb200", 8): 18, ("gb200", 16): 18}
    for p in doc["frontier"]:
        cfg = p["config"]
        nodes = want[(cfg["hardware"], cfg["gpus"])]
        assert cfg["nodes"] == nodes and f"--set cluster.nodes={nodes} " in p["command"]
        got = eval_json(shlex.split(p["command"])[1:])
        assert got is not None and got["feasible"]
        assert got["tokens_per_s_per_gpu"] == pytest.approx(p["tokens_per_s_per_gpu"], rel=1e-12)


@pytest.mark.parametrize(
    ("nominal", "ends", "want"),
    [
        (9.76, [10.12, 10.12], (9.76, 10.12)),  # both ends above the nominal
        (5.0, [4.0, 6.0], (4.0, 6.0)),
        (5.0, [6.0], (5.0, 6.0)),  # the low end reaches no point
        (None, [10.12], (None, None)),  # no nominal point: no interval
    ],
)
def test_a_ranking_interval_holds_its_nominal(nominal, ends, want) -> None:
    assert search_app.objective_span(nominal, ends) == want


def _interval_faults(result: Any) -> list[str]:
    faults = []
    for t in result.best:
        for r in t["robustness"]["options"]:
            n, lo, hi = r["nominal"], r["low"], r["high"]
            if n is None and (lo, hi) != (None, None):
                faults.append(f"{t['target']} {r['option']}: an interval without a nominal")
            if n is not None and not (lo is not None and lo <= n <= hi):
                faults.append(f"{t['target']} {r['option']}: {n} outside [{lo}, {hi}]")
    return faults


@pytest.mark.slow  # every shipped report's searches, three passes each
def test_every_shipped_reports_ranking_intervals_hold_their_nominals() -> None:
    """Each target of each ``pareto`` block of the shipped reports: an option's interval
    holds its own nominal, and one with no nominal point shows none."""
    checked = 0
    for spec in sorted((catalog_root() / "reports").glob("*.toml")):
        report = Report(spec.stem)
        try:
            for _, kind, opts, at in report._blocks:
                if kind.name != "pareto":
                    continue
                result = report.computed(at, functools.partial(kind.compute, report, opts, at))
                assert not _interval_faults(result), (spec.stem, _interval_faults(result))
                checked += len(result.best)
        finally:
            report._jobs.close()
    assert checked >= 2  # dsr1-frontiers' two targets at least
