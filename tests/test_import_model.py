"""Hugging Face configs in (issue 23, item 1): `stepwall import-model` and ``from = "hf:…"``.

The configs are the publishers' own files (tests/data/hf/README.md). Each check compares with
something the importer does not compute: the shipped catalog bytes, the publisher's parameter
total counted by the model plugin's own weight accounting, the hand-written catalog specs of
the same models, and the quantisation formats' definitions.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stepwall.apps.import_model import model_spec
from stepwall.cli import main
from stepwall.model.compose import build_model
from stepwall.plugin.registry import build
from stepwall.spec.hf import Module, _matches, read_config
from stepwall.testing import import_refusal

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "hf"
CATALOG = tomllib.loads((DATA / "catalog.toml").read_text())["model"]
WEIGHT_BITS = (
    "expert_bits",
    "shared_expert_bits",
    "attention_bits",
    "dense_bits",
    "embedding_bits",
)


@pytest.fixture(scope="module")
def kinds() -> Any:
    return build().kinds


@pytest.mark.parametrize("entry", CATALOG, ids=[e["name"] for e in CATALOG])
def test_catalog_entry_is_what_the_importer_writes(
    entry: dict[str, Any], kinds: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the specs name their source as a repository path
    text = model_spec(f"tests/data/hf/{entry['config']}", kinds, entry["name"])
    assert (ROOT / "specs" / "models" / f"{entry['name']}.toml").read_text() == text


@pytest.mark.parametrize("entry", CATALOG, ids=[e["name"] for e in CATALOG])
def test_parameter_count_is_the_published_total(entry: dict[str, Any]) -> None:
    """The plugin's resident weights on one GPU at one byte per weight, against the total the
    publisher states."""
    sets = ["parallel.tp=1", "parallel.ep=1", "parallel.redundant_experts=0"]
    sets += [f"model.{b}=8 bit" for b in WEIGHT_BITS]
    inline = f"model={entry['name']},hardware=h200,cluster=hgx-h200-ib,engine=trtllm"
    sets += ["workload.concurrency=1", "workload.context=1024"]
    held = float(build_model(inline, sets).evaluate()["weight_bytes_per_gpu"])
    assert held == pytest.approx(entry["published_total"], rel=entry["tol"]), entry["total_source"]


# hand-written catalog specs of the same architectures: every architecture field agrees
HAND_WRITTEN = {
    "deepseek-v3-fp8": "deepseek-ai--DeepSeek-V3",
    "kimi-k2-fp8": "moonshotai--Kimi-K2-Instruct",
    "llama-3.3-70b-fp8": "nvidia--Llama-3.1-70B-Instruct-FP8",
    "gpt-oss-120b": "openai--gpt-oss-120b",
    "minimax-m2.5-fp8": "MiniMaxAI--MiniMax-M2.5",
}
ARCHITECTURE = (
    "n_layers",
    "n_dense_layers",
    "hidden",
    "n_experts",
    "experts_per_token",
    "n_shared_experts",
    "expert_intermediate",
    "attention",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "vocab",
    "sliding_window",
    "sliding_layers",
    "n_group",
    "topk_group",
)


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_import_agrees_with_the_hand_written_spec(name: str, kinds: Any) -> None:
    hand = tomllib.loads((ROOT / "specs" / "models" / f"{name}.toml").read_text())
    got = tomllib.loads(model_spec(str(DATA / HAND_WRITTEN[name]), kinds))
    for key in ARCHITECTURE:
        if key in hand and key in got:
            assert got[key] == hand[key], (name, key)
    assert got["attention"] == hand["attention"]


def test_hand_written_precisions_of_fp8_llama_agree(kinds: Any) -> None:
    """ModelOpt FP8 (per tensor, W8A8, FP8 KV) as the hand-written Llama spec states it."""
    got = tomllib.loads(model_spec(str(DATA / "nvidia--Llama-3.1-70B-Instruct-FP8"), kinds))
    hand = tomllib.loads((ROOT / "specs" / "models" / "llama-3.3-70b-fp8.toml").read_text())
    for key in (
        "attention_bits",
        "dense_bits",
        "embedding_bits",
        "kv_bits",
        "attention_math",
        "dense_math",
        "attention_core_math",
    ):
        assert got[key] == hand[key], key


def test_formats_are_their_definitions(kinds: Any) -> None:
    """Stored bits: FP8 + an FP32 scale per 128x128 block; NVFP4 e2m1 + E4M3 per 16; MXFP4
    e2m1 + E8M0 per 32; INT4 + a BF16 scale per 32 (Kimi K2.5's W4A16)."""

    def bits(folder: str, key: str) -> float:
        spec = tomllib.loads(model_spec(str(DATA / folder), kinds))
        return float(spec[key].split()[0])

    assert bits("deepseek-ai--DeepSeek-R1", "expert_bits") == round(8 + 32 / 128**2, 3)
    assert bits("nvidia--Qwen3-235B-A22B-NVFP4", "expert_bits") == 4 + 8 / 16
    assert bits("openai--gpt-oss-20b", "expert_bits") == 4 + 8 / 32
    assert bits("moonshotai--Kimi-K2.5", "expert_bits") == 4 + 16 / 32
    assert bits("moonshotai--Kimi-K2.5", "attention_bits") == 16  # ignored: re:.*self_attn.*
    k25 = tomllib.loads(model_spec(str(DATA / "moonshotai--Kimi-K2.5"), kinds))
    assert (k25["expert_math"], k25["dispatch_bits"]) == ("wna16", "16 bit")  # weight-only


def test_partly_excluded_attention_is_weighted_by_parameters(kinds: Any) -> None:
    """DeepSeek-V3.1 NVFP4 leaves q_a, q_b, kv_a and kv_b in BF16 and quantises o_proj: the
    attention's bits are the parameter-weighted mean, counted here by hand from the config."""
    h, heads, rq, rkv, nope, rope, v = 7168, 128, 1536, 512, 128, 64, 128
    left_out = h * rq + rq * heads * (nope + rope) + h * (rkv + rope) + rkv * heads * (nope + v)
    o_proj = heads * v * h
    want = (left_out * 16 + o_proj * 4.5) / (left_out + o_proj)
    spec = tomllib.loads(model_spec(str(DATA / "nvidia--DeepSeek-V3.1-NVFP4"), kinds))
    assert float(spec["attention_bits"].split()[0]) == pytest.approx(want, abs=0.005)


@pytest.mark.parametrize(
    ("pattern", "name", "hit"),
    [
        ("gate", "model.layers.3.block_sparse_moe.gate", True),
        ("gate", "model.layers.3.mlp.experts.0.gate_proj", False),
        ("lm_head", "lm_head", True),
        ("model.layers.*.self_attn", "model.layers.7.self_attn", True),
        ("model.layers.1.self_attn*", "model.layers.1.self_attn.q_proj", True),
        ("model.layers.1.self_attn*", "model.layers.11.self_attn.q_proj", False),
        ("re:.*shared_experts.*", "model.layers.4.mlp.shared_experts.up_proj", True),
        ("re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "model.layers.0.mlp.down_proj", True),
        (
            "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
            "model.layers.5.mlp.experts.1.down_proj",
            False,
        ),
    ],
)
def test_exclusion_patterns_match_as_the_quantisers_do(pattern: str, name: str, hit: bool) -> None:
    assert _matches(pattern, name) is hit


def test_module_covered_by_any_alias() -> None:
    cfg = read_config(str(DATA / "nvidia--Kimi-K2.6-NVFP4"))
    assert cfg.quant is not None
    attn = Module(
        ("model.layers.5.self_attn.o_proj", "language_model.model.layers.5.self_attn.o_proj"), 1
    )
    assert not cfg.quant.covers(attn.names, expert=False)
    assert cfg.precision([attn]).bits == 16


def _eval_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(args) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_hf_source_equals_the_catalog_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``model = "hf:DIR"`` in a scenario, and a model spec ``from = "hf:DIR"`` with an
    override, price the same step as the written catalog entry with the same override."""
    config = DATA / "Qwen--Qwen3-30B-A3B-FP8"
    base = 'from = "llama70b-fp8-h200-tp1"\n'
    (tmp_path / "direct.toml").write_text(base + f'model = "hf:{config}"\n')
    (tmp_path / "mine.toml").write_text(f'name = "mine"\nfrom = "hf:{config}"\nkv_bits = "8 bit"\n')
    (tmp_path / "via.toml").write_text(base + 'model = "mine.toml"\n')
    (tmp_path / "cat.toml").write_text(base + 'model = "qwen3-30b-a3b-fp8"\n')
    step = "step_time_s"
    direct = _eval_json(["eval", str(tmp_path / "direct.toml"), "--json", "--no-cache"], capsys)
    cat = _eval_json(["eval", str(tmp_path / "cat.toml"), "--json", "--no-cache"], capsys)
    assert direct[step] == cat[step]
    via = _eval_json(["eval", str(tmp_path / "via.toml"), "--json", "--no-cache"], capsys)
    cat8 = _eval_json(
        [
            "eval",
            str(tmp_path / "cat.toml"),
            "--json",
            "--no-cache",
            "--set",
            'model.kv_bits="8 bit"',
        ],
        capsys,
    )
    assert via[step] == cat8[step]


def test_hub_id_from_the_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = tmp_path / "models--openai--gpt-oss-20b" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    shutil.copy(DATA / "openai--gpt-oss-20b" / "config.json", snap / "config.json")
    (tmp_path / "models--openai--gpt-oss-20b" / "refs").mkdir()
    (tmp_path / "models--openai--gpt-oss-20b" / "refs" / "main").write_text("abc123\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["import-model", "openai/gpt-oss-20b"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["name"] == "gpt-oss-20b"


def test_output_file_is_written_whole_and_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.toml"
    assert (
        main(
            [
                "import-model",
                str(DATA / "mistralai--Mixtral-8x7B-v0.1"),
                "-o",
                str(out),
                "--name",
                "mixtral",
            ]
        )
        == 0
    )
    assert "wrote" in capsys.readouterr().out
    assert main(["check", str(out)]) == 0
    assert tomllib.loads(out.read_text())["name"] == "mixtral"


@pytest.mark.parametrize(
    ("folder", "edit", "key"),
    [
        # local attention in neither Llama 4's chunked form nor MiMo-V2's window
        ("mistralai--Mixtral-8x7B-v0.1", {"attention_chunk_size": 8192}, "attention_chunk_size"),
        ("mistralai--Mixtral-8x7B-v0.1", {"sparse_topk_blocks": 16}, "sparse_topk_blocks"),
    ],
)
def test_inexpressible_architectures_are_refused_at_their_key(
    folder: str, edit: dict[str, Any], key: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A publisher's config with a key that names physics the kind lacks."""
    cfg = json.loads((DATA / folder / "config.json").read_text())
    assert f"config.json:{key}:" in import_refusal(capsys, tmp_path, {**cfg, **edit})


# a Llama config with every key the importer needs, small
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "vocab_size": 100,
}
# a Nemotron-H config of two Mamba-2, one attention and two MoE blocks
TINY_NEMOTRON = {
    "architectures": ["NemotronHForCausalLM"],
    "hybrid_override_pattern": "ME*ME",
    "num_hidden_layers": 5,
    "hidden_size": 64,
    "intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "mamba_num_heads": 8,
    "mamba_head_dim": 16,
    "n_groups": 2,
    "ssm_state_size": 16,
    "expand": 2,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 64,
    "moe_latent_size": 16,
    "mlp_hidden_act": "relu2",
    "vocab_size": 100,
}
# a Kimi Linear (K3) config: KDA on layer 1, MLA on layer 2 (1-based), a latent MoE
KDA = {"kda_layers": [1], "full_attn_layers": [2], "num_heads": 4, "head_dim": 16,
       "use_full_rank_gate": True}  # fmt: skip
TINY_KIMI = {
    "architectures": ["KimiLinearForCausalLM"],
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "moe_intermediate_size": 32,
    "routed_expert_hidden_size": 32,
    "linear_attn_config": KDA,
    "vocab_size": 100,
}


# a DeepSeek-V4 config: a window-only layer, a CSA and an HCA layer, then the MTP module's
TINY_V4 = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "num_hidden_layers": 3,
    "compress_ratios": [0, 4, 128, 0],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "q_lora_rank": 16,
    "o_lora_rank": 16,
    "o_groups": 2,
    "sliding_window": 8,
    "index_topk": 4,
    "index_n_heads": 2,
    "index_head_dim": 8,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_intermediate_size": 32,
    "expert_dtype": "fp4",
    "hc_mult": 4,
    "vocab_size": 100,
}


