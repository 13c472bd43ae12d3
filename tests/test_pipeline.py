"""Pipeline parallelism (issue 23, item 2): p stages of consecutive layers, m micro-batches.

The schedule laws against a small discrete-event simulation of the same schedules written
here (a batch through an empty pipeline; micro-batches circling it in decode); the stage's
share of the model against the unstaged model's own numbers; and bad degrees refused."""

from __future__ import annotations

import contextlib
import heapq
import io
import json
import shlex
from typing import Any

import pytest

from stepwall.cli import main
from stepwall.core.laws import bubble_fraction, pipeline_fill, pipeline_iteration
from stepwall.model.compose import build_model
from stepwall.testing import refusal

LLAMA = "llama70b-fp8-h200-tp1"  # Llama 3.3 70B FP8 on one H200; 80 layers, untied embeddings


def _fill_makespan(p: int, m: int) -> float:
    """Simulate GPipe's forward schedule: micro-batch j enters stage i when stage i is free
    and the micro-batch has left stage i − 1; each stage slot takes 1."""
    free = [0.0] * p
    done = 0.0
    for _ in range(m):
        t = 0.0
        for i in range(p):
            start = max(t, free[i])
            t = free[i] = start + 1.0
        done = t
    return done


def _decode_period(p: int, m: int, rounds: int = 50) -> float:
    """Simulate m micro-batches circling p stages, each needing its previous token before
    its next pass (stage slots of 1, stages serve in arrival order): the steady time between
    one micro-batch's tokens."""
    ready = [(0.0, j) for j in range(m)]  # (time the micro-batch may enter stage 0, id)
    heapq.heapify(ready)
    free = [0.0] * p
    finished: dict[int, list[float]] = {j: [] for j in range(m)}
    while min(len(v) for v in finished.values()) < rounds:
        t, j = heapq.heappop(ready)
        for i in range(p):
            t = free[i] = max(t, free[i]) + 1.0
        finished[j].append(t)
        heapq.heappush(ready, (t, j))
    times = finished[0]
    return (times[-1] - times[rounds // 2]) / (len(times) - 1 - rounds // 2)


@pytest.mark.parametrize(("p", "m"), [(2, 1), (2, 4), (4, 4), (4, 8), (8, 3)])
def test_fill_is_the_simulated_makespan_and_its_bubble(p: int, m: int) -> None:
    """(m + p − 1) stage slots for m micro-batches; the idle share (p − 1)/(m + p − 1)."""
    makespan = _fill_makespan(p, m)
    assert float(pipeline_fill(p, m)) * m == pytest.approx(makespan)
    busy = p * m / (p * makespan)  # each stage works m of the makespan's slots
    assert float(bubble_fraction(p, m)) == pytest.approx(1 - busy)
    assert float(bubble_fraction(p, m)) == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize(("p", "m"), [(2, 1), (2, 2), (4, 2), (4, 4), (4, 6), (8, 3)])
def test_decode_iteration_is_the_simulated_period(p: int, m: int) -> None:
    """A micro-batch returns every max(m, p) stage slots: no bubble once m ≥ p."""
    assert float(pipeline_iteration(p, m)) * m == pytest.approx(_decode_period(p, m))


def _ev(*sets: str) -> dict[str, Any]:
    return build_model(LLAMA, list(sets)).evaluate()


def _terms(ev: dict[str, Any]) -> dict[str, float]:
    return {name: float(seconds) for name, seconds in ev["terms"].items()}


def test_a_stage_holds_its_layers_and_one_end_matrix() -> None:
    """Two stages of Llama's 80 layers: each GPU holds half of every layer's weights and of
    the cache, and of the embedding and LM head (one V x h matrix each) the one at its end."""
    one, two = _ev(), _ev("parallel.pp=2")
    m = build_model(LLAMA).scenario.model
    head = m.vocab * m.hidden * float(m.embedding_bits)
    body = one["weight_bytes_per_gpu"] - 2 * head
    assert two["weight_bytes_per_gpu"] == pytest.approx(body / 2 + head)
    assert two["kv_bytes_per_gpu"] == pytest.approx(one["kv_bytes_per_gpu"] / 2)
    assert two["gpus"] == 2 * one["gpus"]


def test_uneven_stages_are_priced_at_the_busiest() -> None:
    """Three stages of 80 layers: the busiest holds ⌈80/3⌉ = 27."""
    one, three = _ev(), _ev("parallel.pp=3", "parallel.microbatches=3")
    share = three["ops"]["attention.core"]["bytes"] / one["ops"]["attention.core"]["bytes"]
    assert share == pytest.approx(27 / 80)


def test_one_micro_batch_leaves_the_other_stage_idle() -> None:
    """m = 1 over p = 2: the step is twice the stage's own work, the bubble the half."""
    ev = _ev("parallel.pp=2", "parallel.microbatches=1")
    terms = _terms(ev)
    own = sum(v for k, v in terms.items() if not k.startswith(("pipeline.", "ttft.")))
    assert terms["pipeline.bubble"] == pytest.approx(own)
    assert ev["step_time_s"] == pytest.approx(2 * own)


def test_unset_micro_batches_are_the_stages() -> None:
    """Unset, m = p (a batch in flight per stage, as vLLM and SGLang run): no decode bubble,
    and the stage's weights streamed p times, as with m = p stated."""
    unset, stated = _ev("parallel.pp=4"), _ev("parallel.pp=4", "parallel.microbatches=4")
    assert _terms(unset)["pipeline.bubble"] == 0
    assert unset["step_time_s"] == pytest.approx(stated["step_time_s"], rel=1e-12)
    assert unset["ops"]["lm_head"]["bytes"] == pytest.approx(4 * _ev()["ops"]["lm_head"]["bytes"])


def test_micro_batches_reread_the_stage_weights() -> None:
    """m micro-batches each stream the stage's weights: the LM head (on the last stage, whole)
    is read m times."""
    one = _ev()["ops"]["lm_head"]["bytes"]
    assert _ev("parallel.pp=4", "parallel.microbatches=4")["ops"]["lm_head"]["bytes"] == (
        pytest.approx(4 * one)
    )


def test_time_to_first_token_fills_the_pipeline() -> None:
    """One prompt in m micro-batches through an empty pipeline: (m + p − 1)/m of the stage's
    own work on it, the prefill-alone time."""
    model = build_model(LLAMA, ["parallel.pp=4", "parallel.microbatches=2"])
    terms = {t.name: float(model.substituted(t.expr)) for t in model.ttft_terms}
    bubble = terms.pop("ttft.pipeline.bubble")
    own = sum(terms.values())
    assert bubble == pytest.approx(own * ((2 + 4 - 1) / 2 - 1))
    assert model.evaluate()["prefill_s"] == pytest.approx(own + bubble)


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["parallel.pp=0"], "parallel.pp"),
        (["parallel.microbatches=0"], "parallel.microbatches"),
        (["parallel.pp=200"], "tp·ep·pp·dp GPUs"),
        (["parallel.pp=2", "parallel.microbatches=300"], "at least one user"),
        (["parallel.pp=96", "parallel.microbatches=1"], "at least one layer"),
        (["parallel.pp=96"], "at least one user"),  # unset, m = p = 96 > 64 users
    ],
)
def test_impossible_pipelines_are_refused(
    sets: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Degrees below 1, more GPUs than the cluster, more micro-batches than an attention
    rank has users (64), more stages than layers (80, on a cluster of 16 nodes)."""
    argv = ["eval", LLAMA, "--set", "cluster.nodes=16"]
    for s in sets:
        argv += ["--set", s]
    assert needle in refusal(capsys, *argv)


def _cli(argv: list[str]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, err.getvalue()
    return dict(json.loads(out.getvalue()))


def test_a_search_over_stages_keeps_every_deployment_at_n_gpus() -> None:
    """``--vary parallel.pp=1,2,4`` on 8 GPUs: each stage count's layouts are tp·ep·dp·pp = 8,
    and a staged point reproduces through its own command."""
    doc = _cli(["search", "llama-3.1-70b", "--hardware", "h200", "--cluster", "hgx-h200-ib",
                "--gpus", "8", "--batch", "16,64,256", "--vary", "parallel.pp=1,2,4",
                "--json", "-q"])  # fmt: skip
    # layouts of 8, 4 and 2 GPUs per stage set (tp ≤ 8, then ep, dp): 10 + 6 + 3, × 3 batches
    assert doc["evaluated"] == (10 + 6 + 3) * 3
    assert {p["gpus"] for p in doc["frontier"]} == {8}
    staged = [p for p in doc["frontier"] if p["config"]["vary"]["parallel.pp"] > 1]
    assert staged, "no staged point on the frontier"
    for point in staged:
        cfg = point["config"]
        assert cfg["tp"] * cfg["ep"] * cfg["dp"] * cfg["vary"]["parallel.pp"] == 8
        again = _cli([*shlex.split(point["command"])[1:], "--json"])
        assert again["gpus"] == 8
        assert again["tokens_per_s_per_gpu"] == pytest.approx(point["tokens_per_s_per_gpu"],
                                                              rel=1e-12)  # fmt: skip


def test_stages_that_divide_no_size_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "llama-3.1-70b", "--hardware", "h200", "--cluster", "hgx-h200-ib",
            "--gpus", "8", "--vary", "parallel.pp=3"]  # fmt: skip
    assert "no variant has a layout of 8 GPUs" in refusal(capsys, *argv)
