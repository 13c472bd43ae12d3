"""Chunked local attention (issue 23, item 2): Llama 4's RoPE layers attend only within their
chunk of attention_chunk_size tokens, its other layers to the whole context. The law on its own
terms: the cache and the reads of a chunked layer are the current chunk's tokens, S − C·⌊S/C⌋,
whatever the context before it (tests/data/hf/meta-llama--Llama-4-Scout-17B-16E-Instruct:
48 layers, 36 chunked at 8,192; GQA 8 KV heads of 128, BF16)."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.core.laws import chunk_tokens_mean
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


@pytest.mark.parametrize(
    ("prompt", "chunk"), [(100, 8192), (8192, 8192), (20000, 8192), (65536, 4096)]
)
def test_prompt_mean_is_the_brute_force_mean(prompt: int, chunk: int) -> None:
    """A prompt token at in-chunk position j attends to the j + 1 tokens up to it: the mean
    over the prompt, counted one token at a time, within half a token of the law."""
    exact = sum((x % chunk) + 1 for x in range(prompt)) / prompt
    assert float(chunk_tokens_mean(prompt, chunk)) == pytest.approx(exact, abs=0.5 + 1e-9)


def test_a_long_prompt_attends_within_its_chunks() -> None:
    """Prefilling 65,536 tokens (8 chunks): the 12 global layers attend to P/2 tokens per
    query on average, the 36 chunked ones to C/2, at 2·2·d_h FLOPs per head per token (5 of
    the 40 heads on a TP-8 rank)."""
    prompt = 65536
    sets = ['workload.kind="prefill"', "workload.concurrency=1",
            f"workload.input_tokens={prompt}", "parallel.tp=8"]  # fmt: skip
    op = build_model(SCOUT, sets).evaluate()["ops"]["attention.core"]
    per_token = 2 * 2 * 128 * 5
    want = prompt * per_token * ((L - CHUNKED) * prompt / 2 + CHUNKED * CHUNK / 2)
    assert op["flops"] == pytest.approx(want)
