"""``stepwall search --disagg`` (issue 24, item 1): prefill and decode pools searched apart and
paired into xPyD deployments. The pairing is checked through the command line against brute
force over ``stepwall eval`` of every pool configuration of a small space and every instance
count, with the TTFT percentile computed here by hand (M/D/1 and the exponential tail); each
deployment's commands reproduce its numbers; bad requests are one-line errors."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import shlex
from typing import Any

import numpy as np
import pytest

from stepwall.analyses.crossover import crossover
from stepwall.apps import switch, validate
from stepwall.cli import main
from stepwall.core.errors import SpecError
from stepwall.model.compose import StepModel, build_model
from stepwall.testing import refusal, scaled, with_flags

MODEL, HW, CLUSTER = "deepseek-r1-fp4", "gb200", "gb200-nvl72"
ISL, OSL, MAX_GPUS, TTFT_P90 = 1024, 1024, 24, 1.0
DECODE_GPUS, DECODE_BATCH, PREFILL_GPUS, PREFILL_BATCH = 8, (16, 64), 4, (1, 4)
SMALL = ["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, "--isl", str(ISL),
         "--osl", str(OSL), "--gpus", str(DECODE_GPUS), "--only", "parallel.tp=1,8",
         "--batch", ",".join(map(str, DECODE_BATCH)), "--disagg",
         "--prefill-gpus", str(PREFILL_GPUS), "--prefill-only", "parallel.tp=4",
         "--prefill-batch", ",".join(map(str, PREFILL_BATCH)), "--max-gpus", str(MAX_GPUS),
         "--ttft", f"p90<={TTFT_P90:g}s", "--at", "tokens_per_s_per_user>=1", "-q"]  # fmt: skip
REF = f"model={MODEL},hardware={HW},cluster={CLUSTER}"


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def eval_json(sets: list[str]) -> dict[str, Any] | None:
    code, out, err = run(["eval", REF, *(a for s in sets for a in ("--set", s)), "--json"])
    if code == 2:
        return None
    assert code == 0, err
    return dict(json.loads(out))


def p90_by_hand(rate: float, t: float, prompts: float) -> float:
    """A prefill replica's TTFT p90 under Poisson arrivals at ``rate``: half a step (arrival
    between steps), the step, and the M/D/1 wait's p90 with an exponential tail,
    w = W/ρ·ln(ρ/0.1) where ρ > 0.1, W = ρ·s/(2(1 − ρ)), s = t/C."""
    s = t / prompts
    rho = rate * s
    wait = rho * s / (2 * (1 - rho))
    tail = max(0.0, wait / rho * math.log(rho / 0.1)) if rho > 0 else 0.0
    return t / 2 + t + tail


def layouts(gpus: int, tps: tuple[int, ...]) -> list[tuple[int, int, int]]:
    return [(tp, ep, gpus // (tp * ep)) for tp in tps for ep in (1, 2, 4, 8)
            if gpus % (tp * ep) == 0]  # fmt: skip


@pytest.fixture(scope="module")
def pools() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every feasible decode and prefill configuration of the small space, by eval."""
    decode, prefill = [], []
    for tp, ep, dp in layouts(DECODE_GPUS, (1, 8)):
        for b in DECODE_BATCH:
            got = eval_json(["workload.kind=decode", f"workload.input_tokens={ISL}",
                             f"workload.output_tokens={OSL}",
                             f"workload.context={ISL + OSL // 2}", "workload.kv_transfer=true",
                             f"parallel.tp={tp}", f"parallel.ep={ep}", f"parallel.dp={dp}",
                             f"workload.concurrency={b * ep}"])  # fmt: skip
            if got is not None and got["feasible"]:
                decode.append({**got, "layout": (tp, ep, dp, b * ep)})
    for tp, ep, dp in layouts(PREFILL_GPUS, (4,)):
        for b in PREFILL_BATCH:
            got = eval_json(["workload.kind=prefill", f"workload.input_tokens={ISL}",
                             f"workload.output_tokens={OSL}", f"parallel.tp={tp}",
                             f"parallel.ep={ep}", f"parallel.dp={dp}",
                             f"workload.concurrency={b * ep}"])  # fmt: skip
            if got is not None and got["feasible"]:
                prefill.append({**got, "layout": (tp, ep, dp, b * ep)})
    assert decode and prefill, "the small space has no pool: the test checks nothing"
    return decode, prefill


