"""The public API (docs/api.md): every documented name resolves, the version is the
distribution's, and ``import stepwall`` loads nothing heavy."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import stepwall


def test_version_is_the_distributions() -> None:
    assert stepwall.__version__ == importlib.metadata.version("stepwall")


def test_every_public_name_resolves_to_its_definition() -> None:
    for name in stepwall.__all__:
        value = getattr(stepwall, name)
        assert value is not None, name
    assert stepwall.default_registry() is stepwall.default_registry()
    assert isinstance(stepwall.default_registry(), stepwall.Registry)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        stepwall.no_such_thing  # noqa: B018
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("no AttributeError")


def test_the_documented_example_runs() -> None:
    model = stepwall.build_model("k26-b300-tp8-ddtree", sets=["parallel.tp=16"])
    scenario = stepwall.load_scenario("k26-b300-tp8-ddtree", ["parallel.tp=16"])
    assert scenario.label == model.scenario.label == "k26-b300-tp8-ddtree [parallel.tp=16]"
    assert float(model.evaluate()["tokens_per_s_per_gpu"]) > 0
    assert "hardware" in {s.name.split(".")[0] for s in model.step_time.free_symbols}


def test_importing_stepwall_loads_no_sympy_numpy_or_plugins() -> None:
    heavy = "('sympy', 'numpy', 'pluggy')"
    code = f"import sys, stepwall; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
