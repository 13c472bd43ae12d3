"""Launch configurations (issue 24, item 4): a priced deployment as its engine's command line.

Every emitted option is checked here against the release's documented option list read from
its file (specs/engines/launch/), independently of the emitter's own check; the layout maps
onto each engine's flags as its docs define them; values come from the engine profile the
point was priced with; layouts an engine cannot run as priced are refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import tomllib
from typing import Any

import pytest

from stepwall.apps import launch
from stepwall.cli import main
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError
from stepwall.plugin import registry as registries
from stepwall.spec.validation import load_scenario
from stepwall.testing import refusal

MODEL = "deepseek-v3-fp8"
PROFILE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
LAYOUTS = [  # (tp, ep, users, decoding sets)
    (8, 1, 64, []),
    (1, 8, 512, []),
    (8, 1, 32, ["decoding.kind=mtp", "decoding.drafts=2", "decoding.acceptance=0.8"]),
]


def _profile(engine: str) -> dict[str, Any]:
    return tomllib.loads((catalog_root() / "engines" / f"{engine}.toml").read_text())


def _documented(launcher: str) -> dict[str, Any]:
    version = _profile(PROFILE[launcher])["version"]
    path = catalog_root() / "engines" / "launch" / f"{launcher}-{version}.toml"
    return tomllib.loads(path.read_text())


def _launch(launcher: str, tp: int, ep: int, users: int, extra: list[str]) -> launch.Launch:
    ref = f"model={MODEL},hardware=h200,cluster=hgx-h200-ib,engine={PROFILE[launcher]}"
    sets = ["workload.kind=serving", "workload.input_tokens=1024", "workload.output_tokens=1024",
            f"parallel.tp={tp}", f"parallel.ep={ep}",
            f"workload.concurrency={users}", *extra]  # fmt: skip
    sc = load_scenario(ref, registries.default().kinds, sets)
    return launch.launch(sc, launcher)


def _flags(command: str) -> dict[str, str | bool]:
    words = shlex.split(command)
    out: dict[str, str | bool] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            out[w] = True if (not nxt or nxt.startswith("--")) else nxt
    return out


def _yaml_keys(text: str) -> dict[str, str]:
    """Dotted keys of a two-space-indented YAML mapping of scalars, with their values."""
    out, path = {}, []
    for line in text.splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        key, _, value = line.strip().partition(":")
        path = [*path[:depth], key]
        if value.strip():
            out[".".join(path)] = value.strip()
    return out


@pytest.mark.parametrize("launcher", sorted(PROFILE))
@pytest.mark.parametrize(("tp", "ep", "users", "extra"), LAYOUTS)
def test_every_emitted_option_is_documented(launcher, tp, ep, users, extra) -> None:
    lau = _launch(launcher, tp, ep, users, extra)
    doc = _documented(launcher)
    for flag in _flags(lau.commands[0]):
        assert flag in doc["options"], (launcher, flag)
    for body in lau.files.values():
        for key in _yaml_keys(body):
            assert key in doc["yaml"], (launcher, key)


def test_sglang_lays_a_dep8_replica_out_as_priced() -> None:
    """Attention data-parallel over 8 groups of one GPU, experts over 8: --tp-size 8 --dp-size
    8 --enable-dp-attention --ep-size 8; the replica's 512 users; the profile's chunk."""
    f = _flags(_launch("sglang", 1, 8, 512, []).commands[0])
    assert (f["--tp-size"], f["--dp-size"], f["--ep-size"]) == ("8", "8", "8")
    assert f["--enable-dp-attention"] is True and f["--max-running-requests"] == "512"
    assert f["--chunked-prefill-size"] == str(_profile("sglang")["prefill_chunk"])
    assert f["--mem-fraction-static"] == f"{_profile('sglang')['memory_fraction']:g}"


def test_vllm_tp8_and_dep8() -> None:
    tp8 = _flags(_launch("vllm", 8, 1, 64, []).commands[0])
    assert tp8["--tensor-parallel-size"] == "8" and "--enable-expert-parallel" not in tp8
    assert tp8["--max-num-seqs"] == "64"
    dep8 = _flags(_launch("vllm", 1, 8, 512, []).commands[0])
    assert dep8["--data-parallel-size"] == "8" and dep8["--enable-expert-parallel"] is True
    assert dep8["--max-num-seqs"] == "64"  # per data-parallel engine: 512 over 8 ranks
    assert dep8["--max-num-batched-tokens"] == str(_profile("vllm")["prefill_chunk"])


def test_mtp_drafts_reach_each_engine() -> None:
    mtp = ["decoding.kind=mtp", "decoding.drafts=2", "decoding.acceptance=0.8"]
    v = _flags(_launch("vllm", 8, 1, 32, mtp).commands[0])
    assert json.loads(str(v["--speculative-config"]))["num_speculative_tokens"] == 2
    s = _flags(_launch("sglang", 8, 1, 32, mtp).commands[0])
    assert (s["--speculative-num-steps"], s["--speculative-num-draft-tokens"]) == ("2", "3")
    t = _launch("trtllm", 8, 1, 32, mtp)
    keys = _yaml_keys(next(iter(t.files.values())))
    assert keys["speculative_config.decoding_type"] == "MTP"
    assert keys["speculative_config.num_nextn_predict_layers"] == "2"


def test_trtllm_attention_dp_and_the_yaml() -> None:
    t = _launch("trtllm", 1, 8, 512, [])
    f = _flags(t.commands[0])
    assert (f["--tp_size"], f["--ep_size"], f["--max_batch_size"]) == ("8", "8", "64")
    keys = _yaml_keys(t.files[str(f["--extra_llm_api_options"])])
    assert keys["enable_attention_dp"] == "true"
    assert float(keys["kv_cache_config.free_gpu_memory_fraction"]) == pytest.approx(
        _profile("trtllm")["memory_fraction"]
    )


@pytest.mark.parametrize(
    ("launcher", "says"),
    [("vllm", "not the tp-split experts"), ("trtllm", "attention data-parallel over all")],
)
def test_layouts_an_engine_cannot_run_as_priced_are_refused(launcher, says) -> None:
    """tp 2 × ep 4: experts split over the 2 GPUs of each of 4 groups, as priced."""
    with pytest.raises(SpecError) as e:
        _launch(launcher, 2, 4, 64, [])
    assert says in e.value.problem


def test_a_polling_interval_reaches_sglang_and_is_refused_elsewhere() -> None:
    """engine.recv_interval = 30 (priced as the wait for SGLang's scheduler to poll) becomes
    --scheduler-recv-interval 30, a documented option; SGLang refuses it with attention DP and
    the other engines poll every iteration, so their launches are refused in one line."""
    flags = _flags(_launch("sglang", 8, 1, 64, ["engine.recv_interval=30"]).commands[0])
    assert flags["--scheduler-recv-interval"] == "30"
    assert "--scheduler-recv-interval" in _documented("sglang")["options"]
    assert "--scheduler-recv-interval" not in _flags(_launch("sglang", 8, 1, 64, []).commands[0])
    for launcher, tp, ep, says in [("sglang", 1, 8, "asserts not enable_dp_attention"),
                                   ("vllm", 8, 1, "every iteration"),
                                   ("trtllm", 8, 1, "every iteration")]:  # fmt: skip
        with pytest.raises(SpecError) as e:
            _launch(launcher, tp, ep, 64, ["engine.recv_interval=30"])
        assert says in e.value.problem, launcher


def test_a_scheduler_that_launches_no_iteration_ahead_has_no_launch() -> None:
    """Each launcher's release runs its overlap scheduler by default (engine.schedules_ahead
    = 1, the profiles' value); a deployment priced without it names no documented switch, so
    its launch is refused in one line for every engine."""
    for launcher, tp, ep in [("sglang", 8, 1), ("vllm", 8, 1), ("trtllm", 8, 1)]:
        assert _launch(launcher, tp, ep, 64, []).commands  # the profile's own value launches
        with pytest.raises(SpecError) as e:
            _launch(launcher, tp, ep, 64, ["engine.schedules_ahead=0"])
        assert "engine.schedules_ahead 0" in e.value.problem, launcher
        assert e.value.expected == "engine.schedules_ahead = 1", launcher


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("launcher", sorted(PROFILE))
def test_the_layouts_a_search_keeps_for_an_engine_are_those_it_launches(launcher) -> None:
    """`launch.runs_layouts` (what `--emit` searches) agrees with each emitter, layout by
    layout: every tp × ep of 8 GPUs it keeps launches, every one it drops is refused."""
    for tp, ep in [(tp, 8 // tp) for tp in (1, 2, 4, 8)] + [(2, 2), (4, 2)]:
        kept = bool(launch.runs_layouts(launcher, {"parallel.tp": tp, "parallel.ep": ep}))
        try:
            _launch(launcher, tp, ep, 8 * ep, [])
            launched = True
        except SpecError as e:
            assert f"tp {tp} × ep {ep}" in e.problem
            launched = False
        assert kept == launched, (tp, ep)


SEARCH = ["search", MODEL, "--hardware", "h200", "--cluster", "hgx-h200-ib", "--gpus", "8",
          "--batch", "8,64", "-q"]  # fmt: skip


def test_search_emits_the_best_points_launch_and_it_reproduces_the_layout() -> None:
    code, out, err = _cli([*SEARCH, "--engine", "sglang", "--at", "tokens_per_s_per_user>=20",
                           "--emit", "sglang", "--json"])  # fmt: skip
    assert code == 0, err
    option = json.loads(out)["targets"][0]["options"][0]
    cfg, lau = option["point"]["config"], option["launch"]
    f = _flags(lau["commands"][0])
    assert int(str(f["--tp-size"])) == cfg["tp"] * cfg["ep"]
    assert lau["version"] == _profile("sglang")["version"]


def test_search_with_emit_keeps_to_the_layouts_the_engine_launches() -> None:
    """Without --emit, the best TensorRT-LLM point at this target is a tp × ep mix that
    TensorRT-LLM cannot launch as priced; with --emit trtllm the search keeps to the layouts
    it launches, so the best point has a launch and no frontier point mixes tp and ep."""
    ask = ["search", MODEL, "--hardware", "b200", "--cluster", "hgx-b200-ib", "--gpus", "8",
           "--batch", "4,6,8", "-q", "--engine", "trtllm", "--at", "tokens_per_s_per_user>=50",
           "--json"]  # fmt: skip
    code, out, err = _cli(ask)
    assert code == 0, err
    free = json.loads(out)["targets"][0]["options"][0]["point"]["config"]
    assert free["tp"] > 1 and free["ep"] > 1  # the case this test is about
    code, out, err = _cli([*ask, "--emit", "trtllm"])
    assert code == 0, err
    doc = json.loads(out)
    option = doc["targets"][0]["options"][0]
    assert "commands" in option["launch"], option["launch"]
    assert min(option["point"]["config"]["tp"], option["point"]["config"]["ep"]) == 1
    assert all(min(p["config"]["tp"], p["config"]["ep"]) == 1 for p in doc["frontier"])


def test_recommend_with_emit_sizes_only_layouts_the_engine_launches() -> None:
    """Sized for TensorRT-LLM, the runners-up include tp × ep mixes; with --emit trtllm every
    candidate is a layout it launches as priced, each with its launch."""
    ask = ["recommend", MODEL, "--rate", "10", "--hardware", "b200", "--cluster", "hgx-b200-ib",
           "--gpus", "8", "--batch", "4,6,8", "--engine", "trtllm", "--keep", "5", "--json",
           "-q"]  # fmt: skip
    code, out, err = _cli(ask)
    assert code == 0, err
    mixes = [c["config"] for c in json.loads(out)["candidates"]]
    assert any(c["tp"] > 1 and c["ep"] > 1 for c in mixes)  # the case this test is about
    code, out, err = _cli([*ask, "--emit", "trtllm"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["candidates"]
    assert all(min(c["config"]["tp"], c["config"]["ep"]) == 1 for c in doc["candidates"])
    assert all("commands" in c["launch"] for c in doc["candidates"]), doc["candidates"]


def test_recommend_emits_each_candidates_launch() -> None:
    code, out, err = _cli(["recommend", MODEL, "--rate", "10", "--hardware", "h200",
                           "--cluster", "hgx-h200-ib", "--gpus", "8", "--batch", "8,64",
                           "--engine", "vllm", "--emit", "vllm", "--keep", "3", "-q"])  # fmt: skip
    assert code == 0, err
    assert f"launch (vllm {_profile('vllm')['version']}):" in out and "vllm serve" in out


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--engine", "trtllm", "--at", "tokens_per_s_per_user>=20", "--emit", "vllm"],
         "another engine than the one priced"),
        (["--engine", "vllm", "--emit", "vllm"], "--at"),
        (["--engine", "trtllm", "--only", "parallel.tp=2", "--only", "parallel.ep=4",
          "--at", "tokens_per_s_per_user>=20", "--emit", "trtllm"],
         "search:--emit: trtllm launches none of the layouts searched"),
    ],
)  # fmt: skip
def test_bad_emits_are_one_line_errors(extra, says, capsys) -> None:
    assert says in refusal(capsys, *SEARCH, *extra)