def best_by_brute_force(
    d: dict[str, Any], prefill: list[dict[str, Any]], limit: float = TTFT_P90
) -> tuple[float, int]:
    """The most output tokens/s per GPU of any x prefill + y decode instances fed by decode
    point ``d`` within MAX_GPUS and the TTFT p90 ``limit``, and its GPUs (fewest on a tie)."""
    lam = d["tokens_per_s"] / OSL
    top = (-math.inf, 0)
    for p in prefill:
        _, _, dp, prompts = p["layout"]
        t = p["step_time_s"]
        for y in range(1, MAX_GPUS // DECODE_GPUS + 1):
            for x in range(1, MAX_GPUS // PREFILL_GPUS + 1):
                gpus = x * PREFILL_GPUS + y * DECODE_GPUS
                rate = y * lam / (x * dp)  # at each prefill replica
                if gpus > MAX_GPUS or rate * t / prompts >= 1:
                    continue
                if p90_by_hand(rate, t, prompts) + d["kv_transfer_s"] > limit:
                    continue
                value = y * lam * OSL / gpus
                if value > top[0] * (1 + 1e-12) or (
                    math.isclose(value, top[0], rel_tol=1e-12) and gpus < top[1]
                ):
                    top = (value, gpus)
    return top


@pytest.fixture(scope="module")
def answer() -> dict[str, Any]:
    code, out, err = run([*SMALL, "--json"])
    assert code == 0, err
    return dict(json.loads(out))


def _decode_key(p: dict[str, Any]) -> tuple[int, int, int, int]:
    c = p["decode"]["config"]
    return (c["tp"], c["ep"], c["dp"], c["concurrency"])


def test_each_deployment_is_the_brute_force_best_for_its_decode_pool(pools, answer) -> None:
    decode, prefill = pools
    by_layout = {d["layout"]: d for d in decode}
    shown = [p for p in answer["frontier"] if p["mode"] == "disaggregated"]
    # several: each deployment is priced on its own (not at the first one's load)
    assert len(shown) >= 2, "under two disaggregated frontier points: the test checks little"
    for p in shown:
        value, gpus = best_by_brute_force(by_layout[_decode_key(p)], prefill)
        assert p["tokens_per_s_per_gpu"] == pytest.approx(value, rel=1e-9)
        assert p["gpus"] == gpus
        assert p["gpus"] == p["prefill_gpus"] + p["decode_gpus"] <= MAX_GPUS
        assert p["ttft_p90_s"] <= TTFT_P90


def test_the_best_at_a_target_is_the_brute_force_best(pools, answer) -> None:
    decode, prefill = pools
    (target,) = answer["targets"]
    (option,) = target["options"]
    dis = max(best_by_brute_force(d, prefill)[0] for d in decode)
    assert option["value"] >= dis * (1 - 1e-9)  # the aggregated best may beat every P/D
    if option["point"]["mode"] == "disaggregated":
        assert option["value"] == pytest.approx(dis, rel=1e-9)


def test_a_target_no_deployment_meets_names_the_nearest(answer) -> None:
    """Beyond every deployment's reach, the best at a target is none and says how close
    the space comes: the most tokens/s per user of any deployment, aggregated or
    disaggregated (the frontier's first point, as `answer`'s frontier gives it)."""
    argv = [*SMALL[: SMALL.index("--at")], "--at", "tokens_per_s_per_user>=100000", "-q"]
    code, out, err = run([*argv, "--json"])
    assert code == 0, err
    (option,) = json.loads(out)["targets"][0]["options"]
    most = max(p["tokens_per_s_per_user"] for p in answer["frontier"])
    assert option["point"] is None
    assert option["nearest"]["value"] == pytest.approx(most, rel=1e-9)
    assert option["nearest"]["gap"] == pytest.approx(most / 100_000 - 1, rel=1e-9)
    code, out, err = run(argv)
    assert (
        code == 0
        and f"no deployment meets it (the nearest gives tokens_per_s_per_user {most:.4g}, " in out
    ), out


def test_a_deployment_reproduces_through_its_two_commands(answer) -> None:
    p = next(p for p in answer["frontier"] if p["mode"] == "disaggregated")
    code, out, err = run([*shlex.split(p["decode"]["command"])[1:], "--json"])
    assert code == 0, err
    dec = json.loads(out)
    code, out, err = run([*shlex.split(p["prefill"]["command"])[1:], "--json"])
    assert code == 0, err
    pre = json.loads(out)  # the prefill instance at the deployment's arrival rate
    assert dec["feasible"] and pre["feasible"]
    assert p["tokens_per_s_per_user"] == pytest.approx(dec["tokens_per_s_per_user"], rel=1e-12)
    load = p["decode_instances"] * dec["tokens_per_s"] / OSL
    assert p["request_rate_per_s"] == pytest.approx(load, rel=1e-12)
    assert pre["request_rate_per_s"] == pytest.approx(load / p["prefill_instances"], rel=1e-9)
    for q in ("ttft_s", "ttft_p90_s", "ttft_p99_s"):
        assert p[q] == pytest.approx(pre[q] + dec["kv_transfer_s"], rel=1e-9)
    assert p["tokens_per_s_per_gpu"] == pytest.approx(load * OSL / p["gpus"], rel=1e-12)
    assert p["total_tokens_per_s_per_gpu"] == pytest.approx(
        p["tokens_per_s_per_gpu"] * (ISL + OSL) / OSL, rel=1e-12
    )


def test_the_frontier_marks_both_modes_and_is_pareto(answer) -> None:
    front = answer["frontier"]
    assert {p["mode"] for p in front} <= {"aggregated", "disaggregated"}
    xs = [p["tokens_per_s_per_user"] for p in front]
    ys = [p["tokens_per_s_per_gpu"] for p in front]
    assert xs == sorted(xs, reverse=True)
    assert all(b > a for a, b in itertools.pairwise(ys))  # each point earns its place


def test_kv_transfer_is_priced_only_where_the_kv_arrives() -> None:
    base = [
        "workload.kind=decode",
        "workload.context=1536",
        "parallel.ep=8",
        "workload.concurrency=64",
    ]
    sent = eval_json([*base, "workload.kv_transfer=true"])
    local = eval_json(base)
    assert sent is not None and local is not None
    assert 0 < sent["kv_transfer_s"] < sent["prefill_s"]
    assert local["kv_transfer_s"] == 0
    assert sent["prefill_s"] > local["prefill_s"]


def test_a_percentile_ttft_filters_the_aggregated_search() -> None:
    argv = ["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, "--gpus", "8", "--batch",
            "16,256", "--ttft", "p90<=200ms", "--tpot", "<=40ms", "--json", "-q"]  # fmt: skip
    code, out, err = run(argv)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["filters"] == ["ttft_p90_s<=200ms", "tpot_s<=40ms"]
    assert doc["frontier"]
    assert all(p["ttft_p90_s"] <= 0.2 and p["tpot_s"] <= 0.04 for p in doc["frontier"])


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--y", "usd_per_million_tokens"], "--y"),
        (["--x", "tpot_s"], "--x"),
        (["--ttft", ">=1s"], "--ttft"),
        (["--max-gpus", "1"], "--max-gpus"),
        (["--vary", "hardware.hbm_bandwidth=7TB/s,8TB/s"], "--vary"),
        (["--prefill-hardware", "h100,h200", "--prefill-cluster", "hgx-h100-ib,hgx-h200-ib"],
         "--prefill-hardware"),
        (["--prefill-hardware", "h100"], "--prefill-cluster"),
        (["--emit", "sglang"], "no best deployment can be launched with sglang"),
        (["--ttft", "p95<=1s"], "p95 is not a percentile stepwall prices"),
        (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler"),
        (["--plot", "frontier.png"], "--plot"),
        (["--workload", "decode"], "--workload"),
    ],
)  # fmt: skip
def test_bad_requests_are_one_line_errors(
    extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = refusal(capsys, *with_flags(SMALL, extra))
    assert says in text
    assert text.count("(expected") <= 1, text


@pytest.mark.slow  # starts a 2-worker LocalCluster
def test_dask_equals_single_process() -> None:
    """--dask spreads the aggregated search's chunks and both pools' over a 2-worker
    LocalCluster of processes, and the document is the same, byte for byte."""
    pytest.importorskip("distributed")
    code, one, err = run([*SMALL, "--json"])
    assert code == 0, err
    code, many, err = run([*SMALL, "--json", "--dask", "--workers", "2"])
    assert code == 0, err
    assert many == one


def test_max_gpus_bounds_aggregated_deployments_too() -> None:
    """--max-gpus bounds a deployment's GPUs, and an aggregated deployment is one instance:
    with --gpus 4,8 and a bound of 6, no 8-GPU point of either mode is on the frontier or
    picked at a target, and 4-GPU aggregated ones are."""
    argv = [
        *with_flags(SMALL, ["--gpus", "4,8", "--max-gpus", "6", "--ttft", "p90<=100s"]),
        "--json",
    ]
    code, out, err = run(argv)
    assert code == 0, err
    doc = json.loads(out)
    points = [*doc["frontier"], *(o["point"] for t in doc["targets"] for o in t["options"]
                                  if o["point"] is not None)]  # fmt: skip
    assert points and all(p["gpus"] <= 6 for p in points)
    assert any(p["mode"] == "aggregated" and p["gpus"] == 4 for p in points)


def test_max_gpus_below_every_instance_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A bound no instance fits in (8-GPU decode and aggregated, 4-GPU prefill, bound 4):
    a one-line refusal naming --max-gpus, not an empty frontier."""
    assert "--max-gpus" in refusal(capsys, *with_flags(SMALL, ["--max-gpus", "4"]))


def test_a_prefill_flag_without_disagg_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, "--prefill-gpus", "4"]
    assert "--disagg" in refusal(capsys, *argv)


# ---------------------------------------------------------------- validate's disagg rows

DISAGG_ROW = """
[[row]]
id = "pd"
class = "disagg"
scenario = "dsr1-fp4-gb200-dep8-decode"
metric = "total_tokens_per_s_per_gpu"
measured = "5000 tokens/s"
at = "tokens_per_s_per_user>=20"
{deployed}search = {search}
source = "a test"
url = "https://example.org"
{extra}
"""
ROW_SPACE = ["--isl", str(ISL), "--osl", str(OSL), "--gpus", str(DECODE_GPUS),
             "--only", "parallel.tp=1,8", "--batch", ",".join(map(str, DECODE_BATCH)),
             "--prefill-gpus", str(PREFILL_GPUS), "--prefill-only", "parallel.tp=4",
             "--prefill-batch", ",".join(map(str, PREFILL_BATCH)),
             "--max-gpus", str(MAX_GPUS)]  # fmt: skip


def _table(tmp_path: Any, deployed: str | None = "4:8", search: list[str] | None = None,
           extra: str = "", cls: str = "disagg") -> Any:  # fmt: skip
    p = tmp_path / "t.toml"
    line = "" if deployed is None else f'deployed = "{deployed}"\n'
    text = DISAGG_ROW.format(deployed=line, search=json.dumps(search or ROW_SPACE),
                             extra=extra)  # fmt: skip
    p.write_text(text.replace('class = "disagg"', f'class = "{cls}"'))
    return p


SCENARIO = f"""name = "pd-test"
model = "{MODEL}"
hardware = "{HW}"

[cluster]
from = "{CLUSTER}"

[workload]
kind = "decode"
concurrency = 64
context = {ISL + OSL // 2}
"""


def test_a_disagg_row_is_the_brute_force_best_deployment(tmp_path, pools) -> None:
    """A disagg row predicts the best deployment at its target: brute force over every pool
    configuration of the space and every instance count (no TTFT limit here), with the
    split it picks and its ratio over the deployed one's."""
    (tmp_path / "pd.toml").write_text(SCENARIO)
    table = _table(tmp_path)
    table.write_text(table.read_text().replace("dsr1-fp4-gb200-dep8-decode", "pd.toml"))
    (row,) = validate.load_rows([table])
    (r,) = validate.predict([row], intervals={})
    decode, prefill = pools
    best = max(
        best_by_brute_force(d, prefill, math.inf)
        for d in decode
        if d["tokens_per_s_per_user"] >= 20
    )  # fmt: skip (the row states no TTFT limit)
    assert r.predicted == pytest.approx(best[0] * (ISL + OSL) / OSL, rel=1e-9)
    assert r.split is not None and sum(r.split) == best[1]
    assert r.ratio_factor == pytest.approx((r.split[0] / r.split[1]) / (4 / 8), rel=1e-12)
    s = validate.summary([r])
    assert s["splits"] == {"rows": 1, "within": int(1 / 1.5 <= r.ratio_factor <= 1.5),
                           "factor": 1.5}  # fmt: skip
    assert "deployed 4:8" in validate.text([r])


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("missing", "deployed"),
        ("malformed", "deployed"),
        ("frontier-deployed", "deployed"),
        ("frontier-prefill", "--prefill-gpus"),
        ("workload", "--workload"),
    ],
)
def test_bad_disagg_rows_are_one_line_errors(tmp_path, kind: str, says: str) -> None:
    table = {
        "missing": lambda: _table(tmp_path, deployed=None),
        "malformed": lambda: _table(tmp_path, deployed="12/32"),
        "frontier-deployed": lambda: _table(tmp_path, cls="frontier", search=ROW_SPACE[:-8]),
        "frontier-prefill": lambda: _table(tmp_path, deployed=None, cls="frontier"),
        "workload": lambda: _table(tmp_path, search=["--workload", "decode", *ROW_SPACE]),
    }[kind]()
    with pytest.raises(SpecError) as e:
        validate.load_rows([table])
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("engine", "role_option"),
    [("sglang", "--disaggregation-mode"), ("vllm", "--kv-transfer-config"),
     ("trtllm", "cache_transceiver_config")],
)  # fmt: skip
def test_emit_launches_both_sides_with_their_roles(engine: str, role_option: str) -> None:
    argv = [*SMALL, "--engine", engine, "--only", "parallel.ep=1", "--emit", engine, "--json"]
    argv[argv.index("--at") + 1] = "tokens_per_s_per_user>=1"
    code, out, err = run(argv)
    assert code == 0, err
    (option,) = json.loads(out)["targets"][0]["options"]
    p = option["point"]
    lau = p["launch"]
    if p["mode"] == "aggregated":  # the aggregated best wins here: its own launch, no role
        assert role_option not in json.dumps(lau)
        return
    assert lau["instances"] == {"prefill": p["prefill_instances"], "decode": p["decode_instances"]}
    for side in ("prefill", "decode"):
        text = json.dumps(lau[side])
        assert "refused" not in lau[side], text
        assert role_option in text
        if engine == "sglang":
            assert f"--disaggregation-mode {side}" in lau[side]["commands"][0]
    assert str(p["prefill_instances"]) in lau["router"]


