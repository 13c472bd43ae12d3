"""The fields of model kind ``moe-transformer``: the architecture, named after the Hugging Face
config of DeepSeek-V3 / Kimi K2, with a precision (bits) and a math per component."""

from __future__ import annotations

from typing import Any

import attrs

from stepwall.core.fields import choice, quantity
from stepwall.core.terms import OP_PRECISIONS

PLUGIN = "moe_transformer"


def _count(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, integer=True, **kw)


def _zero_ok(doc: str, latex: str) -> Any:
    return quantity(
        "dimensionless", doc, latex=latex, integer=True, minimum=0, inclusive=True, default=0
    )


def _bits(doc: str, latex: str, default: Any = attrs.NOTHING) -> Any:
    """Bits per element; a ``default`` is in bytes (SI), 1.0 = 8 bit."""
    return quantity("information", doc, latex=latex, default=default)


# The routing laws (`destination_ranks`, `destination_nodes`) multiply over a token's k picks
# and sum over its t groups term by term: k and t above this are refused, not built (today's
# models pick 1-22 experts from at most 8 groups).
MOST_PICKS = 64


def _picks(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, integer=True, maximum=MOST_PICKS, **kw)


def _switch(doc: str, latex: str) -> Any:
    """A 0/1 choice of the architecture (0 by default)."""
    return quantity("dimensionless", doc, latex=latex, integer=True, minimum=0, inclusive=True,
                    maximum=1, default=0)  # fmt: skip


def _math(doc: str) -> Any:
    return choice(OP_PRECISIONS, doc, default="bf16")


