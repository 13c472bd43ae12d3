"""DeepSeek-V4's compressed attention (issue 23, item 2): a 128-token window on every layer,
CSA layers keeping one entry per 4 tokens of which an indexer selects index_topk, HCA layers
keeping one entry per 128 tokens, all attended; one shared key-value head of head_dim; a
grouped low-rank output. Each law on its own terms, against counts from the configs' numbers
(tests/data/hf/deepseek-ai--DeepSeek-V4-Flash, -Pro) and against DeepSeek's published cache
size at a million tokens."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.model.compose import build_model
from stepwall.testing import refusal

FLASH = "model=deepseek-v4-flash,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
PRO = "model=deepseek-v4-pro,hardware=b200,cluster=hgx-b200-ib,engine=sglang"
# V4-Flash's config: 43 layers (2 window-only, 21 CSA at 4, 20 HCA at 128), hidden 4096,
# 64 heads of 512, q_lora_rank 1024, o_lora_rank 1024 over 8 groups, window 128, index 64 x 128
L, L_CSA, L_HCA, H, HEADS, D = 43, 21, 20, 4096, 64, 512
RQ, RO, G, W, TOPK, H_I, D_I = 1024, 1024, 8, 128, 512, 64, 128
BF16 = ['model.kv_bits="16 bit"', 'model.index_bits="16 bit"']


def _ev(model: str, users: int, context: int, *sets: str) -> dict[str, Any]:
    base = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", "parallel.tp=1", "parallel.ep=1"]  # fmt: skip
    return build_model(model, [*base, *sets]).evaluate()


def test_pro_cache_at_a_million_tokens_is_the_published_size() -> None:
    """DeepSeek-V4-Pro keeps 9.62 GiB of cache per sequence at 1M tokens in BF16 (the V4
    release's figure, as AINews reported it on 2026-04-25: 'the 1M token context KV cache ...
    9.62 GiB/sequence (in bf16)'); the law counts 61 windows, 30 CSA layers' 262,144 entries
    with their index keys and 31 HCA layers' 8,192 entries."""
    ev = _ev(PRO, 1, 1 << 20, *BF16)
    assert ev["kv_bytes_per_gpu"] / 2**30 == pytest.approx(9.62, rel=0.005)


def test_held_entries_per_layer_kind() -> None:
    """At S tokens a request holds W entries per layer, S/4 more per CSA layer (and their
    index keys, 128 elements at 4 bit) and S/128 per HCA layer, each a 512-element BF16
    vector; growing S by 64K adds only the compressed entries."""
    users, grow = 2, 65536
    short, long = _ev(FLASH, users, 8192), _ev(FLASH, users, 8192 + grow)
    entry, index_key = D * 2, D_I * 0.5
    added = users * (L_CSA * grow / 4 * (entry + index_key) + L_HCA * grow / 128 * entry)
    assert long["kv_bytes_per_gpu"] - short["kv_bytes_per_gpu"] == pytest.approx(added)


def test_csa_reads_top_k_entries_and_hca_reads_all() -> None:
    """Past 4·512 tokens a CSA layer's query reads its window and 512 selected entries
    whatever the context; an HCA layer's reads grow by one entry per 128 tokens. The
    attention kernel's bytes from 64K to 128K context therefore grow by the HCA part alone."""
    users = 4
    a, b = _ev(FLASH, users, 65536), _ev(FLASH, users, 131072)
    grown = b["ops"]["attention.core"]["bytes"] - a["ops"]["attention.core"]["bytes"]
    assert grown == pytest.approx(users * L_HCA * 65536 / 128 * D * 2)


def test_indexer_scores_every_compressed_entry() -> None:
    """The lightning indexer of each CSA layer scores all S/4 compressed index keys for every
    query: H_I·d_I multiply-adds per key."""
    users, context = 8, 32768
    op = _ev(FLASH, users, context)["ops"]["attention.indexer"]
    keys = (context + 0.5) / 4  # a decode query attends to its context and half its token
    assert op["flops"] == pytest.approx(users * L_CSA * keys * H_I * D_I * 2)


def test_attention_weights() -> None:
    """Per layer wq_a (h·r_q), wq_b (r_q·H·d), wkv (h·d), wo_a (H·d·r_o), wo_b (G·r_o·h);
    compressors 2·h·c·d on CSA (c = 2) and HCA (c = 1) layers; on CSA layers the indexer
    (r_q·H_I·d_I + h·d_I + h·H_I) with its own compressor 2·h·2·d_I; and the router (h·E),
    which attention_bits also prices: the weights that move with attention_bits from 8 to 16
    bit, one byte each."""
    per_layer = H * RQ + RQ * HEADS * D + H * D + HEADS * D * RO + G * RO * H
    extra = L_HCA * 2 * H * 1 * D + L_CSA * (2 * H * 2 * D + RQ * H_I * D_I + H * D_I
                                             + H * H_I + 2 * H * 2 * D_I)  # fmt: skip
    one = _ev(FLASH, 1, 1024, 'model.attention_bits="8 bit"')["weight_bytes_per_gpu"]
    two = _ev(FLASH, 1, 1024, 'model.attention_bits="16 bit"')["weight_bytes_per_gpu"]
    router = L * H * 256
    assert two - one == pytest.approx(L * per_layer + extra + router)


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("model.csa_layers", "40", "csa_layers"),
        ("model.o_lora_rank", "0", "o_lora_rank"),
        ("model.sliding_window", "0", "sliding_window"),
        ("model.index_topk", "0", "index_topk"),
        ("model.o_groups", "65", "o_groups"),
    ],
)
def test_impossible_compressed_attention_is_refused(
    key: str, value: str, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refusal(capsys, "eval", FLASH, "--set", 'workload.kind="decode"', "--set",
                  "workload.concurrency=1", "--set", "workload.context=1024", "--set",
                  "parallel.ep=8", "--set", f"{key}={value}")  # fmt: skip
    assert field in err
