"""The seed's figures (BRIEF §4, S1–S16) reproduced by evaluating shipped scenarios.

Every expected number here is the seed's value from the BRIEF, with the BRIEF's tolerance;
the measured side always comes out of the framework (specs -> plugins -> terms).
"""

from __future__ import annotations

import json

import pytest
import sympy as sp

from stepwall.cli import main
from stepwall.core.errors import SpecError
from stepwall.core.laws import ffn_params
from stepwall.model.compose import StepModel, build_model


def close(value: float, seed: float, tol: float) -> bool:
    return abs(value - seed) <= tol * abs(seed)


def op_bytes(model: StepModel, *names: str) -> float:
    """Bytes per GPU per step of the named ops, from their expressions and the spec values."""
    total = sp.Add(*(op.bytes for op in model.workload.ops if op.name in names))
    return float(model.substituted(total))


def group(model: StepModel, *groups: str) -> float:
    times = model.group_times()
    return sum(times.get(g, 0.0) for g in groups)


def term(model: StepModel, name: str) -> float:
    return float(model.evaluate()["terms"][name])


@pytest.fixture(scope="module")
def tp8() -> StepModel:
    return build_model("k26-b300-tp8-ddtree")


@pytest.fixture(scope="module")
def tp72() -> StepModel:
    return build_model("k26-gb300nvl72-tp72-ddtree")


@pytest.fixture(scope="module")
def one_gpu() -> StepModel:
    return build_model("k26-b300-tp1-moe")


# --- S1–S4: sizes and capacity


def test_s1_bytes_per_routed_expert(one_gpu: StepModel) -> None:
    p = one_gpu.scenario.params.model
    per_expert = float(
        one_gpu.substituted(ffn_params(p.hidden, p.expert_intermediate) * p.expert_bits)
    )
    assert close(per_expert, 22.02e6, 0.01)


def test_s2_routed_expert_weights(one_gpu: StepModel) -> None:
    m = one_gpu.scenario.model
    p = one_gpu.scenario.params.model
    routed = (m.n_layers - m.n_dense_layers) * m.n_experts
    per_expert = ffn_params(p.hidden, p.expert_intermediate) * p.expert_bits
    assert close(routed * float(one_gpu.substituted(per_expert)), 507e9, 0.01)


def test_s3_total_weights_from_the_architecture(one_gpu: StepModel) -> None:
    """Total weights at TP-1 against a hand count of BRIEF §3's config (INT4 experts, the
    shared expert at 4 bit like the seed, BF16 elsewhere)."""
    expert = 3 * 7168 * 2048 * 0.5
    mla = 7168 * 1536 + 1536 * 64 * 192 + 7168 * 576 + 512 * 64 * 256 + 64 * 128 * 7168
    hand = (
        60 * 385 * expert  # routed + shared
        + 61 * mla * 2
        + 3 * 7168 * 18432 * 2  # one dense layer
        + 2 * 163840 * 7168 * 2  # embeddings and LM head
        + 60 * 7168 * 384 * 2  # routers
    )
    weights = float(one_gpu.evaluate()["weight_bytes_per_gpu"])
    assert close(weights, hand, 0.001)


@pytest.mark.xfail(
    strict=True,
    reason="the seed's ~548 GB is not reachable from the BRIEF §3 "
    "architecture: every component counted gives 527 GB (−3.8%); see docs/physics.md",
)
def test_s3_total_weights_seed_figure(one_gpu: StepModel) -> None:
    assert close(float(one_gpu.evaluate()["weight_bytes_per_gpu"]), 548e9, 0.03)


def test_s4_fits_on_eight_b300(tp8: StepModel) -> None:
    ev = tp8.evaluate()
    assert ev["gpus"] == 8
    assert ev["memory_bytes_per_gpu"] <= ev["memory_capacity_per_gpu"]
    assert close(float(ev["memory_capacity_per_gpu"]), 275e9, 0.02)


# --- S5–S9: one-GPU view and the calibration point


def test_s5_weights_read_per_token(one_gpu: StepModel) -> None:
    per_token = op_bytes(one_gpu, "moe.routed_experts", "moe.shared_experts")
    layers = one_gpu.scenario.model.n_layers - one_gpu.scenario.model.n_dense_layers
    assert close(per_token / layers, 198e6, 0.02)
    assert close(per_token, 11.9e9, 0.02)


def test_s6_bandwidth_ceiling_one_b300() -> None:
    ideal = build_model("k26-b300-tp1-moe", ["engine.memory_efficiency=1.0"])
    moe_seconds = term(ideal, "moe.routed_experts") + term(ideal, "moe.shared_experts")
    assert close(1 / moe_seconds, 660, 0.03)


def test_s7_calibration_point(tp8: StepModel) -> None:
    assert close(float(tp8.evaluate()["tokens_per_s_per_user"]), 303, 0.02)


