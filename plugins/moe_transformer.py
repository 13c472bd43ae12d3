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

from stepwall.fields import KindSpec, choice, quantity
from stepwall.hookspecs import hookimpl
from stepwall.laws import (
    FLOPS_PER_MAC,
    expected_distinct_experts,
    ffn_params,
    gqa_kv_bytes,
    gqa_params,
    gqa_score_flops,
    mla_kv_bytes,
    mla_params,
    mla_score_flops,
    shard,
)
from stepwall.scenario import Scenario
from stepwall.terms import Collective, Constraint, Decoding, Layout, Op, Workload

if TYPE_CHECKING:
    from stepwall.analyses import Analysis

PLUGIN = "moe_transformer"


def _count(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, integer=True, **kw)


def _zero_ok(doc: str, latex: str) -> Any:
    return quantity(
        "dimensionless", doc, latex=latex, integer=True, minimum=0, inclusive=True, default=0
    )


def _bits(doc: str, latex: str) -> Any:
    return quantity("information", doc, latex=latex)


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
    expert_bits: float = _bits("bits per routed-expert weight", "b_{e}")
    shared_expert_bits: float = _bits("bits per shared-expert weight", "b_{se}")
    attention_bits: float = _bits("bits per attention (and router) weight", "b_{attn}")
    dense_bits: float = _bits("bits per dense-FFN weight", "b_{d}")
    embedding_bits: float = _bits("bits per embedding / LM-head weight", "b_{emb}")
    kv_bits: float = _bits("bits per KV-cache element", "b_{kv}")
    activation_bits: float = _bits("bits per activation element (all-reduce, combine)", "b_{act}")
    dispatch_bits: float = _bits("bits per element sent in expert dispatch", "b_{disp}")


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


