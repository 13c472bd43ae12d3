"""Chunked local attention (issue 23, item 2): Llama 4's RoPE layers attend only within their
chunk of attention_chunk_size tokens, its other layers to the whole context. The law on its own
terms: the cache and the reads of a chunked layer are the current chunk's tokens, S − C·⌊S/C⌋,
whatever the context before it (tests/data/hf/meta-llama--Llama-4-Scout-17B-16E-Instruct:
48 layers, 36 chunked at 8,192; GQA 8 KV heads of 128, BF16)."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.model.compose import build_model

SCOUT = "model=llama-4-scout-17b-16e-instruct,hardware=h200,cluster=hgx-h200-ib,engine=vllm"
L, CHUNKED, CHUNK = 48, 36, 8192
KV_TOKEN = 2 * 1 * 128 * 2  # K and V, one of the 8 KV heads per TP-8 rank, BF16


def _ev(context: int, users: int = 2) -> dict[str, Any]:
    sets = ['workload.kind="decode"', f"workload.concurrency={users}",
            f"workload.context={context}", "parallel.tp=8"]  # fmt: skip
    return build_model(SCOUT, sets).evaluate()


def test_cache_holds_the_current_chunk_on_chunked_layers() -> None:
    """At 17,407 cached tokens and the one decoded, in vLLM's paged cache of 16-token blocks
    (half a block more on average: `paged_tokens`, 17,415.5), the 12 global layers hold all of
    them and the 36 chunked ones those past 2 x 8,192, 1,031.5."""
    users, context = 2, 17407
    held = context + 0.5 + 16 / 2
    got = _ev(context, users)["kv_bytes_per_gpu"]
    local = held - 2 * CHUNK
    assert got == pytest.approx(users * ((L - CHUNKED) * held + CHUNKED * local) * KV_TOKEN)


def test_a_whole_chunk_more_context_grows_only_the_global_layers() -> None:
    """8,192 more tokens put a decode at the same place in its chunk: only the 12 global
    layers read more, 8,192 tokens each."""
    users = 2
    a, b = _ev(20000, users), _ev(20000 + CHUNK, users)
    grown = b["ops"]["attention.core"]["bytes"] - a["ops"]["attention.core"]["bytes"]
    assert grown == pytest.approx(users * (L - CHUNKED) * CHUNK * KV_TOKEN)
