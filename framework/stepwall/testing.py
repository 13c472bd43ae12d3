"""The plugin test kit: register throwaway plugins, evaluate scenarios with them.

For plugin authors. Installing stepwall makes this module a pytest plugin (entry point
``pytest11: stepwall = "stepwall.testing"``), so the ``stepwall_plugin`` fixture is available
in any test without an import::

    from stepwall.plugin.hookspecs import hookimpl

    class Fixed:  # a throwaway plugin: any object or module with @hookimpl functions
        @hookimpl
        def stepwall_fixed_terms(self, scenario, workload, decoding):
            ...

    def test_my_term(stepwall_plugin):
        kit = stepwall_plugin(Fixed())          # built-ins + Fixed, nothing else
        out = kit.evaluate("k26-b300-tp8-ddtree")  # the `stepwall eval --json` dict
        assert any(t["plugin"] == "fixed" for t in out["terms"])

Every function takes its registry explicitly, so nothing global is patched: a kit's plugins
exist only in the kit's registry (``kit.registry``), and ``kit.cli(...)`` runs the command
line with it. By default installed entry points are not loaded (``autoload=False``), so a
test sees exactly the built-ins plus the plugins it names; pass ``autoload=True`` to include
them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from stepwall import cli
from stepwall.model.compose import build_model, model_summary
from stepwall.plugin import registry as registries
from stepwall.plugin.hookspecs import DISABLE_ENV

if TYPE_CHECKING:
    from stepwall.core.scenario import Scenario
    from stepwall.model.compose import StepModel
    from stepwall.plugin.registry import Registry

__all__ = ["PluginKit", "evaluate", "model", "registry", "run_cli", "stepwall_plugin"]


def run_cli(*argv: str, pythonpath: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``stepwall ARGV`` in a fresh interpreter, as a user would run it: installed plugins are
    autoloaded (STEPWALL_DISABLE_PLUGIN_AUTOLOAD is cleared unless ``env`` sets it);
    ``pythonpath`` is prepended for plugins that are on disk but not installed."""

    environ = {k: v for k, v in os.environ.items() if k != DISABLE_ENV}
    if pythonpath:
        environ["PYTHONPATH"] = pythonpath
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "stepwall.cli", *argv],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )


def registry(*plugins: object, autoload: bool = False) -> Registry:
    """A fresh registry: the built-ins, installed entry points if ``autoload``, then
    ``plugins`` (modules, classes or instances with ``@hookimpl`` functions).

    A plugin passed here that raises while declaring, implements an unknown hook or claims
    what another plugin owns raises `stepwall.core.errors.PluginError` naming it.
    """

    return registries.build(extra=tuple(plugins), autoload=autoload)


def model(
    scenario: str | Path | Scenario,
    plugins: Iterable[object] = (),
    sets: Iterable[str] = (),
    *,
    autoload: bool = False,
) -> StepModel:
    """The `StepModel` of ``scenario`` (catalog name or path) with ``plugins`` added and
    ``--set`` style overrides ``sets`` (``"parallel.tp=2"``)."""

    return build_model(scenario, tuple(sets), registry(*plugins, autoload=autoload))


def evaluate(
    scenario: str | Path | Scenario,
    plugins: Iterable[object] = (),
    sets: Iterable[str] = (),
    *,
    autoload: bool = False,
) -> dict[str, Any]:
    """The ``stepwall eval --json`` dict of ``scenario`` with ``plugins`` added and
    overrides ``sets`` (violations listed, if any)."""

    return model_summary(model(scenario, plugins, sets, autoload=autoload))


class PluginKit:
    """What the ``stepwall_plugin`` fixture returns: call it to register plugins.

    ``kit(plugin, ...)`` registers the plugins (on top of the built-ins and those registered
    before in this test) in a fresh registry and returns the kit. ``kit.registry`` is that
    registry; ``kit.evaluate``, ``kit.model``, ``kit.plugins`` and ``kit.cli`` use it.
    """

    def __init__(self, autoload: bool = False) -> None:
        self.autoload = autoload
        self.registered: list[object] = []
        self._registry: Registry | None = None

    def __call__(self, *plugins: object, autoload: bool | None = None) -> PluginKit:
        if autoload is not None:
            self.autoload = autoload
        candidate = registry(*self.registered, *plugins, autoload=self.autoload)
        self.registered.extend(plugins)
        self._registry = candidate
        return self

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = registry(*self.registered, autoload=self.autoload)
        return self._registry

    def model(self, scenario: str | Path | Scenario, sets: Iterable[str] = ()) -> StepModel:
        return build_model(scenario, tuple(sets), self.registry)

    def evaluate(self, scenario: str | Path | Scenario, sets: Iterable[str] = ()) -> dict[str, Any]:
        """The ``stepwall eval --json`` dict for ``scenario`` with the registered plugins."""

        return model_summary(self.model(scenario, sets))

    def plugins(self) -> list[dict[str, Any]]:
        """The ``stepwall plugins --json`` rows for this registry."""
        return self.registry.describe()

    def cli(self, *argv: str) -> tuple[int, str, str]:
        """Run ``stepwall ARGV...`` in-process with this registry: (exit code, stdout,
        stderr)."""

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv), registry=self.registry)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def stepwall_plugin() -> PluginKit:
    """Register throwaway stepwall plugins for one test.

    Returns a `PluginKit`: ``stepwall_plugin(MyPlugin())`` registers a plugin next to the
    built-ins in the kit's own registry (installed entry points are left out unless
    ``autoload=True``), and ``.evaluate(scenario, sets=...)`` returns the ``stepwall eval
    --json`` dict. Nothing outside the kit sees the plugin.
    """
    return PluginKit()


def scaled(model: StepModel, path: str, factor: float) -> StepModel:
    """``model`` with the value at spec path ``path`` times ``factor`` (a finite-difference
    step on one parameter)."""
    values = dict(model.scenario.values)
    sym = model.scenario.by_path[path]
    values[sym] = values[sym] * factor
    return attrs.evolve(model, scenario=attrs.evolve(model.scenario, values=values))


def with_flags(argv: Iterable[str], extra: Iterable[str]) -> list[str]:
    """``argv`` with each ``FLAG VALUE`` pair of ``extra`` replacing the flag's value where
    ``argv`` gives it, else appended: one bad option swapped into a working command line."""
    out, pairs = list(argv), list(extra)
    for flag, value in zip(pairs[::2], pairs[1::2], strict=True):
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``stepwall ARGV`` refused as bad input: exit code 2 and one line on stderr, no
    traceback; returns that line for the test to read."""
    assert cli.main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def import_refusal(capsys: pytest.CaptureFixture[str], folder: Path, config: dict[str, Any]) -> str:
    """``stepwall import-model`` of ``config`` (written as ``folder``/config.json) refused in
    one line (`refusal`), with no spec written; returns that line."""
    (folder / "config.json").write_text(json.dumps(config))
    out = folder / "x.toml"
    err = refusal(capsys, "import-model", str(folder), "-o", str(out))
    assert not out.exists()
    return err
