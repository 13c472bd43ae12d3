"""``stepwall recommend`` (issue 24, item 2): the cheapest deployment for a request rate within
an SLA, checked through the command line against brute force over ``stepwall eval`` of every
candidate of a small space, its costs against the spec files by hand, its commands
reproducing their points, and its refusals."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shlex
import tomllib
from typing import Any

import pytest

from stepwall.apps.recommend import MAX_FLEET_GPUS, within_fleet
from stepwall.cli import main
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError
from stepwall.core.units import parse_quantity
from stepwall.testing import refusal, with_flags

MODEL, HW, CLUSTER, ENGINE = "deepseek-v3-fp8", "h200", "hgx-h200-ib", "trtllm"
BATCH = (1, 8, 64)
RATE, TPOT, TTFT_P90 = 10.0, 0.05, 2.0
SMALL = ["recommend", MODEL, "--rate", str(RATE), "--isl", "1024", "--osl", "1024",
         "--hardware", HW, "--cluster", CLUSTER, "--engine", ENGINE, "--gpus", "8",
         "--batch", ",".join(map(str, BATCH)), "--ttft", f"p90<={TTFT_P90}s",
         "--tpot", f"<={TPOT * 1e3:g}ms", "-q"]  # fmt: skip


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def recommend_json(*extra: str) -> dict[str, Any]:
    code, out, err = run([*SMALL, *extra, "--json"])
    assert code == 0, err
    return dict(json.loads(out))


def eval_json(argv: list[str]) -> dict[str, Any] | None:
    code, out, err = run([*argv, "--json"])
    if code == 2:
        return None
    assert code == 0, err
    return dict(json.loads(out))


def spec_value(kind: str, name: str, key: str) -> float:
    """A value of a shipped spec file, in SI, read here from the TOML."""
    doc = tomllib.loads((catalog_root() / kind / f"{name}.toml").read_text())
    return parse_quantity(str(doc[key]))[0] if isinstance(doc[key], str) else float(doc[key])


@pytest.fixture(scope="module")
def feasible() -> dict[tuple[int, int, int, int], dict[str, Any]]:
    """Every point of the small space through ``stepwall eval``, by layout and users, for
    those that satisfy every constraint."""
    out = {}
    for tp in (1, 2, 4, 8):
        for ep in (1, 2, 4, 8):
            if 8 % (tp * ep):
                continue
            for b in BATCH:
                dp, users = 8 // (tp * ep), b * ep
                sets = ["workload.kind=serving", "workload.input_tokens=1024",
                        "workload.output_tokens=1024", f"parallel.tp={tp}", f"parallel.ep={ep}",
                        f"parallel.dp={dp}", f"workload.concurrency={users}"]  # fmt: skip
                ref = f"model={MODEL},hardware={HW},cluster={CLUSTER},engine={ENGINE}"
                got = eval_json(["eval", ref, *(a for s in sets for a in ("--set", s))])
                if got is not None and got["feasible"]:
                    out[(tp, ep, dp, users)] = got
    return out


@pytest.fixture(scope="module")
def brute(feasible) -> list[tuple[int, tuple[int, int, int, int]]]:
    """(GPUs to serve RATE, layout and users) of the feasible points that meet the SLA."""
    return sorted(
        (math.ceil(RATE / got["request_rate_per_s"]) * 8, key)
        for key, got in feasible.items()
        if got["tpot_s"] <= TPOT and got["ttft_p90_s"] <= TTFT_P90
    )


def test_an_sla_beyond_reach_names_the_nearest(feasible, capsys) -> None:
    """No configuration meets --tpot <=1us: the refusal gives the least TPOT any feasible
    point has (each through ``stepwall eval``) and its multiple of the SLA, and leaves out
    the TTFT filter, which some point meets."""
    least = min(got["tpot_s"] for got in feasible.values())
    says = refusal(capsys, *with_flags(SMALL, ["--tpot", "<=1us"]))
    assert f"; the nearest gives tpot_s {least:.4g}, {least / 1e-6:.3g}× the target (" in says
    assert "ttft_p90_s " not in says.split("nearest gives")[1]


def test_filters_met_alone_but_not_together_are_named_so(feasible, capsys) -> None:
    """A TPOT only the fastest point meets and a throughput only the busiest meets: each
    filter alone is met (by brute force over ``stepwall eval``), none together, and the
    refusal says so rather than naming a nearest value."""
    points = list(feasible.values())
    tpot = min(p["tpot_s"] for p in points) * 1.001
    rate = max(p["tokens_per_s_per_gpu"] for p in points) * 0.999
    assert not any(p["tpot_s"] <= tpot and p["tokens_per_s_per_gpu"] >= rate for p in points)
    says = refusal(capsys, *with_flags(SMALL, ["--tpot", f"<={tpot * 1e3:.6g}ms"]),
                   "--where", f"tokens_per_s_per_gpu>={rate:.6g}")  # fmt: skip
    assert "each filter is met by some configuration, but none meets them together" in says
    assert "nearest" not in says


def test_the_cheapest_is_the_brute_force_cheapest(brute) -> None:
    doc = recommend_json()
    assert brute, "the small space has no candidate: the test checks nothing"
    best = doc["candidates"][0]
    assert best["gpus_total"] == brute[0][0]
    c = best["config"]
    assert (c["tp"], c["ep"], c["dp"], c["concurrency"]) in {
        k for g, k in brute if g == brute[0][0]
    }
    costs = [x["cost"] for x in doc["candidates"]]
    assert costs == sorted(costs)
    for x in doc["candidates"]:  # each serves the rate within the SLA, as its copy's eval says
        got = eval_json(shlex.split(x["command"])[1:])
        assert got is not None and got["feasible"]
        assert got["request_rate_per_s"] == pytest.approx(x["request_rate_per_s"], rel=1e-12)
        assert x["copies"] == math.ceil(RATE / got["request_rate_per_s"])
        assert x["copies"] * got["request_rate_per_s"] >= RATE
        assert got["tpot_s"] <= TPOT and got["ttft_p90_s"] <= TTFT_P90


def test_runners_up_are_distinct_replica_layouts() -> None:
    doc = recommend_json("--keep", "4")
    seen = [(x["config"]["tp"], x["config"]["ep"]) for x in doc["candidates"]]
    assert len(seen) == len(set(seen)) == 4


def test_costs_by_hand_from_the_spec_files() -> None:
    price = spec_value("clusters", CLUSTER, "price_per_gpu_hour") * 3600  # SI USD/s -> USD/h
    power = spec_value("hardware", HW, "board_power") * spec_value("clusters", CLUSTER, "pue")
    usd, mw = recommend_json("--minimize", "usd"), recommend_json("--minimize", "mw")
    for x in usd["candidates"]:
        assert x["cost"] == pytest.approx(x["gpus_total"] * price, rel=1e-12)
    for x in mw["candidates"]:
        assert x["cost"] == pytest.approx(x["gpus_total"] * power / 1e6, rel=1e-12)
    assert usd["unit"] == "USD per hour" and mw["unit"] == "MW"


def test_a_fleet_holds_at_most_the_cap_of_gpus() -> None:
    """Candidates up to `MAX_FLEET_GPUS` GPUs stay, those above go; where none stays the
    refusal names the fewest GPUs any candidate needs."""
    at, over = {"gpus_total": MAX_FLEET_GPUS}, {"gpus_total": MAX_FLEET_GPUS + 8}
    assert within_fleet((over, at), 5.0) == (at,)
    assert within_fleet((), 5.0) == ()
    with pytest.raises(SpecError, match=f"needs {MAX_FLEET_GPUS + 8:,} GPUs at the least"):
        within_fleet((over,), 5.0)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--rate", "0"], "--rate"),
        # more GPUs than any installation: refused, not sized
        (["--rate", "1e12"], "recommend:--rate: 1e+12 requests/s needs"),
        (["--ttft", "q90<=2s"], "--ttft"),
        (["--tpot", "<=1us"], "no configuration searched passes"),
        (["--keep", "0"], "--keep"),
        (["--isl", "0"], "recommend:--isl: 0 tokens per request"),
        (["--gpus", "0"], "recommend:--gpus"),
        (["--prefill-gpus", "8"], "recommend:--prefill-gpus: applies to disaggregated"),
        (["--cluster", "mi300x-8", "--hardware", "mi300x", "--minimize", "usd"],
         "price_per_gpu_hour"),
        # priced with TensorRT-LLM, launched with SGLang: refused, saying once what to pass
        (["--emit", "sglang"], "no candidate can be launched with sglang"),
    ],
)  # fmt: skip
def test_bad_requests_are_one_line_errors(
    extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = refusal(capsys, *with_flags(SMALL, extra))
    assert says in text
    assert text.count("(expected") <= 1, text


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--prefill-only", "parallel.tp=3"], "recommend:--prefill-only: parallel.tp=3 leaves "
         "no layout of 8 GPUs"),
        (["--prefill-batch", "0"], "recommend:--prefill-batch: '0'"),
        (["--prefill-engine", "nosuch"], "--prefill-engine:nosuch: no engines entry"),
    ],
)  # fmt: skip
def test_bad_prefill_flags_are_named_as_given(
    extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --disagg the prefill pools are searched with the prefill flags: an error in one
    names that flag and this command, not the search flag it stands for."""
    assert says in refusal(capsys, *SMALL, "--disagg", *extra)
