"""Sliding-window and full layers of their own head dimensions and KV heads, with the full
layers' keys serving as their values (issue 23: Gemma 4), on their own terms: a request's
cache, the attention weights and a decode token's attention FLOPs against hand formulas from
the config's numbers; the geometry collapsing to plain GQA; the MLP beside the experts as
shared experts; and what the kind cannot hold refused at its key."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import sympy as sp

from stepwall.apps.import_model import model_spec
from stepwall.model.compose import build_model
from stepwall.plugin.registry import build
from stepwall.plugins.moe_transformer.attention import Attention
from stepwall.plugins.moe_transformer.work import Pass
from stepwall.testing import import_refusal, refusal

DATA = Path(__file__).parent / "data" / "hf"
G31 = "model=gemma-4-31b-it-nvfp4,hardware=h200,cluster=hgx-h200-ib,engine=vllm"
# nvidia/Gemma-4-31B-IT-NVFP4 config.json: 60 layers of hidden 5376 and 32 query heads; 50
# sliding_attention layers (window 1024) with 16 KV heads of 256, 10 full_attention layers
# with 4 global KV heads of 512 whose keys are their values (attention_k_eq_v); FP8 KV cache
LAYERS, HIDDEN, HEADS = 60, 5376, 32
WINDOWED, KV_W, D_W, WINDOW = 50, 16, 256, 1024
FULL, KV_F, D_F = 10, 4, 512
KV_BYTES = 1


def _attention(*sets: str) -> tuple[Any, Attention]:
    model = build_model(G31, ["parallel.tp=1", "workload.concurrency=1",
                              "workload.context=1024", *sets])  # fmt: skip
    step = next(s for s in model.steps if s.name == "decode")
    return model, Attention.of(Pass(model.scenario, model.layout, step, model.engine))


@pytest.mark.parametrize("tokens", [100, 1024, 131072])
def test_a_request_keeps_each_kind_of_layer_at_its_own_geometry(tokens: int) -> None:
    """Full layers: every token, one tensor (the key, also the value) of 4 × 512; window
    layers: at most 1024 tokens, a key and a value of 16 × 256."""
    model, att = _attention()
    full = FULL * tokens * KV_F * D_F * 1
    want = (full + WINDOWED * min(tokens, WINDOW) * KV_W * D_W * 2) * KV_BYTES
    got = float(model.substituted(att.cache_bytes(sp.Integer(tokens), model.layout.tp)))
    assert got == want


def test_the_attention_weights_by_hand() -> None:
    """Window layers: q and o (2·h·H·256), k and v (2·h·16·256); full layers: q and o
    (2·h·H·512) and k alone (h·4·512): no v projection."""
    model, att = _attention()
    window = 2 * HIDDEN * HEADS * D_W + 2 * HIDDEN * KV_W * D_W
    full = 2 * HIDDEN * HEADS * D_F + HIDDEN * KV_F * D_F
    assert float(model.substituted(att.weights)) == WINDOWED * window + FULL * full


def test_decode_attention_flops_count_each_kind_at_its_head_dimension() -> None:
    """A decode token's q·k and p·v: 2·d multiply-adds per query head per KV token, d = 512
    over S + 1/2 tokens on the full layers, d = 256 over at most 1024 on the window layers."""
    context = 8192
    sets = ["parallel.tp=1", "workload.kind=decode", "workload.concurrency=1",
            f"workload.context={context}", "decoding.kind=autoregressive"]  # fmt: skip
    flops = build_model(G31, sets).evaluate()["ops"]["attention.core"]["flops"]
    seen = context + 0.5
    want = 2 * 2 * HEADS * (FULL * D_F * seen + WINDOWED * D_W * min(seen, WINDOW))
    assert flops == pytest.approx(want, rel=1e-12)


def test_one_geometry_for_both_kinds_prices_as_plain_gqa() -> None:
    """Window layers at the full layers' head dimension and KV heads, keys and values apart,
    give the plain GQA model's numbers exactly."""
    same = ["model.window_head_dim=512", "model.window_kv_heads=4", "model.keys_are_values=0"]
    plain = ["model.window_head_dim=0", "model.window_kv_heads=0", "model.keys_are_values=0"]
    base = ["workload.concurrency=8", "workload.context=4096", "parallel.tp=4"]
    a = build_model(G31, [*base, *same]).evaluate()
    b = build_model(G31, [*base, *plain]).evaluate()
    for key in ("step_time_s", "weight_bytes_per_gpu", "kv_bytes_per_gpu", "prefill_s"):
        assert a[key] == pytest.approx(b[key], rel=1e-12), key


