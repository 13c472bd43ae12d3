"""The catalog's breadth entries (issue 11, item 8): models, GPUs, clusters and scenarios.

Every check reads the spec files themselves. A model's parameter count is computed twice,
independently: from its architecture fields with the published formulas (below), and from
the model plugin's own resident weight bytes at one GPU (TP-1, EP-1) with every weight at
8 bits (one byte per parameter). Both must agree, and both must match the total the model's
publisher states, within a tolerance that covers what neither counts (norms, biases, gpt-oss's
attention sinks) and the rounding of the published figure.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from stepwall.cli import main
from stepwall.model.compose import build_model

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"

NEW_MODELS = (
    "kimi-k2-fp8",
    "deepseek-r1-fp4",
    "llama-3.3-70b-fp8",
    "llama-3.1-8b-fp8",
    "gpt-oss-120b",
)
NEW_HARDWARE = ("h800", "mi300x", "mi325x", "mi355x")
NEW_CLUSTERS = ("hgx-h800-ib", "mi300x-8", "mi355x-8")
# each new model and each new GPU is exercised by at least one of these
NEW_SCENARIOS = (
    "llama70b-fp8-h200-tp1",
    "llama8b-fp8-h100-tp1",
    "gptoss120b-b200-tp4",
    "gptoss120b-mi355x-tp1",
    "dsr1-fp4-b200-tp8",
    "kimik2-fp8-h200-ep16",
    "kimik2-fp8-mi325x-tp8",
    "dsv3-mi300x-tp8",
    "dsv3-mi355x-ep8",
    "dsv3-h800-ep144",
)

# Published totals (and active parameters per token, where the publisher states them), with
# the relative tolerance each comparison allows and why.
PUBLISHED: dict[str, dict[str, Any]] = {
    "deepseek-v3-fp8": {
        "total": 671e9,
        "active": 37e9,
        "tol": 0.005,
        "active_tol": 0.03,
        "why": "DeepSeek-V3 README / arXiv 2412.19437: 671B total (MTP module's 14B apart), "
        "37B activated",
    },
    "deepseek-r1-fp4": {
        "total": 671e9,
        "active": 37e9,
        "tol": 0.005,
        "active_tol": 0.03,
        "why": "DeepSeek-R1 has DeepSeek-V3's architecture: 671B total, 37B activated",
    },
    "kimi-k2-fp8": {
        "total": 1e12,
        "active": 32e9,
        "tol": 0.03,
        "active_tol": 0.03,
        "why": "MoonshotAI/Kimi-K2 README: '1T total parameters', '32B activated' (both "
        "rounded; the architecture gives 1.026T)",
    },
    "llama-3.3-70b-fp8": {
        "total": 70e9,
        "tol": 0.01,
        "why": "Llama-3.3-70B: the 70B of its name (the architecture gives 70.55B)",
    },
    "llama-3.1-8b-fp8": {
        "total": 8e9,
        "tol": 0.01,
        "why": "Llama-3.1-8B: the 8B of its name (the architecture gives 8.03B)",
    },
    "gpt-oss-120b": {
        "total": 117e9,
        "active": 5.1e9,
        "tol": 0.005,
        "active_tol": 0.015,
        "why": "openai/gpt-oss README: 117B parameters, 5.1B active (biases and sinks, "
        "~0.04B, are not modelled)",
    },
}

# a scenario that uses each model, for the plugin's own count
COUNTED_BY = {
    "deepseek-v3-fp8": "dsv3-mi300x-tp8",
    "deepseek-r1-fp4": "dsr1-fp4-b200-tp8",
    "kimi-k2-fp8": "kimik2-fp8-h200-ep16",
    "llama-3.3-70b-fp8": "llama70b-fp8-h200-tp1",
    "llama-3.1-8b-fp8": "llama8b-fp8-h100-tp1",
    "gpt-oss-120b": "gptoss120b-b200-tp4",
}
WEIGHT_BITS = ("expert_bits", "shared_expert_bits", "attention_bits", "dense_bits",
               "embedding_bits")  # fmt: skip

# keys that describe an entry rather than set a physical value
META = {"name", "description", "kind", "source", "sources", "from"}


def spec(folder: str, name: str) -> dict[str, Any]:
    return tomllib.loads((SPECS / folder / f"{name}.toml").read_text())


# ---------------------------------------------------------------- parameter counts


def architecture_count(m: Mapping[str, Any]) -> tuple[float, float]:
    """(total, active) parameters from a model file's architecture fields, with the
    formulas of the papers: MLA (DeepSeek-V2 §2.1) or GQA projections, gated FFNs of
    3·h·I, a router of h·E per MoE layer, untied embedding and LM head of V·h each.
    Active counts the k routed experts a token uses and the LM head, not the embedding
    lookup (gpt-oss's convention; DeepSeek's and Kimi's 37B/32B agree within 1%)."""
    h, n_layers = m["hidden"], m["n_layers"]
    if m.get("attention", "mla") == "mla":
        heads, r_q, r_kv = m["n_heads"], m["q_lora_rank"], m["kv_lora_rank"]
        nope, rope, v = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
        attention = (h * r_q + h * (r_kv + rope) + r_q * heads * (nope + rope)
                     + r_kv * heads * (nope + v) + heads * v * h)  # fmt: skip
    else:
        d = m["head_dim"]
        attention = 2 * h * m["n_heads"] * d + 2 * h * m["n_kv_heads"] * d
    experts = m.get("n_experts", 0)
    moe_layers = n_layers - m.get("n_dense_layers", 0) if experts else 0
    dense_layers = n_layers - moe_layers
    expert = 3 * h * m.get("expert_intermediate", 1)
    dense = 3 * h * m["dense_intermediate"]
    shared = m.get("n_shared_experts", 0) * expert
    router = h * experts
    head = m["vocab"] * h
    common = n_layers * attention + dense_layers * dense + moe_layers * (shared + router) + head
    total = common + moe_layers * experts * expert + head  # + the embedding
    active = common + moe_layers * m.get("experts_per_token", 0) * expert
    return float(total), float(active)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_the_published_total(name: str) -> None:
    pub = PUBLISHED[name]
    total, active = architecture_count(spec("models", name))
    assert total == pytest.approx(pub["total"], rel=pub["tol"]), pub["why"]
    if "active" in pub:
        assert active == pytest.approx(pub["active"], rel=pub["active_tol"]), pub["why"]


@pytest.mark.parametrize("name", sorted(COUNTED_BY))
def test_the_plugin_holds_every_parameter(name: str) -> None:
    """Resident weight bytes on one GPU (TP-1, EP-1, no redundant experts) with every weight
    at 8 bits are the parameter count: the plugin's accounting is the architecture's."""
    sets = ["parallel.tp=1", "parallel.ep=1", "parallel.redundant_experts=0"]
    sets += [f"model.{b}=8 bit" for b in WEIGHT_BITS]
    model = build_model(COUNTED_BY[name], sets)
    held = float(model.evaluate()["weight_bytes_per_gpu"])  # bytes, one per parameter
    total, _ = architecture_count(spec("models", name))
    assert held == pytest.approx(total, rel=1e-9)


def test_each_count_scenario_uses_its_model() -> None:
    for name, scenario in COUNTED_BY.items():
        assert spec("scenarios", scenario)["model"] == name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_weight_bits_are_the_formats(name: str) -> None:
    """Bits per weight follow from the formats the files name: FP8 block 8, NVFP4 (e2m1 +
    E4M3 per 16) 4.5, MXFP4 (e2m1 + E8M0 per 32) 4.25, BF16 16."""
    formats = {"fp8": 8.0, "fp4": None, "bf16": 16.0}
    nvfp4, mxfp4 = 4 + 8 / 16, 4 + 8 / 32
    m = spec("models", name)
    for part in ("expert", "shared_expert", "attention", "dense"):
        math_, bits = m.get(f"{part}_math", "bf16"), float(m[f"{part}_bits"].split()[0])
        if part in ("shared_expert",) and m.get("n_shared_experts", 0) == 0:
            continue  # unused
        if part == "expert" and m.get("n_experts", 0) == 0:
            continue
        if part == "dense" and m.get("n_experts", 0) and m.get("n_dense_layers", 0) == 0:
            continue
        want = formats[math_] if math_ != "fp4" else (mxfp4 if "gpt-oss" in name else nvfp4)
        assert bits == want, (name, part, math_, bits)


# ---------------------------------------------------------------- sources


def unsourced(section: Mapping[str, Any], where: str) -> list[str]:
    """Keys of ``section`` (and of its sub-tables, recursively) that set a value with no
    entry in the ``sources`` table beside them."""
    sources = section.get("sources", {})
    missing = []
    for key, value in section.items():
        if key in META:
            continue
        if isinstance(value, dict):
            missing += unsourced(value, f"{where}.{key}")
        elif not isinstance(sources.get(key), str) or not sources[key].strip():
            missing.append(f"{where}.{key}")  # no source, or not a text
    return missing


HARDWARE = sorted(p.stem for p in (SPECS / "hardware").glob("*.toml"))


@pytest.mark.parametrize("name", HARDWARE)
def test_every_hardware_value_has_a_source(name: str) -> None:
    entry = spec("hardware", name)
    assert str(entry.get("source", "")).strip(), f"{name}: no source"
    assert unsourced(entry, name) == []


@pytest.mark.parametrize("name", NEW_CLUSTERS)
def test_every_new_cluster_value_has_a_source(name: str) -> None:
    entry = spec("clusters", name)
    assert str(entry.get("source", "")).strip()
    # nodes and gpus_per_node are the deployment chosen, said in the description
    sections = {k: v for k, v in entry.items() if isinstance(v, dict)}
    assert unsourced(sections, name) == []


@pytest.mark.parametrize("name", (*NEW_MODELS, "deepseek-v3-fp8"))
def test_every_new_model_value_has_a_source(name: str) -> None:
    entry = spec("models", name)
    assert str(entry.get("source", "")).strip()
    assert unsourced(entry, name) == []


@pytest.mark.parametrize("name", NEW_HARDWARE)
def test_assumed_values_say_so(name: str) -> None:
    """A value not measured on the part itself says what it was assumed from."""
    entry = spec("hardware", name)
    texts = [str(t) for t in entry.get("sources", {}).values()]
    texts += [str(t) for v in entry.values() if isinstance(v, dict)
              for t in v.get("sources", {}).values()]  # fmt: skip
    for text in texts:
        if "assum" in text.lower():
            assert "as " in text, text


# ---------------------------------------------------------------- scenarios and checks


@pytest.mark.parametrize("name", NEW_SCENARIOS)
def test_new_scenario_evaluates_and_fits(name: str) -> None:
    model = build_model(name)
    model.check()  # every constraint holds: memory fits, divisibility, layout in cluster
    ev = model.evaluate()
    step = float(ev["step_time_s"])
    assert math.isfinite(step) and step > 0
    assert bool(ev["feasible"])
    assert str(spec("scenarios", name).get("description", "")).strip()


def test_new_scenarios_cover_every_new_model_and_gpu() -> None:
    used = [spec("scenarios", s) for s in NEW_SCENARIOS]
    models = {s["model"] for s in used}
    gpus = {s["hardware"] for s in used}
    assert set(NEW_MODELS) <= models
    assert set(NEW_HARDWARE) <= gpus


@pytest.mark.parametrize("name", ("llama70b-fp8-h200-tp1", "llama8b-fp8-h100-tp1"))
def test_a_dense_model_has_dense_ffn_and_no_moe(name: str) -> None:
    model = build_model(name)
    names = {t.name for t in model.terms}
    assert "dense.ffn" in names
    assert not {n for n in names if n.startswith("moe.") or n.startswith("comm.ep_")}


def test_gpt_oss_experts_run_on_the_fp4_roof() -> None:
    ops = {op.name: op for op in build_model("gptoss120b-b200-tp4").workload.ops}
    assert ops["moe.routed_experts"].precision == "fp4"
    assert ops["attention.projections"].precision == "bf16"


NEW_FILES = (
    *(SPECS / "models" / f"{n}.toml" for n in NEW_MODELS),
    *(SPECS / "hardware" / f"{n}.toml" for n in NEW_HARDWARE),
    *(SPECS / "clusters" / f"{n}.toml" for n in NEW_CLUSTERS),
    *(SPECS / "scenarios" / f"{n}.toml" for n in NEW_SCENARIOS),
)


@pytest.mark.parametrize("path", NEW_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stepwall_check_passes(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(path)]) == 0
    assert "ok:" in capsys.readouterr().out
