"""A GEMM's k-loop: each output tile reduces over k in a serial loop, which no width of the GPU
hides at small M, so where a precision's roof states ``gemm_k_latency`` τ_k a GEMM op's roof
has a third side, K·τ_k, for K the reduction lengths summed over its kernels (`Op.chain`).
Each op's K is written out here from the model's own dimensions (DeepSeek-V3's config), and
the term is checked against its three sides computed from the spec's values."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.cli import main
from stepwall.core.terms import Op
from stepwall.model.compose import build_model
from stepwall.plugins.moe_transformer.attention import Attention, add_attention
from stepwall.plugins.moe_transformer.dense import add_dense
from stepwall.plugins.moe_transformer.linear import add_linear
from stepwall.plugins.moe_transformer.moe import add_moe
from stepwall.plugins.moe_transformer.work import Pass

# DeepSeek-V3's config.json: hidden, q_lora_rank, kv_lora_rank, qk_nope_head_dim, v_head_dim,
# heads, dense intermediate, expert intermediate, layers (3 dense, 58 MoE)
H, R_Q, R_KV, D_NOPE, D_V, HEADS, I_DENSE, I_EXPERT, LAYERS, DENSE = (
    7168, 1536, 512, 128, 128, 128, 18432, 2048, 61, 3)  # fmt: skip
DSV3 = "model=deepseek-v3-fp8,hardware=b200,cluster=hgx-b200-ib,engine=trtllm"


def _ops(spec: str, *sets: str) -> tuple[Any, dict[str, Op]]:
    """The model and its GEMM ops (by name) for one decode step of ``spec``."""
    model = build_model(spec, ['workload.kind="decode"', "workload.context=1024", *sets])
    p = Pass(model.scenario, model.layout, model.steps[0], model.engine)
    add_attention(p, Attention.of(p))
    add_dense(p)
    if model.scenario.params.model.n_experts != 0:
        add_moe(p)
    else:
        add_linear(p)
    return model, {o.name: o for o in p.ops if o.kind == "gemm"}


@pytest.mark.parametrize("tp", [1, 8])
def test_each_gemm_op_walks_the_k_of_its_kernels(tp: int) -> None:
    """MLA's five GEMMs reduce over h (fused q_a/kv_a), r_q (q_b), d_nope and r_kv (the absorbed
    key and value up-projections) and the rank's heads' d_v (o); an FFN over h (gate-up) and
    its rank's columns of the intermediate (down); the router and the LM head over h."""
    model, ops = _ops(DSV3, f"parallel.tp={tp}", "workload.concurrency=1")
    k = {name: float(model.substituted(op.chain)) for name, op in ops.items()}
    assert k["attention.projections"] == LAYERS * (H + R_Q + D_NOPE + R_KV + HEADS // tp * D_V)
    assert k["dense.ffn"] == DENSE * (H + I_DENSE // tp)
    assert k["moe.shared_experts"] == (LAYERS - DENSE) * (H + I_EXPERT // tp)
    assert k["moe.router"] == (LAYERS - DENSE) * H
    assert k["lm_head"] == H


def test_gqa_and_linear_layers_walk_their_projections_k() -> None:
    """A GQA layer reduces over h (fused qkv) and its rank's heads' d_h (o); a Gated DeltaNet
    layer over h (in_proj) and its rank's value heads' d_v (out_proj): Qwen3.5-397B's config,
    15 GQA layers of 32 heads of 256 and 45 linear ones of 64 value heads of 128, at TP-8."""
    qwen = "model=qwen3.5-397b-a17b,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
    model, ops = _ops(qwen, "parallel.tp=8", "workload.concurrency=1")
    p = Pass(model.scenario, model.layout, model.steps[0], model.engine)
    add_linear(p)
    linear = next(o for o in p.ops if o.name == "linear.projections")
    assert float(model.substituted(ops["attention.projections"].chain)) == 15 * (4096 + 4 * 256)
    assert float(model.substituted(linear.chain)) == 45 * (4096 + 8 * 128)


def _sides(model: Any, op: Op) -> tuple[float, float, float]:
    """An op's streaming, math (at one row: twice its plateau time) and k-loop times at the
    spec's values."""
    value = {p.name: float(v) for p, v in model.values.items()}
    at = f"hardware.{op.precision}"
    streaming = float(model.substituted(op.bytes)) / (
        value["hardware.hbm_bandwidth"] * value["hardware.hbm_efficiency"])  # fmt: skip
    math = (
        2 * float(model.substituted(op.flops)) / (value[f"{at}.flops"] * value[f"{at}.efficiency"])
    )
    return streaming, math, float(model.substituted(op.chain)) * value[f"{at}.gemm_k_latency"]


def test_a_gemm_is_the_slowest_of_its_streaming_math_and_k_loop() -> None:
    """At one user the attention projections of DeepSeek-V3 at TP-8 on B200 are bound by their
    k-loops: the term is max(bytes/(B·η), FLOPs·2/(F·η_p), K·τ_k) at the spec's values, and the
    k side is the largest, so without it the term would be shorter."""
    model, ops = _ops(DSV3, "parallel.tp=8", "workload.concurrency=1")
    streaming, math, loops = _sides(model, ops["attention.projections"])
    term = model.evaluate()["terms"]["attention.projections"]
    assert term == pytest.approx(max(streaming, math, loops), rel=1e-4)
    assert loops > 1.2 * max(streaming, math)


def test_without_a_k_latency_a_gemm_keeps_its_two_sided_roof() -> None:
    """A roof that states τ_k = 0 (as one that states none) prices no k-loop: the same op is
    then max(streaming, math)."""
    model, ops = _ops(DSV3, "parallel.tp=8", "workload.concurrency=1",
                      'hardware.fp8.gemm_k_latency="0 ns"')  # fmt: skip
    streaming, math, loops = _sides(model, ops["attention.projections"])
    assert loops == 0
    term = model.evaluate()["terms"]["attention.projections"]
    assert term == pytest.approx(max(streaming, math), rel=1e-4)


def test_a_negative_k_latency_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "dsv3-b200-tp8-mtp", "--set", 'hardware.fp8.gemm_k_latency="-1 ns"'])
    err = capsys.readouterr().err
    assert code == 2
    assert "hardware.fp8.gemm_k_latency" in err and len(err.strip().splitlines()) == 1
