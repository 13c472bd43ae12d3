"""DeepSeek Sparse Attention (issue 23, item 2): a lightning indexer scores every cached index
key and each query reads the k_I tokens it selects (DeepSeek-V3.2-Exp report §2.1).

Each law is checked on its own terms: the indexer's work against a count of its dot products,
the attention kernel's reads against the dense model's at k_I tokens, the cache against the
index keys it adds; and a configuration with an indexer of no heads is refused.
"""

from __future__ import annotations

import csv
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepwall.cli import main
from stepwall.core.units import parse_quantity
from stepwall.model.compose import build_model

GLM5 = "model=glm-5-fp8,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
L, H_I, D_I, K_I = 78, 32, 128, 2048  # GLM-5's config: layers, index heads, head dim, top-k


def _ev(context: int, *sets: str, users: int = 4) -> dict[str, Any]:
    base = [f"workload.concurrency={users}", f"workload.context={context}", "parallel.tp=8"]
    return build_model(GLM5, [*base, *sets]).evaluate()


@pytest.mark.parametrize("context", [512, 4096, 30000])
def test_indexer_work_is_its_dot_products(context: int) -> None:
    """Decode: each of B users' new token scores its S + ½ cached keys with H_I·d_I
    multiply-adds per layer, and each user's index keys (d_I bytes in FP8 per token per
    layer) are read once."""
    users = 4
    op = _ev(context, users=users)["ops"]["attention.indexer"]
    assert op["flops"] == pytest.approx(users * L * 2 * H_I * D_I * (context + 0.5), rel=1e-9)
    assert op["bytes"] == pytest.approx(users * L * (context + 1) * D_I * 1.0, rel=1e-9)


@pytest.mark.parametrize("context", [8192, 60000])
def test_attention_reads_the_selected_tokens_only(context: int) -> None:
    """Past k_I cached tokens the sparse kernel reads k_I of them: its bytes are the dense
    model's at a context of k_I (less the one new token, which both read)."""
    sparse = _ev(context)["ops"]["attention.core"]
    dense_at_k = _ev(K_I - 1, "model.index_topk=0")["ops"]["attention.core"]
    assert sparse["bytes"] == pytest.approx(dense_at_k["bytes"], rel=1e-9)


def test_short_context_attends_everything() -> None:
    """Below k_I every token is selected: the attention kernel is the dense one."""
    assert (
        _ev(1000)["ops"]["attention.core"]
        == _ev(1000, "model.index_topk=0")["ops"]["attention.core"]
    )


def test_cache_holds_every_token_and_its_index_key() -> None:
    """The whole context stays cached (the indexer may select any token), plus one FP8 index
    key of d_I per token per layer: the sparse cache is the dense one plus B·S′·L·d_I bytes."""
    users, context, block = 4, 8192, 64
    paged = f"engine.kv_block={block}"
    sparse = _ev(context, paged, users=users)["kv_bytes_per_gpu"]
    dense = _ev(context, paged, "model.index_topk=0", users=users)["kv_bytes_per_gpu"]
    pages = context + 1 + (block - 1) / 2  # the tokens held, with a paged cache's mean waste
    assert sparse - dense == pytest.approx(users * pages * L * D_I * 1.0, rel=1e-6)


def test_long_context_decode_is_cheaper_than_dense() -> None:
    """The point of the design: at 60K cached tokens the step is faster than dense MLA's."""
    assert _ev(60000)["step_time_s"] < _ev(60000, "model.index_topk=0")["step_time_s"]


def test_indexer_weights_are_in_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    """r_q·H_I·d_I + h·d_I + h·H_I weights per layer (wq_b, wk, weights_proj)."""
    sets = ["parallel.tp=1", "workload.concurrency=1", "workload.context=1024"]
    with_index = build_model(GLM5, sets).evaluate()["weight_bytes_per_gpu"]
    without = build_model(GLM5, [*sets, "model.index_topk=0"]).evaluate()["weight_bytes_per_gpu"]
    per_layer = 2048 * H_I * D_I + 6144 * D_I + 6144 * H_I
    assert with_index - without == pytest.approx(L * per_layer * 8.002 / 8, rel=1e-4)


