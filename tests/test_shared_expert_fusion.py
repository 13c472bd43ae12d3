"""Shared-expert fusion (issue 22, item 5: the engine's kernel path): SGLang runs DeepSeek's
one shared expert as routed expert 257, picked by every token, inside the fused MoE kernel
where the experts are not split by EP. Checked on its own terms: the shared GEMMs vanish,
the routed op streams exactly one more expert's weights per layer and runs one more pick
per token, and nothing changes where SGLang keeps them apart (EP, mixed precisions)."""

from __future__ import annotations

from typing import Any

import pytest

from stepwall.model.compose import build_model

H, INTER, TP, LAYERS = 7168, 2048, 8, 58  # DeepSeek-V3: hidden, expert FFN, TP-8, MoE layers
BASE = ['workload.kind="decode"', "workload.context=2048", f"parallel.tp={TP}"]


def _ops(model: str, users: int, *sets: str) -> dict[str, Any]:
    at = f"model={model},hardware=h200,cluster=hgx-h200-ib,engine=sglang"
    ev = build_model(at, [*BASE, f"workload.concurrency={users}", *sets]).evaluate()
    ops: dict[str, Any] = ev["ops"]
    return ops


@pytest.mark.parametrize("users", [1, 16, 256])
def test_fused_shared_expert_is_one_more_routed_expert(users: int) -> None:
    """Fused: no shared-expert GEMM; the routed op's bytes grow by one expert's weights per
    layer (3·h·I/tp FP8 bytes: it is hit by every step) and its FLOPs by one pick per
    token (2·3·h·I/tp per token per layer)."""
    fused = _ops("deepseek-v3-fp8", users)
    apart = _ops("deepseek-v3-fp8", users, "engine.fuse_shared_experts=false")
    expert = 3 * H * INTER / TP  # weights of one expert on a TP-8 rank
    assert fused["moe.shared_experts"] == {"bytes": 0, "flops": 0}
    assert apart["moe.shared_experts"]["bytes"] > 0
    grown = fused["moe.routed_experts"]["bytes"] - apart["moe.routed_experts"]["bytes"]
    assert grown == pytest.approx(LAYERS * expert * 1.0, rel=1e-3)  # FP8: ~1 byte a weight
    more = fused["moe.routed_experts"]["flops"] - apart["moe.routed_experts"]["flops"]
    assert more == pytest.approx(LAYERS * users * 2 * expert)


def test_no_fusion_under_expert_parallelism() -> None:
    """With the experts split by EP, SGLang keeps the shared expert apart: the fusion flag
    changes nothing."""
    ep = [f"parallel.ep={TP}", "parallel.tp=1", f"parallel.dp={TP}"]
    on = _ops("deepseek-v3-fp8", 64, *ep)
    off = _ops("deepseek-v3-fp8", 64, *ep, "engine.fuse_shared_experts=false")
    assert on == off
    assert on["moe.shared_experts"]["bytes"] > 0


def test_no_fusion_across_precisions() -> None:
    """A shared expert in BF16 beside FP8 routed experts: one kernel cannot hold both, and
    nothing is fused."""
    bf16 = ["model.shared_expert_bits=16 bit", 'model.shared_expert_math="bf16"']
    on = _ops("deepseek-v3-fp8", 16, *bf16)
    off = _ops("deepseek-v3-fp8", 16, *bf16, "engine.fuse_shared_experts=false")
    assert on == off
