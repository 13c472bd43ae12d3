"""MoE layers of ``moe-transformer``: the router, routed experts (those a step hits, on the
most loaded EP rank), shared experts, expert dispatch and combine over EP, the weights they
hold per GPU, and MTP drafting (one MoE layer per draft module)."""

from __future__ import annotations

from typing import Any

import sympy as sp

from stepwall.core.laws import (
    BYTE,
    FLOPS_PER_MAC,
    GEMM_INPUT_BYTES,
    destination_nodes,
    destination_ranks,
    expected_distinct_experts,
    ffn_params,
    ffn_serial_k,
    moe_activation_bytes,
    rank_reach,
    shard,
)
from stepwall.core.scenario import Scenario
from stepwall.core.terms import Collective, Decoding, Op
from stepwall.plugins.moe_transformer.attention import ATTENTION_GEMMS, Attention, core_kind
from stepwall.plugins.moe_transformer.spec import PLUGIN
from stepwall.plugins.moe_transformer.work import Pass


def _expert(m: Any, tp: sp.Expr, width: sp.Expr) -> sp.Expr:
    """Weights of one expert per GPU, working at ``width`` (the hidden size, or a routed
    expert's latent)."""
    return ffn_params(width, m.expert_intermediate, m.ffn_matrices) * shard(
        m.expert_intermediate, tp
    )


def _shared_serial_k(m: Any, tp: sp.Expr) -> sp.Expr:
    """The reduction lengths of a layer's shared experts' gate-up and down on one TP rank,
    their intermediates side by side (`ffn_serial_k`)."""
    return ffn_serial_k(m.hidden, m.n_shared_experts * m.expert_intermediate, tp)


def _latent_serial_k(m: Any) -> sp.Expr:
    """The reduction lengths of a latent MoE layer's projections, down (h) and up (ℓ)."""
    return m.hidden + m.moe_latent


def _routed_width(p: Pass) -> sp.Expr:
    """The width routed experts work at and dispatch carries: the latent ℓ of a latent MoE
    (NVIDIA, "LatentMoE", 2026, as Nemotron 3 Super runs it: the router reads the hidden state,
    the experts and the all-to-all see ℓ), otherwise the hidden size."""
    return p.m.moe_latent if p.spec.moe_latent > 0 else p.m.hidden


def _fused_shared(p: Pass) -> sp.Expr:
    """1 where the engine runs the model's shared expert as one more routed expert of the
    fused MoE kernel, picked by every token (k + 1 picks over E + 1 experts), else 0. SGLang
    does so for the DeepSeek-V3 architecture and those built on it (MLA, 256 routed experts,
    one shared expert: its allow-list), where the routed experts' kernel can hold the shared
    one's weights (their width and precision), the experts are not split by EP and no
    two-batch overlap runs (sgl-project/sglang python/sglang/srt/models/deepseek_v2.py,
    determine_num_fused_shared_experts; PR #4918)."""
    spec, eng = p.spec, p.engine
    allowed = spec.attention == "mla" and spec.n_experts == 256 and spec.n_shared_experts == 1
    same = (spec.moe_latent == 0 and spec.shared_expert_math == spec.expert_math
            and spec.shared_expert_bits == spec.expert_bits)  # fmt: skip
    if not eng.fuse_shared_experts or p.tbo or not allowed or not same:
        return sp.S.Zero
    return sp.Piecewise((1, sp.Eq(p.layout.ep, 1)), (0, True))


def _latent_params(p: Pass, layers: sp.Expr) -> sp.Expr:
    """A latent MoE's down- and up-projections around the routed experts (fc1_latent_proj,
    fc2_latent_proj: 2·h·ℓ per layer), whole on every rank as TensorRT-LLM's and vLLM's
    Nemotron-H layers build them (a plain Linear, not TP-split)."""
    return layers * 2 * p.m.hidden * p.m.moe_latent


