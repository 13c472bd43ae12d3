"""GQA with values narrower than queries and keys, and sliding-window layers with KV heads of
their own (issue 23: MiMo-V2-Flash), on their own terms: the cache a request keeps, the
attention weights and the attention FLOPs against hand formulas from the config's numbers;
the models without these fields unchanged; and a geometry stepwall keeps one of refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sympy as sp

from stepwall.model.compose import build_model
from stepwall.plugins.moe_transformer.attention import Attention
from stepwall.plugins.moe_transformer.work import Pass
from stepwall.testing import import_refusal, refusal

DATA = Path(__file__).parent / "data" / "hf"
MIMO = "model=mimo-v2-flash,hardware=h200,cluster=hgx-h200-ib,engine=trtllm"
# XiaomiMiMo/MiMo-V2-Flash config.json: 48 layers, hidden 4096, 64 query heads of q·k 192 and
# v 128; 9 full layers (hybrid_layer_pattern 0) with 4 KV heads, 39 with a window of 128
# tokens and 8 KV heads; BF16 cache
LAYERS, HIDDEN, HEADS, QK, V = 48, 4096, 64, 192, 128
FULL, WINDOWED, KV_FULL, KV_WINDOW, WINDOW, KV_BYTES = 9, 39, 4, 8, 128, 2


def _attention(context: int, *sets: str) -> tuple[Any, Attention, Pass]:
    model = build_model(MIMO, ["parallel.tp=1", "workload.concurrency=1",
                               f"workload.context={context}", *sets])  # fmt: skip
    step = next(s for s in model.steps if s.name == "decode")
    p = Pass(model.scenario, model.layout, step, model.engine)
    return model, Attention.of(p), p


@pytest.mark.parametrize("tokens", [100, 2048, 65536])
def test_a_request_keeps_each_kind_of_layer_at_its_own_heads(tokens: int) -> None:
    """Full layers: every token, 4 KV heads; window layers: at most 128 tokens, 8 KV heads;
    each head a key of 192 and a value of 128 elements."""
    model, att, _ = _attention(1024)
    per_head = (QK + V) * KV_BYTES
    want = (
        FULL * tokens * KV_FULL * per_head + WINDOWED * min(tokens, WINDOW) * KV_WINDOW * per_head
    )
    got = float(model.substituted(att.cache_bytes(sp.Integer(tokens), model.layout.tp)))
    assert got == want


def test_the_attention_weights_by_hand() -> None:
    """q (h·H·192) and o (H·128·h) on every layer; k and v (h·H_kv·(192 + 128)) at each
    layer's own KV heads."""
    model, att, _ = _attention(1024)
    q_o = LAYERS * HIDDEN * HEADS * (QK + V)
    k_v = (FULL * KV_FULL + WINDOWED * KV_WINDOW) * HIDDEN * (QK + V)
    assert float(model.substituted(att.weights)) == q_o + k_v


def test_decode_attention_flops_count_query_heads_on_both_kinds() -> None:
    """A decode token's q·k (192) and p·v (128) multiply-adds per query head per KV token,
    over S + 1/2 tokens on the full layers and at most 128 on the window layers: the window
    layers' extra KV heads add bytes, not FLOPs."""
    context = 4096
    sets = ["parallel.tp=1", "workload.kind=decode", "workload.concurrency=1",
            f"workload.context={context}", "decoding.kind=autoregressive"]  # fmt: skip
    model = build_model(MIMO, sets)
    flops = model.evaluate()["ops"]["attention.core"]["flops"]
    seen = context + 0.5
    want = 2 * (QK + V) * HEADS * (FULL * seen + WINDOWED * min(seen, WINDOW))
    assert flops == pytest.approx(want, rel=1e-12)


def test_value_heads_as_wide_as_keys_price_as_before() -> None:
    """v_head_dim = head_dim and window KV heads = the full layers' give the plain GQA
    model's numbers exactly."""
    same = ["model.v_head_dim=192", "model.window_kv_heads=4"]
    plain = ["model.v_head_dim=0", "model.window_kv_heads=0", "model.head_dim=192"]
    a = build_model(MIMO, ["workload.concurrency=8", "workload.context=4096", *same]).evaluate()
    b = build_model(MIMO, ["workload.concurrency=8", "workload.context=4096", *plain]).evaluate()
    for key in ("step_time_s", "weight_bytes_per_gpu", "kv_bytes_per_gpu", "prefill_s"):
        assert a[key] == pytest.approx(b[key], rel=1e-12), key


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        ({"swa_head_dim": 128}, "swa_head_dim"),
        ({"swa_num_attention_heads": 32}, "swa_num_attention_heads"),
        ({"attention_chunk_size": 256}, "attention_chunk_size"),
        ({"hybrid_layer_pattern": [0, 1]}, "hybrid_layer_pattern"),
    ],
)
def test_what_one_geometry_cannot_hold_is_refused_at_its_key(
    edit: dict[str, Any], key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Window layers of other query heads or head dimensions, a chunk that is not the window,
    a layer pattern of the wrong length: one line naming the key, exit 2, nothing written."""
    cfg = json.loads((DATA / "XiaomiMiMo--MiMo-V2-Flash" / "config.json").read_text())
    assert f"config.json:{key}:" in import_refusal(capsys, tmp_path, {**cfg, **edit})


def test_window_heads_that_do_not_group_the_query_heads_are_refused(capsys) -> None:
    """64 query heads over 5 KV heads of a window layer: no equal groups."""
    argv = ["eval", MIMO, "--set", "workload.concurrency=8", "--set", "workload.context=4096",
            "--set", "model.window_kv_heads=5"]  # fmt: skip
    assert "model.window_kv_heads" in refusal(capsys, *argv)