# ---------------------------------------------------------------- recommend --disagg


def test_no_target_best_lies_above_the_frontier(answer) -> None:
    """Each target's best deployment is on the frontier or below a point of it."""
    front = answer["frontier"]
    for t in answer["targets"]:
        for o in t["options"]:
            b = o["point"]
            assert any(f["tokens_per_s_per_user"] >= b["tokens_per_s_per_user"]
                       and f["tokens_per_s_per_gpu"] >= b["tokens_per_s_per_gpu"]
                       for f in front), b["tokens_per_s_per_gpu"]  # fmt: skip


def test_the_plot_draws_both_modes_and_the_aggregated_frontier_alone(tmp_path) -> None:
    """``--plot``: one line per option over both modes, circles and triangles for the two,
    the aggregated search's own frontier dashed; the same bytes on a second run."""
    svgs = []
    for name in ("a.svg", "b.svg"):
        code, _, err = run([*SMALL, "--plot", str(tmp_path / name)])
        assert code == 0, err
        svgs.append((tmp_path / name).read_bytes())
    assert svgs[0] == svgs[1]
    text = svgs[0].decode()
    for label in ("gb200: best of either", "gb200: aggregated alone", "P/D point",
                  "aggregated point", "tokens_per_s_per_user&gt;=1"):  # fmt: skip
        assert label in text, label


