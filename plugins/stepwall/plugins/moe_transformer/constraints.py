"""The relations ``moe-transformer``'s laws assume, of the architecture and of a layout."""

from __future__ import annotations

from typing import Any

import sympy as sp

from stepwall.core.scenario import Scenario
from stepwall.core.terms import Constraint, Layout
from stepwall.plugins.moe_transformer.attention import head_constraints
from stepwall.plugins.moe_transformer.spec import PLUGIN


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


def _architecture(m: Any, spec: Any) -> list[Constraint]:
    """What the laws assume of the architecture itself, whatever the layout: layer subsets,
    attention head grouping and MLA dimensions, the routing of MoE layers."""
    has_moe = spec.n_experts > 0
    out = [
        _at_most("dense_layers_within_layers", m.n_dense_layers, m.n_layers,
                 ("model.n_dense_layers", "model.n_layers"),
                 "dense layers are a subset of the layers"),
        # `attended`: L − L_s − L_w full layers, L_w at a window of W ≥ 1 tokens, L_s linear
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
    if spec.chunked_layers > 0:  # `Attention.full_layers`: the rest attend to everything
        out.append(_at_most("chunked_layers_within_layers",
                            m.chunked_layers + m.sliding_layers + m.linear_layers, m.n_layers,
                            ("model.chunked_layers", "model.sliding_layers",
                             "model.linear_layers", "model.n_layers"),
                            "chunked, sliding-window and linear layers are disjoint subsets of "
                            "the layers"))  # fmt: skip
    if spec.mixer_only_layers > 0:  # `Pass.n_moe`, `Pass.n_dense`: FFNs on the other layers
        out.append(_at_most("ffn_layers_within_layers", m.n_dense_layers + m.mixer_only_layers,
                            m.n_layers, ("model.n_dense_layers", "model.mixer_only_layers",
                                         "model.n_layers"),
                            "dense-FFN layers and layers without an FFN are disjoint subsets "
                            "of the layers"))  # fmt: skip
    if spec.linear_layers > 0:  # `linear_state_params`, `linear_state_elements`: each ≥ 1
        out.append(_at_most("linear_layers_within_layers", m.linear_layers + m.sliding_layers,
                            m.n_layers, ("model.linear_layers", "model.sliding_layers",
                                         "model.n_layers"),
                            "linear-attention layers are layers without attention, apart from "
                            "the sliding-window ones"))  # fmt: skip
        out += [
            _at_most(f"linear_{name}_positive", 1, getattr(m, f"linear_{name}"),
                     (f"model.linear_{name}", "model.linear_layers"),
                     "a linear-attention layer has at least one head of at least one "
                     "dimension")
            for name in ("key_heads", "value_heads", "key_dim", "value_dim")
        ]  # fmt: skip
    if has_moe:
        out.append(_at_most("top_k_at_least_one", 1, m.experts_per_token,
                            ("model.experts_per_token",),
                            "an MoE layer routes each token to at least one expert"))  # fmt: skip
        out += [  # `destination_nodes`: t of G groups of E/G experts, k picks among them
            _at_most("topk_group_within_groups", m.topk_group, m.n_group,
                     ("model.topk_group", "model.n_group"),
                     "a token's experts come from topk_group of the n_group groups"),
            Constraint("experts_by_groups", sp.Eq(sp.Mod(m.n_experts, m.n_group), 0),
                       "the routed experts form n_group equal groups",
                       ("model.n_group", "model.n_experts"), PLUGIN),
            _at_most("top_k_within_groups", m.experts_per_token,
                     m.topk_group * m.n_experts / m.n_group,
                     ("model.experts_per_token", "model.topk_group", "model.n_group"),
                     "a token's top-k experts lie in its topk_group groups"),
        ]  # fmt: skip
    else:  # the shared experts sit in MoE layers, which a dense model does not have
        out.append(_at_most("shared_experts_need_moe", m.n_shared_experts, m.n_experts,
                            ("model.n_shared_experts", "model.n_experts"),
                            "shared experts belong to MoE layers; a dense model "
                            "(model.n_experts = 0) has none"))  # fmt: skip
    out += head_constraints(m, spec)
    return out


def layout_constraints(scenario: Scenario, layout: Layout) -> list[Constraint]:
    """What the laws assume of the model under ``layout``: the architecture's own relations,
    each rank holding a part of every split, and (unless ``parallel.uneven``) even splits."""
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
    if layout.pipelined:  # `stages.stage_of`: every stage holds at least one layer
        out.append(_at_most("stages_within_layers", layout.pp, m.n_layers,
                            ("parallel.pp", "model.n_layers"),
                            "each pipeline stage holds at least one layer"))  # fmt: skip
    if layout.uneven:
        return out
    out += [
        _divides("heads_by_tp", tp, m.n_heads, ("parallel.tp", "model.n_heads"),
                 "attention heads"),
        _divides("dense_intermediate_by_tp", tp, m.dense_intermediate,
                 ("parallel.tp", "model.dense_intermediate"), "dense FFN columns"),
    ]  # fmt: skip
    if spec.attention == "compressed":
        out.append(_divides("o_groups_by_tp", tp, m.o_groups, ("parallel.tp", "model.o_groups"),
                            "output groups"))  # fmt: skip
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
