"""Every number can say where it came from: file and cited source for each parameter."""

from __future__ import annotations

import json

import pytest

from stepwall.cli import main
from stepwall.model.compose import build_model, model_summary
from stepwall.spec.loader import catalog_names


def test_eval_json_names_file_and_source_of_each_parameter(capsys) -> None:
    assert main(["eval", "k26-b300-tp8-ddtree", "--set", "parallel.tp=16", "--json"]) == 0
    params = {p["path"]: p for p in json.loads(capsys.readouterr().out)["parameters"]}
    bw = params["hardware.hbm_bandwidth"]
    assert bw["file"] == "specs/hardware/b300.toml"
    assert bw["unit"] == "B/s" and bw["value"] == 7.7e12
    assert "HGX B300 62 TB/s over 8" in bw["source"]
    # the seed's engine streams at its own measured rate; the GPU's rate is fitted to kernels
    assert params["engine.memory_efficiency"]["source"].startswith("the seed's measured MoE")
    assert params["engine.memory_efficiency"]["file"] == "specs/engines/seed-estimator.toml"
    assert "stepwall calibrate fit" in params["hardware.moe_efficiency"]["source"]
    assert "b300-moe.csv (sha256" in params["hardware.moe_efficiency"]["source"]
    assert params["parallel.tp"]["source"] == "--set on the command line"
    assert params["parallel.dp"]["source"] == "the plugin's default"
    assert "nccl #1244" in params["cluster.scale_out.latency"]["source"]


@pytest.mark.parametrize("scenario", catalog_names("scenarios"))
def test_every_hardware_and_network_value_cites_a_source(scenario: str) -> None:
    for p in model_summary(build_model(scenario))["parameters"]:
        if p["path"].startswith(("hardware.", "cluster.scale_")) and p["file"]:
            assert p["source"], f"{scenario}: {p['path']} from {p['file']} has no source"