def add_moe(p: Pass) -> dict[str, sp.Expr]:
    """The MoE layers' ops and collectives; returns their weight bytes per GPU."""
    m, spec, layout, step = p.m, p.spec, p.layout, p.step
    tokens, tokens_rank, n_moe, batches = step.tokens, step.tokens_rank, p.n_moe, p.batches
    ep = layout.ep
    width = _routed_width(p)
    expert = _expert(m, layout.tp, width)
    shared = _expert(m, layout.tp, m.hidden)
    fused = _fused_shared(p)  # 1: the shared expert runs in the routed experts' kernel
    # experts a micro-batch hits (each micro-batch streams its own), the fused one with them
    hit = batches * (expected_distinct_experts(m.n_experts, m.experts_per_token,
                                               tokens / batches) + fused)  # fmt: skip
    per_gpu_hit = layout.imbalance * hit / ep
    picks = m.experts_per_token + fused  # picks per token
    picks_gpu = layout.imbalance * tokens * picks / ep  # token-expert pairs
    rows = picks_gpu / per_gpu_hit  # tokens per expert per micro-batch the GPU runs
    shared_lane = ("shared/compute" if p.engine.overlap_shared_experts and not p.tbo
                   else p.experts_lane)  # fmt: skip
    slots = (m.n_experts + layout.redundant_experts) / ep
    # rows per expert as a kernel given every token of the micro-batch counts them (TP
    # attention, or a dispatch that gathers all tokens): the count Marlin picks its m-block by
    counted = tokens / batches * picks / (slots + fused)
    # the engine's own expert kernels run where no all-to-all exchanges the experts (EP 1)
    own = sp.Piecewise((1, sp.Eq(ep, 1)), (0, True))
    p.ops.append(Op("moe.routed_experts", n_moe * per_gpu_hit * expert * m.expert_bits,
                    n_moe * expert * picks_gpu * FLOPS_PER_MAC, PLUGIN,
                    "routed experts hit this step, E·(1−(1−k/E)^T)/ep (and the shared expert "
                    "where the engine fuses it in), most loaded GPU",
                    "moe", batches * n_moe, p.experts_lane, "grouped_gemm", spec.expert_math,
                    rows, counted_rows=counted, engine_kernels=own,
                    experts=n_moe * per_gpu_hit))  # fmt: skip
    # the tokens' and picks' activations through the steps around the GEMMs, read at the
    # input precision of the kernel path the experts run on
    runs_as = p.engine.kernel_path(spec.expert_math).runs_as
    moved = moe_activation_bytes(
        picks_gpu, tokens_rank, width, GEMM_INPUT_BYTES[runs_as] * BYTE, m.activation_bits
    )
    p.ops.append(Op("moe.activations", p.engine.activation_factor * n_moe * moved, sp.S.Zero,
                    PLUGIN,
                    "routed experts' activations: each token quantised and combined, each "
                    "pick's row read, written and read back", "moe", sp.S.Zero, p.experts_lane,
                    "grouped_gemm", spec.expert_math, engine_kernels=own))  # fmt: skip
    _every_token_gemms(p, shared, fused, shared_lane)
    per_domain = _ranks_per_domain(p.scenario, layout.tp, ep)
    copies, across, how, (there, back) = _dispatch(p, per_domain)
    # the busiest rank sends its tokens' copies (imbalance: it also receives the most)
    sent_tokens = layout.imbalance * tokens_rank / batches
    reach = rank_reach(m.n_experts, spec.experts_per_token, ep, sent_tokens)
    sent = sent_tokens * copies * width
    nic = None if across is None else sent_tokens * across * width
    combine_lane = "tbo.attention/comm" if p.tbo else ""
    dispatch_lane = ("shared/comm" if shared_lane.startswith("shared")
                     else "tbo.experts/comm" if p.tbo else "")  # fmt: skip
    p.collectives += [
        Collective("comm.ep_dispatch", there, ep, sent * m.dispatch_bits,
                   batches * n_moe, PLUGIN, f"tokens sent to their experts' ranks, {how}",
                   dispatch_lane, per_domain, reach, nic and nic * m.dispatch_bits),
        Collective("comm.ep_combine", back, ep, sent * m.activation_bits,
                   batches * n_moe, PLUGIN,
                   f"expert outputs returned to their tokens' ranks, {how}", combine_lane,
                   per_domain, reach, nic and nic * m.activation_bits),
    ]  # fmt: skip
    out = {
        "routed_experts": n_moe * slots * expert * m.expert_bits,
        "shared_experts": n_moe * m.n_shared_experts * shared * m.shared_expert_bits,
        "router": n_moe * m.hidden * m.n_experts * m.attention_bits,
    }
    if spec.moe_latent > 0:
        out["latent_projections"] = _latent_params(p, n_moe) * m.attention_bits
    return out


