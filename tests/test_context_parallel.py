"""Prefill context parallelism (issue 23, item 2): ``parallel.cp`` = c splits a prompt
prefilled alone over c attention ranks of its replica (SGLang's prefill CP).

On its own terms: each rank computes 1/c of the prompt's queries (the zigzag split gives each
the same causal work) while the experts' work, spread over EP already, is unchanged; the KV
gather carries the whole prompt's cache layer by layer (the hand formula for MLA from
DeepSeek-V3's config); the prefill capacity a prompt holds is its time on all c ranks; and
what cannot be split is refused."""

from __future__ import annotations

from typing import Any

import pytest
import sympy as sp

from stepwall.core.terms import Layout, Step
from stepwall.model.compose import build_model
from stepwall.model.queueing import prefill_service
from stepwall.plugins.moe_transformer import stepwall_model_work
from stepwall.testing import refusal

DSV3 = "dsv3-h200-adp-ep8"  # DeepSeek-V3 on 8 H200, tp 1, ep 8 (attention data-parallel)
# DeepSeek-V3's config.json: kv_lora_rank 512, qk_rope_head_dim 64, 61 layers; BF16 KV here
KV_LORA, ROPE, LAYERS, KV_BYTES = 512, 64, 61, 2
ISL = 32768
SETS = [f"workload.input_tokens={ISL}", "workload.concurrency=64"]


def _ttft_work(cp: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The model, and its prompt-alone step's ops and collectives by name, evaluated."""
    model = build_model(DSV3, [*SETS, f"parallel.cp={cp}"])
    step = next(s for s in model.steps if s.name == "ttft")
    work = stepwall_model_work(model.scenario, model.decoding, model.layout, step, model.engine)
    ops = {o.name: o for o in work.ops}
    collectives = {c.name: c for c in work.collectives}
    return model, ops, collectives


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_each_rank_computes_its_share_of_the_queries(cp: int) -> None:
    one, ops1, _ = _ttft_work(1)
    many, ops, _ = _ttft_work(cp)

    def flops(m: Any, o: dict[str, Any], name: str) -> float:
        return float(m.substituted(o[name].flops))

    for name in ("attention.core", "attention.projections", "dense.ffn"):
        assert flops(many, ops, name) == pytest.approx(flops(one, ops1, name) / cp, rel=1e-12)
    # the routed experts see the replica's tokens, spread over the EP ranks either way
    assert flops(many, ops, "moe.routed_experts") == pytest.approx(
        flops(one, ops1, "moe.routed_experts"), rel=1e-12
    )


@pytest.mark.parametrize("cp", [2, 8])
def test_the_gather_carries_the_prompts_cache_a_layer_at_a_time(cp: int) -> None:
    model, _, collectives = _ttft_work(cp)
    gather = collectives["comm.cp_kv_gather"]
    assert gather.op == "all_to_all" and float(model.substituted(gather.group)) == cp
    assert float(model.substituted(gather.count)) == LAYERS
    # (d_c + d_r) latent entries per token per layer, the whole prompt, on the one TP rank
    assert float(model.substituted(gather.size)) == ISL * (KV_LORA + ROPE) * KV_BYTES


def test_no_split_no_gather_and_a_faster_first_token() -> None:
    _, _, collectives = _ttft_work(1)
    assert "comm.cp_kv_gather" not in collectives
    alone = {cp: build_model(DSV3, [*SETS, f"parallel.cp={cp}"]).evaluate()["prefill_s"]
             for cp in (1, 2, 8)}  # fmt: skip
    assert alone[8] < alone[2] < alone[1]


def test_a_split_prompt_holds_the_prefill_capacity_of_all_its_ranks() -> None:
    """Chunked serving: a prompt holds max(ISL·t/(chunk·ranks), cp·t_alone/ranks) of the
    prefill capacity: split over cp ranks, it takes each of them for its time alone."""
    t, alone, ranks, cp = sp.symbols("t t_alone ranks cp", positive=True)
    step = Step("decode", sp.Integer(64), sp.Integer(8), sp.S.One, sp.Integer(100), sp.S.One,
                prefill_tokens=sp.Integer(10))  # fmt: skip
    ttft = Step("ttft", sp.S.One, 1 / cp, sp.Integer(1000), sp.S.Zero, sp.Integer(1000))
    engine = build_model(DSV3).engine
    layout = Layout(sp.S.One, ranks, sp.S.One, ranks, sp.Integer(64), 64 / ranks, cp=cp,
                    context_parallel=True)  # fmt: skip
    service = prefill_service(step, ttft, t, alone, engine, layout)
    chunk = engine.prefill_chunk
    want = sp.Max(1000 * t / (chunk * ranks), alone * cp / ranks)
    values = {t: 0.05, alone: 0.3, ranks: 8, cp: 4, chunk: 2048}
    assert float(service.occupancy.subs(values)) == pytest.approx(float(want.subs(values)))


@pytest.mark.parametrize(
    ("model", "sets", "needle"),
    [
        (DSV3, ["parallel.cp=16"], "cp ≤ ep"),
        (DSV3, ["parallel.cp=0"], "parallel.cp"),
        ("dsv3-h200-tp8", ["parallel.cp=2"], "cp ≤ ep"),
        ("model=qwen3.5-397b-a17b,hardware=b200,cluster=hgx-b200-ib",
         ["workload.concurrency=64", "workload.context=2048", "parallel.ep=8",
          "parallel.cp=2"], "linear-attention"),
    ],
)  # fmt: skip
def test_what_cannot_be_split_is_refused(
    model: str, sets: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """More ranks than the replica's attention ranks, none, a TP-only replica (one attention
    rank), and layers whose recurrent state is handed on, not gathered."""
    argv = ["eval", model]
    for s in sets:
        argv += ["--set", s]
    assert needle in refusal(capsys, *argv)
