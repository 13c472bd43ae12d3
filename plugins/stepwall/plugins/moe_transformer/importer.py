"""``moe-transformer`` from Hugging Face configs: the fields of each architecture this kind
expresses, each with the config key it came from, and the precisions the checkpoint's
quantisation gives each component (`stepwall.spec.hf`).

Families: Llama 3 / Mistral / Qwen2 / Qwen3 (dense), Mixtral, Qwen3-MoE, MiniMax-M2, gpt-oss
(GQA, sliding-window layers), DeepSeek-V3 / R1 and Kimi K2 / K2.5 (MLA, shared experts,
node-limited routing), DeepSeek-V3.2 and GLM-5 (the same, with DeepSeek Sparse Attention),
Qwen3.5 / Qwen3-Next (Gated DeltaNet layers), Nemotron-H / Nemotron-3 (Mamba-2 blocks, latent
MoE), Kimi K3 (Kimi Delta Attention beside gated MLA, latent MoE), DeepSeek-V4 (compressed
attention, FP4 experts), MiniMax-M3 (MiniMax Sparse Attention), Llama 4 (chunked local
attention, MoE on every n-th layer). A config whose architecture needs physics this kind does
not have is refused at the key that says so. Not modelled, as in
the hand-written catalog: norms, biases, rotary details and MTP modules (under 0.1% of the
weights, or not run by the engines priced).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import attrs

from stepwall.core.errors import SpecError
from stepwall.plugins.moe_transformer.spec import MoeTransformer
from stepwall.spec.hf import Entry, HFConfig, Module, Precision, bits_text

KIND = "moe-transformer"

# Config keys that mean physics this kind lacks (issue: architectures in), and what it is.
NOT_YET = {
    "compress_ratios": "compressed attention with per-layer ratios (DeepSeek-V4)",
    "hc_mult": "hyper-connections (several residual streams)",
    "linear_attn_config": "linear attention layers beside full attention (Kimi Delta Attention)",
    "hybrid_override_pattern": "Mamba-2 state-space layers interleaved with attention",
    "mamba_num_heads": "Mamba-2 state-space layers",
    "attention_chunk_size": "local attention outside Llama 4's chunked form and MiMo-V2's "
    "sliding window",
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
        most = attrs.fields_dict(MoeTransformer)[field].metadata.get("maximum")
        if most is not None and value > most:  # refused here, under the config's own key
            raise SpecError(self.cfg.file, self.cfg.key(key), f"is {value}",
                            f"an integer of at most {most:g}: model.{field}'s bound")  # fmt: skip
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
    handled = HANDLED.get(cfg.architecture, ())
    for key, what in NOT_YET.items():
        if cfg.has(key) and key not in handled:
            raise SpecError(
                cfg.file,
                cfg.key(key),
                f"{what}: not expressible in {KIND} yet",
                f"a model of the families {KIND} imports (stepwall import-model --help lists them)",
            )


def _names(suffix: str, layers: Iterable[int], root: str) -> list[tuple[str, ...]]:
    """Each layer's module ``suffix`` by the names checkpoints give it (a multimodal wrapper
    prefixes ``language_model.``)."""
    out: list[tuple[str, ...]] = []
    for i in layers:
        base = f"{root}.layers.{i}.{suffix}"
        out.append((base, f"language_model.{base}", f"{root}.language_model.layers.{i}.{suffix}"))
    return out


def _modules(
    spec: dict[str, int], layers: Iterable[int], expert: bool = False, root: str = "model"
) -> list[Module]:
    layers = list(layers)
    return [
        Module(names, params, expert)
        for suffix, params in spec.items()
        for names in _names(suffix, layers, root)
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


def _gqa(d: Draft, hidden: int, shape: Shape, root: str = "model") -> None:
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
    at = "mixer" if root == "backbone" else "self_attn"  # Nemotron-H names its blocks' Linears
    shape.attention = _modules(
        {
            f"{at}.q_proj": hidden * q,
            f"{at}.k_proj": hidden * k,
            f"{at}.v_proj": hidden * k,
            f"{at}.o_proj": q * hidden,
        },
        shape.attention_layers,
        root=root,
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
        shape.attention_layers,
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
    k_dense, hidden, dense_width, shared, e_width = _deepseek_moe(d, DEEPSEEK_MOE)
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


# A DeepSeek-style MoE's config keys for the routed experts, top-k, expert groups and shared
# experts (DeepSeek-V3 and its descendants; Kimi Linear renames them)
DEEPSEEK_MOE = ("n_routed_experts", "num_experts_per_tok", "n_group", "n_shared_experts")
KIMI_LINEAR_MOE = ("num_experts", "num_experts_per_token", "num_expert_group", "num_shared_experts")


def _deepseek_moe(d: Draft, keys: tuple[str, str, str, str]) -> tuple[int, int, int, int, int]:
    """A DeepSeek-style MoE's counts under the config's ``keys``: leading dense layers, hidden
    size, dense width, routed experts and top-k, node-limited groups, shared experts, expert
    width; returns (dense layers, hidden, dense width, shared experts, expert width)."""
    experts, top_k, groups, shared_key = keys
    k_dense = d.take("n_dense_layers", "first_k_dense_replace", default=0, minimum=0)
    hidden = d.take("hidden", "hidden_size")
    dense_width = d.take("dense_intermediate", "intermediate_size")
    d.take("n_experts", experts)
    d.take("experts_per_token", top_k)
    d.take("n_group", groups, default=1)
    d.take("topk_group", "topk_group", default=1)
    shared = d.take("n_shared_experts", shared_key, default=0, minimum=0)
    e_width = d.take("expert_intermediate", "moe_intermediate_size")
    return k_dense, hidden, dense_width, shared, e_width


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
    stated = f"{cfg.key('shared_expert_intermediate_size')} {shared_width}"
    shared = _shared_experts(d, shared_width, e_width, "shared_expert_intermediate_size", stated)
    d.put("expert_intermediate", e_width, f"config.json {cfg.key('moe_intermediate_size')} "
          f"{e_width}")  # fmt: skip
    shape.experts = _modules(_ffn("mlp.experts.0", hidden, e_width, GATE_UP_DOWN),
                             shape.moe_layers, expert=True)  # fmt: skip
    if shared:
        shape.shared = _modules(_ffn("mlp.shared_expert", hidden, shared_width, GATE_UP_DOWN),
                                shape.moe_layers)  # fmt: skip


def _shared_experts(d: Draft, shared_width: int, width: int, key: str, stated: str) -> int:
    """Shared experts as a whole number of routed-expert widths (one shared expert of width
    2·I holds and computes what two of I do), from the config's ``key`` as ``stated``."""
    cfg = d.cfg
    if shared_width % width:
        raise SpecError(cfg.file, cfg.key(key),
                        f"{shared_width} is not a multiple of moe_intermediate_size {width}",
                        "a whole number of expert widths")  # fmt: skip
    shared = shared_width // width
    d.put("n_shared_experts", shared, f"config.json {stated} = {shared} x moe_intermediate_size")
    return shared


