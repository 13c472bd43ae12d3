"""stepwall-offload: the gpu-offload laws against hand arithmetic, memory, entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import attrs
import numpy as np
import pytest
import stepwall
from stepwall.testing import run_cli

import stepwall_offload
from stepwall_offload import plugin

RTX = stepwall_offload.scenario("k26-rtxpro6000x2-offload")
GH200 = stepwall_offload.scenario("k26-gh200-offload")

# Kimi K2.6 (config.json): 61 layers, 1 dense, hidden 7168, expert intermediate 2048, top-8,
# INT4 routed experts. One user, autoregressive: T = 1 token, so k = 8 experts per layer.
EXPERT_BYTES = 3 * 7168 * 2048 * 4 / 8  # one routed expert, gate + up + down, 4 bit
MOE_LAYERS = 60
TOUCHED = MOE_LAYERS * 8 * EXPERT_BYTES  # bytes of experts one token touches per step


def _term(summary: dict, name: str) -> float:
    return next(t["seconds"] for t in summary["terms"] if t["name"] == name)


def test_entry_point_loads_the_plugin() -> None:
    hooks = stepwall.build_registry(autoload=True)
    rows = {r["name"]: r for r in hooks.describe()}
    assert rows["offload"]["kinds"] == ["hardware:gpu-offload"]
    assert rows["offload"]["version"] == stepwall_offload.__version__
    assert "stepwall_device_memory" in rows["offload"]["hooks"]
    assert not hooks.problems


def test_rtx_pro_6000_pair_streams_over_pcie(stepwall_plugin) -> None:
    kit = stepwall_plugin(plugin)
    out = kit.evaluate(RTX)
    f, link = 0.32, 64e9 * 0.8  # the scenario's resident fraction; PCIe 5.0 x16 at 80%
    per_gpu = TOUCHED / 2  # TP-2 splits each expert's intermediate dimension
    assert _term(out, "moe.routed_experts.host_link") == pytest.approx((1 - f) * per_gpu / link)
    # the resident share streams from GDDR7 at the grouped-GEMM efficiency of kind gpu
    efficiency = kit.model(RTX).scenario.value("hardware.moe_efficiency")
    assert _term(out, "moe.routed_experts") == pytest.approx(f * per_gpu / (1.79e12 * efficiency))
    # Overlapped: the link hides the resident experts' HBM time; it is the wall.
    others = sum(t["seconds"] for t in out["terms"] if not t["name"].startswith("moe.routed"))
    assert out["step_time_s"] == pytest.approx(_term(out, "moe.routed_experts.host_link") + others)
    assert _term(out, "moe.routed_experts.host_link") > 0.8 * out["step_time_s"]
    assert out["tokens_per_s_per_user"] == pytest.approx(1 / out["step_time_s"])
    assert out["memory"]["fits"]


def test_gh200_streams_over_nvlink_c2c(stepwall_plugin) -> None:
    out = stepwall_plugin(plugin).evaluate(GH200)
    f, link = 0.23, 450e9 * 0.8
    assert _term(out, "moe.routed_experts.host_link") == pytest.approx((1 - f) * TOUCHED / link)
    assert _term(out, "moe.routed_experts.host_link") > 0.7 * out["step_time_s"]
    assert out["memory"]["fits"]


def test_resident_fraction_one_is_a_plain_gpu(stepwall_plugin) -> None:
    kit = stepwall_plugin(plugin)
    out = kit.evaluate(GH200, sets=["hardware.resident_expert_fraction=1"])
    assert _term(out, "moe.routed_experts.host_link") == 0
    mem = out["memory"]
    assert mem["bytes_per_gpu"] == pytest.approx(
        mem["weight_bytes_per_gpu"] + mem["kv_bytes_per_gpu"]
    )


def test_only_the_resident_share_of_experts_counts_in_memory(stepwall_plugin) -> None:
    kit = stepwall_plugin(plugin)
    full = kit.evaluate(GH200, sets=["hardware.resident_expert_fraction=1"])["memory"]
    none = kit.evaluate(GH200, sets=["hardware.resident_expert_fraction=0"])["memory"]
    all_experts = MOE_LAYERS * 384 * EXPERT_BYTES
    assert full["bytes_per_gpu"] - none["bytes_per_gpu"] == pytest.approx(all_experts)


def test_serialized_adds_what_overlapped_hides(stepwall_plugin) -> None:
    kit = stepwall_plugin(plugin)
    over = kit.evaluate(RTX)
    serial = kit.evaluate(RTX, sets=["hardware.transfer=serialized"])
    hbm = _term(over, "moe.routed_experts") + _term(over, "moe.routed_experts.floor")
    assert serial["step_time_s"] == pytest.approx(over["step_time_s"] + hbm)


def test_more_link_bandwidth_never_slower(stepwall_plugin) -> None:
    model = stepwall_plugin(plugin).model(RTX)
    times = model.evaluate(
        {"hardware.host_link_bandwidth": np.array([32e9, 64e9, 128e9, 450e9, 4e12])}
    )
    steps = list(times["step_time_s"])
    assert steps == sorted(steps, reverse=True)


def test_link_bandwidth_dominates(stepwall_plugin) -> None:
    """Elasticity d ln t / d ln x of the step time: the host link is the parameter that
    matters most in both scenarios."""
    for path in (RTX, GH200):
        model = stepwall_plugin(plugin).model(path)
        base = float(model.evaluate()["step_time_s"])
        elasticity = {}
        for key in ("host_link_bandwidth", "hbm_bandwidth", "bf16.flops", "bf16.gemm_floor"):
            value = model.scenario.value(f"hardware.{key}")
            bumped = float(model.evaluate({f"hardware.{key}": value * 1.01})["step_time_s"])
            elasticity[key] = (bumped / base - 1) / 0.01
        top = max(elasticity, key=lambda k: abs(elasticity[k]))
        assert top == "host_link_bandwidth", elasticity
        assert elasticity[top] < -0.7


def test_extends_gpu_without_copying_its_fields() -> None:
    """Kind gpu-offload declares only its own fields; the gpu fields come by ``extends``."""
    from stepwall.testing import registry as kit_registry

    own = {f.name for f in attrs.fields(plugin.Offload)}
    kinds = kit_registry(plugin).kinds
    merged = {f.name for f in attrs.fields(kinds["hardware", "gpu-offload"].fields)}
    gpu = {f.name for f in attrs.fields(kinds["hardware", "gpu"].fields)}
    assert "hbm_bandwidth" not in own and merged == gpu | own


def test_cli_sees_the_installed_plugin() -> None:
    plugins = run_cli("plugins", "--json")
    assert plugins.returncode == 0, plugins.stderr
    assert "hardware:gpu-offload" in {k for r in json.loads(plugins.stdout) for k in r["kinds"]}
    out = run_cli("eval", str(GH200), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["scenario"] == "k26-gh200-offload"


def test_disable_autoload_turns_the_plugin_off() -> None:
    plugins = run_cli("plugins", "--json", STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    assert plugins.returncode == 0
    assert "offload" not in {r["name"] for r in json.loads(plugins.stdout)}
    out = run_cli("eval", str(GH200), STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    assert out.returncode == 2
    assert "no plugin provides kind 'gpu-offload'" in out.stderr


@pytest.mark.parametrize("entry", sorted((stepwall_offload.SPECS / "hardware").glob("*.toml")))
def test_shipped_hardware_entries_check(entry) -> None:
    from stepwall.spec.validation import check_file

    hooks = stepwall.build_registry(extra=(plugin,), autoload=False)
    assert check_file(entry, hooks.kinds).startswith("ok:")


def test_module_prints_scenario_paths() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "stepwall_offload", "k26-gh200-offload"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == str(GH200)
