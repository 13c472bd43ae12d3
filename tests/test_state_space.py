"""Nemotron-H / Nemotron-3 blocks (issue 23, item 2): Mamba-2 state-space layers, latent MoE,
ungated FFNs and layers without an FFN. Each on its own terms, against hand counts from the
config's own numbers (tests/data/hf/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8): a request's
Mamba-2 state is H·P·N per layer whatever the context; a latent MoE's experts are ℓ x I x 2
and its all-to-all carries ℓ, not h; a pattern of single-purpose blocks reduces over TP once
per block."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.model.compose import StepModel, build_model
from stepwall.testing import refusal

SUPER = "model=nemotron-3-super-120b-a12b-fp8,hardware=b200,cluster=hgx-b200-ib,engine=trtllm"
# the config's: 40 M, 8 *, 40 E blocks; hidden 4096; Mamba-2 128 heads of 64, 8 groups of 128
M_BLOCKS, A_BLOCKS, E_BLOCKS, H = 40, 8, 40, 4096
HEADS, HEAD_DIM, GROUPS, STATE_N, CHUNK = 128, 64, 8, 128, 128
EXPERTS, TOP_K, WIDTH, LATENT, SHARED_WIDTH = 512, 22, 2688, 1024, 5376
STATE_BYTES = 4.0  # mamba_ssm_cache_dtype float32
ONE_BYTE = [
    f"model.{b}=8 bit"
    for b in ("attention_bits", "expert_bits", "shared_expert_bits", "dense_bits", "embedding_bits")
]


def _model(users: int, context: int, *sets: str, tp: int = 1, ep: int = 1) -> StepModel:
    base = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", f"parallel.tp={tp}", f"parallel.ep={ep}"]  # fmt: skip
    return build_model(SUPER, [*base, *sets])


def _ev(users: int, context: int, *sets: str, tp: int = 1, ep: int = 1) -> dict[str, Any]:
    return _model(users, context, *sets, tp=tp, ep=ep).evaluate()


def test_mamba_state_is_h_p_n_per_layer_and_constant_in_context() -> None:
    """Only the 8 attention blocks' KV grows with the context (2 KV heads of 128, FP8); the
    40 Mamba-2 blocks hold H·P·N FP32 elements per request at any context."""
    users = 4
    short, long = _ev(users, 2048), _ev(users, 32768)
    kv = users * A_BLOCKS * (32768 - 2048) * 2 * 2 * 128 * 1.0
    assert long["kv_bytes_per_gpu"] - short["kv_bytes_per_gpu"] == pytest.approx(kv)
    only_state = _ev(users, 2048, f"model.linear_layers={M_BLOCKS + A_BLOCKS}")
    state = users * (M_BLOCKS + A_BLOCKS) * HEADS * HEAD_DIM * STATE_N * STATE_BYTES
    assert only_state["kv_bytes_per_gpu"] == pytest.approx(state)
    assert _ev(8, 1024)["ops"]["linear.state"] == _ev(8, 65536)["ops"]["linear.state"]


def test_mamba_block_weights_are_its_in_and_out_projections() -> None:
    """in_proj to z and x (2·H·P), B and C (2·G·N) and dt (H), out_proj (H·P·h): the blocks'
    weights at one byte each, as the difference from the same model with no Mamba block."""
    inner = HEADS * HEAD_DIM
    per_block = H * (2 * inner + 2 * GROUPS * STATE_N + HEADS) + inner * H
    with_mamba = _ev(1, 1024, *ONE_BYTE)
    none = _ev(1, 1024, *ONE_BYTE, "model.linear_layers=0")
    attention = 2 * H * 32 * 128 + 2 * H * 2 * 128  # q, o; k, v of the layer it becomes
    assert with_mamba["weight_bytes_per_gpu"] - none["weight_bytes_per_gpu"] == pytest.approx(
        M_BLOCKS * (per_block - attention)
    )


def test_mamba_prefill_works_in_chunks_of_the_configs_chunk_size() -> None:
    """A prompt token adds C·(N + P) multiply-adds per head to the decode update's 2·N·P
    (SSD's chunked form, C = chunk_size 128), in Mamba-2's own scan (op kind chunked_scan,
    its five kernels: no delta-rule kernel values, no chain); a decode token spends the 2·N·P
    alone."""
    model = build_model(SUPER, ['workload.kind="prefill"', "workload.concurrency=1",
                                "workload.input_tokens=1024", "parallel.tp=1",
                                "parallel.ep=1"])  # fmt: skip
    ev, value = model.evaluate(), {p.name: float(v) for p, v in model.values.items()}
    per_token = 2 * HEADS * (2 * STATE_N * HEAD_DIM + CHUNK * (STATE_N + HEAD_DIM))
    assert ev["ops"]["linear.chunks"]["flops"] == pytest.approx(M_BLOCKS * 1024 * per_token)
    floor = M_BLOCKS * 5 * value["hardware.kernel_floor"]
    assert ev["terms"]["linear.chunks.floor"] == pytest.approx(floor)
    assert ev["ops"]["linear.state"]["flops"] == 0
    decode = _ev(16, 1024)["ops"]["linear.state"]["flops"]
    assert decode == pytest.approx(M_BLOCKS * 16 * 2 * HEADS * 2 * STATE_N * HEAD_DIM)


def test_latent_experts_are_latent_wide_and_ungated() -> None:
    """Routed experts up and down (squared ReLU, no gate) in the latent: 2·ℓ·I each; the
    shared expert (two expert widths) at the hidden size; the projections around them
    2·h·ℓ per MoE block."""
    m = _model(1, 1024, *ONE_BYTE)
    got = {k: float(m.substituted(v)) for k, v in m.workload.weight_parts.items()}
    assert got["routed_experts"] == pytest.approx(E_BLOCKS * EXPERTS * 2 * LATENT * WIDTH)
    assert got["shared_experts"] == pytest.approx(E_BLOCKS * 2 * H * SHARED_WIDTH)
    assert got["latent_projections"] == pytest.approx(E_BLOCKS * 2 * H * LATENT)


def test_latent_dispatch_carries_the_latent_not_the_hidden_state() -> None:
    """Dispatch and combine sizes scale with ℓ: the same model with ℓ = h sends h/ℓ = 4 times
    the bytes per token."""

    def sizes(*sets: str) -> dict[str, float]:
        m = _model(64, 2048, *sets, ep=8)
        return {c.name: float(m.substituted(c.size)) for c in m.workload.collectives
                if c.name.startswith("comm.ep_")}  # fmt: skip

    latent, wide = sizes(), sizes(f"model.moe_latent={H}")
    for name in ("comm.ep_dispatch", "comm.ep_combine"):
        assert wide[name] == pytest.approx(latent[name] * H / LATENT)


def test_blocks_without_an_ffn_reduce_over_tp_once() -> None:
    """48 mixer blocks and 40 FFN blocks: 88 all-reduces per step under TP, not 2 x 48."""
    m = _model(8, 2048, tp=4, ep=4)
    (ar,) = [c for c in m.workload.collectives if c.name == "comm.tp_allreduce"]
    assert float(m.substituted(ar.count)) == M_BLOCKS + A_BLOCKS + E_BLOCKS


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("model.mixer_only_layers", "49", "mixer_only_layers"),
        ("model.ffn_matrices", "4", "ffn_matrices"),
        ("model.moe_latent", "-1", "moe_latent"),
        ("model.linear_chunk", "0", "linear_chunk"),
    ],
)
def test_impossible_blocks_are_refused(
    key: str, value: str, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal(capsys, "eval", SUPER, "--set", 'workload.kind="decode"', "--set",
                  "workload.concurrency=1", "--set", "workload.context=1024", "--set",
                  f"{key}={value}")  # fmt: skip
    assert field in err
