"""Plugins through pluggy the way pytest uses it (issue 21): one plugin disabled by name
(``registries.build(disable=...)``, ``registries.default(disable=...)``, the environment
variable STEPWALL_DISABLE_PLUGINS), and a failing hook blamed on the plugin whose
implementation raised, seen by hook-call monitoring rather than by calling hooks again."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from stepwall.core.errors import PluginError
from stepwall.model.compose import build_model
from stepwall.plugin import registry as registries
from stepwall.plugin.hookspecs import hookimpl
from stepwall.testing import run_cli

BASE = "k26-b300-tp8-ddtree"


def test_a_disabled_builtin_is_not_registered_and_declares_nothing() -> None:
    full = registries.build(autoload=False, disable=())
    less = registries.build(autoload=False, disable=["analyses"])
    assert "wall" in full.analyses and full.pm.has_plugin("analyses")
    assert "wall" not in less.analyses and not less.pm.has_plugin("analyses")
    assert "analyses" not in [row["name"] for row in less.describe()]


def test_default_keeps_one_registry_per_set_of_disabled_names() -> None:
    less = registries.default(disable=("report_blocks",))
    assert less is registries.default(disable=["report_blocks"])
    assert less is not registries.default(disable=())
    assert not less.pm.has_plugin("report_blocks") and less.is_default


def test_the_environment_variable_lists_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPWALL_DISABLE_PLUGINS", " analyses, ,report_blocks ")
    assert registries.disabled() == ("analyses", "report_blocks")
    built = registries.build(autoload=False)
    assert not built.pm.has_plugin("analyses") and not built.pm.has_plugin("report_blocks")
    assert built.pm.has_plugin("gpu")


def test_a_builtin_the_output_needs_cannot_be_disabled() -> None:
    with pytest.raises(PluginError, match="plugin formats: cannot be disabled"):
        registries.build(autoload=False, disable=["formats"])
    done = run_cli("eval", BASE, "--no-cache", STEPWALL_DISABLE_PLUGINS="formats")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == (
        "stepwall: error: plugin formats: cannot be disabled: every command's text, JSON "
        "and CSV output needs it\n"
    )


def test_disabling_the_model_plugin_refuses_a_scenario_with_a_model() -> None:
    done = run_cli("eval", BASE, "--no-cache", STEPWALL_DISABLE_PLUGINS="moe_transformer")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("stepwall: error: "), line
    assert "model.description: unknown key" in line and "Traceback" not in done.stderr


def test_disabling_an_analysis_plugin_on_the_command_line() -> None:
    done = run_cli("derive", BASE, "wall", "parallel.tp", STEPWALL_DISABLE_PLUGINS="analyses")
    assert done.returncode == 2 and "invalid choice: 'wall'" in done.stderr, done.stderr


def test_a_disabled_installed_plugin_is_not_even_imported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "imported"
    (site / "ep_loud.py").write_text(
        f"import pathlib, sys\npathlib.Path({str(marker)!r}).write_text('x')\nsys.exit(3)\n"
    )
    dist = site / "probe_loud-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-loud\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[stepwall]\nloud = ep_loud\n")
    off = run_cli("plugins", "--json", pythonpath=str(site), STEPWALL_DISABLE_PLUGINS="loud")
    assert off.returncode == 0, off.stderr
    assert "loud" not in [r["name"] for r in json.loads(off.stdout)] and not marker.exists()
    on = run_cli("plugins", "--json", pythonpath=str(site))
    rows = {r["name"]: r for r in json.loads(on.stdout)}
    assert "cannot load entry point ep_loud: SystemExit(3)" in rows["loud"]["problem"]
    assert marker.exists()


def _counting(name: str, fail: bool, calls: list[str]) -> object:
    module = types.ModuleType(name)

    def stepwall_fixed_terms(scenario: Any) -> list[Any]:
        calls.append(name)
        if fail:
            raise ZeroDivisionError("division by zero")
        return []

    module.stepwall_fixed_terms = hookimpl(stepwall_fixed_terms)  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("order", ["bad_first", "bad_last"])
def test_a_failing_hook_is_named_without_calling_it_again(order: str) -> None:
    calls: list[str] = []
    bad = _counting("probe_bad", True, calls)
    good = _counting("probe_good", False, calls)
    plugins = (bad, good) if order == "bad_first" else (good, bad)
    registry = registries.build(extra=plugins, autoload=False, disable=())
    with pytest.raises(PluginError) as caught:
        build_model(BASE, registry=registry)
    assert str(caught.value) == (
        "plugin probe_bad: stepwall_fixed_terms raised ZeroDivisionError: division by zero"
    )
    assert calls.count("probe_bad") == 1 and calls.count("probe_good") <= 1, calls


# ---------------------------------------------------------------- -p no:NAME on the command line


def test_dash_p_no_name_runs_without_that_plugin() -> None:
    full = run_cli("plugins", "--json", STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    less = run_cli("-p", "no:analyses", "-pno:report_blocks", "plugins", "--json",
                   STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")  # fmt: skip
    assert full.returncode == less.returncode == 0, less.stderr
    names = {row["name"] for row in json.loads(full.stdout)}
    assert {"analyses", "report_blocks"} <= names
    assert names - {row["name"] for row in json.loads(less.stdout)} == {"analyses", "report_blocks"}


def test_dash_p_adds_to_the_environment_variable() -> None:
    env = {"STEPWALL_DISABLE_PLUGINS": "report_blocks", "STEPWALL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    out = run_cli("-p", "no:analyses", "plugins", "--json", **env)
    names = {row["name"] for row in json.loads(out.stdout)}
    assert out.returncode == 0 and not names & {"analyses", "report_blocks"}


@pytest.mark.parametrize("value", ["gpu", "no:", "yes:gpu"])
def test_dash_p_takes_only_no_name(value: str) -> None:
    out = run_cli("-p", value, "eval", BASE)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("stepwall: error: -p:") and "no:NAME" in out.stderr
    assert len(out.stderr.splitlines()) == 1


def test_a_scenario_whose_kind_a_disabled_plugin_owns_is_one_line() -> None:
    out = run_cli("-p", "no:gpu", "eval", BASE, STEPWALL_DISABLE_PLUGIN_AUTOLOAD="1")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "hardware" in out.stderr