def test_s7_via_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "k26-b300-tp8-ddtree", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert close(out["tokens_per_s_per_user"], 303, 0.02)
    assert {t["name"] for t in out["terms"]} >= {"moe.routed_experts", "spec.draft"}


def test_s8_step_decomposition(tp8: StepModel) -> None:
    moe = group(tp8, "moe")
    base = group(tp8, "attention", "dense", "comm", "base")
    spec = group(tp8, "spec")
    assert close(moe, 2.0e-3, 0.05)
    assert close(base, 7.3e-3, 0.05)
    assert close(spec, 5.3e-3, 0.05)
    assert close((base + spec) / (moe + base + spec), 0.85, 0.05)


@pytest.mark.parametrize(("scenario", "tp", "seed_ms"), [
    ("k26-b300-tp8-ddtree", 1, 15.9),
    ("k26-b300-tp8-ddtree", 8, 1.99),
    ("k26-gb300nvl72-tp72-ddtree", 72, 0.22),
])  # fmt: skip
def test_s9_moe_time_at_m9(scenario: str, tp: int, seed_ms: float) -> None:
    m = build_model(scenario, [f"parallel.tp={tp}"])
    assert m.decoding.verify_tokens == m.scenario.params.decoding.budget + 1
    assert float(m.substituted(m.decoding.verify_tokens)) == 9
    assert close(group(m, "moe"), seed_ms * 1e-3, 0.05)


# --- S10–S13: wide TP on NVL72


def test_s10_tp72_active_moe_bytes_per_gpu_per_layer() -> None:
    m = build_model("k26-b300-tp1-moe", ["parallel.tp=72"])
    layers = m.scenario.model.n_layers - m.scenario.model.n_dense_layers
    per_layer = op_bytes(m, "moe.routed_experts", "moe.shared_experts") / layers
    assert close(per_layer, 2.75e6, 0.03)


@pytest.mark.parametrize(("budget", "seed_ms"), [(8, 0.58), (32, 0.85)])
def test_s11_tp72_allreduce_per_step(budget: int, seed_ms: float) -> None:
    m = build_model("k26-gb300nvl72-tp72-ddtree", [f"decoding.budget={budget}"])
    allreduces = float(m.substituted(m.workload.collectives[-1].count))
    assert allreduces in (120, 122)  # 2 per MoE layer (seed) or per layer (here, 61 layers)
    assert close(term(m, "comm.tp_allreduce"), seed_ms * 1e-3, 0.12)


def test_s12_tp8_to_tp72(tp8: StepModel, tp72: StepModel) -> None:
    t8 = float(tp8.evaluate()["step_time_s"])
    t72 = float(tp72.evaluate()["step_time_s"])
    assert close(t8, 14.5e-3, 0.05)
    assert close(t72, 12.7e-3, 0.05)
    assert close(t8 / t72, 1.14, 0.05)


@pytest.mark.parametrize("base", ["k26-b300-tp8-ddtree", "k26-b300-tp8-ddtree-native"])
def test_s13_tp_on_nvl72_monotone_and_gain_in_seed_range(base: str) -> None:
    times = []
    for n in (8, 16, 36, 72):
        m = build_model("k26-gb300nvl72-tp72-ddtree", [f"parallel.tp={n}"]
                        + (["engine.native=0.6"] if base.endswith("native") else []))  # fmt: skip
        times.append(float(m.evaluate()["step_time_s"]))
    assert times == sorted(times, reverse=True)
    gain = times[0] / times[-1] - 1
    assert 0.13 <= gain <= 0.34


# --- S14–S16: the EP plateau and the native engine


def test_s14_ep8_all_expert_plateau_moe_time() -> None:
    m = build_model("k26-gb300nvl72-ep8-plateau", ["workload.concurrency=512"])
    assert close(term(m, "moe.routed_experts"), 7.92e-3, 0.02)


@pytest.mark.parametrize(("scenario", "seed"), [
    ("k26-gb300nvl72-ep8-plateau", 11e3),
    ("k26-gb300nvl72-ep72-plateau", 39e3),
])  # fmt: skip
def test_s15_ep_plateau_aggregate(scenario: str, seed: float) -> None:
    m = build_model(scenario)
    ev = m.evaluate()
    accepted = float(m.substituted(m.layout.users * m.decoding.accepted_tokens))
    assert close(accepted, 110, 0.05)
    assert close(float(ev["tokens_per_s"]), seed, 0.10)


def test_s16_native_engine_ratio(tp8: StepModel) -> None:
    native = build_model("k26-b300-tp8-ddtree-native")
    ratio = float(native.evaluate()["tokens_per_s"]) / float(tp8.evaluate()["tokens_per_s"])
    assert close(ratio, 1.43, 0.05)