def _model(command: str) -> StepModel:
    words = shlex.split(command)
    return build_model(words[2], [words[i + 1] for i, w in enumerate(words) if w == "--set"])


def _curve(p: dict[str, Any]) -> tuple[StepModel, float]:
    """A frontier point's curve: its model and the GPUs each of its replicas (decode
    instances) is charged, with a P/D instance's share of the prefill pool."""
    if p["mode"] == "aggregated":
        return _model(p["command"]), float(p["config"]["gpus"]) / float(p["config"]["dp"])
    gpus = p["decode"]["config"]["gpus"] + p["prefill_gpus"] / p["decode_instances"]
    return _model(p["decode"]["command"]), float(gpus)


def _per_user(m: StepModel, charged: float, per_gpu: np.ndarray) -> np.ndarray:
    ev = m.evaluate({m.provides["users"]: per_gpu * charged})
    u = np.asarray(ev["tokens_per_s_per_user"], dtype=float) * np.ones_like(per_gpu)
    return np.where(np.asarray(ev["feasible"], dtype=bool), u, np.nan)


def _end(front: list[dict[str, Any]], side: dict[str, Any]) -> dict[str, Any]:
    """The frontier point a switch's side names."""
    if side.get("mode") != "disaggregated":
        return next(p for p in front if p["mode"] == "aggregated" and p["config"] == side)
    return next(p for p in front if p["mode"] == "disaggregated"
                and p["decode"]["config"] == side["decode"]
                and p["decode_instances"] == side["decode_instances"])  # fmt: skip