def test_an_indexer_without_heads_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", GLM5, "--set", "workload.concurrency=1", "--set",
                 "workload.context=1024", "--set", "model.index_heads=0"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "index_heads" in err and "Traceback" not in err


# ---------------------------------------------------------------- the primitive tables

DSA_DATA = Path(__file__).resolve().parent / "data" / "dsa"
SPECS = Path(__file__).resolve().parent.parent / "specs"
SCENARIO = "glm5-fp8-b200-tp8-sglang"


def _table(kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with (DSA_DATA / f"b200-sglang-0.5.14-glm5-fp8-tp8-{kind}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    size = "context" if kind == "generation" else "prompt"
    batch = np.array([float(r["batch_size"]) for r in rows])
    tokens = np.array([float(r[size]) for r in rows])
    per_layer = np.array([float(r["latency_ms"]) for r in rows]) * 1e-3
    return batch, tokens, per_layer


def _attention_group(ev: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    terms = ev["terms"]
    parts = [np.broadcast_to(np.asarray(v, dtype=float), shape)
             for k, v in terms.items() if k.startswith("attention.")]  # fmt: skip
    return np.sum(parts, axis=0)


def test_decode_attention_against_the_module_table() -> None:
    """SGLang 0.5.14's DSA decode module on B200 (GLM-5 FP8, FP8 KV, 8 heads per rank: TP-8),
    per layer, against the attention group of the model (projections, sparse kernel, indexer,
    their floors) at the same batch and context. Batches up to 512 (1,024 is a cliff the
    table shows, 11x the 512 point, outside CUDA graphs). RMS 18%, max 38% when written: no
    value was fitted to it; a change that moves the laws away from it fails here."""
    batch, ctx, per_layer = _table("generation")
    keep = batch <= 512
    batch, ctx, measured = batch[keep], ctx[keep], per_layer[keep] * L
    model = build_model(SCENARIO, ['workload.kind="decode"', "workload.concurrency=1",
                                   "workload.context=1024"])  # fmt: skip
    ev = model.evaluate({"workload.concurrency": batch, "workload.context": ctx})
    err = _attention_group(ev, batch.shape) / measured - 1
    assert len(err) > 100
    assert float(np.sqrt(np.mean(err**2))) < 0.25
    assert float(np.max(np.abs(err))) < 0.45


def test_prefill_attention_against_the_module_table() -> None:
    """SGLang 0.5.14's DSA prefill module on B200 against the attention group of a prefill
    pass, per layer, at least the engine's host time per layer (`prefill_host_floor`: SGLang
    runs prefill outside CUDA graphs; engine.prefill_layer_host, read from its profile). The
    table's time grows with the batch's prompt tokens, however they are split (8 × 2,048
    costs what 1 × 16,384 does), as the sparse kernel's k_I slots per query at 128 padded
    heads say; no value was fitted to it. Batches of 32-128 prompts carry a cost per prompt
    the laws do not price (up to 3x the 256-prompt rows at the same tokens): outside the
    tight bound, inside the loose one."""
    batch, prompt, per_layer = _table("context")
    model = build_model(SCENARIO, ['workload.kind="prefill"', "workload.concurrency=1",
                                   "workload.input_tokens=1024"])  # fmt: skip
    ev = model.evaluate({"workload.concurrency": batch, "workload.input_tokens": prompt})
    host = parse_quantity(_spec("engines", "sglang")["prefill_layer_host"])[0]
    err = np.maximum(host, _attention_group(ev, batch.shape) / L) / per_layer - 1
    assert float(np.sqrt(np.mean(err**2))) < 0.3
    apart = (batch < 32) | (batch > 128)
    assert apart.sum() > 60
    assert float(np.sqrt(np.mean(err[apart] ** 2))) < 0.2
    assert float(np.max(np.abs(err[apart]))) < 0.45


def _spec(folder: str, name: str) -> dict[str, Any]:
    return tomllib.loads((SPECS / folder / f"{name}.toml").read_text())


def test_sparse_prefill_computes_its_slots_at_the_padded_heads() -> None:
    """A prompt token on an indexed layer costs 2·k_I·(2·r_kv + d_rope)·H_tile FLOPs on a
    B200 (8 heads per TP-8 rank, padded to its 128-head tile) whatever the prompt's length;
    at TP-1 (64 heads) it is padded to 128 all the same, on an H200 (tile 64) not at all."""
    r_kv, d_rope, heads = 512, 64, 64  # GLM-5's config

    def sparse(tokens: int, *sets: str) -> float:
        sets = ('workload.kind="prefill"', "workload.concurrency=1",
                f"workload.input_tokens={tokens}", *sets)  # fmt: skip
        return float(
            build_model(GLM5, list(sets)).evaluate()["ops"]["attention.sparse_prefill"]["flops"]
        )

    def expected(tokens: int, tp: int, gpu: str) -> float:
        tile = _spec("hardware", gpu)["sparse_mla_heads"]
        padded = tile * math.ceil(heads / tp / tile)
        return tokens * L * 2 * K_I * (2 * r_kv + d_rope) * padded

    for tokens in (512, 8192):
        assert sparse(tokens, "parallel.tp=8") == pytest.approx(expected(tokens, 8, "b200"))
    assert sparse(4096, "parallel.tp=1") == pytest.approx(expected(4096, 1, "b200"))
    for tp in (1, 8):
        assert sparse(4096, f"parallel.tp={tp}", "hardware=h200") == pytest.approx(
            expected(4096, tp, "h200")
        )


def test_decode_has_no_sparse_prefill() -> None:
    assert "attention.sparse_prefill" not in _ev(8192)["ops"]


@pytest.mark.parametrize("tile", ["0", "1.5", "-64", '"wide"'])
def test_a_head_tile_not_a_whole_number_of_heads_is_refused(
    tile: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = ["workload.concurrency=1", "workload.context=1024", f"hardware.sparse_mla_heads={tile}"]
    code = main(["eval", GLM5, *(a for s in sets for a in ("--set", s))])
    assert code == 2
    err = capsys.readouterr().err
    assert "sparse_mla_heads" in err and "Traceback" not in err


# --- MiniMax Sparse Attention (MiniMax-M3: tests/data/hf/MiniMaxAI--MiniMax-M3): 57 of 60
# layers select 16 blocks of 128 tokens; 3 attend densely; GQA 4 KV heads of 128, BF16
M3 = "model=minimax-m3,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
M3_L, M3_DENSE, M3_KV, M3_D, M3_K, M3_HI, M3_DI = 60, 3, 4, 128, 2048, 4, 128


def _m3(context: int, users: int = 2) -> dict[str, Any]:
    sets = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", "parallel.tp=4", "parallel.ep=1"]  # fmt: skip
    return build_model(M3, sets).evaluate()


def test_msa_sparse_layers_read_their_blocks_and_dense_layers_everything() -> None:
    """Past 2,048 cached tokens only the 3 dense-attention layers read more: one KV head per
    TP-4 rank, 2·128 BF16 elements per token each."""
    users, a, b = 2, 16384, 32768
    grown = (
        _m3(b, users)["ops"]["attention.core"]["bytes"]
        - _m3(a, users)["ops"]["attention.core"]["bytes"]
    )
    assert grown == pytest.approx(users * M3_DENSE * (b - a) * 2 * M3_D * 2)


def test_msa_indexer_scores_every_key_of_its_layers() -> None:
    """The 57 sparse layers' indexers score all S + ½ cached keys with H_I·d_I multiply-adds
    and read each user's BF16 index keys once; the dense layers have none."""
    users, context = 2, 8192
    op = _m3(context, users)["ops"]["attention.indexer"]
    sparse = M3_L - M3_DENSE
    assert op["flops"] == pytest.approx(users * sparse * 2 * M3_HI * M3_DI * (context + 0.5))
    assert op["bytes"] == pytest.approx(users * sparse * (context + 1) * M3_DI * 2)
