"""A prefix-cache hit rate (issue 24, item 2): ``workload.prefix_hit`` = h of each prompt's
tokens are found cached, so (1 − h)·ISL are prefilled, attending to the h·ISL cached ones as
context; benchmark clients still count every input token. Checked on the steps' own terms."""

from __future__ import annotations

import pytest
import sympy as sp

from stepwall.model.compose import build_model
from stepwall.plugins.moe_transformer import stepwall_model_work
from stepwall.testing import refusal

SERVING = "llama70b-h200-serving"  # Llama 3.1 70B on H200, aggregated serving


def _model(h: float):
    return build_model(SERVING, [f"workload.prefix_hit={h}"])


def _step(model, name: str):
    return next(s for s in model.steps if s.name == name)


@pytest.mark.parametrize("h", [0.25, 0.5, 0.9])
def test_a_prompt_prefills_its_uncached_tokens_over_its_cached_context(h: float) -> None:
    model = _model(h)
    isl = float(model.substituted(model.scenario.params.workload.input_tokens))
    ttft = _step(model, "ttft")
    assert float(model.substituted(ttft.tokens_per_user)) == pytest.approx((1 - h) * isl)
    assert float(model.substituted(ttft.context)) == pytest.approx(h * isl)
    assert float(model.substituted(ttft.produced)) == pytest.approx(isl)
    serving = _step(model, "decode")
    # the mean prompt token prefilled sits after the cache and half the new tokens
    assert float(model.substituted(serving.prefill_context)) == pytest.approx(
        h * isl + (1 - h) * isl / 2
    )
    plain = _step(_model(0), "decode")
    assert float(model.substituted(serving.prefill_tokens)) == pytest.approx(
        (1 - h) * float(_model(0).substituted(plain.prefill_tokens)), rel=1e-6
    )


def test_only_the_uncached_tokens_go_through_the_gemms() -> None:
    """The prompt-alone step's projection FLOPs scale by 1 − h; its attention reads the whole
    prompt's KV, cached part included."""
    flops, reads = {}, {}
    for h in (0.0, 0.5):
        model = _model(h)
        ttft = _step(model, "ttft")
        work = stepwall_model_work(model.scenario, model.decoding, model.layout, ttft,
                                   model.engine)  # fmt: skip
        ops = {o.name: o for o in work.ops}
        flops[h] = float(model.substituted(ops["attention.projections"].flops))
        reads[h] = float(model.substituted(ops["attention.core"].bytes))
    assert flops[0.5] == pytest.approx(flops[0.0] / 2, rel=1e-6)
    assert reads[0.5] == pytest.approx(reads[0.0], rel=1e-6)


def test_first_tokens_come_sooner_and_clients_count_every_input_token() -> None:
    runs = {h: _model(h).evaluate() for h in (0.0, 0.5, 0.9)}
    assert runs[0.9]["ttft_s"] < runs[0.5]["ttft_s"] < runs[0.0]["ttft_s"]
    assert runs[0.9]["prefill_s"] < runs[0.5]["prefill_s"] < runs[0.0]["prefill_s"]
    model = _model(0.5)
    w = model.scenario.params.workload
    isl, osl = (float(model.substituted(x)) for x in (w.input_tokens, w.output_tokens))
    ev = runs[0.5]
    assert ev["total_tokens_per_s_per_gpu"] == pytest.approx(
        ev["tokens_per_s_per_gpu"] * (isl + osl) / osl, rel=1e-6
    )


def test_no_hit_is_the_model_without_the_field() -> None:
    a, b = build_model(SERVING), _model(0)
    assert [sp.srepr(t.expr) for t in a.terms] == [sp.srepr(t.expr) for t in b.terms]


@pytest.mark.parametrize("h", ["1", "-0.1"])
def test_a_hit_rate_outside_0_to_0_99_is_refused(h: str, capsys) -> None:
    assert "workload.prefix_hit" in refusal(capsys, "eval", SERVING, "--set",
                                            f"workload.prefix_hit={h}")  # fmt: skip