@pytest.fixture(scope="module")
def switched() -> dict[str, Any]:
    code, out, err = run([*SMALL, "--switch-points", "--json"])
    assert code == 0, err
    return dict(json.loads(out))


def test_a_pd_switch_point_is_the_brute_force_crossing(switched) -> None:
    """Between an aggregated and a P/D deployment: a crossing of tokens/s per user at equal
    users per GPU, the P/D side's decode model with each instance charged x·N_p/y prefill
    GPUs more (a sign change on a grid of 200,001 points, within 1%), and the prefill pool's
    utilisation there from its own step time (ρ = Λ·t_p/(x·dp·C))."""
    front = switched["frontier"]
    mixed = [s for s in switched["switch_points"] if s["users_per_gpu"] is not None
             and "disaggregated" in (s["from"].get("mode"), s["to"].get("mode"))]  # fmt: skip
    assert mixed, "no aggregated ↔ P/D switch crosses: the test checks nothing"
    for s in mixed:
        ends = [_end(front, s[key]) for key in ("from", "to")]
        (ma, ga), (mb, gb) = (_curve(p) for p in ends)
        grid = np.geomspace(0.05, 2000, 200_001)
        diff = _per_user(ma, ga, grid) - _per_user(mb, gb, grid)
        flips = np.flatnonzero(np.isfinite(diff[:-1]) & np.isfinite(diff[1:])
                               & (np.sign(diff[:-1]) != np.sign(diff[1:])))  # fmt: skip
        assert flips.size, s
        # where rounding (prompt chunks, KV blocks) makes the two curves touch more than once
        # in a narrow band, the root found is one of those crossings: the nearest one
        c = grid[flips[np.argmin(np.abs(grid[flips] - s["users_per_gpu"]))]]
        assert s["users_per_gpu"] == pytest.approx(c, rel=0.01)
        u = float(_per_user(ma, ga, np.array([c]))[0])
        assert s["tokens_per_s_per_user"] == pytest.approx(u, rel=0.01)
        for p, charged, rho in zip(ends, (ga, gb), s["prefill_utilisation"], strict=True):
            if p["mode"] != "disaggregated":
                assert rho is None
                continue
            pre = eval_json(shlex.split(p["prefill"]["command"])[4::2])
            assert pre is not None
            cfg = p["prefill"]["config"]
            load = p["decode_instances"] * c * charged * u / OSL
            want = load / (p["prefill_instances"] * cfg["dp"]) * pre["step_time_s"] / (
                cfg["concurrency"] / cfg["dp"])  # fmt: skip
            assert rho == pytest.approx(want, rel=0.02)