def _state_bits(d: Draft, key: str) -> None:
    """The recurrent state's element as the config's ``key`` states it (FP32 when it does not,
    as the engines' linear-attention caches keep it)."""
    cfg = d.cfg
    dtype = cfg.value(key, "float32")
    bits = {"float32": 32.0, "bfloat16": 16.0, "float16": 16.0}.get(dtype)
    if bits is None:
        raise SpecError(cfg.file, cfg.key(key), f"is {dtype!r}", "float32, bfloat16 or float16")
    why = (f"config.json {cfg.key(key)} {dtype}: the recurrent state's element" if cfg.has(key)
           else f"config.json states no {cfg.key(key)}: an FP32 state")  # fmt: skip
    d.put("state_bits", bits_text(bits), why)


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
    _state_bits(d, "mamba_ssm_dtype")
    shape.attention += _modules(
        {
            "linear_attn.in_proj_qkvz": hidden * (2 * hk * dk + 2 * hv * dv),
            "linear_attn.in_proj_ba": hidden * 2 * hv,
            "linear_attn.out_proj": hv * dv * hidden,
        },
        linear,
    )


# Nemotron-H's block pattern: one letter per block (NVIDIA's configuration_nemotron_h.py)
BLOCKS = {"M": "mamba", "*": "attention", "E": "moe", "-": "mlp"}


def _nemotron_blocks(cfg: HFConfig) -> tuple[str, str]:
    """The block pattern as letters, and the key it was read from: ``hybrid_override_pattern``
    (M Mamba-2, * attention, E MoE, - MLP) or the newer ``layers_block_type`` list."""
    if cfg.has("hybrid_override_pattern"):
        key, pattern = "hybrid_override_pattern", cfg.value("hybrid_override_pattern")
        ok = isinstance(pattern, str) and bool(pattern) and set(pattern) <= set(BLOCKS)
    else:
        key, types = "layers_block_type", cfg.value("layers_block_type")
        names = {v: k for k, v in BLOCKS.items()}
        ok = isinstance(types, list) and bool(types) and all(t in names for t in types)
        pattern = "".join(names[t] for t in types) if ok else ""
    if not ok:
        raise SpecError(cfg.file, cfg.key(key), "is not a block pattern",
                        "letters M, *, E, - (or a list of mamba, attention, moe, mlp)")  # fmt: skip
    if cfg.has("num_hidden_layers") and cfg.count("num_hidden_layers") != len(pattern):
        raise SpecError(cfg.file, cfg.key("num_hidden_layers"),
                        f"is {cfg.count('num_hidden_layers')}, the pattern has {len(pattern)} "
                        "blocks", f"{len(pattern)}")  # fmt: skip
    return pattern, key


def _nemotron_h(d: Draft) -> None:
    """Nemotron-H / Nemotron-3: a pattern of single-purpose blocks, each with its own residual:
    Mamba-2 (M), GQA attention (*), MoE (E, latent MoE where ``moe_latent_size`` is set) and
    MLP (-), the FFNs ungated squared ReLU. Here a layer is a token mixer (M or *) and the
    FFN blocks (E, -) pair with them; mixers beyond the FFNs are layers without one."""
    cfg = d.cfg
    pattern, key = _nemotron_blocks(cfg)
    where = {b: [i for i, c in enumerate(pattern) if c == b] for b in BLOCKS}
    mixers = len(where["M"]) + len(where["*"])
    ffns = len(where["E"]) + len(where["-"])
    counts = ", ".join(f"{len(where[b])} {BLOCKS[b]}" for b in BLOCKS)
    if ffns > mixers:
        raise SpecError(cfg.file, cfg.key(key), f"has more FFN blocks ({ffns}) than token "
                        f"mixers ({mixers})", "at most one FFN block per mixer block")  # fmt: skip
    d.put("n_layers", mixers, f"config.json {cfg.key(key)}: {counts}; a layer per mixer (M, *)")
    d.put("mixer_only_layers", mixers - ffns,
          f"{mixers} mixer blocks, {ffns} FFN blocks (E, -)")  # fmt: skip
    moe = bool(where["E"])
    d.put("n_dense_layers", len(where["-"]),
          f"config.json {cfg.key(key)}: {len(where['-'])} MLP blocks")  # fmt: skip
    if cfg.value("mlp_hidden_act", "relu2") != "relu2":
        raise SpecError(cfg.file, cfg.key("mlp_hidden_act"), f"is {cfg.value('mlp_hidden_act')!r}",
                        "relu2 (Nemotron-H's ungated squared-ReLU MLP)")  # fmt: skip
    d.put("ffn_matrices", 2, f"config.json {cfg.key('mlp_hidden_act')} relu2: up and down only")
    hidden = d.take("hidden", "hidden_size")
    root = "backbone"
    shape = Shape(mixers, [])
    dense_width = cfg.count("intermediate_size")
    unused = "" if where["-"] else " (no MLP blocks: enters no cost)"
    d.put("dense_intermediate", dense_width,
          f"config.json {cfg.key('intermediate_size')} {dense_width}{unused}")  # fmt: skip
    shape.dense = _modules({"mixer.up_proj": hidden * dense_width,
                            "mixer.down_proj": dense_width * hidden}, where["-"],
                           root=root)  # fmt: skip
    latent = _nemotron_moe(d, hidden, where["E"], shape) if moe else 0
    for f in () if moe else ("n_experts", "experts_per_token", "n_shared_experts"):
        d.put(f, 0, "no MoE blocks: no experts")
    shape.attention_layers = where["*"]
    _gqa(d, hidden, shape, root)
    _mamba(d, hidden, where["M"], shape)
    if latent:
        shape.attention += _modules({"mixer.fc1_latent_proj": hidden * latent,
                                     "mixer.fc2_latent_proj": latent * hidden}, where["E"],
                                    root=root)  # fmt: skip
    _finish(d, hidden, shape)


