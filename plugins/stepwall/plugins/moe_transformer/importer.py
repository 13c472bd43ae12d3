"""``moe-transformer`` from Hugging Face configs: the fields of each architecture this kind
expresses, each with the config key it came from, and the precisions the checkpoint's
quantisation gives each component (`stepwall.spec.hf`).

Families: Llama 3 / Mistral / Qwen2 / Qwen3 (dense), Mixtral, Qwen3-MoE, MiniMax-M2, gpt-oss
(GQA, sliding-window layers), DeepSeek-V3 / R1 and Kimi K2 / K2.5 (MLA, shared experts,
node-limited routing), DeepSeek-V3.2 and GLM-5 (the same, with DeepSeek Sparse Attention). A
config whose architecture needs physics this kind does not have (compressed, linear or
state-space attention layers, chunked or block-sparse attention) is refused at the key that
says so. Not modelled, as in the hand-written catalog: norms, biases, rotary details and MTP
modules (under 0.1% of the weights, or not run by the engines priced).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import attrs

from stepwall.core.errors import SpecError
from stepwall.spec.hf import Entry, HFConfig, Module, bits_text

KIND = "moe-transformer"

# Config keys that mean physics this kind lacks (issue: architectures in), and what it is.
NOT_YET = {
    "compress_ratios": "compressed attention with per-layer ratios (DeepSeek-V4)",
    "linear_attn_config": "linear attention layers beside full attention (Kimi Delta Attention)",
    "hybrid_override_pattern": "Mamba-2 state-space layers interleaved with attention",
    "mamba_num_heads": "Mamba-2 state-space layers",
    "attention_chunk_size": "chunked local attention",
    "sparse_topk_blocks": "block-sparse attention",
    "sparse_attention_config": "block-sparse attention",
    "moe_latent_size": "latent MoE (experts in a projected space)",
}


class Draft:
    """The spec being written from ``cfg``: entries in the catalog's order, each sourced."""

    def __init__(self, cfg: HFConfig) -> None:
        self.cfg = cfg
        self.entries: list[Entry] = [("kind", KIND, "")]

    def put(self, field: str, value: object, why: str) -> None:
        self.entries.append((field, value, why))

    def take(self, field: str, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.cfg.count(key, default, minimum=minimum)
        stated = self.cfg.has(key)
        self.put(
            field,
            value,
            f"config.json {self.cfg.key(key)} {value}"
            if stated
            else f"config.json states no {self.cfg.key(key)}: {value}",
        )
        return value


def _refuse_unexpressible(cfg: HFConfig) -> None:
    for key, what in NOT_YET.items():
        if cfg.has(key):
            raise SpecError(
                cfg.file,
                cfg.key(key),
                f"{what}: not expressible in {KIND} yet",
                f"a model of the families {KIND} imports (stepwall import-model --help lists them)",
            )
    if cfg.value("tie_word_embeddings") is True:
        raise SpecError(
            cfg.file,
            cfg.key("tie_word_embeddings"),
            f"tied input and output embeddings: not expressible in {KIND} yet",
            "an untied model (the kind prices the embedding and LM head apart)",
        )


def _names(suffix: str, layers: Iterable[int]) -> list[tuple[str, ...]]:
    """Each layer's module ``suffix`` by the names checkpoints give it (a multimodal wrapper
    prefixes ``language_model.``)."""
    out: list[tuple[str, ...]] = []
    for i in layers:
        base = f"model.layers.{i}.{suffix}"
        out.append((base, f"language_model.{base}", f"model.language_model.layers.{i}.{suffix}"))
    return out


def _modules(spec: dict[str, int], layers: Iterable[int], expert: bool = False) -> list[Module]:
    layers = list(layers)
    return [
        Module(names, params, expert)
        for suffix, params in spec.items()
        for names in _names(suffix, layers)
    ]


class Shape:
    """The counts the precisions are weighted by: layers, and the Linears of each component."""

    def __init__(self, n_layers: int, dense_layers: list[int]) -> None:
        self.n_layers = n_layers
        self.dense_layers = dense_layers
        self.moe_layers = [i for i in range(n_layers) if i not in set(dense_layers)]
        self.attention_layers = list(range(n_layers))  # all but linear-attention ones
        self.attention: list[Module] = []
        self.dense: list[Module] = []
        self.experts: list[Module] = []
        self.shared: list[Module] = []


def _gqa(d: Draft, hidden: int, shape: Shape) -> None:
    cfg = d.cfg
    d.put("attention", "gqa", "grouped-query attention (num_key_value_heads, num_attention_heads)")
    heads = d.take("n_heads", "num_attention_heads")
    kv = d.take("n_kv_heads", "num_key_value_heads", default=heads)
    if cfg.has("head_dim"):
        head_dim = d.take("head_dim", "head_dim")
    else:
        head_dim = hidden // heads
        d.put("head_dim", head_dim, f"config.json hidden_size / num_attention_heads = {head_dim}")
    q, k = heads * head_dim, kv * head_dim
    shape.attention = _modules(
        {
            "self_attn.q_proj": hidden * q,
            "self_attn.k_proj": hidden * k,
            "self_attn.v_proj": hidden * k,
            "self_attn.o_proj": q * hidden,
        },
        shape.attention_layers,
    )


def _mla(d: Draft, hidden: int, shape: Shape) -> None:
    cfg = d.cfg
    d.put("attention", "mla", "multi-head latent attention (kv_lora_rank; DeepSeek-V2 §2.1)")
    heads = d.take("n_heads", "num_attention_heads")
    if not cfg.has("q_lora_rank"):
        raise SpecError(
            cfg.file,
            cfg.key("q_lora_rank"),
            f"is null: MLA without a query low-rank projection is not expressible in {KIND} yet",
            "an integer (DeepSeek-V3: 1536)",
        )
    rq = d.take("q_lora_rank", "q_lora_rank")
    rkv = d.take("kv_lora_rank", "kv_lora_rank")
    nope = d.take("qk_nope_head_dim", "qk_nope_head_dim")
    rope = d.take("qk_rope_head_dim", "qk_rope_head_dim")
    v = d.take("v_head_dim", "v_head_dim")
    shape.attention = _modules(
        {
            "self_attn.q_a_proj": hidden * rq,
            "self_attn.q_b_proj": rq * heads * (nope + rope),
            "self_attn.kv_a_proj_with_mqa": hidden * (rkv + rope),
            "self_attn.kv_b_proj": rkv * heads * (nope + v),
            "self_attn.o_proj": heads * v * hidden,
        },
        range(shape.n_layers),
    )


def _ffn(prefix: str, hidden: int, width: int, names: tuple[str, str, str]) -> dict[str, int]:
    return {f"{prefix}.{n}": hidden * width for n in names}


GATE_UP_DOWN = ("gate_proj", "up_proj", "down_proj")
W1_W3_W2 = ("w1", "w3", "w2")


def _dense_model(d: Draft) -> None:
    """Llama 3, Mistral, Qwen2, Qwen3: attention and a gated MLP in every layer."""
    cfg = d.cfg
    if cfg.value("use_sliding_window") is True:
        raise SpecError(
            cfg.file,
            cfg.key("use_sliding_window"),
            "is true: Qwen's sliding "
            f"window below max_window_layers is not expressible in {KIND} yet",
            "false",
        )
    n = d.take("n_layers", "num_hidden_layers")
    d.put("n_dense_layers", n, f"{cfg.architecture}: every layer has a dense MLP")
    hidden = d.take("hidden", "hidden_size")
    width = d.take("dense_intermediate", "intermediate_size")
    for f in ("n_experts", "experts_per_token", "n_shared_experts"):
        d.put(f, 0, "dense model: no experts")
    shape = Shape(n, list(range(n)))
    _gqa(d, hidden, shape)
    _window(d, n, "all")
    shape.dense = _modules(_ffn("mlp", hidden, width, GATE_UP_DOWN), range(n))
    _finish(d, hidden, shape)


def _window(d: Draft, n_layers: int, which: str) -> None:
    """A sliding window on every layer (Mistral, Mixtral) or on the layers ``layer_types``
    names (gpt-oss); nothing when the config states none."""
    cfg = d.cfg
    window = cfg.value("sliding_window")
    if window is None:
        return
    d.take("sliding_window", "sliding_window")
    if which == "all":
        d.put("sliding_layers", n_layers, "config.json sliding_window on every layer")
        return
    types = cfg.value("layer_types") or []
    sliding = sum(1 for t in types if t == "sliding_attention")
    d.put(
        "sliding_layers",
        sliding,
        f"config.json {cfg.key('layer_types')}: {sliding} sliding_attention of {len(types)}",
    )


@attrs.frozen
class MoeLayout:
    """Where a GQA + routed-experts family keeps its counts (config keys) and its experts'
    Linears (module names), and which of its layers are dense."""

    experts: str
    top_k: str
    width: str
    names: tuple[str, str, str]
    prefix: str
    dense: Callable[[HFConfig, int], list[int]]


def _moe_model(d: Draft, layout: MoeLayout) -> None:
    """Mixtral, Qwen3-MoE, MiniMax-M2, gpt-oss: GQA and routed experts, no shared expert."""
    cfg = d.cfg
    experts, top_k, width = layout.experts, layout.top_k, layout.width
    n = d.take("n_layers", "num_hidden_layers")
    dense_layers = layout.dense(cfg, n)
    d.put(
        "n_dense_layers",
        len(dense_layers),
        f"{cfg.architecture}: {len(dense_layers)} layers with a dense MLP"
        + (f" ({', '.join(map(str, dense_layers))})" if dense_layers else ""),
    )
    hidden = d.take("hidden", "hidden_size")
    e_width = cfg.count(width)
    dense_width = cfg.count("intermediate_size") if width != "intermediate_size" else e_width
    d.put(
        "dense_intermediate",
        dense_width,
        f"config.json {cfg.key('intermediate_size')} {dense_width}"
        if dense_layers
        else "no dense layers: the expert width, which enters no cost",
    )
    d.take("n_experts", experts)
    d.take("experts_per_token", top_k)
    d.put("n_shared_experts", 0, f"{cfg.architecture}: no shared expert")
    d.put("expert_intermediate", e_width, f"config.json {cfg.key(width)} {e_width}")
    shape = Shape(n, dense_layers)
    _gqa(d, hidden, shape)
    _window(d, n, "layer_types" if cfg.has("layer_types") else "all")
    shape.dense = _modules(_ffn("mlp", hidden, dense_width, GATE_UP_DOWN), dense_layers)
    shape.experts = _modules(
        _ffn(layout.prefix, hidden, e_width, layout.names), shape.moe_layers, expert=True
    )
    _finish(d, hidden, shape)


def _no_dense(cfg: HFConfig, n: int) -> list[int]:
    return []


def _qwen_dense(cfg: HFConfig, n: int) -> list[int]:
    """Qwen3-MoE's dense layers: ``mlp_only_layers``, and those off ``decoder_sparse_step``."""
    step = cfg.count("decoder_sparse_step", 1)
    only = set(cfg.value("mlp_only_layers") or [])
    return [i for i in range(n) if i in only or (i + 1) % step != 0]


def _minimax_m2(d: Draft) -> None:
    cfg = d.cfg
    if cfg.value("shared_intermediate_size", 0):
        raise SpecError(
            cfg.file,
            cfg.key("shared_intermediate_size"),
            f"is not 0: MiniMax's shared expert is not expressible in {KIND} yet",
            "0",
        )
    kinds = cfg.value("attn_type_list") or []
    if any(t != 1 for t in kinds):
        raise SpecError(
            cfg.file,
            cfg.key("attn_type_list"),
            f"has linear (lightning) attention layers, not expressible in {KIND} yet",
            "full attention (1) on every layer",
        )
    _moe_model(d, MIXTRAL)  # Mixtral's layout: block_sparse_moe.experts.N.w1/w2/w3


def _deepseek(d: Draft) -> None:
    """DeepSeek-V3 / R1, Kimi K2 / K2.5: MLA, leading dense layers, shared experts and
    node-limited routing over expert groups."""
    cfg = d.cfg
    if cfg.count("moe_layer_freq", 1) != 1:
        raise SpecError(
            cfg.file,
            cfg.key("moe_layer_freq"),
            f"is not 1: MoE on every n-th layer is not expressible in {KIND} yet",
            "1",
        )
    n = d.take("n_layers", "num_hidden_layers")
    k_dense = d.take("n_dense_layers", "first_k_dense_replace", default=0, minimum=0)
    hidden = d.take("hidden", "hidden_size")
    dense_width = d.take("dense_intermediate", "intermediate_size")
    d.take("n_experts", "n_routed_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    d.take("n_group", "n_group", default=1)
    d.take("topk_group", "topk_group", default=1)
    shared = d.take("n_shared_experts", "n_shared_experts", default=0, minimum=0)
    e_width = d.take("expert_intermediate", "moe_intermediate_size")
    shape = Shape(n, list(range(k_dense)))
    _mla(d, hidden, shape)
    if cfg.has("index_topk"):
        _sparse_attention(d)
    d.put(
        "vocab",
        cfg.count("vocab_size"),
        f"config.json {cfg.key('vocab_size')} {cfg.count('vocab_size')}",
    )
    shape.dense = _modules(_ffn("mlp", hidden, dense_width, GATE_UP_DOWN), shape.dense_layers)
    shape.experts = _modules(
        _ffn("mlp.experts.0", hidden, e_width, GATE_UP_DOWN), shape.moe_layers, expert=True
    )
    if shared:
        shape.shared = _modules(
            _ffn("mlp.shared_experts", hidden, shared * e_width, GATE_UP_DOWN), shape.moe_layers
        )
    _finish(d, hidden, shape, vocab_done=True)


def _sparse_attention(d: Draft) -> None:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer of H_I heads of
    d_I scores the cached index keys in FP8 and each query reads the k_I tokens it selects
    (DeepSeek-V3.2-Exp report, §2.1)."""
    d.take("index_topk", "index_topk")
    d.take("index_heads", "index_n_heads")
    d.take("index_head_dim", "index_head_dim")
    d.put(
        "index_bits",
        bits_text(8.0),
        "FP8 index keys (DeepSeek-V3.2-Exp report §2.1: the "
        "lightning indexer is implemented in FP8)",
    )
    d.put("index_math", "fp8", "the indexer's scores in FP8 (DeepSeek-V3.2-Exp report §2.1)")


def _qwen35(d: Draft) -> None:
    """Qwen3.5 / Qwen3-Next: Gated DeltaNet linear attention on the layers ``layer_types``
    marks ``linear_attention``, gated GQA on the others, and (MoE releases) routed experts
    with a shared expert of ``shared_expert_intermediate_size``."""
    cfg = d.cfg
    n = d.take("n_layers", "num_hidden_layers")
    types = cfg.value("layer_types") or []
    linear = [i for i, t in enumerate(types) if t == "linear_attention"]
    if len(types) != n or any(t not in ("linear_attention", "full_attention") for t in types):
        raise SpecError(
            cfg.file,
            cfg.key("layer_types"),
            f"is {types[:4]!r}…",
            f"{n} entries, each linear_attention or full_attention",
        )
    hidden = d.take("hidden", "hidden_size")
    if cfg.value("mlp_only_layers"):
        raise SpecError(
            cfg.file,
            cfg.key("mlp_only_layers"),
            "names dense layers among MoE ones, not read for this family yet",
            "[] (every layer MoE)",
        )
    moe = cfg.has("num_experts")
    dense_layers = [] if moe else list(range(n))
    d.put(
        "n_dense_layers",
        len(dense_layers),
        f"{cfg.architecture}: "
        + ("every layer is MoE (mlp_only_layers empty)" if moe else "a dense MLP in every layer"),
    )
    shape = Shape(n, dense_layers)
    if moe:
        _qwen35_experts(d, hidden, shape)
    else:
        width = d.take("dense_intermediate", "intermediate_size")
        for f in ("n_experts", "experts_per_token", "n_shared_experts"):
            d.put(f, 0, "dense model: no experts")
        shape.dense = _modules(_ffn("mlp", hidden, width, GATE_UP_DOWN), range(n))
    shape.attention_layers = [i for i in range(n) if i not in set(linear)]
    _gqa(d, hidden, shape)
    if cfg.value("attn_output_gate") is True:
        d.put(
            "attention_gate",
            1,
            f"config.json {cfg.key('attn_output_gate')} true: q_proj "
            "also projects a gate as wide as the query",
        )
    _linear_layers(d, hidden, linear, shape)
    _finish(d, hidden, shape)


def _qwen35_experts(d: Draft, hidden: int, shape: Shape) -> None:
    """Qwen3.5-MoE's routed experts and its shared expert (a whole number of expert widths)."""
    cfg = d.cfg
    e_width = cfg.count("moe_intermediate_size")
    d.put("dense_intermediate", e_width, "no dense layers: the expert width, which enters no cost")
    d.take("n_experts", "num_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    shared_width = cfg.count("shared_expert_intermediate_size", 0, minimum=0)
    if shared_width % e_width:
        raise SpecError(cfg.file, cfg.key("shared_expert_intermediate_size"),
                        f"{shared_width} is not a multiple of moe_intermediate_size {e_width}",
                        "a whole number of expert widths")  # fmt: skip
    shared = shared_width // e_width
    d.put("n_shared_experts", shared, f"config.json {cfg.key('shared_expert_intermediate_size')} "
          f"{shared_width} = {shared} x moe_intermediate_size")  # fmt: skip
    d.put("expert_intermediate", e_width, f"config.json {cfg.key('moe_intermediate_size')} "
          f"{e_width}")  # fmt: skip
    shape.experts = _modules(_ffn("mlp.experts.0", hidden, e_width, GATE_UP_DOWN),
                             shape.moe_layers, expert=True)  # fmt: skip
    if shared:
        shape.shared = _modules(_ffn("mlp.shared_expert", hidden, shared_width, GATE_UP_DOWN),
                                shape.moe_layers)  # fmt: skip


def _linear_layers(d: Draft, hidden: int, linear: list[int], shape: Shape) -> None:
    cfg = d.cfg
    d.put(
        "linear_layers",
        len(linear),
        f"config.json {cfg.key('layer_types')}: {len(linear)} linear_attention of {shape.n_layers}",
    )
    hk = d.take("linear_key_heads", "linear_num_key_heads")
    hv = d.take("linear_value_heads", "linear_num_value_heads")
    dk = d.take("linear_key_dim", "linear_key_head_dim")
    dv = d.take("linear_value_dim", "linear_value_head_dim")
    dtype = cfg.value("mamba_ssm_dtype", "float32")
    bits = {"float32": 32.0, "bfloat16": 16.0, "float16": 16.0}.get(dtype)
    if bits is None:
        raise SpecError(
            cfg.file, cfg.key("mamba_ssm_dtype"), f"is {dtype!r}", "float32, bfloat16 or float16"
        )
    d.put(
        "state_bits",
        bits_text(bits),
        f"config.json {cfg.key('mamba_ssm_dtype')} {dtype}: the recurrent state's element",
    )
    shape.attention += _modules(
        {
            "linear_attn.in_proj_qkvz": hidden * (2 * hk * dk + 2 * hv * dv),
            "linear_attn.in_proj_ba": hidden * 2 * hv,
            "linear_attn.out_proj": hv * dv * hidden,
        },
        linear,
    )


def _finish(d: Draft, hidden: int, shape: Shape, vocab_done: bool = False) -> None:
    """The vocabulary and every component's precision and math."""
    cfg = d.cfg
    vocab = cfg.count("vocab_size")
    if not vocab_done:
        d.put("vocab", vocab, f"config.json {cfg.key('vocab_size')} {vocab}")
    plain, plain_why = cfg.dtype_bits
    experts = cfg.precision(shape.experts)
    parts = (
        ("expert", shape.experts, "routed experts", experts),
        ("shared_expert", shape.shared, "shared experts", None),
        ("attention", shape.attention, "attention projections", None),
        ("dense", shape.dense, "dense MLP layers", None),
    )
    for name, modules, what, known in parts:
        if not modules:
            d.put(f"{name}_bits", bits_text(plain), f"unused: no {what}")
            continue
        p = known or cfg.precision(modules)
        d.put(f"{name}_bits", bits_text(p.bits), p.why)
        d.put(f"{name}_math", p.math, f"{what}: {p.why}")
    # quantisers leave the embedding (not a Linear) and the LM head in the checkpoint's dtype
    # (transformers' get_keys_to_not_convert; ModelOpt and compressed-tensors list lm_head)
    d.put(
        "embedding_bits",
        bits_text(plain),
        f"embedding and LM head in the checkpoint dtype ({plain_why}): quantisers leave them out",
    )
    d.put("embedding_math", "bf16", "LM head in the checkpoint dtype")
    q = cfg.quant
    kv = q.kv_bits if q is not None else None
    if q is None or kv is None:
        d.put("kv_bits", bits_text(16.0), "no KV-cache quantisation stated: BF16 cache")
        d.put("attention_core_math", "bf16", "attention over a BF16 KV cache")
    else:
        d.put("kv_bits", bits_text(kv), f"KV cache at {kv:g} bit ({q.source})")
        d.put(
            "attention_core_math",
            "fp8" if kv == 8 else "bf16",
            "attention over the quantised KV cache",
        )
    d.put("activation_bits", bits_text(16.0), "BF16 activations (all-reduce, combine)")
    d.put(
        "dispatch_bits",
        bits_text(experts.input_bits if shape.experts else 16.0),
        "the experts' GEMM input, as the dispatch can send it: "
        + (experts.why if shape.experts else "no experts"),
    )


MIXTRAL = MoeLayout("num_local_experts", "num_experts_per_tok", "intermediate_size",
                    W1_W3_W2, "block_sparse_moe.experts.0", _no_dense)  # fmt: skip
QWEN3_MOE = MoeLayout("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                      GATE_UP_DOWN, "mlp.experts.0", _qwen_dense)  # fmt: skip
# gpt-oss: the experts' gate and up projections are one fused tensor (mlp.experts.gate_up_proj)
GPT_OSS = MoeLayout("num_local_experts", "num_experts_per_tok", "intermediate_size",
                    ("gate_up_proj", "gate_up_proj", "down_proj"), "mlp.experts",
                    _no_dense)  # fmt: skip


FAMILIES: dict[str, Callable[[Draft], None]] = {
    "LlamaForCausalLM": _dense_model,
    "MistralForCausalLM": _dense_model,
    "Qwen2ForCausalLM": _dense_model,
    "Qwen3ForCausalLM": _dense_model,
    "MixtralForCausalLM": partial(_moe_model, layout=MIXTRAL),
    "Qwen3MoeForCausalLM": partial(_moe_model, layout=QWEN3_MOE),
    "MiniMaxM2ForCausalLM": _minimax_m2,
    "GptOssForCausalLM": partial(_moe_model, layout=GPT_OSS),
    "DeepseekV3ForCausalLM": _deepseek,
    "KimiK25ForConditionalGeneration": _deepseek,
    "DeepseekV32ForCausalLM": _deepseek,
    "GlmMoeDsaForCausalLM": _deepseek,
    "Qwen3_5ForConditionalGeneration": _qwen35,
    "Qwen3_5MoeForConditionalGeneration": _qwen35,
    "Qwen3NextForCausalLM": _qwen35,
}


# Architectures recognised but refused, at the config key that names what the kind lacks.
NOT_YET_ARCHITECTURES = (
    "DeepseekV4ForCausalLM",
    "KimiLinearForCausalLM",
    "KimiK3ForConditionalGeneration",
    "NemotronHForCausalLM",
    "MiniMaxM3ForCausalLM",
    "MiniMaxM3SparseForCausalLM",
    "Llama4ForConditionalGeneration",
    "Gemma4ForConditionalGeneration",
    "MiMoV2FlashForCausalLM",
)


def import_config(cfg: HFConfig) -> list[Entry]:
    """The entries of a ``moe-transformer`` spec for ``cfg``, each with its source."""
    _refuse_unexpressible(cfg)
    family = FAMILIES.get(cfg.architecture)
    if family is None:
        raise SpecError(
            cfg.file,
            cfg.key("architectures"),
            f"{cfg.architecture} needs physics {KIND} does not have yet",
            f"one of {', '.join(FAMILIES)}",
        )
    d = Draft(cfg)
    family(d)
    return d.entries


IMPORTERS = dict.fromkeys((*FAMILIES, *NOT_YET_ARCHITECTURES), import_config)