@attrs.frozen
class MoeTransformer:
    """The fields of a ``moe-transformer`` model section."""

    n_layers: int = _count("decoder layers", "L")
    n_dense_layers: int = _zero_ok(
        "leading layers with a dense FFN (first_k_dense_replace)", "L_{d}"
    )
    hidden: int = _count("hidden size", "h")
    dense_intermediate: int = _count("dense FFN intermediate size", "I_{d}")
    mixer_only_layers: int = _zero_ok(
        "layers with a token mixer (attention or linear) and no FFN: Nemotron-H's pattern has "
        "more mixer blocks (M, *) than FFN blocks (E, -)",
        "L_{m}",
    )
    ffn_matrices: int = quantity(
        "dimensionless",
        "weight matrices per FFN, dense and expert: 3 gated (SwiGLU: gate, up, down), 2 "
        "ungated (up, down: Nemotron-H's squared ReLU)",
        latex="n_{f}",
        integer=True,
        minimum=2,
        inclusive=True,
        maximum=3,
        default=3,
    )
    n_experts: int = _zero_ok("routed experts per MoE layer", "E")
    experts_per_token: int = _picks(
        "routed experts each token uses (top-k; at most 64)",
        "k",
        minimum=0,
        inclusive=True,
        default=0,
    )
    n_shared_experts: int = _zero_ok("shared experts per MoE layer", "E_{s}")
    expert_intermediate: int = _count("expert FFN intermediate size", "I_{e}", default=1)
    moe_latent: int = _zero_ok(
        "latent MoE: the width routed experts work in, projected down from and back up to the "
        "hidden size around them (moe_latent_size; 0: experts at the hidden size)",
        r"h_{\ell}",
    )
    attention: str = choice(
        ("mla", "gqa", "compressed"),
        "attention type: MLA, GQA, or DeepSeek-V4's compressed attention (one shared key-value "
        "head of head_dim, a sliding window on every layer, compressed entries on csa_layers "
        "and hca_layers)",
        default="mla",
    )
    n_heads: int = _count("attention heads", "H")
    n_kv_heads: int = _count("KV heads (GQA)", "H_{kv}", default=1)
    head_dim: int = _count("head dimension (GQA)", "d_{h}", default=128)
    q_lora_rank: int = _zero_ok("MLA query low-rank dimension", "r_{q}")
    kv_lora_rank: int = _zero_ok("MLA latent KV dimension", "r_{kv}")
    qk_nope_head_dim: int = _zero_ok("MLA non-rotary query/key head dimension", "d_{nope}")
    qk_rope_head_dim: int = _zero_ok("MLA rotary head dimension", "d_{rope}")
    v_head_dim: int = _zero_ok(
        "value head dimension: MLA's; GQA's where values are narrower than queries and keys "
        "(MiMo-V2-Flash: 128 beside 192; 0 for GQA: head_dim)",
        "d_{v}",
    )
    vocab: int = _count("vocabulary size", "V")
    tie_embeddings: int = _switch(
        "1: the LM head is the input embedding's matrix, held once (tie_word_embeddings); 0: two",
        "t_{e}",
    )
    sliding_window: int = _zero_ok(
        "tokens a sliding-window layer attends to (0: no sliding-window layers)", "W"
    )
    sliding_layers: int = _zero_ok("layers with a sliding window (gpt-oss: every other)", "L_{w}")
    window_kv_heads: int = _zero_ok(
        "KV heads of the sliding-window layers where they differ from the full layers' "
        "(GQA; MiMo-V2-Flash: 8 beside 4; 0: n_kv_heads)",
        r"H_{kv,w}",
    )
    window_head_dim: int = _zero_ok(
        "head dimension of the sliding-window layers' queries, keys and values where it "
        "differs from the full layers' (GQA; Gemma 4: 256 beside 512; 0: head_dim)",
        r"d_{h,w}",
    )
    keys_are_values: int = _switch(
        "1: the full-attention layers' keys serve as their values (GQA; Gemma 4's "
        "attention_k_eq_v): no value projection and one cached tensor per KV head; 0: apart",
        r"k_{=v}",
    )
    chunked_layers: int = _zero_ok(
        "layers attending only within their chunk of attention_chunk tokens (Llama 4: the "
        "RoPE layers, 3 of 4)",
        "L_{k}",
    )
    attention_chunk: int = _count(
        "tokens per chunk of a chunked-local attention layer (attention_chunk_size)",
        "C_{a}",
        default=8192,
    )
    expert_bits: float = _bits("bits per routed-expert weight", "b_{e}")
    shared_expert_bits: float = _bits("bits per shared-expert weight", "b_{se}")
    attention_bits: float = _bits("bits per attention (and router) weight", "b_{attn}")
    dense_bits: float = _bits("bits per dense-FFN weight", "b_{d}")
    embedding_bits: float = _bits("bits per embedding / LM-head weight", "b_{emb}")
    kv_bits: float = _bits("bits per KV-cache element", "b_{kv}")
    activation_bits: float = _bits("bits per activation element (all-reduce, combine)", "b_{act}")
    dispatch_bits: float = _bits("bits per element sent in expert dispatch", "b_{disp}")
    expert_math: str = _math(
        "math of the routed-expert GEMMs (NVFP4: fp4; INT4 or MXFP4 weight-only: wna16)"
    )
    shared_expert_math: str = _math("math of the shared-expert GEMMs")
    attention_math: str = _math("math of the attention projections and router")
    dense_math: str = _math("math of the dense-FFN GEMMs")
    embedding_math: str = _math("math of the LM head")
    attention_core_math: str = choice(
        ("bf16", "fp8"), "math of the attention kernel (fp8 with an FP8 KV cache)", default="bf16"
    )
    linear_layers: int = _zero_ok(
        "layers whose token mixer is linear attention or a state-space layer, not attention "
        "(Qwen3.5: 3 of 4)",
        "L_{s}",
    )
    linear_key_heads: int = _zero_ok("linear-attention key heads (linear_num_key_heads)", "H_{k}")
    linear_value_heads: int = _zero_ok(
        "linear-attention value heads, each with its own state (linear_num_value_heads)", "H_{v}"
    )
    linear_key_dim: int = _zero_ok("linear-attention key head dimension", "d_{k}")
    linear_value_dim: int = _zero_ok("linear-attention value head dimension", "d_{v}")
    linear_head_scalars: int = quantity(
        "dimensionless",
        "scalars the input projection makes per value head: 2 in Gated DeltaNet (decay, write "
        "strength), 1 in Mamba-2 (dt)",
        latex="s_{h}",
        integer=True,
        minimum=0,
        inclusive=True,
        default=2,
    )
    linear_decay_rank: int = _zero_ok(
        "rank of a per-channel decay gate, h -> r -> H_k·d_k (Kimi Delta Attention's f_a_proj, "
        "f_b_proj: r = head_dim; 0: one decay per head, as in Gated DeltaNet and Mamba-2)",
        "r_{f}",
    )
    linear_form: str = choice(
        ("delta_rule", "ssd"),
        "how a prompt's tokens go through the linear layers: delta_rule, the chunked delta rule "
        "(Gated DeltaNet, Kimi Delta Attention: flash-linear-attention's chunk kernels), or "
        "ssd, Mamba-2's chunked state-space scan (mamba_chunk_scan_combined)",
        default="delta_rule",
    )
    linear_chunk: int = _count(
        "tokens per chunk of the chunked prefill form (flash-linear-attention's Gated DeltaNet: "
        "64; Mamba-2: chunk_size)",
        "C",
        default=64,
    )
    state_bits: float = _bits(
        "bits per recurrent-state element (FP32 in Qwen3.5: mamba_ssm_dtype)", "b_{s}", 4.0
    )
    attention_gate: int = _switch(
        "1: attention layers gate their heads' output with a projection from the hidden state "
        "(H·d_h wide in GQA: Qwen3.5's attn_output_gate; H·d_v in MLA: Kimi K3's "
        "mla_use_output_gate); 0: no gate",
        "g_{a}",
    )
    o_lora_rank: int = _zero_ok(
        "compressed attention: each output group's low-rank width (o_lora_rank)", "r_{o}"
    )
    o_groups: int = _count(
        "compressed attention: groups of heads the output projection reduces apart (o_groups)",
        "G_{o}",
        default=1,
    )
    csa_layers: int = _zero_ok(
        "compressed attention: layers whose compressed entries (one per csa_ratio tokens) the "
        "indexer selects index_topk of (DeepSeek-V4's CSA)",
        "L_{c}",
    )
    csa_ratio: int = _count("tokens per compressed entry in a CSA layer", "r_{c}", default=4)
    hca_layers: int = _zero_ok(
        "compressed attention: layers attending to all of their heavily compressed entries, one "
        "per hca_ratio tokens (DeepSeek-V4's HCA)",
        "L_{h}",
    )
    hca_ratio: int = _count("tokens per compressed entry in an HCA layer", "r_{h}", default=128)
    index_topk: int = _zero_ok(
        "tokens DeepSeek Sparse Attention's indexer selects per query (0: dense attention)",
        "k_{I}",
    )
    index_heads: int = _zero_ok("lightning-indexer heads (index_n_heads)", "H_{I}")
    index_head_dim: int = _zero_ok("lightning-indexer head dimension (index_head_dim)", "d_{I}")
    dense_attention_layers: int = _zero_ok(
        "full-attention layers without the indexer in a sparse model: they attend to the whole "
        "context (MiniMax-M3: the first 3, sparse_attention_freq 0)",
        "L_{D}",
    )
    index_bits: float = _bits(
        "bits per cached index-key element (FP8 in DeepSeek-V3.2)", "b_{I}", 1.0
    )
    index_math: str = choice(("bf16", "fp8"), "math of the indexer's scores", default="fp8")
    n_group: int = _count(
        "expert groups of node-limited routing (n_group; 1: a token may pick any expert)",
        "G",
        default=1,
    )
    topk_group: int = _picks(
        "groups each token's experts are chosen from (topk_group; at most n_group and 64)",
        "t_{G}",
        default=1,
    )