def _nemotron_moe(d: Draft, hidden: int, layers: list[int], shape: Shape) -> int:
    """Nemotron-3's MoE blocks: routed experts (in the latent where one is stated) and a shared
    expert of a whole number of expert widths; returns the latent (0: none)."""
    cfg = d.cfg
    d.take("n_experts", "n_routed_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    d.take("n_group", "n_group", default=1)
    d.take("topk_group", "topk_group", default=1)
    width = d.take("expert_intermediate", "moe_intermediate_size")
    shared_width = cfg.count("moe_shared_expert_intermediate_size", 0, minimum=0)
    _shared_experts(d, shared_width, width, "moe_shared_expert_intermediate_size",
                    f"{cfg.key('moe_shared_expert_intermediate_size')} {shared_width}")  # fmt: skip
    latent = cfg.count("moe_latent_size", 0, minimum=0)
    if latent:
        d.put("moe_latent", latent, f"config.json {cfg.key('moe_latent_size')} {latent}: "
              "routed experts work in the latent")  # fmt: skip
    e_in = latent or hidden
    root = "backbone"
    shape.experts = _modules({"mixer.experts.0.up_proj": e_in * width,
                              "mixer.experts.0.down_proj": width * e_in}, layers, expert=True,
                             root=root)  # fmt: skip
    if shared_width:
        shape.shared = _modules({"mixer.shared_experts.up_proj": hidden * shared_width,
                                 "mixer.shared_experts.down_proj": shared_width * hidden},
                                layers, root=root)  # fmt: skip
    return latent


def _mamba(d: Draft, hidden: int, layers: list[int], shape: Shape) -> None:
    """Mamba-2 blocks in the linear-attention fields (`linear_state_params`): B and C are the
    keys and queries of G groups of N, x the values of H heads of P, one scalar (dt) per head;
    the state H x P x N per request."""
    cfg = d.cfg
    d.put("linear_layers", len(layers), f"{len(layers)} Mamba-2 blocks (M)")
    groups = d.take("linear_key_heads", "n_groups")
    state = d.take("linear_key_dim", "ssm_state_size")
    heads = d.take("linear_value_heads", "mamba_num_heads")
    head_dim = d.take("linear_value_dim", "mamba_head_dim")
    inner = cfg.count("expand", 2) * hidden
    if heads * head_dim != inner:
        raise SpecError(cfg.file, cfg.key("mamba_num_heads"),
                        f"x mamba_head_dim = {heads * head_dim}, not expand x hidden_size = "
                        f"{inner}",
                        "mamba_num_heads x mamba_head_dim = expand x hidden_size")  # fmt: skip
    d.put("linear_head_scalars", 1, "Mamba-2's in_proj makes one dt per head")
    d.put("linear_form", "ssd", "Mamba-2's chunked scan (SSD, Dao & Gu 2024 §6)")
    d.take("linear_chunk", "chunk_size", default=128)
    _state_bits(d, "mamba_ssm_cache_dtype")
    shape.attention += _modules({"mixer.in_proj": hidden * (2 * inner + 2 * groups * state + heads),
                                 "mixer.out_proj": inner * hidden}, layers,
                                root="backbone")  # fmt: skip


def _layer_list(cfg: HFConfig, block: dict[str, object], name: str, n: int) -> list[int]:
    """A 1-based layer list of ``linear_attn_config``, as 0-based indices."""
    layers = block.get(name)
    key = f"{cfg.key('linear_attn_config')}.{name}"
    if not isinstance(layers, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in layers
    ):
        raise SpecError(cfg.file, key, f"is {layers!r}", f"a list of layer numbers 1..{n}")
    return [i - 1 for i in layers]


def _kimi_linear(d: Draft) -> None:
    """Kimi K3 (Kimi Linear): Kimi Delta Attention on ``linear_attn_config.kda_layers``, MLA
    with an output gate on ``full_attn_layers``, leading dense layers, then MoE layers whose
    routed experts work in a latent (``routed_expert_hidden_size``) beside shared experts at
    the hidden size. AttnRes (``attn_res_block_size``) adds only elementwise work, not priced,
    like the norms."""
    cfg = d.cfg
    block = cfg.value("linear_attn_config")
    if not isinstance(block, dict):
        raise SpecError(cfg.file, cfg.key("linear_attn_config"), "is not a table",
                        "kda_layers, full_attn_layers, num_heads, head_dim")  # fmt: skip
    if cfg.count("moe_layer_freq", 1) != 1:
        raise SpecError(cfg.file, cfg.key("moe_layer_freq"), "is not 1: MoE on every n-th "
                        f"layer is not expressible in {KIND} yet", "1")  # fmt: skip
    n = d.take("n_layers", "num_hidden_layers")
    kda = _layer_list(cfg, block, "kda_layers", n)
    full = _layer_list(cfg, block, "full_attn_layers", n)
    if sorted(kda + full) != list(range(n)):
        raise SpecError(cfg.file, f"{cfg.key('linear_attn_config')}.kda_layers",
                        "and full_attn_layers do not name each layer once",
                        f"each of the {n} layers in one of the two lists")  # fmt: skip
    k_dense, hidden, dense_width, shared, e_width = _deepseek_moe(d, KIMI_LINEAR_MOE)
    latent = cfg.count("routed_expert_hidden_size", hidden)
    if latent != hidden:
        d.put("moe_latent", latent, f"config.json {cfg.key('routed_expert_hidden_size')} "
              f"{latent}: routed experts work in the latent")  # fmt: skip
    shape = Shape(n, list(range(k_dense)))
    shape.attention_layers = full
    _mla(d, hidden, shape)
    heads, v = cfg.count("num_attention_heads"), cfg.count("v_head_dim")
    if cfg.value("mla_use_output_gate") is True:
        d.put("attention_gate", 1, f"config.json {cfg.key('mla_use_output_gate')} true: a gate "
              "of H·v_head_dim from the hidden state")  # fmt: skip
        shape.attention += _modules({"self_attn.g_proj": hidden * heads * v}, full)
    _kda(d, hidden, kda, block, shape)
    d.put("vocab", cfg.count("vocab_size"), f"config.json {cfg.key('vocab_size')} "
          f"{cfg.count('vocab_size')}")  # fmt: skip
    moe = shape.moe_layers
    shape.dense = _modules(_ffn("mlp", hidden, dense_width, GATE_UP_DOWN), shape.dense_layers)
    shape.experts = _modules(_ffn("block_sparse_moe.experts.0", latent, e_width, W1_W3_W2), moe,
                             expert=True)  # fmt: skip
    if shared:
        shape.shared = _modules(_ffn("block_sparse_moe.shared_experts", hidden, shared * e_width,
                                     GATE_UP_DOWN), moe)  # fmt: skip
    if latent != hidden:
        shape.attention += _modules({"block_sparse_moe.routed_expert_down_proj": hidden * latent,
                                     "block_sparse_moe.routed_expert_up_proj": latent * hidden},
                                    moe)  # fmt: skip
    _finish(d, hidden, shape, vocab_done=True)


def _kda(d: Draft, hidden: int, layers: list[int], block: dict[str, object], shape: Shape) -> None:
    """Kimi Delta Attention in the linear-attention fields (`linear_state_params`): q, k, v and
    a full-rank output gate of H heads of d, one write strength per head, a per-channel decay
    through rank d (f_a_proj, f_b_proj); the state d x d per head."""
    cfg = d.cfg
    where = cfg.key("linear_attn_config")
    if block.get("use_full_rank_gate") is not True:
        raise SpecError(cfg.file, f"{where}.use_full_rank_gate", "is not true: KDA's low-rank "
                        f"output gate is not expressible in {KIND} yet", "true")  # fmt: skip
    sizes = {}
    for name in ("num_heads", "head_dim"):
        value = block.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(cfg.file, f"{where}.{name}", f"is {value!r}", "an integer >= 1")
        sizes[name] = value
    heads, dim = sizes["num_heads"], sizes["head_dim"]
    d.put("linear_layers", len(layers), f"config.json {where}.kda_layers: {len(layers)} of "
          f"{shape.n_layers}")  # fmt: skip
    for field in ("linear_key_heads", "linear_value_heads"):
        d.put(field, heads, f"config.json {where}.num_heads {heads}")
    for field in ("linear_key_dim", "linear_value_dim"):
        d.put(field, dim, f"config.json {where}.head_dim {dim}")
    d.put("linear_head_scalars", 1, "KDA's b_proj: one write strength per head")
    d.put("linear_decay_rank", dim, f"KDA's per-channel decay through f_a_proj, f_b_proj of "
          f"rank head_dim {dim}")  # fmt: skip
    _state_bits(d, "mamba_ssm_dtype")
    width = heads * dim
    shape.attention += _modules({f"self_attn.{p}_proj": hidden * width for p in "qkvg"}
                                | {"self_attn.b_proj": hidden * heads,
                                   "self_attn.f_a_proj": hidden * dim,
                                   "self_attn.f_b_proj": dim * width,
                                   "self_attn.o_proj": width * hidden}, layers)  # fmt: skip


def _llama4(d: Draft) -> None:
    """Llama 4 (Scout, Maverick): GQA with chunked local attention on the RoPE layers (all but
    every ``no_rope_layer_interval``-th, 4 by default: transformers' Llama4TextConfig
    no_rope_layers), MoE on every ``interleave_moe_layer_step``-th layer with one shared
    expert of the expert width, a dense MLP of ``intermediate_size_mlp`` on the others. The
    vision tower is not priced."""
    cfg = d.cfg
    n = d.take("n_layers", "num_hidden_layers")
    step = cfg.count("interleave_moe_layer_step", 1)
    moe_layers = [i for i in range(n) if (i + 1) % step == 0]
    dense_layers = [i for i in range(n) if (i + 1) % step != 0]
    stated = f"config.json {cfg.key('interleave_moe_layer_step')} {step}"
    counts = f"{len(moe_layers)} MoE layers, {len(dense_layers)} with a dense MLP"
    d.put("n_dense_layers", len(dense_layers), f"{stated}: {counts}")
    hidden = d.take("hidden", "hidden_size")
    dense_width = cfg.count("intermediate_size_mlp")
    unused = "" if dense_layers else " (no dense layers: enters no cost)"
    d.put("dense_intermediate", dense_width,
          f"config.json {cfg.key('intermediate_size_mlp')} {dense_width}{unused}")  # fmt: skip
    d.take("n_experts", "num_local_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    d.put("n_shared_experts", 1, "Llama 4: one shared expert in every MoE layer")
    e_width = d.take("expert_intermediate", "intermediate_size")
    shape = Shape(n, dense_layers)
    shape.moe_layers = moe_layers
    _gqa(d, hidden, shape)
    rope = cfg.value("no_rope_layers")
    interval = cfg.count("no_rope_layer_interval", 4)
    if rope is None:
        rope = [int((i + 1) % interval != 0) for i in range(n)]
        why = f"all but every {interval}th (no_rope_layers absent: the default interval)"
    elif isinstance(rope, list) and len(rope) == n and all(r in (0, 1) for r in rope):
        why = f"config.json {cfg.key('no_rope_layers')}: the RoPE layers"
    else:
        raise SpecError(cfg.file, cfg.key("no_rope_layers"), f"is {rope!r}"[:80],
                        f"{n} entries, each 0 (global, no RoPE) or 1 (chunked, RoPE)")  # fmt: skip
    d.put("chunked_layers", sum(rope), f"{sum(rope)} chunked layers: {why}")
    d.take("attention_chunk", "attention_chunk_size")
    shape.dense = _modules(_ffn("feed_forward", hidden, dense_width, GATE_UP_DOWN), dense_layers)
    shape.experts = _modules({"feed_forward.experts.gate_up_proj": hidden * 2 * e_width,
                              "feed_forward.experts.down_proj": e_width * hidden}, moe_layers,
                             expert=True)  # fmt: skip
    shape.shared = _modules(_ffn("feed_forward.shared_expert", hidden, e_width, GATE_UP_DOWN),
                            moe_layers)  # fmt: skip
    _finish(d, hidden, shape)


def _layer_types(cfg: HFConfig, n: int) -> list[int]:
    """The sliding-window layers ``layer_types`` names (1) among the full-attention ones (0),
    or a one-line error naming it."""
    types = cfg.value("layer_types")
    kinds = {"sliding_attention": 1, "full_attention": 0}
    if not (isinstance(types, list) and len(types) == n and all(t in kinds for t in types)):
        want = f"a list of {n} entries, each sliding_attention or full_attention"
        raise SpecError(cfg.file, cfg.key("layer_types"), f"is {types!r}"[:80], want)
    return [kinds[t] for t in types]


def _refuse_true(cfg: HFConfig, key: str, what: str, want: str) -> None:
    value = cfg.value(key)
    if value not in (None, False, 0):
        raise SpecError(cfg.file, cfg.key(key), f"is {value!r}: {what} not expressible in "
                        f"{KIND} yet", want)  # fmt: skip


def _gemma4(d: Draft) -> None:
    """Gemma 4 (31B, 26B-A4B): GQA whose sliding-window layers (``layer_types``) have
    ``head_dim`` and ``num_key_value_heads`` and whose full layers have ``global_head_dim`` and
    ``num_global_key_value_heads``, their keys serving as values under ``attention_k_eq_v``
    (transformers' Gemma4TextAttention); a GeGLU MLP of ``intermediate_size`` on every layer,
    and with ``enable_moe_block`` routed experts beside it on every layer, so the MLP prices as
    shared experts of the expert width. The vision tower is not priced; per-layer embeddings,
    KV shared across layers (E2B, E4B) and double-wide MLPs are refused at their keys."""
    cfg = d.cfg
    _refuse_true(cfg, "hidden_size_per_layer_input", "per-layer embeddings (E2B, E4B) are", "0")
    _refuse_true(cfg, "num_kv_shared_layers", "KV shared across layers is", "0")
    _refuse_true(cfg, "use_double_wide_mlp", "a double-wide MLP on KV-sharing layers is", "false")
    n = d.take("n_layers", "num_hidden_layers")
    moe = cfg.value("enable_moe_block") is True
    dense_layers = [] if moe else list(range(n))
    d.put("n_dense_layers", len(dense_layers), f"config.json {cfg.key('enable_moe_block')} "
          + ("true: routed experts on every layer" if moe else "false: a dense MLP on every "
             "layer"))  # fmt: skip
    hidden = d.take("hidden", "hidden_size")
    width = cfg.count("intermediate_size")
    shape = Shape(n, dense_layers)
    if moe:
        d.put("dense_intermediate", width, "no dense layers: the MLP beside the experts is "
              "priced as shared experts")  # fmt: skip
        d.take("n_experts", "num_experts")
        d.take("experts_per_token", "top_k_experts")
        e_width = cfg.count("moe_intermediate_size")
        beside = f"{cfg.key('intermediate_size')} {width} (the MLP beside the experts)"
        _shared_experts(d, width, e_width, "intermediate_size", beside)
        d.put("expert_intermediate", e_width,
              f"config.json {cfg.key('moe_intermediate_size')} {e_width}")  # fmt: skip
        shape.experts = _modules({"experts.gate_up_proj": hidden * 2 * e_width,
                                  "experts.down_proj": e_width * hidden}, range(n),
                                 expert=True)  # fmt: skip
        shape.shared = _modules(_ffn("mlp", hidden, width, GATE_UP_DOWN), range(n))
    else:
        d.put("dense_intermediate", width, f"config.json {cfg.key('intermediate_size')} {width}")
        for f in ("n_experts", "experts_per_token", "n_shared_experts"):
            d.put(f, 0, "dense model: no experts")
        shape.dense = _modules(_ffn("mlp", hidden, width, GATE_UP_DOWN), range(n))
    sliding = _layer_types(cfg, n)
    keys_are_values = cfg.value("attention_k_eq_v") is True
    d.put("attention", "gqa", "grouped-query attention, each kind of layer with its own heads")
    heads = d.take("n_heads", "num_attention_heads")
    window_kv = cfg.count("num_key_value_heads")
    window_dim = cfg.count("head_dim")
    # transformers' Gemma4TextAttention: the full layers' KV heads are the global ones only
    # where their keys serve as values
    full_kv = (d.take("n_kv_heads", "num_global_key_value_heads") if keys_are_values
               else d.take("n_kv_heads", "num_key_value_heads"))  # fmt: skip
    full_dim = d.take("head_dim", "global_head_dim", default=window_dim)
    d.take("sliding_window", "sliding_window")
    d.put("sliding_layers", sum(sliding), f"config.json {cfg.key('layer_types')}: "
          f"{sum(sliding)} sliding_attention of {n}")  # fmt: skip
    d.put("window_kv_heads", window_kv, f"config.json {cfg.key('num_key_value_heads')} "
          f"{window_kv}: the sliding-window layers'")  # fmt: skip
    d.put("window_head_dim", window_dim, f"config.json {cfg.key('head_dim')} {window_dim}: the "
          "sliding-window layers'")  # fmt: skip
    shared = "the full layers' keys serve as their values" if keys_are_values else "apart"
    d.put("keys_are_values", int(keys_are_values), f"config.json "
          f"{cfg.key('attention_k_eq_v')} {str(keys_are_values).lower()}: {shared}")  # fmt: skip
    shape.attention = []
    for i in range(n):
        kv, dim = (window_kv, window_dim) if sliding[i] else (full_kv, full_dim)
        parts = {"self_attn.q_proj": hidden * heads * dim, "self_attn.k_proj": hidden * kv * dim,
                 "self_attn.o_proj": heads * dim * hidden}  # fmt: skip
        if sliding[i] or not keys_are_values:
            parts["self_attn.v_proj"] = hidden * kv * dim
        shape.attention += _modules(parts, [i])
    _finish(d, hidden, shape)


def _step3p7(d: Draft) -> None:
    """Step-3.5 / 3.7-Flash: GQA with a sliding window of ``sliding_window`` tokens on the
    layers ``layer_types`` names, ``first_k_dense_replace`` leading dense layers, then routed
    experts and ``n_shared_experts`` shared experts of ``share_expert_dim``. The MTP layers
    (num_nextn_predict_layers) and the vision encoder are not priced."""
    cfg = d.cfg
    n = d.take("n_layers", "num_hidden_layers")
    k = cfg.count("first_k_dense_replace", 0, minimum=0)
    dense_layers = list(range(min(k, n)))
    d.put("n_dense_layers", len(dense_layers),
          f"config.json {cfg.key('first_k_dense_replace')} {k}")  # fmt: skip
    hidden = d.take("hidden", "hidden_size")
    width = d.take("dense_intermediate", "intermediate_size")
    d.take("n_experts", "num_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    e_width = cfg.count("moe_intermediate_size")
    n_shared = cfg.count("n_shared_experts", 1, minimum=0)
    shared_width = n_shared * cfg.count("share_expert_dim", e_width)
    if n_shared:
        _shared_experts(d, shared_width, e_width, "share_expert_dim",
                        f"{cfg.key('n_shared_experts')} {n_shared} x "
                        f"{cfg.key('share_expert_dim')}")  # fmt: skip
    else:
        d.put("n_shared_experts", 0, f"config.json {cfg.key('n_shared_experts')} 0")
    d.put("expert_intermediate", e_width,
          f"config.json {cfg.key('moe_intermediate_size')} {e_width}")  # fmt: skip
    shape = Shape(n, dense_layers)
    _gqa(d, hidden, shape)
    sliding = _layer_types(cfg, n)
    d.take("sliding_window", "sliding_window")
    d.put("sliding_layers", sum(sliding), f"config.json {cfg.key('layer_types')}: "
          f"{sum(sliding)} sliding_attention of {n}")  # fmt: skip
    shape.dense = _modules(_ffn("mlp", hidden, width, GATE_UP_DOWN), dense_layers)
    shape.experts = _modules(_ffn("moe", hidden, e_width, GATE_UP_DOWN), shape.moe_layers,
                             expert=True)  # fmt: skip
    if n_shared:
        shape.shared = _modules(_ffn("share_expert", hidden, shared_width, GATE_UP_DOWN),
                                shape.moe_layers)  # fmt: skip
    _finish(d, hidden, shape)


def _pattern(cfg: HFConfig, key: str, n: int) -> list[int]:
    """A per-layer list of 0s and 1s the config states (``hybrid_layer_pattern``,
    ``moe_layer_freq``), or a one-line error naming it."""
    value = cfg.value(key)
    if not (isinstance(value, list) and len(value) == n and all(v in (0, 1) for v in value)):
        raise SpecError(cfg.file, cfg.key(key), f"is {value!r}"[:80],
                        f"a list of {n} entries, one per layer, each 0 or 1")  # fmt: skip
    return [int(v) for v in value]


def _same(cfg: HFConfig, key: str, like: str) -> None:
    """A sliding-window layer's geometry that stepwall keeps one of for both kinds of layer:
    refused where it differs from the full layers'."""
    if cfg.count(key, cfg.count(like)) != cfg.count(like):
        raise SpecError(cfg.file, cfg.key(key), f"is {cfg.count(key)}, not {like} "
                        f"{cfg.count(like)}: sliding-window layers of other query heads or "
                        f"head dimensions are not expressible in {KIND} yet",
                        f"{like}'s value")  # fmt: skip


def _mimo_v2(d: Draft) -> None:
    """MiMo-V2-Flash: GQA whose values are narrower than queries and keys (``v_head_dim``),
    sliding-window layers (``hybrid_layer_pattern`` 1) of ``sliding_window`` tokens with KV
    heads of their own (``swa_num_key_value_heads``) beside full layers (0), and a DeepSeek-
    style MoE without shared experts on the layers ``moe_layer_freq`` marks 1 (the others a
    dense MLP of ``intermediate_size``). Its ``attention_chunk_size`` is the window's size;
    attention sinks and the partial rotary embedding are elementwise and not priced."""
    cfg = d.cfg
    n = d.take("n_layers", "num_hidden_layers")
    moe = _pattern(cfg, "moe_layer_freq", n)
    dense_layers = [i for i in range(n) if not moe[i]]
    d.put(
        "n_dense_layers",
        len(dense_layers),
        f"config.json {cfg.key('moe_layer_freq')}: "
        f"{len(dense_layers)} layers with a dense MLP ({', '.join(map(str, dense_layers))})",
    )
    hidden = d.take("hidden", "hidden_size")
    dense_width = d.take("dense_intermediate", "intermediate_size")
    d.take("n_experts", "n_routed_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    d.take("n_group", "n_group", default=1)
    d.take("topk_group", "topk_group", default=1)
    shared = d.take("n_shared_experts", "n_shared_experts", default=0, minimum=0)
    e_width = d.take("expert_intermediate", "moe_intermediate_size")
    shape = Shape(n, dense_layers)
    d.put("attention", "gqa", "grouped-query attention (num_key_value_heads, num_attention_heads)")
    heads = d.take("n_heads", "num_attention_heads")
    kv = d.take("n_kv_heads", "num_key_value_heads")
    qk = d.take("head_dim", "head_dim")
    v = d.take("v_head_dim", "v_head_dim")
    sliding = _pattern(cfg, "hybrid_layer_pattern", n)
    window = d.take("sliding_window", "sliding_window")
    chunk = cfg.count("attention_chunk_size", window)
    if chunk != window:
        raise SpecError(cfg.file, cfg.key("attention_chunk_size"), f"is {chunk}, not the "
                        f"sliding window {window}", f"{window} (the window's size)")  # fmt: skip
    d.put("sliding_layers", sum(sliding), f"config.json {cfg.key('hybrid_layer_pattern')}: "
          f"{sum(sliding)} sliding-window layers (1) of {n}")  # fmt: skip
    for key, like in (
        ("swa_num_attention_heads", "num_attention_heads"),
        ("swa_head_dim", "head_dim"),
        ("swa_v_head_dim", "v_head_dim"),
    ):
        _same(cfg, key, like)
    kv_w = d.take("window_kv_heads", "swa_num_key_value_heads")
    kv_of = [kv_w if sliding[i] else kv for i in range(n)]
    shape.attention = [
        Module(names, params, False)
        for i in range(n)
        for suffix, params in (("self_attn.q_proj", hidden * heads * qk),
                               ("self_attn.k_proj", hidden * kv_of[i] * qk),
                               ("self_attn.v_proj", hidden * kv_of[i] * v),
                               ("self_attn.o_proj", heads * v * hidden))
        for names in _names(suffix, [i], "model")
    ]  # fmt: skip
    shape.dense = _modules(_ffn("mlp", hidden, dense_width, GATE_UP_DOWN), dense_layers)
    shape.experts = _modules(_ffn("mlp.experts.0", hidden, e_width, GATE_UP_DOWN),
                             shape.moe_layers, expert=True)  # fmt: skip
    if shared:
        shape.shared = _modules(_ffn("mlp.shared_experts", hidden, shared * e_width,
                                     GATE_UP_DOWN), shape.moe_layers)  # fmt: skip
    _finish(d, hidden, shape)


def _sparse_block(cfg: HFConfig, block: dict[str, object], name: str) -> int:
    value = block.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(cfg.file, f"{cfg.key('sparse_attention_config')}.{name}",
                        f"is {value!r}", "an integer >= 1")  # fmt: skip
    return value


def _minimax_m3(d: Draft) -> None:
    """MiniMax-M3: GQA with MiniMax Sparse Attention on the layers ``sparse_attention_freq``
    marks (a lightning indexer of ``sparse_num_index_heads`` query heads over one index key of
    ``sparse_index_dim`` per token scores every cached key; each query attends to
    ``sparse_topk_blocks`` blocks of ``sparse_block_size`` tokens, its local block among them),
    dense attention on the others; leading dense layers, then routed experts and shared
    experts. The vision tower and the MTP modules are not priced."""
    cfg = d.cfg
    block = cfg.value("sparse_attention_config")
    where = cfg.key("sparse_attention_config")
    if not isinstance(block, dict) or block.get("use_sparse_attention") is not True:
        raise SpecError(cfg.file, where, "is not a sparse-attention table in use",
                        "use_sparse_attention = true with its block and index sizes")  # fmt: skip
    n = d.take("n_layers", "num_hidden_layers")
    freq = block.get("sparse_attention_freq")
    if not isinstance(freq, list) or len(freq) != n or any(f not in (0, 1) for f in freq):
        raise SpecError(cfg.file, f"{where}.sparse_attention_freq", f"is {freq!r}"[:80],
                        f"{n} entries, each 0 (dense) or 1 (sparse)")  # fmt: skip
    k_dense = d.take("n_dense_layers", "first_k_dense_replace", default=0, minimum=0)
    moe_freq = cfg.value("moe_layer_freq")
    if moe_freq is not None and moe_freq != [0] * k_dense + [1] * (n - k_dense):
        raise SpecError(cfg.file, cfg.key("moe_layer_freq"),
                        f"is not the first {k_dense} layers dense and MoE after",
                        "first_k_dense_replace's pattern (MoE on some later layers only "
                        "is not expressible yet)")  # fmt: skip
    hidden = d.take("hidden", "hidden_size")
    dense_width = d.take("dense_intermediate", "dense_intermediate_size")
    d.take("n_experts", "num_local_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    e_width = cfg.count("moe_intermediate_size")
    shared_width = cfg.count("n_shared_experts", 0, minimum=0) * cfg.count(
        "shared_intermediate_size", 0, minimum=0
    )
    stated = f"{cfg.key('n_shared_experts')} x shared_intermediate_size = {shared_width}"
    _shared_experts(d, shared_width, e_width, "shared_intermediate_size", stated)
    d.put("expert_intermediate", e_width, f"config.json {cfg.key('moe_intermediate_size')} "
          f"{e_width}")  # fmt: skip
    shape = Shape(n, list(range(k_dense)))
    _gqa(d, hidden, shape)
    if cfg.value("attention_output_gate") is True:
        d.put("attention_gate", 1, f"config.json {cfg.key('attention_output_gate')} true")
    topk = _sparse_block(cfg, block, "sparse_topk_blocks")
    size = _sparse_block(cfg, block, "sparse_block_size")
    heads = _sparse_block(cfg, block, "sparse_num_index_heads")
    dim = _sparse_block(cfg, block, "sparse_index_dim")
    d.put("index_topk", topk * size, f"config.json {where}.sparse_topk_blocks {topk} x "
          f"sparse_block_size {size} tokens")  # fmt: skip
    d.put("index_heads", heads, f"config.json {where}.sparse_num_index_heads {heads}")
    d.put("index_head_dim", dim, f"config.json {where}.sparse_index_dim {dim}")
    plain, plain_why = cfg.dtype_bits
    d.put("index_bits", bits_text(plain), f"index keys in the checkpoint dtype ({plain_why}): "
          "the config states no format")  # fmt: skip
    d.put("index_math", "bf16", "the indexer's scores in BF16: the config states no format")
    dense_attn = freq.count(0)
    d.put("dense_attention_layers", dense_attn, f"config.json {where}.sparse_attention_freq: "
          f"{dense_attn} layers at 0")  # fmt: skip
    sparse_layers = [i for i, f in enumerate(freq) if f]
    indexer = {
        "self_attn.index_q_proj": hidden * heads * dim,
        "self_attn.index_k_proj": hidden * dim,
    }
    shape.attention += _modules(indexer, sparse_layers)
    shape.dense = _modules(_ffn("mlp", hidden, dense_width, GATE_UP_DOWN), shape.dense_layers)
    shape.experts = _modules(_ffn("block_sparse_moe.experts.0", hidden, e_width, W1_W3_W2),
                             shape.moe_layers, expert=True)  # fmt: skip
    if shared_width:
        shape.shared = _modules(_ffn("block_sparse_moe.shared_experts", hidden, shared_width,
                                     GATE_UP_DOWN), shape.moe_layers)  # fmt: skip
    _finish(d, hidden, shape)


def _deepseek_v4(d: Draft) -> None:
    """DeepSeek-V4 (Flash, Pro): compressed attention (a 128-token window on every layer, CSA
    layers with one entry per 4 tokens and an indexer selecting index_topk of them, HCA layers
    with one entry per 128 tokens; one shared key-value head of head_dim; a grouped low-rank
    output), then MoE on every layer with a shared expert and FP4 experts. Not priced:
    hyper-connections (hc_mult residual streams: small mixing weights, elementwise work) and
    the hash routing of the first num_hash_layers (the same expert work as learned routing)."""
    cfg = d.cfg
    n = d.take("n_layers", "num_hidden_layers")
    ratios = cfg.value("compress_ratios")
    if (
        not isinstance(ratios, list)
        or len(ratios) < n
        or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ratios)
    ):
        raise SpecError(cfg.file, cfg.key("compress_ratios"), f"is {ratios!r}"[:80],
                        f"at least {n} whole ratios ≥ 0, one per layer")  # fmt: skip
    layers = ratios[:n]  # a further entry is the MTP module's
    kinds = sorted(set(layers) - {0})
    if len(kinds) > 2:
        raise SpecError(cfg.file, cfg.key("compress_ratios"), f"has ratios {kinds}",
                        "at most two compression ratios (CSA's and HCA's) besides 0")  # fmt: skip
    k_dense = d.take("n_dense_layers", "first_k_dense_replace", default=0, minimum=0)
    hidden = d.take("hidden", "hidden_size")
    e_width = cfg.count("moe_intermediate_size")
    d.put("dense_intermediate", e_width, "no dense layers: the expert width, which enters no cost")
    d.take("n_experts", "n_routed_experts")
    d.take("experts_per_token", "num_experts_per_tok")
    d.take("n_group", "n_group", default=1)
    d.take("topk_group", "topk_group", default=1)
    shared = d.take("n_shared_experts", "n_shared_experts", default=0, minimum=0)
    d.put("expert_intermediate", e_width, f"config.json {cfg.key('moe_intermediate_size')} "
          f"{e_width}")  # fmt: skip
    shape = Shape(n, list(range(k_dense)))
    _compressed_attention(d, hidden, layers, kinds, shape)
    d.put("vocab", cfg.count("vocab_size"), f"config.json {cfg.key('vocab_size')} "
          f"{cfg.count('vocab_size')}")  # fmt: skip
    shape.experts = _modules(_ffn("ffn.experts.0", hidden, e_width, W1_W3_W2), shape.moe_layers,
                             expert=True)  # fmt: skip
    if shared:
        shape.shared = _modules(_ffn("ffn.shared_experts", hidden, shared * e_width, W1_W3_W2),
                                shape.moe_layers)  # fmt: skip
    experts = None
    if cfg.value("expert_dtype") == "fp4":
        experts = Precision(4 + 8 / 32, "fp8", 8.0, f"config.json {cfg.key('expert_dtype')} fp4: "
                            "FP4 e2m1 with one UE8M0 scale per 32 (scale_fmt ue8m0), the "
                            "block-FP8 scheme's FP8 activations (W4A8)")  # fmt: skip
    elif cfg.has("expert_dtype"):
        raise SpecError(cfg.file, cfg.key("expert_dtype"), f"is {cfg.value('expert_dtype')!r}",
                        "fp4, or absent (the checkpoint's scheme)")  # fmt: skip
    _finish(d, hidden, shape, vocab_done=True, experts=experts)


def _compressed_attention(
    d: Draft, hidden: int, layers: list[int], kinds: list[int], shape: Shape
) -> None:
    """DeepSeek-V4's attention fields: the smaller nonzero ratio is CSA's (the indexer's
    layers), the larger HCA's; ratio 0 is the window alone."""
    cfg = d.cfg
    d.put("attention", "compressed", "compressed attention (config.json compress_ratios)")
    heads = d.take("n_heads", "num_attention_heads")
    if cfg.count("num_key_value_heads", 1) != 1:
        raise SpecError(cfg.file, cfg.key("num_key_value_heads"), "is not 1: compressed "
                        "attention shares one key-value head", "1")  # fmt: skip
    head_dim = d.take("head_dim", "head_dim")
    rq = d.take("q_lora_rank", "q_lora_rank")
    ro = d.take("o_lora_rank", "o_lora_rank")
    groups = d.take("o_groups", "o_groups", default=1)
    d.take("sliding_window", "sliding_window")
    names = (("csa", "CSA"), ("hca", "HCA"))
    for (field, what), ratio in zip(names, [*kinds, *([None] * (2 - len(kinds)))], strict=True):
        count = layers.count(ratio) if ratio is not None else 0
        d.put(f"{field}_layers", count, f"config.json {cfg.key('compress_ratios')}: {count} "
              f"layers at {ratio}" if ratio else f"no {what} layers")  # fmt: skip
        if ratio:
            d.put(f"{field}_ratio", ratio, f"config.json {cfg.key('compress_ratios')} {ratio}")
    if kinds:
        d.take("index_topk", "index_topk")
        d.take("index_heads", "index_n_heads")
        d.take("index_head_dim", "index_head_dim")
        d.put("index_bits", bits_text(4.0), "FP4 index keys (as aiconfigurator's DeepSeek-V4 "
              "cache model keeps them)")  # fmt: skip
        d.put("index_math", "fp8", "the indexer's scores in FP8 (DeepSeek-V3.2-Exp report §2.1)")
    attn = {
        "attn.wq_a": hidden * rq,
        "attn.wq_b": rq * heads * head_dim,
        "attn.wkv": hidden * head_dim,
        "attn.wo_a": heads * head_dim * ro,
        "attn.wo_b": groups * ro * hidden,
    }
    shape.attention = _modules(attn, shape.attention_layers)


def _finish(
    d: Draft,
    hidden: int,
    shape: Shape,
    vocab_done: bool = False,
    experts: Precision | None = None,
) -> None:
    """The vocabulary and every component's precision and math (the routed experts' as
    ``experts`` states it, where the config names their format apart)."""
    cfg = d.cfg
    vocab = cfg.count("vocab_size")
    if not vocab_done:
        d.put("vocab", vocab, f"config.json {cfg.key('vocab_size')} {vocab}")
    if cfg.value("tie_word_embeddings") is True:
        d.put("tie_embeddings", 1, f"config.json {cfg.key('tie_word_embeddings')} true: the LM "
              "head is the embedding matrix")  # fmt: skip
    plain, plain_why = cfg.dtype_bits
    experts = experts or cfg.precision(shape.experts)
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
    "NemotronHForCausalLM": _nemotron_h,
    "KimiLinearForCausalLM": _kimi_linear,
    "DeepseekV4ForCausalLM": _deepseek_v4,
    "MiniMaxM3ForCausalLM": _minimax_m3,
    "Llama4ForConditionalGeneration": _llama4,
    "MiMoV2FlashForCausalLM": _mimo_v2,
    "Gemma4ForConditionalGeneration": _gemma4,
    "Gemma4ForCausalLM": _gemma4,  # the text model alone, its config flat
    "Step3p7FlashForCausalLM": _step3p7,
}

# NOT_YET keys a family reads itself
HANDLED = {
    "NemotronHForCausalLM": ("hybrid_override_pattern", "mamba_num_heads", "moe_latent_size"),
    "KimiLinearForCausalLM": ("linear_attn_config",),
    "DeepseekV4ForCausalLM": ("compress_ratios", "hc_mult"),
    "MiniMaxM3ForCausalLM": ("sparse_attention_config",),
    "Llama4ForConditionalGeneration": ("attention_chunk_size",),
    "MiMoV2FlashForCausalLM": ("attention_chunk_size",),
}


# Architectures recognised but refused, at the config key that names what the kind lacks.
NOT_YET_ARCHITECTURES = (
    "KimiK3ForConditionalGeneration",
    "MiniMaxM3SparseForCausalLM",
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