def test_keys_as_values_halve_a_full_layers_cache() -> None:
    """With no window layers, keys serving as values keep half the cache per token."""
    flat = ["model.sliding_layers=0", "model.window_kv_heads=0", "model.window_head_dim=0"]
    apart, _ = _attention(*flat, "model.keys_are_values=0")
    shared, _ = _attention(*flat, "model.keys_are_values=1")
    _, att_a = _attention(*flat, "model.keys_are_values=0")
    _, att_s = _attention(*flat, "model.keys_are_values=1")
    a = float(apart.substituted(att_a.cache_bytes(sp.Integer(4096), apart.layout.tp)))
    s = float(shared.substituted(att_s.cache_bytes(sp.Integer(4096), shared.layout.tp)))
    assert a == 2 * s == LAYERS * 4096 * KV_F * D_F * 2 * KV_BYTES


def test_the_mlp_beside_the_experts_is_three_expert_widths() -> None:
    """google/gemma-4-26B-A4B: every layer runs its 2112-wide MLP beside 8 of 128 experts of
    704: held and computed as 3 shared experts of 704."""
    spec = (Path(__file__).parents[1] / "specs" / "models" / "gemma-4-26b-a4b.toml").read_text()
    assert "n_shared_experts = 3 " in spec and "n_dense_layers = 0 " in spec
    sets = ["parallel.tp=1", "workload.concurrency=1", "workload.context=1024"]
    r = build_model("model=gemma-4-26b-a4b,hardware=h200,cluster=hgx-h200-ib,engine=vllm",
                    sets).evaluate()  # fmt: skip
    shared = r["ops"]["moe.shared_experts"]
    hidden, width, layers = 2816, 2112, 30
    assert shared["bytes"] == pytest.approx(layers * 3 * hidden * width * 2, rel=1e-12)


GEMMA = "nvidia--Gemma-4-31B-IT-NVFP4"


def test_the_text_model_alone_imports_as_the_multimodal_one(tmp_path: Path) -> None:
    """Gemma4ForCausalLM's flat config (the text_config's keys at the top) gives the same
    architecture as the multimodal wrapper's."""
    cfg = json.loads((DATA / "google--gemma-4-26B-A4B" / "config.json").read_text())
    flat = {**cfg["text_config"], "architectures": ["Gemma4ForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(flat))
    kinds = build().kinds
    wrapped = tomllib.loads(model_spec(str(DATA / "google--gemma-4-26B-A4B"), kinds))
    alone = tomllib.loads(model_spec(str(tmp_path), kinds))
    drop = {"name", "description", "source", "sources"}
    assert {k: v for k, v in alone.items() if k not in drop} == {
        k: v for k, v in wrapped.items() if k not in drop
    }


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        ({"hidden_size_per_layer_input": 256}, "text_config.hidden_size_per_layer_input"),
        ({"num_kv_shared_layers": 20}, "text_config.num_kv_shared_layers"),
        ({"use_double_wide_mlp": True}, "text_config.use_double_wide_mlp"),
        ({"layer_types": ["sliding_attention"] * 59}, "text_config.layer_types"),
        ({"layer_types": ["chunked_attention"] * 60}, "text_config.layer_types"),
    ],
)
def test_what_the_kind_cannot_hold_is_refused_at_its_key(
    edit: dict[str, Any], key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-layer embeddings and KV shared across layers (Gemma 4 E2B/E4B), a double-wide MLP,
    a layer pattern of the wrong length or kind: one line naming the key, exit 2."""
    cfg = json.loads((DATA / GEMMA / "config.json").read_text())
    cfg["text_config"] = {**cfg["text_config"], **edit}
    assert f"config.json:{key}:" in import_refusal(capsys, tmp_path, cfg)


def test_step_layer_pattern_of_another_kind_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = json.loads((DATA / "stepfun-ai--Step-3.7-Flash" / "config.json").read_text())
    cfg["layer_types"] = cfg["layer_types"][:-1]
    assert "config.json:layer_types:" in import_refusal(capsys, tmp_path, cfg)


@pytest.mark.parametrize(
    ("inline", "key"),
    [
        ("model=deepseek-v3-fp8,hardware=h200,cluster=hgx-h200-ib,engine=trtllm",
         "model.keys_are_values=1"),
        ("model=mimo-v2-flash,hardware=h200,cluster=hgx-h200-ib,engine=trtllm",
         "model.window_head_dim=128"),
    ],
)  # fmt: skip
def test_gqa_geometry_where_it_cannot_apply_is_refused(
    inline: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keys as values on MLA; a window head dimension beside values narrower than keys."""
    argv = ["eval", inline, "--set", "workload.concurrency=8", "--set", "workload.context=2048",
            "--set", key]  # fmt: skip
    assert key.split("=")[0] in refusal(capsys, *argv)
