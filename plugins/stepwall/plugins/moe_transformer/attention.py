"""Attention of ``moe-transformer``: MLA, GQA or DeepSeek-V4's compressed projections, the
attention kernel over the KV cache (sliding-window layers see at most W tokens of it; with
DeepSeek Sparse Attention each query reads the k_I tokens its lightning indexer selects, and
the indexer scores every cached index key; compressed attention keeps a window and one entry
per r tokens), the cache's bytes, and what the attention laws assume of the architecture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import sympy as sp

from stepwall.core.laws import (
    chunk_tokens,
    chunk_tokens_mean,
    compressed_attention_params,
    compressed_entries,
    compressed_serial_k,
    compressor_params,
    gqa_kv_bytes,
    gqa_params,
    gqa_score_flops,
    gqa_serial_k,
    index_key_bytes,
    indexer_params,
    indexer_score_flops,
    linear_state_elements,
    mla_kv_bytes,
    mla_params,
    mla_prompt_score_flops,
    mla_score_flops,
    mla_serial_k,
    mla_sparse_prompt_flops,
    paged_tokens,
    shard,
    shared_kv_bytes,
)
from stepwall.core.symbols import min_of
from stepwall.core.terms import KV_TRANSFER_TERM, Collective, Constraint, Op
from stepwall.plugins.moe_transformer.spec import PLUGIN
from stepwall.plugins.moe_transformer.work import Pass

# GEMM kernels per layer of each attention type (the engine adds norms, RoPE, quantisation):
# MLA: fused q_a/kv_a down-projection, q_b, the absorbed k_b (UK) and v_b (UV), o;
# GQA: fused qkv, o (DeepSeek-V2 §2.1; TensorRT-LLM blog 1 lists the same five MLA GEMMs);
# compressed: fused q_a/kv, q_b, the grouped o_a, o_b (DeepSeek-V4 inference/model.py).
ATTENTION_GEMMS = {"mla": 5, "gqa": 2, "compressed": 4}

# MLA's dimensions, each ≥ 1 where `mla_params`, `mla_kv_bytes` and the score laws use them:
# a zero would silently drop a projection (r_q = 0: no query at all) or the cached latent.
MLA_DIMS = {
    "q_lora_rank": "MLA projects queries through a latent of r_q ≥ 1 dimensions (q_a, q_b)",
    "kv_lora_rank": "MLA caches a KV latent of r_kv ≥ 1 dimensions",
    "qk_nope_head_dim": "each MLA head has d_nope ≥ 1 non-rotary query/key dimensions",
    "qk_rope_head_dim": "MLA keys carry a decoupled rotary part of d_rope ≥ 1 dimensions",
    "v_head_dim": "each MLA head has d_v ≥ 1 value dimensions",
}


@attrs.frozen
class Attention:
    """The attention laws of one model under TP: replicated and split projection weights per
    GPU, KV bytes per token per layer, and score FLOPs per query per KV token (decode
    queries in absorbed form, prompt queries in expanded, multi-head form)."""

    m: Any
    rep: sp.Expr
    split: sp.Expr
    kv_token: sp.Expr
    score: Callable[[sp.Expr], sp.Expr]
    prompt_score: Callable[[sp.Expr], sp.Expr]
    sparse: bool = False  # DeepSeek Sparse Attention: an indexer selects k_I tokens per query
    compressed: bool = False  # DeepSeek-V4: a window and compressed entries per layer
    chunked: bool = False  # Llama 4: some layers attend only within their chunk
    indexer: sp.Expr = sp.S.Zero  # weights per indexed layer of the lightning indexer
    # FLOPs per prompt token per indexed layer of a token-sparse prefill kernel (MLA with an
    # indexer: `mla_sparse_prompt_flops`); 0: prompts attend in expanded form on every layer
    sparse_prompt: sp.Expr = sp.S.Zero
    extra: sp.Expr = sp.S.Zero  # weights over the layers besides these (compressors)
    # a window layer's KV bytes per token over a full layer's, less one (its own KV heads)
    window_surplus: sp.Expr = sp.S.Zero
    # a window layer's score FLOPs per KV token over a full layer's (its own head dimension)
    window_score: sp.Expr = sp.S.One
    # the reduction lengths of a layer's projection GEMMs on one rank, summed (their k-loops)
    serial_k: sp.Expr = sp.S.Zero

    @classmethod
    def of(cls, p: Pass) -> Attention:
        att = attrs.evolve(cls._dense(p), chunked=p.spec.chunked_layers > 0)
        if p.spec.attention_gate:  # a sigmoid gate on the heads' output, split by heads
            m = p.m
            gqa_width = m.v_head_dim if p.spec.v_head_dim > 0 else m.head_dim
            width = gqa_width if p.spec.attention == "gqa" else m.v_head_dim
            gate = m.hidden * m.n_heads * width * shard(m.n_heads, p.layout.tp)
            att = attrs.evolve(att, split=att.split + gate)
        if p.spec.attention == "compressed":
            return cls._compressors(p, att)
        if p.spec.index_topk == 0:
            return att
        m = p.m
        # the indexer's queries come from MLA's query latent, or from the hidden state (GQA)
        source = m.q_lora_rank if p.spec.attention == "mla" else m.hidden
        indexer = indexer_params(m.hidden, source, m.index_heads, m.index_head_dim)
        att = attrs.evolve(att, indexer=indexer, sparse=True)
        if p.spec.attention != "mla":
            return att
        tile = _head_tile(p)
        sparse = mla_sparse_prompt_flops(m.kv_lora_rank, m.qk_rope_head_dim, m.n_heads,
                                         p.layout.tp, tile, m.index_topk)  # fmt: skip
        return attrs.evolve(att, sparse_prompt=sparse)

    @classmethod
    def _compressors(cls, p: Pass, att: Attention) -> Attention:
        """DeepSeek-V4's compressing layers add their compressors (`compressor_params`: CSA's
        over overlapping pairs of groups, c = 2; HCA's c = 1) and, on the CSA layers, a
        lightning indexer with its own compressor of index keys, whole on each rank."""
        m, spec = p.m, p.spec
        extra = m.hca_layers * compressor_params(m.hidden, m.head_dim, 1)
        sparse = spec.csa_layers > 0 and spec.index_topk > 0
        if spec.csa_layers > 0:
            extra += m.csa_layers * compressor_params(m.hidden, m.head_dim, 2)
        indexer = sp.S.Zero
        if sparse:
            indexer = indexer_params(m.hidden, m.q_lora_rank, m.index_heads, m.index_head_dim)
            indexer += compressor_params(m.hidden, m.index_head_dim, 2)
        return attrs.evolve(att, compressed=True, sparse=sparse, indexer=indexer, extra=extra)

    @classmethod
    def _dense(cls, p: Pass) -> Attention:
        m, tp = p.m, p.layout.tp
        if p.spec.attention == "compressed":
            rep, split = compressed_attention_params(
                m.hidden, m.q_lora_rank, m.n_heads, m.head_dim, m.o_lora_rank, m.o_groups, tp
            )

            def shared_score(ctx: sp.Expr) -> sp.Expr:  # keys and values: the one entry
                return gqa_score_flops(m.head_dim, m.n_heads, tp, ctx)

            kv_token = shared_kv_bytes(m.head_dim, m.kv_bits)
            loops = compressed_serial_k(m.hidden, m.q_lora_rank, m.n_heads, m.head_dim,
                                        m.o_lora_rank, m.o_groups, tp)  # fmt: skip
            return cls(m, rep, split, kv_token, shared_score, shared_score, serial_k=loops)
        if p.spec.attention == "mla":
            rep, split = mla_params(m.hidden, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                                    m.qk_rope_head_dim, m.v_head_dim, m.n_heads, tp)  # fmt: skip
            kv_token = mla_kv_bytes(m.kv_lora_rank, m.qk_rope_head_dim, m.kv_bits)

            def score(ctx: sp.Expr) -> sp.Expr:
                return mla_score_flops(m.kv_lora_rank, m.qk_rope_head_dim, m.n_heads, tp, ctx)

            def prompt_score(ctx: sp.Expr) -> sp.Expr:
                return mla_prompt_score_flops(m.qk_nope_head_dim, m.qk_rope_head_dim,
                                              m.v_head_dim, m.n_heads, tp, ctx)  # fmt: skip

            loops = mla_serial_k(m.hidden, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                                 m.v_head_dim, m.n_heads, tp)  # fmt: skip
            return cls(m, rep, split, kv_token, score, prompt_score, serial_k=loops)
        # values narrower than queries and keys: every GQA law is linear in 2·d_h, so the
        # mean (d_qk + d_v)/2 prices q·k and p·v, the k and v caches and q, k, v, o exactly
        spec = p.spec
        d = (m.head_dim + m.v_head_dim) / 2 if spec.v_head_dim > 0 else m.head_dim
        tensors = 1 if spec.keys_are_values else 2
        rep, split = gqa_params(m.hidden, m.n_heads, m.n_kv_heads, d, tp, tensors)
        kv_token = gqa_kv_bytes(m.n_kv_heads, d, tp, m.kv_bits, tensors)

        def gqa_score(ctx: sp.Expr) -> sp.Expr:
            return gqa_score_flops(d, m.n_heads, tp, ctx)

        att = cls(m, rep, split, kv_token, gqa_score, gqa_score,
                  serial_k=gqa_serial_k(m.hidden, m.n_heads, d, tp))  # fmt: skip
        if spec.window_kv_heads == 0 and spec.window_head_dim == 0 and tensors == 2:
            return att
        # sliding-window layers of their own geometry (KV heads, head dimension, keys and
        # values apart): their projections, cache and scores in proportion to a full layer's
        kv_w = m.window_kv_heads if spec.window_kv_heads > 0 else m.n_kv_heads
        d_w = m.window_head_dim if spec.window_head_dim > 0 else d
        own = gqa_kv_bytes(kv_w, d_w, tp, m.kv_bits)
        _, split_w = gqa_params(m.hidden, m.n_heads, kv_w, d_w, tp)
        return attrs.evolve(att, extra=m.sliding_layers * (split_w - split),
                            window_surplus=own / kv_token - 1,
                            window_score=d_w / d)  # fmt: skip

    @property
    def params(self) -> sp.Expr:
        """Projection weights per GPU per attention layer."""
        return self.rep + self.split

    @property
    def weights(self) -> sp.Expr:
        """Projection weights per GPU over all attention layers, with the indexers of the
        indexed layers and the compressors of the compressing ones."""
        return self.layers * self.params + self.indexed_layers * self.indexer + self.extra

    @property
    def layers(self) -> sp.Expr:
        """Layers with attention: all but the linear-attention (state-space) ones."""
        return self.m.n_layers - self.m.linear_layers

    @property
    def full_layers(self) -> sp.Expr:
        """Attention layers over the whole context: all but the sliding-window and the
        chunked ones."""
        full = self.layers - self.m.sliding_layers
        return full - self.m.chunked_layers if self.chunked else full

    def local(self, ctx: sp.Expr, prompt: bool = False) -> sp.Expr:
        """Layer-tokens the windowed and chunked layers keep and attend to: W at most on a
        sliding-window layer, the current chunk's on a chunked one (`chunk_tokens`); for a
        prompt's tokens, whose mean position is ``ctx``, the mean over its 2·ctx positions
        (`chunk_tokens_mean`: the tokens before a chunk's start are not seen)."""
        m = self.m
        window = m.sliding_layers * min_of(ctx, m.sliding_window)
        if not self.chunked:
            return window
        chunk = (chunk_tokens_mean(2 * ctx, m.attention_chunk) if prompt
                 else chunk_tokens(ctx, m.attention_chunk))  # fmt: skip
        return window + m.chunked_layers * chunk

    def surplus(self, ctx: sp.Expr, cap: bool = True) -> sp.Expr:
        """Layer-tokens of KV bytes the window layers' own KV heads add to those counted at
        the full layers' bytes per token (`window_surplus` of each of their min(S, W) tokens,
        or of every token written when ``cap`` is false); 0 with the full layers' heads."""
        if self.window_surplus == 0:
            return sp.S.Zero
        m = self.m
        tokens = min_of(ctx, m.sliding_window) if cap else ctx
        return self.window_surplus * m.sliding_layers * tokens

    @property
    def window_layers(self) -> sp.Expr:
        """Compressed attention's layers with the sliding window alone (ratio 0)."""
        m = self.m
        return self.layers - m.csa_layers - m.hca_layers

    def held(self, ctx: sp.Expr, prompt: bool = False) -> sp.Expr:
        """Layer-tokens of KV cache one user keeps over all layers: L − L_w full layers, L_w
        at a window of at most W tokens; compressed attention keeps the window on every layer
        and one entry per r tokens on its CSA and HCA layers (`compressed_entries`)."""
        m = self.m
        if self.compressed:
            window = self.window_layers * min_of(ctx, m.sliding_window)
            csa = m.csa_layers * compressed_entries(ctx, m.sliding_window, m.csa_ratio)
            return window + csa + m.hca_layers * compressed_entries(ctx, m.sliding_window,
                                                                     m.hca_ratio)  # fmt: skip
        return self.full_layers * ctx + self.local(ctx, prompt)

    def attended(self, ctx: sp.Expr, prompt: bool = False) -> sp.Expr:
        """Layer-tokens of KV one query attends to: as `held`, but a sparse model's full
        layers read only the k_I tokens its indexer selects (min(S, k_I)), and CSA layers the
        window and k_I of their S/r_c compressed entries. ``prompt``: ``ctx`` is the mean
        position of a prompt's tokens (`local`)."""
        m = self.m
        if self.compressed:
            csa = min_of(ctx, m.sliding_window) + (
                min_of(ctx / m.csa_ratio, m.index_topk) if self.sparse else ctx / m.csa_ratio
            )
            hca = m.hca_layers * compressed_entries(ctx, m.sliding_window, m.hca_ratio)
            return self.window_layers * min_of(ctx, m.sliding_window) + m.csa_layers * csa + hca
        if not self.sparse:
            return self.held(ctx, prompt)
        dense = m.dense_attention_layers * ctx
        return self.indexed_layers * min_of(ctx, m.index_topk) + dense + self.local(ctx, prompt)

    def scored(self, ctx: sp.Expr, prompt: bool = False) -> sp.Expr:
        """Layer-tokens of score work one query does, in a full layer's FLOPs per token: as
        `attended`, each window layer's min(S, W) tokens at its head dimension over a full
        layer's (`window_score`; 1 where the two kinds share it)."""
        attended = self.attended(ctx, prompt)
        if self.window_score == 1:
            return attended
        m = self.m
        return attended + (self.window_score - 1) * m.sliding_layers * min_of(ctx, m.sliding_window)

    def prompt_flops(self, ctx: sp.Expr) -> sp.Expr:
        """Score FLOPs of one prompt token at mean position ``ctx`` over the layers the
        expanded (multi-head) prefill kernel runs: all of them, or, with a token-sparse prefill
        kernel (`sparse_prompt`), all but the indexed ones, which `add_attention` prices apart."""
        scored = self.scored(ctx, True)
        if self.sparse_prompt != 0:
            scored -= self.indexed_layers * min_of(ctx, self.m.index_topk)
        return self.prompt_score(1) * scored

    def written(self, tokens: sp.Expr) -> sp.Expr:
        """Layer-entries a prompt of ``tokens`` writes to the cache: one per token per layer;
        compressed attention's entries as `held` counts them."""
        if self.compressed:
            return self.held(tokens)
        return self.layers * tokens + self.surplus(tokens, cap=False)

    @property
    def indexed_layers(self) -> sp.Expr:
        """Layers whose lightning indexer scores cached index keys: the full layers but the
        dense-attention ones (DSA, MiniMax Sparse Attention), or compressed attention's CSA
        layers; none without an indexer."""
        if not self.sparse:
            return sp.S.Zero
        if self.compressed:
            return self.m.csa_layers
        return self.full_layers - self.m.dense_attention_layers

    def indexed(self, ctx: sp.Expr) -> sp.Expr:
        """Index keys per indexed layer for ``ctx`` tokens: one per token, or one per
        compressed CSA entry."""
        return ctx / self.m.csa_ratio if self.compressed else ctx

    @property
    def index_token(self) -> sp.Expr:
        """Index-key bytes per token over all indexed layers (0 for dense attention)."""
        m = self.m
        if not self.sparse:
            return sp.Integer(0) * m.index_bits
        return self.indexed_layers * self.indexed(1) * index_key_bytes(m.index_head_dim,
                                                                        m.index_bits)  # fmt: skip

    def cache_bytes(self, tokens: sp.Expr, tp: sp.Expr) -> sp.Expr:
        """Per-request cache bytes on one TP rank for ``tokens``: the KV (and index-key) cache,
        and the linear-attention layers' recurrent state, constant in the context."""
        m = self.m
        state = linear_state_elements(m.linear_value_heads, m.linear_key_dim, m.linear_value_dim,
                                      tp)  # fmt: skip
        return ((self.held(tokens) + self.surplus(tokens)) * self.kv_token
                + tokens * self.index_token
                + m.linear_layers * state * m.state_bits)  # fmt: skip

    def resident_kv(self, p: Pass) -> sp.Expr:
        """KV-cache bytes per GPU: the busiest rank's users, each with its whole context in
        whole blocks of the engine's paged cache."""
        step = p.step
        held = paged_tokens(step.context + step.tokens_per_user, p.engine.kv_block)
        return step.users_per_rank * self.cache_bytes(held, p.layout.tp)


def add_attention(p: Pass, att: Attention) -> None:
    """The projections, then the attention kernel over the KV cache: each user's tokens attend
    to its cached context plus, on average, half of its own new tokens."""
    m, spec, step = p.m, p.spec, p.step
    p.gemm("attention.projections", att.weights, m.attention_bits, step.tokens_rank,
           "attention", "attention projections (weights read once per step)",
           ATTENTION_GEMMS[spec.attention] * att.layers, spec.attention_math,
           serial_k=att.layers * att.serial_k)  # fmt: skip
    attended, kv_token = att.attended, att.kv_token

    def new(ctx: sp.Expr) -> sp.Expr:  # the pass's own tokens: prompts in a prefill pass
        return att.attended(ctx, prompt=p.prefill)

    def prompts(ctx: sp.Expr) -> sp.Expr:  # prompt tokens at mean position ctx
        return att.attended(ctx, prompt=True)

    decode_ctx = step.context + step.tokens_per_user / 2
    prompt_ctx = step.tokens_per_user / 2 if p.prefill else step.prefill_context
    users_rank = step.users_per_rank
    whole = step.context + step.tokens_per_user
    kv_read = users_rank * (attended(whole) + att.surplus(whole)) * kv_token
    kv_read += att.written(step.prefill_tokens_rank) * kv_token  # new prompt KV written
    # prompt tokens attend in expanded (multi-head) form, decode tokens in absorbed form
    new_tokens = users_rank * step.tokens_per_user
    if p.prefill:
        flops = new_tokens * att.prompt_flops(decode_ctx)
    else:
        flops = new_tokens * att.score(1) * att.scored(decode_ctx)
    flops += step.prefill_tokens_rank * att.prompt_flops(prompt_ctx)
    one_user = (attended(whole) + att.surplus(whole)) * kv_token  # its own KV, in order
    # KV tokens per query per layer, averaged over the pass's queries (its compute ramp)
    queries = users_rank * step.tokens_per_user + step.prefill_tokens_rank
    per_query = (
        users_rank * step.tokens_per_user * new(decode_ctx)
        + step.prefill_tokens_rank * prompts(prompt_ctx)
    ) / (queries * att.layers)
    p.ops.append(Op("attention.core", kv_read, flops, PLUGIN,
                    "attention over the KV cache: context S and each user's new tokens",
                    "attention", p.batches * att.layers, p.lane, core_kind(spec),
                    spec.attention_core_math, per_query, one_user))  # fmt: skip
    prompts_rank = (new_tokens if p.prefill else 0) + step.prefill_tokens_rank
    if att.sparse_prompt != 0 and prompts_rank != 0:
        p.ops.append(_sparse_prefill(p, att, prompts_rank))
    if att.sparse:
        p.ops.append(_indexer(p, att, decode_ctx, prompt_ctx))


def core_kind(spec: Any) -> str:
    """The op kind of a layer's attention over its cache: grouped-query attention runs its
    own kernel family (TensorRT-LLM's XQA on Hopper, FlashInfer's decode), MLA and the rest
    theirs."""
    return "gqa_attention" if spec.attention == "gqa" else "attention"


def _head_tile(p: Pass) -> sp.Expr:
    """The GPU's head tile of token-sparse MLA prefill kernels (`Gpu.sparse_mla_heads`); 1
    where the hardware states none."""
    hardware = p.scenario.sections["hardware"]
    if getattr(hardware, "sparse_mla_heads", None) is None:
        return sp.S.One
    return p.scenario.params.hardware.sparse_mla_heads


def _sparse_prefill(p: Pass, att: Attention, prompts_rank: sp.Expr) -> Op:
    """The indexed layers' prompt tokens in the token-sparse prefill kernel
    (`mla_sparse_prompt_flops`): k_I slots per query at the padded heads, in BF16 (FlashMLA
    computes over a BF16 copy of the cache: FlashMLA README, sparse MLA prefill). No bytes
    beyond the cache `attention.core` reads and writes: the README reports the kernel
    compute-bound (up to 1450 TFLOP/s on B200 at 128 heads), so its gathers of the selected
    entries are not what bounds it. One launch per layer, the attention kernel's own (its
    floor is `attention.core`'s)."""
    return Op("attention.sparse_prefill", sp.Integer(0) * p.m.kv_bits,
              prompts_rank * att.indexed_layers * att.sparse_prompt, PLUGIN,
              "token-sparse prefill: every prompt query computes k_I slots at the padded heads",
              "attention", sp.S.Zero, p.lane, "attention", "bf16", p.m.index_topk)  # fmt: skip


def _indexer(p: Pass, att: Attention, decode_ctx: sp.Expr, prompt_ctx: sp.Expr) -> Op:
    """DeepSeek Sparse Attention's lightning indexer: every query scores all of its cached
    index keys (`indexer_score_flops`), reading them once per user per step, then a top-k
    selects the k_I tokens the attention kernel reads (one scoring and one top-k kernel per
    full layer)."""
    m, step = p.m, p.step
    layers, keys = att.indexed_layers, att.indexed
    users_rank, new = step.users_per_rank, step.users_per_rank * step.tokens_per_user
    key_bytes = index_key_bytes(m.index_head_dim, m.index_bits)
    read = users_rank * layers * keys(step.context + step.tokens_per_user) * key_bytes
    read += layers * keys(step.prefill_tokens_rank) * key_bytes  # the prompt's keys written
    per_token = indexer_score_flops(m.index_heads, m.index_head_dim, 1)
    scored = new * keys(decode_ctx) + step.prefill_tokens_rank * keys(prompt_ctx)
    queries = new + step.prefill_tokens_rank
    one_user = layers * keys(step.context + step.tokens_per_user) * key_bytes
    return Op("attention.indexer", read, scored * layers * per_token, PLUGIN,
              "lightning indexer: each query scores every cached index key, then a top-k",
              "attention", 2 * p.batches * layers, p.lane, "attention", p.spec.index_math,
              scored / queries, one_user)  # fmt: skip


def kv_transfer(p: Pass, att: Attention) -> Collective:
    """The prompt's KV cache, sent to a decode pool (disaggregated serving)."""
    return Collective(KV_TRANSFER_TERM, "send", sp.Integer(2),
                      att.cache_bytes(p.step.kv_transfer, p.layout.tp), sp.Integer(1), PLUGIN,
                      "the prompt's KV cache to the decode pool")  # fmt: skip


def cp_kv_gather(p: Pass, att: Attention) -> Collective:
    """Prefill context parallelism (SGLang's prefill CP, docs.sglang.io advanced_features/
    prefill_cp): each of the cp ranks holds 1/cp of the prompt's tokens (a zigzag split gives
    each the same causal work) and, layer by layer, all-gathers the others' keys and values
    to attend over. An all-gather is the all-to-all in which each rank sends its share to
    every peer: per call the prompt's whole cache of one layer on a TP rank (the mean over
    the attention layers; window layers hold at most the window)."""
    prompt, layers = p.step.tokens_per_user, att.layers
    size = att.cache_bytes(prompt, p.layout.tp) / layers
    return Collective("comm.cp_kv_gather", "all_to_all", p.layout.cp, size, layers, PLUGIN,
                      "the prompt's KV gathered over its context-parallel ranks, a layer at "
                      "a time")  # fmt: skip


def head_constraints(m: Any, spec: Any) -> list[Constraint]:
    """What the attention laws assume of the heads: GQA's query heads in equal groups per KV
    head (`gqa_params`, `gqa_kv_bytes`), or MLA's dimensions each at least one."""
    sparse = []
    if spec.index_topk > 0:
        sparse = [
            Constraint(f"dsa_{name}_positive", getattr(m, name) >= 1,
                       "a sparse-attention indexer has at least one head of at least one "
                       "dimension", (f"model.{name}", "model.index_topk"), PLUGIN)
            for name in ("index_heads", "index_head_dim")
        ]  # fmt: skip
        sparse.append(Constraint(
            "dense_attention_within_full_layers",
            m.dense_attention_layers <= m.n_layers - m.linear_layers - m.sliding_layers,
            "dense-attention layers are full-attention layers without the indexer",
            ("model.dense_attention_layers", "model.n_layers"), PLUGIN))  # fmt: skip
    if spec.attention != "gqa" and (spec.window_head_dim or spec.keys_are_values):
        sparse.append(
            Constraint(  # `Attention._dense` reads these of GQA alone
                "gqa_geometry_only_with_gqa",
                sp.Eq(m.window_head_dim + m.keys_are_values, 0),
                "a window head dimension and keys serving as values are GQA geometries",
                ("model.window_head_dim", "model.keys_are_values", "model.attention"),
                PLUGIN,
            )
        )
    if spec.attention == "compressed":
        return [*sparse, *_compressed_constraints(m)]
    if spec.attention == "gqa":
        window = []
        if spec.window_kv_heads > 0:
            window = [Constraint(
                "window_kv_heads_group_heads", sp.Eq(sp.Mod(m.n_heads, m.window_kv_heads), 0),
                "a sliding-window layer's query heads form equal groups, one per KV head",
                ("model.window_kv_heads", "model.n_heads"), PLUGIN)]  # fmt: skip
        if spec.window_head_dim > 0 and spec.v_head_dim > 0:  # d_w prices q, k and v alike
            window.append(Constraint(
                "window_head_dim_with_even_values", sp.Eq(m.v_head_dim, 0),
                "a window layer's own head dimension is its queries', keys' and values'; "
                "values narrower than keys (v_head_dim) are not priced with it",
                ("model.window_head_dim", "model.v_head_dim"), PLUGIN))  # fmt: skip
        return [
            *sparse,
            *window,
            Constraint("kv_heads_within_heads", m.n_kv_heads <= m.n_heads,
                       "each KV head serves one or more query heads",
                       ("model.n_kv_heads", "model.n_heads"), PLUGIN),
            Constraint("kv_heads_group_heads", sp.Eq(sp.Mod(m.n_heads, m.n_kv_heads), 0),
                       "query heads form equal groups, one per KV head",
                       ("model.n_kv_heads", "model.n_heads"), PLUGIN),
        ]  # fmt: skip
    return [
        *sparse,
        *(Constraint(f"mla_{name}_positive", getattr(m, name) >= 1, why, (f"model.{name}",),
                     PLUGIN) for name, why in MLA_DIMS.items()),
    ]  # fmt: skip


def _compressed_constraints(m: Any) -> list[Constraint]:
    """What `compressed_attention_params` and `compressed_entries` assume: a window of W ≥ 1
    on every layer (so ``sliding_layers``, a subset with a window, does not enter), CSA and HCA
    layers among the attention layers, an output rank r_o ≥ 1, and an indexer wherever CSA
    selects."""
    keys = ("model.csa_layers", "model.hca_layers", "model.n_layers", "model.linear_layers")
    return [
        Constraint("compressed_window_positive", m.sliding_window >= 1,
                   "compressed attention keeps a sliding window of W ≥ 1 tokens on every layer",
                   ("model.sliding_window",), PLUGIN),
        Constraint("compressed_layers_within_layers",
                   m.csa_layers + m.hca_layers <= m.n_layers - m.linear_layers,
                   "CSA and HCA layers are disjoint subsets of the attention layers", keys,
                   PLUGIN),
        Constraint("o_lora_rank_positive", m.o_lora_rank >= 1,
                   "compressed attention's output groups reduce to r_o ≥ 1 dimensions",
                   ("model.o_lora_rank",), PLUGIN),
        Constraint("o_groups_within_heads", m.o_groups <= m.n_heads,
                   "each output group holds at least one head", ("model.o_groups", "model.n_heads"),
                   PLUGIN),
        Constraint("csa_needs_indexer", m.index_topk >= sp.Min(m.csa_layers, 1),
                   "a CSA layer's indexer selects index_topk ≥ 1 compressed entries",
                   ("model.index_topk", "model.csa_layers"), PLUGIN),
    ]  # fmt: skip
