"""The plugin test kit: register a throwaway plugin, evaluate scenarios with it, remove it.

For plugin authors. Installing stepwall makes this module a pytest plugin (entry point
``pytest11: stepwall = "stepwall.testing"``), so the ``stepwall_plugin`` fixture is available
in any test without an import::

    from stepwall.hookspecs import hookimpl

    class Fixed:  # a throwaway plugin: any object or module with @hookimpl functions
        @hookimpl
        def stepwall_fixed_terms(self, scenario, workload, decoding):
            ...

    def test_my_term(stepwall_plugin):
        kit = stepwall_plugin(Fixed())          # built-ins + Fixed, nothing else
        out = kit.evaluate("k26-b300-tp1-moe")  # the `stepwall eval --json` dict
        assert any(t["plugin"] == "fixed" for t in out["terms"])

While the test runs, the kit's plugin manager is also the process default, so
``stepwall.cli.main([...])`` and `stepwall.model.build_model` see the plugin too. When the
test ends, the default manager and the parameter catalog are restored: parameters the
plugin declared do not leak into the next test.

Outside pytest, `hooks`, `model` and `evaluate` build a fresh plugin manager per call.
By default they do not load installed entry points (``autoload=False``), so a test sees
exactly the built-ins plus the plugins it names; pass ``autoload=True`` to include them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from stepwall.model import StepModel
    from stepwall.registry import Hooks
    from stepwall.spec import Scenario

__all__ = ["PluginKit", "evaluate", "hooks", "model", "run_cli", "stepwall_plugin"]


def run_cli(*argv: str, pythonpath: str = "", **env: str) -> subprocess.CompletedProcess:
    """``stepwall ARGV`` in a fresh interpreter, as a user would run it: installed plugins are
    autoloaded (STEPWALL_DISABLE_PLUGIN_AUTOLOAD is cleared unless ``env`` sets it);
    ``pythonpath`` is prepended for plugins that are on disk but not installed."""
    from stepwall.registry import DISABLE_ENV

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


def hooks(*plugins: object, autoload: bool = False) -> Hooks:
    """A fresh plugin manager: the built-ins, installed entry points if ``autoload``, then
    ``plugins`` (modules, classes or instances with ``@hookimpl`` functions).

    A plugin passed here that raises in ``stepwall_spec_kinds``, implements an unknown hook
    or claims a kind already claimed raises `stepwall.errors.PluginError` naming it.
    """
    from stepwall import registry

    return registry.build(extra=tuple(plugins), autoload=autoload)


def model(
    scenario: str | Path | Scenario,
    plugins: Iterable[object] = (),
    sets: Iterable[str] = (),
    *,
    autoload: bool = False,
) -> StepModel:
    """Build the `StepModel` of ``scenario`` (catalog name or path) with ``plugins`` added
    and ``--set`` style overrides ``sets`` (``"parallel.tp=2"``)."""
    from stepwall.model import build_model

    return build_model(scenario, tuple(sets), hooks=hooks(*plugins, autoload=autoload))


def evaluate(
    scenario: str | Path | Scenario,
    plugins: Iterable[object] = (),
    sets: Iterable[str] = (),
    *,
    autoload: bool = False,
) -> dict[str, Any]:
    """The summary dict of ``stepwall eval --json`` (`stepwall.model.summary`) for
    ``scenario`` with ``plugins`` added and overrides ``sets``."""
    from stepwall.model import summary

    return summary(model(scenario, plugins, sets, autoload=autoload))


class PluginKit:
    """What the ``stepwall_plugin`` fixture returns: call it to register plugins.

    ``kit(plugin, ...)`` registers the plugins (on top of the built-ins and those registered
    before in this test) in a fresh plugin manager, makes it the process default, and returns
    the kit. ``kit.hooks`` is that manager; ``kit.evaluate``, ``kit.model``, ``kit.plugins``
    and ``kit.cli`` use it.
    """

    def __init__(self, autoload: bool = False) -> None:
        self.autoload = autoload
        self.registered: list[object] = []
        self._hooks: Hooks | None = None

    def __call__(self, *plugins: object, autoload: bool | None = None) -> PluginKit:
        if autoload is not None:
            self.autoload = autoload
        candidate = hooks(*self.registered, *plugins, autoload=self.autoload)
        self.registered.extend(plugins)
        self._hooks = candidate
        return self

    @property
    def hooks(self) -> Hooks:
        if self._hooks is None:
            self._hooks = hooks(*self.registered, autoload=self.autoload)
        return self._hooks

    def model(self, scenario: str | Path | Scenario, sets: Iterable[str] = ()) -> StepModel:
        from stepwall.model import build_model

        return build_model(scenario, tuple(sets), hooks=self.hooks)

    def evaluate(self, scenario: str | Path | Scenario, sets: Iterable[str] = ()) -> dict:
        """The ``stepwall eval --json`` dict for ``scenario`` with the registered plugins."""
        from stepwall.model import summary

        return summary(self.model(scenario, sets))

    def plugins(self) -> list[dict[str, Any]]:
        """The ``stepwall plugins --json`` rows for this manager."""
        return self.hooks.describe()

    def cli(self, *argv: str) -> tuple[int, str, str]:
        """Run ``stepwall ARGV...`` in-process with this manager: (exit code, stdout, stderr)."""
        import contextlib
        import io

        from stepwall import cli, registry

        out, err = io.StringIO(), io.StringIO()
        saved = registry.default
        registry.default = lambda: self.hooks  # type: ignore[assignment]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(list(argv))
        finally:
            registry.default = saved  # type: ignore[assignment]
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def stepwall_plugin() -> Iterator[PluginKit]:
    """Register throwaway stepwall plugins for one test; removed when the test ends.

    Returns a `PluginKit`: ``stepwall_plugin(MyPlugin())`` registers a plugin next to the
    built-ins (installed entry points are left out unless ``autoload=True``), and
    ``.evaluate(scenario, sets=...)`` returns the ``stepwall eval --json`` dict. During the
    test the kit's manager is also `stepwall.registry.default`, so code that uses the
    default (the CLI, `build_model` without ``hooks=``) sees the plugin.
    """
    from stepwall import registry, symbols

    kit = PluginKit()
    saved_default = registry.default
    before = set(symbols._CATALOG)
    registry.default = lambda: kit.hooks  # type: ignore[assignment]
    try:
        yield kit
    finally:
        registry.default = saved_default  # type: ignore[assignment]
        for path in set(symbols._CATALOG) - before:  # parameters declared during the test
            entry = symbols._CATALOG[path]
            if entry.symbol not in symbols._CONSTANTS:
                del symbols._CATALOG[path]
                symbols._BY_SYMBOL.pop(entry.symbol, None)