# a MiniMax-M3 config: a dense layer with dense attention, a MoE layer with sparse attention
MSA = {"use_sparse_attention": True, "sparse_attention_freq": [0, 1], "sparse_topk_blocks": 2,
       "sparse_block_size": 4, "sparse_num_index_heads": 2, "sparse_index_dim": 8}  # fmt: skip
TINY_M3 = {
    "architectures": ["MiniMaxM3ForCausalLM"],
    "num_hidden_layers": 2,
    "first_k_dense_replace": 1,
    "moe_layer_freq": [0, 1],
    "hidden_size": 64,
    "dense_intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "n_shared_experts": 1,
    "shared_intermediate_size": 32,
    "sparse_attention_config": MSA,
    "vocab_size": 100,
}


def _msa(**block: Any) -> dict[str, Any]:
    return {**TINY_M3, "sparse_attention_config": {**MSA, **block}}


def _kda(**block: Any) -> dict[str, Any]:
    return {**TINY_KIMI, "linear_attn_config": {**KDA, **block}}


# the same blocks as the newer configs list them (Nemotron-3 Ultra)
NEMOTRON_LISTED = {k: v for k, v in TINY_NEMOTRON.items() if k != "hybrid_override_pattern"} | {
    "layers_block_type": ["mamba", "moe", "attention", "mamba", "moe"]
}


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"architectures": ["FooForCausalLM"]}, "architectures"),
        ({"model_type": "llama"}, "architectures"),
        ({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}, "num_hidden_layers"),
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": -2}, "num_hidden_layers"),
        (
            {**TINY_LLAMA, "quantization_config": {"quant_method": "bitsandbytes"}},
            "quantization_config.quant_method",
        ),
        ({**TINY_LLAMA, "torch_dtype": "int3"}, "torch_dtype"),
        # a key only another family reads is still refused here
        ({**TINY_LLAMA, "mamba_num_heads": 8}, "mamba_num_heads"),
        ({**TINY_NEMOTRON, "hybrid_override_pattern": "M*X"}, "hybrid_override_pattern"),
        ({**TINY_NEMOTRON, "hybrid_override_pattern": "MEEEE"}, "hybrid_override_pattern"),
        ({**NEMOTRON_LISTED, "layers_block_type": ["mamba", "conv"]}, "layers_block_type"),
        ({**TINY_NEMOTRON, "num_hidden_layers": 6}, "num_hidden_layers"),
        ({**TINY_NEMOTRON, "mlp_hidden_act": "silu"}, "mlp_hidden_act"),
        ({**TINY_NEMOTRON, "mamba_head_dim": 8}, "mamba_num_heads"),
        (
            {**TINY_NEMOTRON, "moe_shared_expert_intermediate_size": 50},
            "moe_shared_expert_intermediate_size",
        ),
        ({**TINY_NEMOTRON, "mamba_ssm_cache_dtype": "int8"}, "mamba_ssm_cache_dtype"),
        ({**TINY_KIMI, "linear_attn_config": [1, 2]}, "linear_attn_config"),
        (_kda(kda_layers=[1, 5]), "linear_attn_config.kda_layers"),
        (_kda(kda_layers=[1], full_attn_layers=[1, 2]), "linear_attn_config.kda_layers"),
        (_kda(use_full_rank_gate=False), "linear_attn_config.use_full_rank_gate"),
        (_kda(num_heads=0), "linear_attn_config.num_heads"),
        ({**TINY_KIMI, "moe_layer_freq": 2}, "moe_layer_freq"),
        ({**TINY_V4, "compress_ratios": [4, 8, 128, 0]}, "compress_ratios"),
        ({**TINY_V4, "compress_ratios": [4, 128]}, "compress_ratios"),
        ({**TINY_V4, "compress_ratios": [0, 4, -1, 0]}, "compress_ratios"),
        ({**TINY_V4, "num_key_value_heads": 2}, "num_key_value_heads"),
        ({**TINY_V4, "expert_dtype": "fp6"}, "expert_dtype"),
        ({**TINY_LLAMA, "hc_mult": 4}, "hc_mult"),
        ({**TINY_LLAMA, "attention_chunk_size": 8192}, "attention_chunk_size"),
        (_msa(use_sparse_attention=False), "sparse_attention_config"),
        (_msa(sparse_attention_freq=[0, 1, 1]), "sparse_attention_config.sparse_attention_freq"),
        (_msa(sparse_topk_blocks=0), "sparse_attention_config.sparse_topk_blocks"),
        ({**TINY_M3, "moe_layer_freq": [1, 0]}, "moe_layer_freq"),
        # above the spec field's bound: refused at the config's key, not the written spec's
        ({**TINY_M3, "num_experts_per_tok": 100}, "num_experts_per_tok"),
    ],
)
def test_bad_configs_are_one_line_errors(
    doc: dict[str, Any], key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(doc))
    assert main(["import-model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"config.json:{key}:" in err and "\n" not in err


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", ""])
def test_unreadable_config_is_a_one_line_error(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(text)
    assert main(["import-model", str(tmp_path / "config.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "config.json" in err and "\n" not in err


def test_missing_config_and_uncached_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["import-model", "nowhere/config.json"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["import-model", "someorg/somemodel"]) == 2
    assert "not in the local Hugging Face cache" in capsys.readouterr().err
    (tmp_path / "s.toml").write_text('from = "llama70b-fp8-h200-tp1"\nmodel = "hf:missing"\n')
    assert main(["eval", str(tmp_path / "s.toml")]) == 2
    assert "s.toml:model: missing: not found" in capsys.readouterr().err


def test_hf_source_outside_a_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.toml").write_text(
        f'from = "llama70b-fp8-h200-tp1"\nhardware = "hf:{DATA / "openai--gpt-oss-20b"}"\n'
    )
    assert main(["eval", str(tmp_path / "s.toml")]) == 2
    assert "a Hugging Face config is a model's source" in capsys.readouterr().err


def _imported(doc: dict[str, Any], folder: Path) -> dict[str, Any]:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(doc))
    out = folder / "m.toml"
    assert main(["import-model", str(folder), "-o", str(out), "--name", "tiny"]) == 0
    assert main(["check", str(out)]) == 0
    got = tomllib.loads(out.read_text())
    return {k: v for k, v in got.items() if k not in ("sources", "source")}


def test_block_pattern_and_block_list_import_alike(tmp_path: Path) -> None:
    """Nemotron-H's pattern letters and the newer configs' list of block names give the same
    spec: 3 mixer layers (2 Mamba-2, 1 attention), 2 MoE blocks, so 1 layer without an FFN."""
    letters = _imported(TINY_NEMOTRON, tmp_path / "letters")
    listed = _imported(NEMOTRON_LISTED, tmp_path / "listed")
    assert letters == listed
    got = (letters["n_layers"], letters["linear_layers"], letters["mixer_only_layers"])
    assert got == (3, 2, 1)
    assert (letters["ffn_matrices"], letters["moe_latent"], letters["n_shared_experts"]) == (
        2,
        16,
        2,
    )


def test_compression_ratios_give_layer_kinds(tmp_path: Path) -> None:
    """compress_ratios [0, 4, 128] over 3 layers (the fourth entry is the MTP module's): one
    window-only layer, one CSA layer at 4 (the smaller ratio: the indexer's), one HCA at 128;
    FP4 experts with an 8-bit scale per 32."""
    got = _imported(TINY_V4, tmp_path / "v4")
    assert (got["csa_layers"], got["csa_ratio"], got["hca_layers"], got["hca_ratio"]) == (
        1, 4, 1, 128,
    )  # fmt: skip
    assert (got["expert_bits"], got["expert_math"]) == ("4.25 bit", "fp8")


def test_sparse_attention_blocks_give_tokens(tmp_path: Path) -> None:
    """MiniMax Sparse Attention selects 2 blocks of 4 tokens: index_topk 8 tokens, on the
    layer sparse_attention_freq marks 1; the other attends densely."""
    got = _imported(TINY_M3, tmp_path / "m3")
    assert (got["index_topk"], got["dense_attention_layers"], got["n_dense_layers"]) == (8, 1, 1)


def test_kimi_linear_layers_are_one_based(tmp_path: Path) -> None:
    """kda_layers [1] and full_attn_layers [2] name the first and second layer: one KDA layer
    (the dense one, first_k_dense_replace absent: none), one MLA layer."""
    got = _imported(TINY_KIMI, tmp_path / "kimi")
    assert (got["n_layers"], got["linear_layers"], got["moe_latent"]) == (2, 1, 32)
    assert got["linear_decay_rank"] == got["linear_key_dim"] == 16


def test_tied_embeddings_hold_one_matrix() -> None:
    """Qwen3-0.6B ties its LM head to the embedding (tie_word_embeddings): one V x h matrix
    less is resident than untied (151,936 x 1,024 BF16), and the LM head's GEMM still reads it."""
    inline = "model=qwen3-0.6b,hardware=h200,cluster=hgx-h200-ib,engine=trtllm"
    sets = ["parallel.tp=1", "workload.concurrency=1", "workload.context=1024"]
    tied = build_model(inline, sets).evaluate()
    untied = build_model(inline, [*sets, "model.tie_embeddings=0"]).evaluate()
    assert untied["weight_bytes_per_gpu"] - tied["weight_bytes_per_gpu"] == 151936 * 1024 * 2
    assert tied["ops"]["lm_head"] == untied["ops"]["lm_head"]