def test_a_pd_switch_points_sensitivities_match_finite_differences(switched) -> None:
    """∂ln c*/∂ln p of an aggregated ↔ P/D switch against the crossing recomputed with p
    moved by ±0.1% on its side (the P/D side charged its prefill share)."""
    front = switched["frontier"]
    s = next(s for s in switched["switch_points"] if s["users_per_gpu"] is not None
             and "disaggregated" in (s["from"].get("mode"), s["to"].get("mode")))  # fmt: skip
    ends = [_end(front, s[key]) for key in ("from", "to")]
    models = [switch.model_of(p, None) for p in ends]
    extra = (switch.besides(ends[0]), switch.besides(ends[1]))
    key = models[0].provides["users"]
    checked = 0
    for row in s["sensitivities"][:3]:
        if row["whole"] or not math.isfinite(row["elasticity"]):
            continue
        roots = []
        for f in (1 + 1e-3, 1 - 1e-3):
            moved = [scaled(m, row["parameter"], f) if row["side"] == name else m
                     for m, name in zip(models, ("from", "to"), strict=True)]  # fmt: skip
            d = crossover(*moved, key, "tokens_per_s_per_user", per_gpu=True, besides=extra)
            roots.append(float(d.value))
        fd = (math.log(roots[0]) - math.log(roots[1])) / (math.log(1 + 1e-3) - math.log(1 - 1e-3))
        assert row["elasticity"] == pytest.approx(fd, rel=0.02, abs=1e-3), row
        checked += 1
    assert checked, "no continuous parameter among the largest sensitivities"


