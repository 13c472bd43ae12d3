"""The plugin API from the outside: the guide's example plugin built from scratch, the test
kit, and how a misbehaving plugin is named while the rest of the tool keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from conftest import write_guide_package

from stepwall.core.errors import DimensionError, PluginError
from stepwall.core.fields import KindSpec
from stepwall.core.terms import Term
from stepwall.plugin import registry
from stepwall.plugin.hookspecs import hookimpl
from stepwall.testing import (
    evaluate,  # the fixture stepwall_plugin comes via pytest11
    run_cli,
)

SCENARIO = "k26-b300-tp8-ddtree"


def test_guide_plugin_from_scratch(tmp_path: Path) -> None:
    project, site = write_guide_package(tmp_path)
    path = os.pathsep.join((str(project), str(site)))

    listed = run_cli("plugins", "--json", pythonpath=path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["serial"]["kinds"] == ["hardware:gpu-serial"]
    assert rows["serial"]["version"] == "0.1.0"

    before = run_cli("eval", SCENARIO, "--json", pythonpath=path)
    after = run_cli(
        "eval", SCENARIO, "--set", "hardware.kind=gpu-serial", "--json", pythonpath=path
    )
    assert before.returncode == after.returncode == 0, after.stderr
    b, a = json.loads(before.stdout), json.loads(after.stdout)
    assert a["step_time_s"] != b["step_time_s"]
    # the guide's law on one op, from the op's work and the spec values eval reports
    value = {q["path"]: q["value"] for q in a["parameters"]}
    op = next(o for o in a["ops"] if o["name"] == "attention.projections")
    term = next(t for t in a["terms"] if t["name"] == "attention.projections")
    law = op["bytes_per_gpu"] / (value["hardware.hbm_bandwidth"] * value["hardware.hbm_efficiency"])
    law += op["flops_per_gpu"] / (value["hardware.bf16.flops"] * value["hardware.bf16.efficiency"])
    assert term["plugin"] == "serial" and term["seconds"] == pytest.approx(law, rel=1e-9)
    assert "serial" in {t["plugin"] for t in a["terms"]}
    assert "serial" not in {t["plugin"] for t in b["terms"]}

    # The guide's own tests, run with the kit the way the guide says.
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr


def test_disable_autoload_hides_the_guide_plugin(tmp_path: Path) -> None:
    project, site = write_guide_package(tmp_path)
    path = os.pathsep.join((str(project), str(site)))
    off = run_cli("plugins", "--json", pythonpath=path, STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    assert "serial" not in {r["name"] for r in json.loads(off.stdout)}


def test_kit_evaluate_equals_therun_cli() -> None:
    out = evaluate(SCENARIO)
    cli = run_cli("eval", SCENARIO, "--json", STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    assert out["step_time_s"] == pytest.approx(json.loads(cli.stdout)["step_time_s"])
    assert [t["name"] for t in out["terms"]] == [t["name"] for t in json.loads(cli.stdout)["terms"]]


# ---------------------------------------------------------------- misbehaving plugins


class WrongDimension:
    __name__ = "wrong_dimension"

    @hookimpl
    def stepwall_fixed_terms(self, scenario, workload, decoding):
        hw = scenario.params.hardware
        return [Term("bytes_not_seconds", hw.memory_capacity, "wrong_dimension", "a size")]


class Raising:
    __name__ = "raising"

    @hookimpl
    def stepwall_fixed_terms(self, scenario, workload, decoding):
        raise ZeroDivisionError("division by zero in my plugin")


@attrs.frozen
class NoFields:
    pass


class ClaimsGpu:
    __name__ = "claims_gpu"

    @hookimpl
    def stepwall_spec_kinds(self):
        return [KindSpec("hardware", "gpu", NoFields, "a second gpu")]


def test_wrong_dimension_names_plugin_and_term(stepwall_plugin) -> None:
    kit = stepwall_plugin(WrongDimension())
    with pytest.raises(DimensionError) as err:
        kit.evaluate(SCENARIO)
    assert "plugin wrong_dimension: term bytes_not_seconds" in str(err.value)
    assert "must have dimension" in str(err.value)
    code, _, stderr = kit.cli("eval", SCENARIO)
    assert code == 2 and "plugin wrong_dimension" in stderr


def test_raising_plugin_named_with_its_hook(stepwall_plugin) -> None:
    kit = stepwall_plugin(Raising())
    with pytest.raises(PluginError, match=r"plugin raising: stepwall_fixed_terms raised "):
        kit.evaluate(SCENARIO)
    code, _, stderr = kit.cli("eval", SCENARIO)
    assert code == 2
    assert "plugin raising: stepwall_fixed_terms raised ZeroDivisionError" in stderr
    assert "Traceback" not in stderr
    assert kit.cli("plugins")[0] == 0  # the rest of the tool still works


def test_fixture_is_a_pytest11_plugin(pytestconfig) -> None:
    import importlib.metadata

    (ep,) = importlib.metadata.entry_points(group="pytest11", name="stepwall")
    assert ep.value == "stepwall.testing"
    assert pytestconfig.pluginmanager.has_plugin("stepwall")


def test_kit_removes_the_plugin_after_the_test() -> None:
    names = {r["name"] for r in registry.default().describe()}
    assert not names & {"raising", "wrong_dimension", "claims_gpu"}
    assert evaluate(SCENARIO)["step_time_s"] > 0


def test_kind_already_claimed_names_both_plugins(stepwall_plugin) -> None:
    with pytest.raises(PluginError) as err:
        stepwall_plugin(ClaimsGpu())
    assert str(err.value) == (
        "plugin claims_gpu: kind 'gpu' of section 'hardware' is already claimed by plugin gpu"
    )
    assert stepwall_plugin.evaluate(SCENARIO)["step_time_s"] > 0  # the kit still works


BROKEN = {
    "claims_gpu": (
        "from stepwall.plugin.hookspecs import hookimpl\n"
        "from stepwall.core.fields import KindSpec\n"
        "class F: pass\n"
        "@hookimpl\n"
        "def stepwall_spec_kinds():\n"
        "    return [KindSpec('hardware', 'gpu', F)]\n",
        "kind 'gpu' of section 'hardware' is already claimed by plugin gpu",
    ),
    "kinds_raise": (
        "from stepwall.plugin.hookspecs import hookimpl\n"
        "@hookimpl\n"
        "def stepwall_spec_kinds():\n"
        "    raise RuntimeError('no kinds today')\n",
        "stepwall_spec_kinds raised RuntimeError('no kinds today')",
    ),
    "misspelled": (
        "from stepwall.plugin.hookspecs import hookimpl\n"
        "@hookimpl\n"
        "def stepwall_compute_term(scenario, ops):\n"
        "    return None\n",
        "unknown hook 'stepwall_compute_term'",
    ),
    "import_fails": ("raise ImportError('missing dependency foo')\n", "cannot load entry point"),
}


def test_broken_entry_points_are_skipped_and_listed(tmp_path: Path) -> None:
    """Installed plugins that cannot load, raise, misspell a hook or claim a taken kind are
    skipped with their problem; the built-ins and a healthy plugin keep working."""
    project, site = write_guide_package(tmp_path)
    for name, (source, _) in BROKEN.items():
        (site / f"broken_{name}.py").write_text(source)
    dist = site / "broken_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[stepwall]\n" + "".join(f"{n} = broken_{n}\n" for n in BROKEN)
    )
    path = os.pathsep.join((str(project), str(site)))

    listed = run_cli("plugins", "--json", pythonpath=path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["serial"]["kinds"] == ["hardware:gpu-serial"]
    roofs = [f"hardware.{p}:roof" for p in ("bf16", "fp4", "fp8", "int8")]
    # the weight-only kernels' own section, and an engine's own routed-expert kernels'
    families = [
        "hardware.wna16:weight_only",
        "hardware.triton:expert_library",
        "hardware.trtllm_gen:expert_library",
    ]
    assert sorted(rows["gpu"]["kinds"]) == sorted([*roofs, *families, "hardware:gpu"])
    for name, (_, problem) in BROKEN.items():
        assert rows[name]["problem"].startswith(f"skipped: plugin {name}: "), rows[name]
        assert problem in rows[name]["problem"]
        assert rows[name]["kinds"] == [] and rows[name]["version"] == "1.0"

    ok = run_cli("eval", SCENARIO, "--set", "hardware.kind=gpu-serial", pythonpath=path)
    assert ok.returncode == 0, ok.stderr
    assert "serial" in ok.stdout