# --- better than the seed: context, topology, clear errors


def test_doubling_context_raises_attention_by_the_mla_factor(tp8: StepModel) -> None:
    """MLA reads (r_kv + d_rope) latent values per token per layer, for the S cached tokens
    and the M new ones, so the KV term is linear in S + M, and the attention group grows by
    (W + K2)/(W + K)."""
    doubled = build_model("k26-b300-tp8-ddtree", ["workload.context=16384"])
    kv, kv2 = term(tp8, "attention.core"), term(doubled, "attention.core")
    assert kv2 / kv == pytest.approx((16384 + 9) / (8192 + 9), rel=1e-9)
    bandwidth = tp8.scenario.value("hardware.hbm_bandwidth")
    efficiency = tp8.scenario.value("engine.memory_efficiency")  # the seed's engine: one η
    # (S + M)·L·(r_kv + d_rope)·2 B / (B·η): one user, the cache in BF16
    by_hand = (8192 + 9) * 61 * (512 + 64) * 2 / (bandwidth * efficiency)
    assert kv == pytest.approx(by_hand, rel=1e-9)
    kv, kv2 = kv + term(tp8, "attention.core.floor"), kv2 + term(doubled, "attention.core.floor")
    w = term(tp8, "attention.projections") + term(tp8, "attention.projections.floor")
    factor = group(doubled, "attention") / group(tp8, "attention")
    assert factor == pytest.approx((w + kv2) / (w + kv), rel=1e-9)


def test_tp16_crosses_infiniband_on_hgx_but_not_on_nvl72() -> None:
    hgx8 = float(build_model("k26-b300-tp8-ddtree").evaluate()["step_time_s"])
    hgx16 = float(build_model("k26-b300-tp8-ddtree", ["parallel.tp=16"]).evaluate()["step_time_s"])
    nvl8 = float(
        build_model("k26-gb300nvl72-tp72-ddtree", ["parallel.tp=8"]).evaluate()["step_time_s"]
    )
    nvl16 = float(
        build_model("k26-gb300nvl72-tp72-ddtree", ["parallel.tp=16"]).evaluate()["step_time_s"]
    )
    assert hgx16 > hgx8
    assert nvl16 < nvl8


def test_more_gpus_than_the_cluster_is_an_error() -> None:
    m = build_model("k26-b300-tp8-ddtree", ["parallel.tp=8", "parallel.dp=10"])
    with pytest.raises(SpecError, match=r"parallel.tp: .* = 80 > .* = 72 \(tp·ep·dp GPUs"):
        m.check()


def test_a_degree_the_model_cannot_split_is_an_error() -> None:
    m = build_model("k26-gb300nvl72-ep72-plateau", ["parallel.ep=512", "cluster.nodes=128"])
    with pytest.raises(SpecError, match=r"parallel.ep: 512 > model.n_experts \+ .* = 432"):
        m.check()


def test_expert_imbalance_slows_the_ep_step() -> None:
    even = build_model("k26-gb300nvl72-ep8-plateau")
    hot = build_model("k26-gb300nvl72-ep8-plateau", ["parallel.imbalance=1.3"])
    assert term(hot, "moe.routed_experts") == pytest.approx(1.3 * term(even, "moe.routed_experts"))


def test_tp_times_ep_layout_pays_both_collectives() -> None:
    """TP-8 × EP-9 on one NVL72 domain: experts over 9 groups, each expert split 8 ways,
    attention data-parallel over the 9 groups; all-reduce and all-to-all both cost time."""
    m = build_model("k26-gb300nvl72-ep72", ["parallel.ep=9", "parallel.tp=8"])
    ev = m.evaluate()
    assert ev["gpus"] == 72
    assert ev["terms"]["comm.tp_allreduce"] > 0
    assert ev["terms"]["comm.ep_dispatch"] > 0
    pure_ep = build_model("k26-gb300nvl72-ep72").evaluate()
    assert pure_ep["terms"]["comm.tp_allreduce"] == 0
    # users per attention rank: ⌈110/9⌉ = 13 vs ⌈110/72⌉ = 2, so 6.5x the KV reads per GPU
    ratio = ev["ops"]["attention.core"]["bytes"] / pure_ep["ops"]["attention.core"]["bytes"]
    assert ratio == pytest.approx(13 / 2)


def test_data_parallel_replicas_multiply_aggregate_not_per_gpu() -> None:
    one = build_model("k26-b300-tp8-ddtree").evaluate()
    nine = build_model("k26-b300-tp8-ddtree", ["parallel.dp=9"]).evaluate()
    assert nine["tokens_per_s"] == pytest.approx(9 * one["tokens_per_s"])
    assert nine["tokens_per_s_per_gpu"] == pytest.approx(one["tokens_per_s_per_gpu"])
    assert nine["gpus"] == 72