def test_pd_switch_points_print(switched) -> None:
    code, out, err = run([*SMALL, "--switch-points"])
    assert code == 0, err
    assert "switch points (where the best deployment along the frontier changes):" in out
    assert "prefill utilisation there" in out


RATE = 30.0


def test_recommend_disagg_is_the_brute_force_cheapest(pools) -> None:
    """The cheapest P/D candidate for RATE requests/s: y = ⌈R/λ⌉ decode instances of each
    decode configuration and the least x prefill instances that keep the queue stable and meet
    the TTFT p90 (by hand), over every prefill configuration; GPUs as the cost."""
    decode, prefill = pools
    brute = math.inf
    for d in decode:
        y = math.ceil(RATE / (d["tokens_per_s"] / OSL))
        for p in prefill:
            _, _, dp, prompts = p["layout"]
            t = p["step_time_s"]
            for x in range(1, 1000):
                rate = RATE / (x * dp)
                if rate * t / prompts < 1 and (
                    p90_by_hand(rate, t, prompts) + d["kv_transfer_s"] <= TTFT_P90
                ):
                    brute = min(brute, x * PREFILL_GPUS + y * DECODE_GPUS)
                    break
    assert math.isfinite(brute), "no P/D deployment meets the SLA: the test checks nothing"
    argv = ["recommend", MODEL, "--rate", str(RATE), "--isl", str(ISL), "--osl", str(OSL),
            "--hardware", HW, "--cluster", CLUSTER, "--gpus", str(DECODE_GPUS),
            "--only", "parallel.tp=1,8", "--batch", ",".join(map(str, DECODE_BATCH)),
            "--disagg", "--prefill-gpus", str(PREFILL_GPUS), "--prefill-only", "parallel.tp=4",
            "--prefill-batch", ",".join(map(str, PREFILL_BATCH)),
            "--ttft", f"p90<={TTFT_P90:g}s", "--keep", "50", "--json", "-q"]  # fmt: skip
    code, out, err = run(argv)
    assert code == 0, err
    cands = json.loads(out)["candidates"]
    costs = [c["cost"] for c in cands]
    assert costs == sorted(costs)
    pd = [c for c in cands if c.get("mode") == "disaggregated"]
    assert pd and pd[0]["gpus_total"] == brute
    assert len(pd) >= 2, "one P/D candidate: the runners-up are not checked"
    for c in pd:
        assert c["ttft_p90_s"] <= TTFT_P90 and c["serves_per_s"] == RATE
        # each candidate carries the whole rate, its prefill instances an equal share of it
        assert c["request_rate_per_s"] == pytest.approx(RATE, rel=1e-12)
        each = c["prefill"]["request_rate_per_s"] * c["prefill_instances"]
        assert each == pytest.approx(RATE, rel=1e-12)
        assert c["decode_instances"] * c["decode"]["tokens_per_s_per_gpu"] * c["decode"][
            "config"]["gpus"] / OSL >= RATE * (1 - 1e-12)  # fmt: skip


