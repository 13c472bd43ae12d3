"""Linear-attention (state-space) layers (issue 23, item 2): Gated DeltaNet as Qwen3.5 runs it
in 45 of its 60 layers. Each law on its own terms: the state a request holds is a d_k x d_v
matrix per value head, constant in the context; a decode token reads and writes it once and
spends 2·d_k·d_v multiply-adds per head on it; the layer's weights are its projections."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import attrs
import pytest
import sympy as sp

from stepwall.cli import main
from stepwall.model.compose import build_model
from stepwall.plugins.moe_transformer.linear import add_linear
from stepwall.plugins.moe_transformer.work import Pass

QWEN = "model=qwen3.5-397b-a17b,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
L, L_S, H_K, H_V, D_K, D_V, H = 60, 45, 16, 64, 128, 128, 4096  # the config's
STATE = 4.0  # bytes per state element (mamba_ssm_dtype float32)


def _ev(users: int, context: int, *sets: str, tp: int = 8) -> dict[str, Any]:
    base = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", f"parallel.tp={tp}"]  # fmt: skip
    return build_model(QWEN, [*base, *sets]).evaluate()


def test_state_is_constant_in_the_context() -> None:
    """Going from 2K to 32K cached tokens grows the cache by the 15 attention layers' KV
    only: 2·H_kv·d_h bytes per token per layer (GQA, 2 KV heads of 256, BF16; a KV head
    is whole on each of 8 ranks when there are fewer KV heads than ranks)."""
    users = 4
    grown = _ev(users, 32768)["kv_bytes_per_gpu"] - _ev(users, 2048)["kv_bytes_per_gpu"]
    kv_heads_per_rank = 1  # ⌈2/8⌉
    assert grown == pytest.approx(users * (L - L_S) * 30720 * 2 * kv_heads_per_rank * 256 * 2)


def test_resident_state_per_request() -> None:
    """With no attention layer left (every layer linear) the cache is the state alone:
    L_s · H_v/tp · d_k · d_v elements of 4 bytes per request."""
    users, tp = 4, 8
    ev = _ev(users, 8192, f"model.linear_layers={L}", tp=tp)
    assert ev["kv_bytes_per_gpu"] == pytest.approx(users * L * (H_V / tp) * D_K * D_V * STATE)


def test_decode_reads_and_writes_the_state_once() -> None:
    users, tp = 16, 8
    op = _ev(users, 8192, tp=tp)["ops"]["linear.state"]
    state = (H_V / tp) * D_K * D_V * STATE
    assert op["bytes"] == pytest.approx(2 * users * L_S * state)
    assert op["flops"] == pytest.approx(users * L_S * 2 * 2 * D_K * D_V * (H_V / tp))


def test_state_work_does_not_grow_with_the_context() -> None:
    short, long = _ev(8, 1024)["ops"]["linear.state"], _ev(8, 65536)["ops"]["linear.state"]
    assert short == long


GDN_TABLE = Path(__file__).parent / "data" / "gdn" / "h200-sglang-0.5.14-qwen35-tp8-generation.csv"


@pytest.mark.parametrize("row", list(csv.DictReader(GDN_TABLE.open())),
                         ids=lambda r: f"batch{r['batch_size']}")  # fmt: skip
def test_decode_recurrence_against_measured_kernels(row: dict[str, str]) -> None:
    """One layer's decode recurrence on H200 at TP-8 (FP32 state), priced with its floors,
    against SGLang 0.5.14's causal_conv1d_update + packed gated delta rule as aiconfigurator
    times them (tests/data/gdn/README.md). Those two are small kernels (1.5-5 µs alone, a
    third of an MLA decode kernel's floor), and the model's third, the gated norm, is untimed:
    the model may be up to one small kernel over the table, and within 10% under it."""
    users = int(row["batch_size"])
    ev = build_model(QWEN.replace("b200", "h200"), ['workload.kind="decode"',
                     f"workload.concurrency={users}", "workload.context=1024",
                     "parallel.tp=8"]).evaluate()  # fmt: skip
    per_layer = (ev["terms"]["linear.state"] + ev["terms"]["linear.state.floor"]) / L_S
    measured = (float(row["conv_ms"]) + float(row["recurrence_ms"])) * 1e-3
    assert 0.9 * measured <= per_layer <= 1.5 * measured


def _prefill(isl: int, gpu: str, *sets: str) -> tuple[dict[str, Any], dict[str, float]]:
    """A Qwen3.5 prompt of ``isl`` tokens prefilled alone on one TP-8 node of ``gpu``: its
    evaluation and the model's parameter values by name."""
    base = ['workload.kind="prefill"', "workload.concurrency=1", f"workload.input_tokens={isl}",
            "parallel.tp=8"]  # fmt: skip
    model = build_model(QWEN.replace("b200", gpu), [*base, *sets])
    return model.evaluate(), {p.name: float(v) for p, v in model.values.items()}


@pytest.mark.parametrize("gpu", ["h200", "b200"])
@pytest.mark.parametrize("isl", [100, 1024, 8192])
def test_a_prompt_walks_its_chunks_in_order(gpu: str, isl: int) -> None:
    """A prompt's linear layers take the chunked form: its tokens padded to whole chunks of
    C = 64 at the prompt's FLOPs per token (2·d_k·d_v + C·(d_k + d_v) multiply-adds per head)
    at the GPU's chunked-recurrence plateau, 8 pipeline kernels at their floor, and the ⌈I/C⌉
    chunks of every layer one after another at their step latency. The state's own op keeps
    no FLOPs, and its two kernels (conv, gated norm) per layer."""
    ev, value = _prefill(isl, gpu)
    peak, eta = value["hardware.bf16.flops"], value["hardware.bf16.chunk_recurrence_efficiency"]
    floor, step = value["hardware.bf16.chunk_recurrence_floor"], value[
        "hardware.bf16.chunk_recurrence_latency"]  # fmt: skip
    chunks, heads = -(-isl // 64), H_V / 8
    flops = L_S * chunks * 64 * heads * 2 * (2 * D_K * D_V + 64 * (D_K + D_V))
    assert ev["ops"]["linear.chunks"]["flops"] == pytest.approx(flops)
    assert ev["terms"]["linear.chunks"] == pytest.approx(flops / (peak * eta) + L_S * chunks * step)
    assert ev["terms"]["linear.chunks.floor"] == pytest.approx(L_S * 8 * floor)
    assert ev["ops"]["linear.state"]["flops"] == 0


def test_a_chunk_chain_is_per_sequence() -> None:
    """Eight prompts of 1K in one pass do eight times the chunk FLOPs of one, but walk the
    same 16 chunks per layer: the chain is one sequence's, the work all of theirs."""
    one, value = _prefill(1024, "b200")
    eight, _ = _prefill(1024, "b200", "workload.concurrency=8")
    assert eight["ops"]["linear.chunks"]["flops"] == pytest.approx(
        8 * one["ops"]["linear.chunks"]["flops"])  # fmt: skip
    peak = value["hardware.bf16.flops"] * value["hardware.bf16.chunk_recurrence_efficiency"]
    chain = L_S * 16 * value["hardware.bf16.chunk_recurrence_latency"]
    compute = one["ops"]["linear.chunks"]["flops"] / peak
    assert one["terms"]["linear.chunks"] == pytest.approx(compute + chain)
    assert eight["terms"]["linear.chunks"] == pytest.approx(8 * compute + chain)


@pytest.mark.parametrize(("carried", "piece", "walked"), [(3000, 2048, 32), (3000, 100, 2),
                                                         (3000, 0, 47)])  # fmt: skip
def test_a_decode_iteration_walks_the_piece_it_carries(carried: int, piece: int,
                                                       walked: int) -> None:  # fmt: skip
    """A decode iteration carrying prompt tokens walks the chunks of one prompt's piece, not of
    all of them: ⌈piece/64⌉ per layer (a workload that states no piece: all of them as one),
    its FLOPs on the pieces padded to whole chunks."""
    model = build_model(QWEN, ['workload.kind="serving"', "workload.concurrency=8",
                               "workload.input_tokens=8192", "workload.output_tokens=1024",
                               "parallel.tp=8"])  # fmt: skip
    step = attrs.evolve(model.steps[0], prefill_tokens_rank=sp.Integer(carried),
                        prefill_piece=sp.Integer(piece))  # fmt: skip
    p = Pass(model.scenario, model.layout, step, model.engine)
    add_linear(p)
    op = next(o for o in p.ops if o.name == "linear.chunks")
    assert float(model.substituted(op.chain)) == L_S * walked
    sequence = piece or carried
    padded = carried * (-(-sequence // 64) * 64) / sequence
    per_token = (H_V / 8) * 2 * (2 * D_K * D_V + 64 * (D_K + D_V))
    assert float(model.substituted(op.flops)) == pytest.approx(L_S * padded * per_token)


@pytest.mark.parametrize(("chunk", "piece"), [(8192, 8192), (2048, 2048)])
def test_a_serving_iterations_piece_is_the_prompt_or_the_chunk(chunk: int, piece: int) -> None:
    """The piece of a prompt one iteration prefills is min(ISL, the engine's chunk budget)
    (SGLang interleaves: the whole budget is the prompt's)."""
    model = build_model(QWEN, ['workload.kind="serving"', "workload.concurrency=8",
                               "workload.input_tokens=8192", "workload.output_tokens=1024",
                               "parallel.tp=8", f"engine.prefill_chunk={chunk}"])  # fmt: skip
    assert float(model.substituted(model.steps[0].prefill_piece)) == piece


def test_linear_layer_weights() -> None:
    """in_proj to q, k (2·H_k·d_k), v, z (2·H_v·d_v) and the two scalars per value head, and
    out_proj (H_v·d_v·h), at one byte per weight on one GPU."""
    bits = [f"model.{b}=8 bit" for b in ("attention_bits", "expert_bits", "shared_expert_bits",
                                           "dense_bits", "embedding_bits")]  # fmt: skip
    with_linear = _ev(1, 1024, *bits, tp=1)["weight_bytes_per_gpu"]
    per_layer = H * (2 * H_K * D_K + 2 * H_V * D_V + 2 * H_V) + H_V * D_V * H
    attention = 2 * H * 32 * 256 + 2 * H * 2 * 256 + H * 32 * 256  # q, o; k, v; the gate
    none = _ev(1, 1024, *bits, "model.linear_layers=0", tp=1)["weight_bytes_per_gpu"]
    assert with_linear - none == pytest.approx(L_S * (per_layer - attention))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("model.linear_layers", "61"),
        ("model.linear_value_heads", "0"),
        ("model.attention_gate", "2"),
    ],
)
def test_impossible_linear_layers_are_refused(
    key: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", QWEN, "--set", 'workload.kind="decode"', "--set",
                 "workload.concurrency=1", "--set", "workload.context=1024", "--set",
                 f"{key}={value}"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert key.split(".")[1] in err and "Traceback" not in err


# --- Kimi Delta Attention beside MLA (Kimi K3: tests/data/hf/moonshotai--Kimi-K3)
K3 = "model=kimi-k3,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
K3_L, K3_KDA, K3_H, K3_HEADS, K3_D = 93, 69, 7168, 96, 128  # the config's
RQ, RKV, NOPE, ROPE, V = 1536, 512, 128, 64, 128  # its MLA
ONE_BYTE = [f"model.{b}=8 bit" for b in ("attention_bits", "expert_bits", "shared_expert_bits",
                                         "dense_bits", "embedding_bits")]  # fmt: skip


def _k3(*sets: str, users: int = 1, context: int = 1024) -> dict[str, Any]:
    base = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", "parallel.tp=1", "parallel.ep=1"]  # fmt: skip
    return build_model(K3, [*base, *sets]).evaluate()


def test_kda_layer_weights() -> None:
    """q, k, v and the full-rank output gate (4·H·d from h), one write strength per head
    (h·H), the decay's f_a (h·d) and f_b (d·H·d), o_proj (H·d·h): against the MLA layer with
    its output gate that the layer becomes when it is not linear."""
    width = K3_HEADS * K3_D
    kda = K3_H * (4 * width + K3_HEADS) + K3_H * K3_D + K3_D * width + width * K3_H
    mla = (K3_H * RQ + RQ * K3_HEADS * (NOPE + ROPE) + K3_H * (RKV + ROPE)
           + RKV * K3_HEADS * (NOPE + V) + K3_HEADS * V * K3_H)  # fmt: skip
    gate = K3_H * K3_HEADS * V
    got = (
        _k3(*ONE_BYTE)["weight_bytes_per_gpu"]
        - _k3(*ONE_BYTE, "model.linear_layers=0")["weight_bytes_per_gpu"]
    )
    assert got == pytest.approx(K3_KDA * (kda - mla - gate))


def test_mla_output_gate_weights() -> None:
    """The gate on MLA's heads: h x H·d_v per full-attention layer."""
    ungated = _k3(*ONE_BYTE, "model.attention_gate=0")["weight_bytes_per_gpu"]
    gated = _k3(*ONE_BYTE)["weight_bytes_per_gpu"]
    assert gated - ungated == pytest.approx((K3_L - K3_KDA) * K3_H * K3_HEADS * V)


def test_kda_state_beside_mla_cache() -> None:
    """A request holds 96 heads of a 128 x 128 FP32 state in each of 69 KDA layers, whatever
    its context, and MLA's latent and rotary key (512 + 64, BF16) per token in 24 layers (the
    context and the token being decoded)."""
    users = 2
    short, long = _k3(users=users, context=1024), _k3(users=users, context=9216)
    mla = users * (K3_L - K3_KDA) * 8192 * (RKV + ROPE) * 2
    assert long["kv_bytes_per_gpu"] - short["kv_bytes_per_gpu"] == pytest.approx(mla)
    state = users * K3_KDA * K3_HEADS * K3_D * K3_D * STATE
    assert short["kv_bytes_per_gpu"] == pytest.approx(state + users * 24 * 1025 * 576 * 2)
