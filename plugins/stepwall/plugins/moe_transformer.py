"""Model kind ``moe-transformer``: per-step bytes and FLOPs of an MoE (or dense) decoder.

Work per GPU under a layout (TP over ``tp`` ranks, experts over ``ep`` ranks, attention
data-parallel over ``ep``), summed over layers. Each law is one function; precisions are
per component (e.g. INT4 experts, BF16 attention). Architecture fields follow the
Hugging Face config names of DeepSeek-V3 / Kimi K2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import sympy as sp

from stepwall.core.fields import KindSpec, choice, quantity
from stepwall.core.laws import (
    FLOPS_PER_MAC,
    expected_distinct_experts,
    ffn_params,
    gqa_kv_bytes,
    gqa_params,
    gqa_score_flops,
    mla_kv_bytes,
    mla_params,
    mla_prompt_score_flops,
    mla_score_flops,
    shard,
)
from stepwall.core.scenario import Scenario
from stepwall.core.terms import (
    PRECISIONS,
    Collective,
    Constraint,
    Decoding,
    Engine,
    Layout,
    Op,
    Step,
    Workload,
)
from stepwall.plugin.hookspecs import hookimpl
from stepwall.plugins.moe_plateau import ANALYSIS

if TYPE_CHECKING:
    from stepwall.plugin.entries import Analysis

PLUGIN = "moe_transformer"


def _count(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, integer=True, **kw)


def _zero_ok(doc: str, latex: str) -> Any:
    return quantity(
        "dimensionless", doc, latex=latex, integer=True, minimum=0, inclusive=True, default=0
    )


def _bits(doc: str, latex: str) -> Any:
    return quantity("information", doc, latex=latex)


def _math(doc: str) -> Any:
    return choice(PRECISIONS, doc, default="bf16")


@attrs.frozen
class MoeTransformer:
    n_layers: int = _count("decoder layers", "L")
    n_dense_layers: int = _zero_ok(
        "leading layers with a dense FFN (first_k_dense_replace)", "L_{d}"
    )
    hidden: int = _count("hidden size", "h")
    dense_intermediate: int = _count("dense FFN intermediate size", "I_{d}")
    n_experts: int = _zero_ok("routed experts per MoE layer", "E")
    experts_per_token: int = _zero_ok("routed experts each token uses (top-k)", "k")
    n_shared_experts: int = _zero_ok("shared experts per MoE layer", "E_{s}")
    expert_intermediate: int = _count("expert FFN intermediate size", "I_{e}", default=1)
    attention: str = choice(("mla", "gqa"), "attention type", default="mla")
    n_heads: int = _count("attention heads", "H")
    n_kv_heads: int = _count("KV heads (GQA)", "H_{kv}", default=1)
    head_dim: int = _count("head dimension (GQA)", "d_{h}", default=128)
    q_lora_rank: int = _zero_ok("MLA query low-rank dimension", "r_{q}")
    kv_lora_rank: int = _zero_ok("MLA latent KV dimension", "r_{kv}")
    qk_nope_head_dim: int = _zero_ok("MLA non-rotary query/key head dimension", "d_{nope}")
    qk_rope_head_dim: int = _zero_ok("MLA rotary head dimension", "d_{rope}")
    v_head_dim: int = _zero_ok("MLA value head dimension", "d_{v}")
    vocab: int = _count("vocabulary size", "V")
    sliding_window: int = _zero_ok(
        "tokens a sliding-window layer attends to (0: no sliding-window layers)", "W"
    )
    sliding_layers: int = _zero_ok("layers with a sliding window (gpt-oss: every other)", "L_{w}")
    expert_bits: float = _bits("bits per routed-expert weight", "b_{e}")
    shared_expert_bits: float = _bits("bits per shared-expert weight", "b_{se}")
    attention_bits: float = _bits("bits per attention (and router) weight", "b_{attn}")
    dense_bits: float = _bits("bits per dense-FFN weight", "b_{d}")
    embedding_bits: float = _bits("bits per embedding / LM-head weight", "b_{emb}")
    kv_bits: float = _bits("bits per KV-cache element", "b_{kv}")
    activation_bits: float = _bits("bits per activation element (all-reduce, combine)", "b_{act}")
    dispatch_bits: float = _bits("bits per element sent in expert dispatch", "b_{disp}")
    expert_math: str = _math("math of the routed-expert GEMMs (INT4 W4A16: bf16; NVFP4: fp4)")
    shared_expert_math: str = _math("math of the shared-expert GEMMs")
    attention_math: str = _math("math of the attention projections and router")
    dense_math: str = _math("math of the dense-FFN GEMMs")
    embedding_math: str = _math("math of the LM head")
    attention_core_math: str = choice(
        ("bf16", "fp8"), "math of the attention kernel (fp8 with an FP8 KV cache)", default="bf16"
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "model",
            "moe-transformer",
            MoeTransformer,
            "decoder-only transformer with MoE (or dense, n_experts = 0) FFNs",
        )
    ]


# GEMM kernels per layer of each attention type (the engine adds norms, RoPE, quantisation):
# MLA: fused q_a/kv_a down-projection, q_b, the absorbed k_b (UK) and v_b (UV), o;
# GQA: fused qkv, o (DeepSeek-V2 §2.1; TensorRT-LLM blog 1 lists the same five MLA GEMMs).
ATTENTION_GEMMS = {"mla": 5, "gqa": 2}


@hookimpl
def stepwall_model_work(
    scenario: Scenario, decoding: Decoding, layout: Layout, step: Step, engine: Engine
) -> Workload:
    m = scenario.params.model
    spec = scenario.model
    mla = spec.attention == "mla"
    has_moe = spec.n_experts > 0
    tp, ep = layout.tp, layout.ep
    n_moe = m.n_layers - m.n_dense_layers if has_moe else sp.Integer(0)
    n_dense = m.n_dense_layers if has_moe else m.n_layers
    tbo = engine.two_batch_overlap
    batches = 2 if tbo else 1  # two micro-batches: each kernel runs twice
    # Two-batch overlap runs in two stages per MoE layer (SGLang's and DeepSeek's schedule):
    # one micro-batch's attention-side work under the other's combine (and all-reduces), its
    # experts under the other's dispatch; each stage lasts as long as its slower side, so
    # unequal sides leave bubbles.
    lane = "tbo.attention/compute" if tbo else ""
    experts_lane = "tbo.experts/compute" if tbo else ""
    prefill = step.name != "decode"  # the whole pass is prompt tokens
    ops: list[Op] = []
    collectives: list[Collective] = []

    def gemm(
        name: str,
        params: sp.Expr,
        bits: sp.Expr,
        rows: sp.Expr,
        group: str,
        why: str,
        kernels: sp.Expr,
        math: str,
        kind: str = "gemm",
        overlap: str = lane,
    ) -> None:
        # each micro-batch streams the weights again
        ops.append(Op(name, batches * params * bits, params * rows * FLOPS_PER_MAC, PLUGIN, why,
                      group, batches * kernels, overlap, kind, math, rows / batches))  # fmt: skip

    # --- tokens: T through the replica's experts, T_r through the busiest attention rank
    tokens, tokens_rank = step.tokens, step.tokens_rank

    # --- attention: projections, then the attention kernel over the KV cache
    if mla:
        rep, split = mla_params(m.hidden, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                                m.qk_rope_head_dim, m.v_head_dim, m.n_heads, tp)  # fmt: skip
        kv_token = mla_kv_bytes(m.kv_lora_rank, m.qk_rope_head_dim, m.kv_bits)

        def score(ctx: sp.Expr) -> sp.Expr:
            return mla_score_flops(m.kv_lora_rank, m.qk_rope_head_dim, m.n_heads, tp, ctx)

        def prompt_score(ctx: sp.Expr) -> sp.Expr:
            return mla_prompt_score_flops(m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim,
                                          m.n_heads, tp, ctx)  # fmt: skip
    else:
        rep, split = gqa_params(m.hidden, m.n_heads, m.n_kv_heads, m.head_dim, tp)
        kv_token = gqa_kv_bytes(m.n_kv_heads, m.head_dim, tp, m.kv_bits)

        def score(ctx: sp.Expr) -> sp.Expr:
            return gqa_score_flops(m.head_dim, m.n_heads, tp, ctx)

        prompt_score = score

    gemm("attention.projections", m.n_layers * (rep + split), m.attention_bits, tokens_rank,
         "attention", "attention projections (weights read once per step)",
         ATTENTION_GEMMS[spec.attention] * m.n_layers, spec.attention_math)  # fmt: skip
    # Each user's tokens attend to its cached context plus, on average, half of its own new
    # tokens; sliding-window layers see at most W of it.
    full = m.n_layers - m.sliding_layers

    def attended(ctx: sp.Expr) -> sp.Expr:
        """Layer-tokens of KV one query attends to over all layers."""
        return full * ctx + m.sliding_layers * sp.Min(ctx, m.sliding_window)

    decode_ctx = step.context + step.tokens_per_user / 2
    prompt_ctx = step.tokens_per_user / 2 if prefill else step.prefill_context
    users_rank = step.users_per_rank
    kv_read = users_rank * attended(step.context + step.tokens_per_user) * kv_token
    kv_read += step.prefill_tokens_rank * m.n_layers * kv_token  # new prompt KV written
    # prompt tokens attend in expanded (multi-head) form, decode tokens in absorbed form
    flops = users_rank * step.tokens_per_user * (prompt_score(1) if prefill else score(1)
                                                 ) * attended(decode_ctx)  # fmt: skip
    flops += step.prefill_tokens_rank * prompt_score(1) * attended(prompt_ctx)
    one_user = attended(step.context + step.tokens_per_user) * kv_token  # its own KV, in order
    # KV tokens per query per layer, averaged over the pass's queries (its compute ramp)
    queries = users_rank * step.tokens_per_user + step.prefill_tokens_rank
    per_query = (
        users_rank * step.tokens_per_user * attended(decode_ctx)
        + step.prefill_tokens_rank * attended(prompt_ctx)
    ) / (queries * m.n_layers)
    ops.append(Op("attention.core", kv_read, flops, PLUGIN,
                  "attention over the KV cache: context S and each user's new tokens",
                  "attention", batches * m.n_layers, lane, "attention",
                  spec.attention_core_math, per_query, one_user))  # fmt: skip

    # --- dense FFN layers and the LM head
    if spec.n_dense_layers > 0 or not has_moe:
        gemm("dense.ffn",
             n_dense * ffn_params(m.hidden, m.dense_intermediate) * shard(m.dense_intermediate, tp),
             m.dense_bits, tokens_rank, "dense", "dense FFN layers (gate-up, down)",
             2 * n_dense, spec.dense_math)  # fmt: skip
    # logits for every verified token when decoding; for the last prompt token otherwise
    head_rows = users_rank * (1 if prefill else step.tokens_per_user)
    gemm("lm_head", m.vocab * m.hidden * shard(m.vocab, tp), m.embedding_bits, head_rows,
         "dense", "LM head (vocabulary-parallel)", sp.Integer(1), spec.embedding_math)  # fmt: skip

    # --- the engine's own kernels per layer: norms, RoPE, quantisation, residual adds
    act = m.hidden * m.activation_bits
    ops.append(Op("layers.elementwise", 2 * tokens_rank * act * m.n_layers * engine.layer_kernels,
                  sp.Integer(0), PLUGIN,
                  "the engine's small kernels per layer (norms, RoPE, quantise), activations "
                  "read and written", "base", batches * m.n_layers * engine.layer_kernels, lane,
                  "elementwise"))  # fmt: skip

    parts: dict[str, sp.Expr] = {
        "attention": m.n_layers * (rep + split) * m.attention_bits,
        "dense": n_dense
        * ffn_params(m.hidden, m.dense_intermediate)
        * shard(m.dense_intermediate, tp)
        * m.dense_bits,
        "embeddings": 2 * m.vocab * m.hidden * shard(m.vocab, tp) * m.embedding_bits,
    }

    # --- MoE layers: router, routed experts, shared experts, dispatch and combine
    if has_moe:
        expert = ffn_params(m.hidden, m.expert_intermediate) * shard(m.expert_intermediate, tp)
        # experts a micro-batch hits (each micro-batch streams its own)
        hit = batches * expected_distinct_experts(
            m.n_experts, m.experts_per_token, tokens / batches
        )
        per_gpu_hit = layout.imbalance * hit / ep
        picks_gpu = layout.imbalance * tokens * m.experts_per_token / ep  # token-expert pairs
        rows = picks_gpu / per_gpu_hit  # tokens per expert per micro-batch the GPU runs
        shared_lane = ("shared/compute" if engine.overlap_shared_experts and not tbo
                       else experts_lane)  # fmt: skip
        ops.append(Op("moe.routed_experts", n_moe * per_gpu_hit * expert * m.expert_bits,
                      n_moe * expert * picks_gpu * FLOPS_PER_MAC, PLUGIN,
                      "routed experts hit this step, E·(1−(1−k/E)^T)/ep, most loaded GPU",
                      "moe", batches * n_moe, experts_lane, "grouped_gemm", spec.expert_math,
                      rows))  # fmt: skip
        if spec.n_shared_experts > 0:
            gemm("moe.shared_experts", n_moe * m.n_shared_experts * expert, m.shared_expert_bits,
                 tokens_rank, "moe", "shared experts (every token)", 2 * n_moe,
                 spec.shared_expert_math, overlap=shared_lane)  # fmt: skip
        gemm("moe.router", n_moe * m.hidden * m.n_experts, m.attention_bits, tokens_rank,
             "dense", "router logits", n_moe, "bf16")  # fmt: skip
        slots = (m.n_experts + layout.redundant_experts) / ep
        parts["routed_experts"] = n_moe * slots * expert * m.expert_bits
        parts["shared_experts"] = n_moe * m.n_shared_experts * expert * m.shared_expert_bits
        parts["router"] = n_moe * m.hidden * m.n_experts * m.attention_bits
        # the busiest rank sends its tokens' k copies (imbalance: it also receives the most)
        sent = layout.imbalance * tokens_rank / batches * m.experts_per_token * m.hidden
        per_domain = _ranks_per_domain(scenario, tp, ep)
        combine_lane = "tbo.attention/comm" if tbo else ""
        dispatch_lane = ("shared/comm" if shared_lane.startswith("shared")
                         else "tbo.experts/comm" if tbo else "")  # fmt: skip
        collectives += [
            Collective("comm.ep_dispatch", "all_to_all", ep, sent * m.dispatch_bits,
                       batches * n_moe, PLUGIN, "tokens sent to their experts' ranks",
                       dispatch_lane, per_domain),
            Collective("comm.ep_combine", "all_to_all", ep, sent * m.activation_bits,
                       batches * n_moe, PLUGIN, "expert outputs returned to their tokens' ranks",
                       combine_lane, per_domain),
        ]  # fmt: skip
    collectives.append(
        Collective(
            "comm.tp_allreduce",
            "all_reduce",
            tp,
            tokens_rank / batches * m.hidden * m.activation_bits,
            batches * 2 * m.n_layers,
            PLUGIN,
            "two all-reduces per layer (after attention and after FFN)",
            "tbo.attention/comm" if tbo else "",
        )
    )

    # --- drafting on the GPU (an MTP module): one token per user per pass
    if decoding.draft_passes != 0 and step.name == "decode":
        ops += _draft_ops(m, spec, tp, users_rank, step.context, decoding, rep + split, kv_token)

    # --- the prompt's KV cache, sent to a decode pool (disaggregated serving)
    if step.kv_transfer != 0:
        collectives.append(Collective(
            "comm.kv_transfer", "send", sp.Integer(2), attended(step.kv_transfer) * kv_token,
            sp.Integer(1), PLUGIN, "the prompt's KV cache to the decode pool"))  # fmt: skip

    kv = users_rank * attended(step.context + step.tokens_per_user) * kv_token
    weights = sp.Add(*parts.values())
    return Workload(tuple(ops), tuple(collectives), weights, kv, m.n_layers, parts)


def _ranks_per_domain(scenario: Scenario, tp: sp.Expr, ep: sp.Expr) -> sp.Expr:
    """EP ranks that share one scale-up domain: TP groups are placed first, so a domain of D
    GPUs holds D/tp of them (at least one)."""
    domain = scenario.params.cluster.scale_up.domain_size
    return sp.Min(ep, sp.Max(1, sp.floor(domain / tp)), evaluate=False)


def _draft_ops(
    m: Any,
    spec: Any,
    tp: sp.Expr,
    users: sp.Expr,
    context: sp.Expr,
    decoding: Decoding,
    attention_params: sp.Expr,
    kv_token: sp.Expr,
) -> list[Op]:
    """An MTP module's passes: ``draft_passes`` × (its decoder layers at one token per user,
    then the shared LM head), every weight read once per pass (DeepSeek-V3 §2.2: one full
    MoE layer per module, reused for each draft by TensorRT-LLM's "MTP Eagle")."""
    passes, layers = decoding.draft_passes, decoding.draft_layers
    expert = ffn_params(m.hidden, m.expert_intermediate) * shard(m.expert_intermediate, tp)
    touched = expected_distinct_experts(m.n_experts, m.experts_per_token, users)
    experts = layers * (touched + m.n_shared_experts) * expert
    head = m.vocab * m.hidden * shard(m.vocab, tp)
    why = "MTP draft module: one pass per draft token"

    def op(name: str, params: sp.Expr, bits: sp.Expr, kernels: sp.Expr, kind: str,
           math: str) -> Op:  # fmt: skip
        return Op(name, passes * params * bits, passes * params * users * FLOPS_PER_MAC, PLUGIN,
                  why, "spec", passes * kernels, "", kind, math, users)  # fmt: skip

    return [
        op("draft.attention", layers * attention_params, m.attention_bits,
           layers * ATTENTION_GEMMS[spec.attention], "gemm", spec.attention_math),
        Op("draft.attention_core", passes * users * layers * context * kv_token, sp.Integer(0),
           PLUGIN, why, "spec", passes * layers, "", "attention", spec.attention_core_math),
        op("draft.experts", experts, m.expert_bits, layers, "grouped_gemm", spec.expert_math),
        op("draft.lm_head", head, m.embedding_bits, sp.Integer(1), "gemm", spec.embedding_math),
    ]  # fmt: skip


def _divides(
    name: str, ranks: sp.Expr, size: sp.Expr, keys: tuple[str, ...], what: str
) -> Constraint:
    """``ranks`` split ``size`` evenly: size mod ranks = 0."""
    return Constraint(
        name,
        sp.Eq(sp.Mod(size, ranks), 0),
        f"{what} are split evenly over the ranks; parallel.uneven = true allows uneven splits",
        keys,
        PLUGIN,
    )


def _at_most(
    name: str, small: sp.Expr, big: sp.Expr, keys: tuple[str, ...], why: str
) -> Constraint:
    return Constraint(name, small <= big, why, keys, PLUGIN)


# MLA's dimensions, each ≥ 1 where `mla_params`, `mla_kv_bytes` and the score laws use them:
# a zero would silently drop a projection (r_q = 0: no query at all) or the cached latent.
MLA_DIMS = {
    "q_lora_rank": "MLA projects queries through a latent of r_q ≥ 1 dimensions (q_a, q_b)",
    "kv_lora_rank": "MLA caches a KV latent of r_kv ≥ 1 dimensions",
    "qk_nope_head_dim": "each MLA head has d_nope ≥ 1 non-rotary query/key dimensions",
    "qk_rope_head_dim": "MLA keys carry a decoupled rotary part of d_rope ≥ 1 dimensions",
    "v_head_dim": "each MLA head has d_v ≥ 1 value dimensions",
}


def _architecture(m: Any, spec: Any) -> list[Constraint]:
    """What the laws assume of the architecture itself, whatever the layout: layer subsets,
    attention head grouping and MLA dimensions, the routing of MoE layers."""
    has_moe = spec.n_experts > 0
    out = [
        _at_most("dense_layers_within_layers", m.n_dense_layers, m.n_layers,
                 ("model.n_dense_layers", "model.n_layers"),
                 "dense layers are a subset of the layers"),
        # `attended`: L − L_w full layers, L_w at a window of W ≥ 1 tokens
        _at_most("sliding_layers_within_layers", m.sliding_layers, m.n_layers,
                 ("model.sliding_layers", "model.n_layers"),
                 "sliding-window layers are a subset of the layers"),
        # (parameters are positive symbols, so "L_w = 0 or W ≥ 1" is written W ≥ Min(L_w, 1))
        Constraint("sliding_window_positive",
                   m.sliding_window >= sp.Min(m.sliding_layers, 1),
                   "a sliding-window layer attends to W ≥ 1 tokens; model.sliding_layers = 0 "
                   "when no layer slides", ("model.sliding_window", "model.sliding_layers"),
                   PLUGIN),
        # `expected_distinct_experts` (top-k of E); a dense model (E = 0) routes to none
        _at_most("top_k_within_experts", m.experts_per_token, m.n_experts,
                 ("model.experts_per_token", "model.n_experts"),
                 "a token picks its top-k among the routed experts"),
    ]  # fmt: skip
    if has_moe:
        out.append(_at_most("top_k_at_least_one", 1, m.experts_per_token,
                            ("model.experts_per_token",),
                            "an MoE layer routes each token to at least one expert"))  # fmt: skip
    else:  # the shared experts sit in MoE layers, which a dense model does not have
        out.append(_at_most("shared_experts_need_moe", m.n_shared_experts, m.n_experts,
                            ("model.n_shared_experts", "model.n_experts"),
                            "shared experts belong to MoE layers; a dense model "
                            "(model.n_experts = 0) has none"))  # fmt: skip
    if spec.attention == "gqa":  # `gqa_params`, `gqa_kv_bytes`: H/H_kv query heads per KV head
        out += [
            _at_most("kv_heads_within_heads", m.n_kv_heads, m.n_heads,
                     ("model.n_kv_heads", "model.n_heads"),
                     "each KV head serves one or more query heads"),
            Constraint("kv_heads_group_heads", sp.Eq(sp.Mod(m.n_heads, m.n_kv_heads), 0),
                       "query heads form equal groups, one per KV head",
                       ("model.n_kv_heads", "model.n_heads"), PLUGIN),
        ]  # fmt: skip
    else:
        out += [
            _at_most(f"mla_{name}_positive", 1, getattr(m, name), (f"model.{name}",), why)
            for name, why in MLA_DIMS.items()
        ]
    return out


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    m, spec = scenario.params.model, scenario.model
    tp, ep = layout.tp, layout.ep
    has_moe, gqa = spec.n_experts > 0, spec.attention == "gqa"
    slots = m.n_experts + layout.redundant_experts
    out = [
        *_architecture(m, spec),
        _at_most("tp_within_dense_intermediate", tp, m.dense_intermediate,
                 ("parallel.tp", "model.dense_intermediate"),
                 "each TP rank holds at least one column of the dense FFN"),
    ]  # fmt: skip
    if has_moe:
        out += [
            _at_most("ep_within_experts", ep, slots,
                     ("parallel.ep", "model.n_experts", "parallel.redundant_experts"),
                     "each EP rank holds at least one expert"),
            _at_most("redundant_within_ranks", layout.redundant_experts,
                     m.n_experts * (ep - 1),
                     ("parallel.redundant_experts", "model.n_experts", "parallel.ep"),
                     "a replica goes to another EP rank, so each rank holds an expert at most "
                     "once: R ≤ E·(ep − 1)"),
            _at_most("tp_within_expert_intermediate", tp, m.expert_intermediate,
                     ("parallel.tp", "model.expert_intermediate"),
                     "each TP rank holds at least one column of every expert"),
        ]  # fmt: skip
    if layout.uneven:
        return out
    out += [
        _divides("heads_by_tp", tp, m.n_heads, ("parallel.tp", "model.n_heads"),
                 "attention heads"),
        _divides("dense_intermediate_by_tp", tp, m.dense_intermediate,
                 ("parallel.tp", "model.dense_intermediate"), "dense FFN columns"),
    ]  # fmt: skip
    if gqa:
        out.append(
            Constraint(
                "kv_heads_by_tp",
                sp.Or(sp.Eq(sp.Mod(m.n_kv_heads, tp), 0), sp.Eq(sp.Mod(tp, m.n_kv_heads), 0)),
                "KV heads are split evenly over TP ranks, or each is replicated on tp/H_kv "
                "ranks; parallel.uneven = true allows uneven splits",
                ("parallel.tp", "model.n_kv_heads"),
                PLUGIN,
            )
        )
    if has_moe:
        out += [
            _divides("expert_intermediate_by_tp", tp, m.expert_intermediate,
                     ("parallel.tp", "model.expert_intermediate"), "expert FFN columns"),
            _divides("experts_by_ep", ep, slots,
                     ("parallel.ep", "model.n_experts", "parallel.redundant_experts"),
                     "routed experts (with redundant replicas)"),
        ]  # fmt: skip
    return out


@hookimpl
def stepwall_analyses() -> list[Analysis]:
    """The EP plateau (`stepwall.plugins.moe_plateau`), imported only when analyses are."""

    return [ANALYSIS]
