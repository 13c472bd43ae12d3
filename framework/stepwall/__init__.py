"""stepwall: closed-form, unit-checked step-time models for distributed LLM inference.

The supported API (docs/api.md); everything else under ``stepwall.*`` is internal::

    import stepwall

    model = stepwall.build_model("k26-b300-tp8-ddtree", sets=["parallel.tp=16"])
    model.evaluate()["tokens_per_s_per_gpu"]        # a number; arrays broadcast
    str(model.step_time)                            # the closed form (sympy)
    stepwall.load_scenario("k26-b300-tp8-ddtree")   # the validated Scenario
    stepwall.default_registry()                     # built-ins + installed plugins

Plugins use `hookimpl` and the entry types (`Analysis`, `Format`, `BlockKind`, `Derivation`,
`option`); plugin tests use the kit in `stepwall.testing` (a pytest plugin: the
``stepwall_plugin`` fixture). Names load on first use, so ``import stepwall`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it (loaded on first use)
_API = {
    "build_model": "stepwall.model.compose",
    "StepModel": "stepwall.model.compose",
    "load_scenario": "stepwall.model.compose",
    "Scenario": "stepwall.core.scenario",
    "Registry": "stepwall.plugin.registry",
    "default_registry": "stepwall.plugin.registry",
    "build_registry": "stepwall.plugin.registry",
    "hookimpl": "stepwall.plugin.hookspecs",
    "Analysis": "stepwall.plugin.entries",
    "Format": "stepwall.plugin.entries",
    "BlockKind": "stepwall.plugin.entries",
    "Derivation": "stepwall.analyses.result",
    "option": "stepwall.core.options",
    "StepwallError": "stepwall.core.errors",
    "SpecError": "stepwall.core.errors",
    "PluginError": "stepwall.core.errors",
}
# a public name that is another name in its module
_RENAMED = {
    "default_registry": "default",
    "build_registry": "build",
    "load_scenario": "scenario_of",
}

__all__ = [
    "Analysis",
    "BlockKind",
    "Derivation",
    "Format",
    "PluginError",
    "Registry",
    "Scenario",
    "SpecError",
    "StepModel",
    "StepwallError",
    "__version__",
    "build_model",
    "build_registry",
    "default_registry",
    "hookimpl",
    "load_scenario",
    "option",
]

if TYPE_CHECKING:
    from stepwall.analyses.result import Derivation
    from stepwall.core.errors import PluginError, SpecError, StepwallError
    from stepwall.core.options import option
    from stepwall.core.scenario import Scenario
    from stepwall.model.compose import StepModel, build_model
    from stepwall.model.compose import scenario_of as load_scenario
    from stepwall.plugin.entries import Analysis, BlockKind, Format
    from stepwall.plugin.hookspecs import hookimpl
    from stepwall.plugin.registry import Registry
    from stepwall.plugin.registry import build as build_registry
    from stepwall.plugin.registry import default as default_registry


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _API:
        raise AttributeError(f"module 'stepwall' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