def _every_token_gemms(p: Pass, shared: sp.Expr, fused: sp.Expr, shared_lane: str) -> None:
    """The MoE layers' GEMMs every token goes through: the shared experts' gate-up and down
    (their intermediates side by side; none where the engine fuses them into the routed
    kernel), the router, and a latent MoE's projections down to the latent and back."""
    m, spec, tokens_rank, n_moe = p.m, p.spec, p.step.tokens_rank, p.n_moe
    if spec.n_shared_experts > 0:
        p.gemm("moe.shared_experts", (1 - fused) * n_moe * m.n_shared_experts * shared,
               m.shared_expert_bits, tokens_rank, "moe", "shared experts (every token)",
               (1 - fused) * 2 * n_moe, spec.shared_expert_math, overlap=shared_lane,
               serial_k=(1 - fused) * n_moe * _shared_serial_k(m, p.layout.tp))  # fmt: skip
    p.gemm("moe.router", n_moe * m.hidden * m.n_experts, m.attention_bits, tokens_rank,
           "dense", "router logits", n_moe, "bf16", serial_k=n_moe * m.hidden)  # fmt: skip
    if spec.moe_latent > 0:
        p.gemm("moe.latent_projections", _latent_params(p, n_moe), m.attention_bits, tokens_rank,
               "moe", "latent MoE: each token projected to the experts' latent and back",
               2 * n_moe, spec.attention_math, serial_k=n_moe * _latent_serial_k(m))  # fmt: skip


def _dispatch(p: Pass, per_domain: sp.Expr) -> tuple[sp.Expr, sp.Expr | None, str, tuple[str, str]]:
    """Copies of a token the engine's dispatcher sends (its own rank's included: the
    all-to-all keeps that one off the wire), the remote nodes it crosses the scale-out network
    to (None: one message per copy, as placement splits them), how, in words, and the
    collectives that carry dispatch and combine. Per expert (DeepEP low-latency kernels): k
    copies. Per rank (DeepEP normal kernels): one per distinct destination rank, and one per
    distinct remote node over RDMA (deepseek-ai/DeepEP docs/legacy.md @ 0297fc80); both by
    all-to-alls. Gathered (TensorRT-LLM's CUTLASS MoE backend under attention DP in its 2025
    releases: CutlassFusedMoE allgathers before the fused MoE op and reducescatters after):
    every rank's tokens to every rank, ep copies, by an all-gather and a reduce-scatter."""
    m, spec, ep = p.m, p.spec, p.layout.ep
    mode = p.engine.dispatcher
    a2a = ("all_to_all", "all_to_all")
    if mode == "gather":
        return (ep, None, "all ranks' tokens gathered to each (outputs reduce-scattered)",
                ("all_gather", "reduce_scatter"))  # fmt: skip
    if mode == "per_expert" or (mode == "auto" and p.step.name == "decode"):
        return m.experts_per_token, None, "k copies (one per chosen expert)", a2a
    k = spec.experts_per_token  # a whole number: the laws multiply over the k picks
    nodes = ep / per_domain  # scale-up domains the EP group spans
    reached = destination_nodes(m.n_experts, k, nodes, m.n_group, spec.topk_group)
    return (destination_ranks(m.n_experts, k, ep), (nodes - 1) / nodes * reached,
            "one copy per destination rank and per remote node", a2a)  # fmt: skip


def _ranks_per_domain(scenario: Scenario, tp: sp.Expr, ep: sp.Expr) -> sp.Expr:
    """EP ranks that share one scale-up domain: TP groups are placed first, so a domain of D
    GPUs holds D/tp of them (at least one)."""
    domain = scenario.params.cluster.scale_up.domain_size
    return sp.Min(ep, sp.Max(1, sp.floor(domain / tp)), evaluate=False)