def test_prefill_pools_may_run_another_engine(capsys) -> None:
    argv = [*SMALL, "--engine", "trtllm", "--prefill-engine", "sglang", "--json"]
    code, out, err = run(argv)
    assert code == 0, err
    shown = [p for p in json.loads(out)["frontier"] if p["mode"] == "disaggregated"]
    assert shown
    for p in shown:
        assert "engine=sglang" in p["prefill"]["command"] and p["prefill"]["config"][
            "engine"] == "sglang"  # fmt: skip
        assert "engine=trtllm" in p["decode"]["command"]
    bad = [*SMALL, "--engine", "trtllm,vllm", "--prefill-engine", "sglang,vllm,trtllm"]
    assert "--prefill-engine" in refusal(capsys, *bad)


def test_a_disaggregated_search_needs_the_decode_sizes(capsys) -> None:
    argv = ["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, "--disagg"]
    assert "--gpus" in refusal(capsys, *argv)


def test_a_disagg_rows_band_is_the_search_at_its_ranges_ends(tmp_path) -> None:
    """A disagg row's band: the disaggregated search with its stated range at the low end,
    then at the high end (no calibration intervals here), the nominal between them."""
    (tmp_path / "pd.toml").write_text(SCENARIO)
    space = [*ROW_SPACE, "--decoding", "mtp"]
    sets = ["decoding.acceptance=0.6..0.9 (0.8)", "decoding.drafts=1", "decoding.draft_layers=1"]
    table = _table(tmp_path, search=space, extra=f"set = {json.dumps(sets)}")
    table.write_text(table.read_text().replace("dsr1-fp4-gb200-dep8-decode", "pd.toml"))
    (row,) = validate.load_rows([table])
    (r,) = validate.predict([row], intervals={})
    ends = []
    for acceptance in (0.6, 0.9):
        fixed = [f"decoding.acceptance={acceptance}", *sets[1:]]
        code, out, err = run(["search", MODEL, "--hardware", HW, "--cluster", CLUSTER, *space,
                              "--disagg", *(a for s in fixed for a in ("--set", s)),
                              "--y", "total_tokens_per_s_per_gpu",
                              "--objective", "total_tokens_per_s_per_gpu",
                              "--at", "tokens_per_s_per_user>=20", "--json", "-q"])  # fmt: skip
        assert code == 0, err
        ends.append(json.loads(out)["targets"][0]["options"][0]["value"])
    assert r.band == pytest.approx((ends[0], ends[1]), rel=1e-9)
    assert ends[0] < r.predicted < ends[1]