@hookimpl
def stepwall_model_work(scenario: Scenario, decoding: Decoding, layout: Layout) -> Workload:
    m, w = scenario.params.model, scenario.params.workload
    spec = scenario.model
    mla = spec.attention == "mla"
    has_moe = spec.n_experts > 0
    tp, ep = layout.tp, layout.ep
    tokens = layout.users * decoding.verify_tokens  # tokens per replica per step (T = C·M)
    tokens_rank = layout.users_per_attention_rank * decoding.verify_tokens
    n_moe = m.n_layers - m.n_dense_layers if has_moe else sp.Integer(0)
    n_dense = m.n_dense_layers if has_moe else m.n_layers
    ops: list[Op] = []
    collectives: list[Collective] = []

    def op(
        name: str,
        params: sp.Expr,
        bits: sp.Expr,
        tokens_through: sp.Expr,
        group: str,
        why: str,
        kernels: sp.Expr,
        overlap: str = "",
    ) -> None:
        ops.append(
            Op(
                name,
                params * bits,
                params * tokens_through * FLOPS_PER_MAC,
                PLUGIN,
                why,
                group,
                kernels,
                overlap,
            )
        )

    # --- attention: weights and KV cache
    if mla:
        rep, split = mla_params(m.hidden, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                                m.qk_rope_head_dim, m.v_head_dim, m.n_heads, tp)  # fmt: skip
        kv_bytes = mla_kv_bytes(m.kv_lora_rank, m.qk_rope_head_dim, m.kv_bits)
        score = mla_score_flops(m.kv_lora_rank, m.qk_rope_head_dim, m.n_heads, tp, w.context)
    else:
        rep, split = gqa_params(m.hidden, m.n_heads, m.n_kv_heads, m.head_dim, tp)
        kv_bytes = gqa_kv_bytes(m.n_kv_heads, m.head_dim, tp, m.kv_bits)
        score = gqa_score_flops(m.head_dim, m.n_heads, tp, w.context)
    op(
        "attention.weights",
        m.n_layers * (rep + split),
        m.attention_bits,
        tokens_rank,
        "attention",
        "attention projections (weights read once per step)",
        3 * m.n_layers,
    )
    kv_read = layout.users_per_attention_rank * w.context * m.n_layers * kv_bytes
    ops.append(
        Op(
            "attention.kv_cache",
            kv_read,
            tokens_rank * m.n_layers * score,
            PLUGIN,
            "KV-cache reads growing with context S and users",
            "attention",
            m.n_layers,
        )
    )

    # --- dense FFN layers, embeddings and LM head
    if spec.n_dense_layers > 0 or not has_moe:
        op(
            "dense.ffn",
            n_dense * ffn_params(m.hidden, m.dense_intermediate) * shard(m.dense_intermediate, tp),
            m.dense_bits,
            tokens_rank,
            "dense",
            "dense FFN layers",
            2 * n_dense,
        )
    op(
        "lm_head",
        m.vocab * m.hidden * shard(m.vocab, tp),
        m.embedding_bits,
        tokens_rank,
        "dense",
        "LM head (vocabulary-parallel)",
        sp.Integer(2),
    )

    parts: dict[str, sp.Expr] = {
        "attention": m.n_layers * (rep + split) * m.attention_bits,
        "dense": n_dense
        * ffn_params(m.hidden, m.dense_intermediate)
        * shard(m.dense_intermediate, tp)
        * m.dense_bits,
        "embeddings": 2 * m.vocab * m.hidden * shard(m.vocab, tp) * m.embedding_bits,
    }

    # --- MoE layers: router, routed experts, shared experts
    if has_moe:
        expert = ffn_params(m.hidden, m.expert_intermediate) * shard(m.expert_intermediate, tp)
        hit = expected_distinct_experts(m.n_experts, m.experts_per_token, tokens)
        per_gpu_hit = layout.imbalance * hit / ep
        tokens_per_expert_gpu = layout.imbalance * tokens * m.experts_per_token / ep
        overlap = "ep" if layout.overlap_ep else ""
        ops.append(
            Op(
                "moe.routed_experts",
                n_moe * per_gpu_hit * expert * m.expert_bits,
                n_moe * expert * tokens_per_expert_gpu * FLOPS_PER_MAC,
                PLUGIN,
                "routed experts hit this step, E·(1−(1−k/E)^T)/ep, most loaded GPU",
                "moe",
                3 * n_moe,
                overlap,
            )
        )
        if spec.n_shared_experts > 0:
            op(
                "moe.shared_experts",
                n_moe * m.n_shared_experts * expert,
                m.shared_expert_bits,
                tokens_rank,
                "moe",
                "shared experts (every token)",
                2 * n_moe,
            )
        op(
            "moe.router",
            n_moe * m.hidden * m.n_experts,
            m.attention_bits,
            tokens_rank,
            "dense",
            "router logits",
            n_moe,
        )
        slots = (m.n_experts + layout.redundant_experts) / ep
        parts["routed_experts"] = n_moe * slots * expert * m.expert_bits
        parts["shared_experts"] = n_moe * m.n_shared_experts * expert * m.shared_expert_bits
        parts["router"] = n_moe * m.hidden * m.n_experts * m.attention_bits
        sent = tokens_rank * m.experts_per_token * m.hidden
        collectives += [
            Collective(
                "comm.ep_dispatch",
                "all_to_all",
                ep,
                sent * m.dispatch_bits,
                n_moe,
                PLUGIN,
                "tokens sent to their experts' ranks",
                overlap,
            ),
            Collective(
                "comm.ep_combine",
                "all_to_all",
                ep,
                sent * m.activation_bits,
                n_moe,
                PLUGIN,
                "expert outputs returned to their tokens' ranks",
                overlap,
            ),
        ]
    collectives.append(
        Collective(
            "comm.tp_allreduce",
            "all_reduce",
            tp,
            tokens_rank * m.hidden * m.activation_bits,
            2 * m.n_layers,
            PLUGIN,
            "two all-reduces per layer (after attention and after FFN)",
        )
    )
    kv = layout.users_per_attention_rank * w.context * m.n_layers * kv_bytes
    weights = sp.Add(*parts.values())
    return Workload(tuple(ops), tuple(collectives), weights, kv, m.n_layers, parts)


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


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    m, spec = scenario.params.model, scenario.model
    tp, ep = layout.tp, layout.ep
    has_moe, gqa = spec.n_experts > 0, spec.attention == "gqa"
    slots = m.n_experts + layout.redundant_experts
    out = [
        _at_most("dense_layers_within_layers", m.n_dense_layers, m.n_layers,
                 ("model.n_dense_layers", "model.n_layers"),
                 "dense layers are a subset of the layers"),
        _at_most("tp_within_dense_intermediate", tp, m.dense_intermediate,
                 ("parallel.tp", "model.dense_intermediate"),
                 "each TP rank holds at least one column of the dense FFN"),
    ]  # fmt: skip
    if has_moe:
        out += [
            _at_most("top_k_within_experts", m.experts_per_token, m.n_experts,
                     ("model.experts_per_token", "model.n_experts"),
                     "a token picks its top-k among the routed experts"),
            _at_most("top_k_at_least_one", 1, m.experts_per_token, ("model.experts_per_token",),
                     "an MoE layer routes each token to at least one expert"),
            _at_most("ep_within_experts", ep, slots,
                     ("parallel.ep", "model.n_experts", "parallel.redundant_experts"),
                     "each EP rank holds at least one expert"),
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
    from stepwall.plugins.moe_plateau import ANALYSIS

    return [ANALYSIS]