def draft_ops(p: Pass, decoding: Decoding, att: Attention) -> list[Op]:
    """An MTP module's passes: ``draft_passes`` × (its decoder layers at one token per user,
    then the shared LM head), every weight read once per pass (DeepSeek-V3 §2.2: one full
    MoE layer per module, reused for each draft by TensorRT-LLM's "MTP Eagle"). A pass routes
    the replica's users, one token each, over all experts, split over the EP ranks as the
    target's MoE layers are: the busiest GPU holds imbalance·E·(1−(1−k/E)^C)/ep of those hit
    and runs k·C·imbalance/ep token-expert pairs."""
    m, spec, layout = p.m, p.spec, p.layout
    users, context = p.step.users_per_rank, p.step.context
    passes, layers = decoding.draft_passes, decoding.draft_layers
    width = _routed_width(p)
    expert = _expert(m, layout.tp, width)
    hit = layout.imbalance * expected_distinct_experts(
        m.n_experts, m.experts_per_token, p.step.users) / layout.ep  # fmt: skip
    picks = layout.imbalance * p.step.users * m.experts_per_token / layout.ep
    head = m.vocab * m.hidden * shard(m.vocab, layout.tp)
    why = "MTP draft module: one pass per draft token"

    def op(name: str, params: sp.Expr, bits: sp.Expr, kernels: sp.Expr, kind: str,
           math: str, rows: sp.Expr = users, flops: sp.Expr | None = None,
           serial_k: sp.Expr = sp.S.Zero, experts: sp.Expr = sp.S.Zero) -> Op:  # fmt: skip
        work = params * users * FLOPS_PER_MAC if flops is None else flops
        return Op(name, passes * params * bits, passes * work, PLUGIN, why, "spec",
                  passes * kernels, "", kind, math, rows, chain=passes * serial_k,
                  experts=passes * experts)  # fmt: skip

    ops = [
        op("draft.attention", layers * (att.params + att.indexer), m.attention_bits,
           layers * ATTENTION_GEMMS[spec.attention], "gemm", spec.attention_math,
           serial_k=layers * att.serial_k),
        Op("draft.attention_core", passes * users * layers * context * att.kv_token,
           sp.Integer(0), PLUGIN, why, "spec", passes * layers, "", core_kind(spec),
           spec.attention_core_math),
        op("draft.experts", layers * hit * expert, m.expert_bits, layers, "grouped_gemm",
           spec.expert_math, picks / hit, layers * expert * picks * FLOPS_PER_MAC,
           experts=layers * hit),
        op("draft.lm_head", head, m.embedding_bits, sp.Integer(1), "gemm", spec.embedding_math,
           serial_k=m.hidden),
    ]  # fmt: skip
    per_domain = _ranks_per_domain(p.scenario, layout.tp, layout.ep)
    copies, across, how, (there, back) = _dispatch(p, per_domain)  # as the target's layers
    sent_tokens = layout.imbalance * users
    reach = rank_reach(m.n_experts, spec.experts_per_token, layout.ep, sent_tokens)
    sent = sent_tokens * copies * width
    nic = None if across is None else sent_tokens * across * width
    p.collectives += [
        Collective("draft.ep_dispatch", there, layout.ep, sent * m.dispatch_bits,
                   passes * layers, PLUGIN, f"{why}: tokens sent to their experts' ranks, "
                   f"{how}", "", per_domain, reach, nic and nic * m.dispatch_bits),
        Collective("draft.ep_combine", back, layout.ep, sent * m.activation_bits,
                   passes * layers, PLUGIN, f"{why}: expert outputs returned, {how}", "",
                   per_domain, reach, nic and nic * m.activation_bits),
    ]  # fmt: skip
    if spec.n_shared_experts > 0:
        ops.append(op("draft.shared_experts", layers * m.n_shared_experts * _expert(
            m, layout.tp, m.hidden), m.shared_expert_bits, layers, "gemm",
            spec.shared_expert_math, serial_k=layers * _shared_serial_k(m, layout.tp)))  # fmt: skip
    if spec.moe_latent > 0:
        ops.append(op("draft.latent_projections", _latent_params(p, layers), m.attention_bits,
                      2 * layers, "gemm", spec.attention_math,
                      serial_k=layers * _latent_serial_k(m)))  # fmt: skip
    return ops
