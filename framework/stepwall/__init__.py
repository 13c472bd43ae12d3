"""stepwall: closed-form, unit-checked step-time models for distributed LLM inference.

The supported API (docs/api.md); everything else under ``stepwall.*`` is internal::

    import stepwall

    model = stepwall.build_model("k26-b300-tp8-ddtree", sets=["parallel.tp=16"])
    model.evaluate()["tokens_per_s_per_gpu"]        # a number; arrays broadcast
    str(model.step_time)                            # the closed form (sympy)
    stepwall.load_scenario("k26-b300-tp8-ddtree")   # the validated Scenario
    stepwall.default_registry()                     # built-ins + installed plugins

Plugins use `hookimpl`, the spec fields (`KindSpec`, `quantity`, `choice`, `flag`), what the
hooks return (`Term`, `Op`, `Collective`, `Constraint`, `Decoding`, `Layout`, `Engine`, `Step`,
`Workload`, `Layouts`, `LayoutTable`; `law`, `laws`, `units`, `roof`, `op_terms`,
`GpuPricing`, `floor_time`) and the entry types (`Analysis`, `Format`, `BlockKind`, `Command`,
`Metric`, `Derivation`, `option`); plugin tests use the kit in `stepwall.testing` (a pytest
plugin: the ``stepwall_plugin`` fixture). Names load on first use, so ``import stepwall`` is
cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it (loaded on first use)
_API = {
    "Derivation": "stepwall.analyses.result",
    "DimensionError": "stepwall.core.errors",
    "PluginError": "stepwall.core.errors",
    "SpecError": "stepwall.core.errors",
    "StepwallError": "stepwall.core.errors",
    "KindSpec": "stepwall.core.fields",
    "choice": "stepwall.core.fields",
    "flag": "stepwall.core.fields",
    "quantity": "stepwall.core.fields",
    "floor_time": "stepwall.core.laws",
    "law": "stepwall.core.laws",
    "option": "stepwall.core.options",
    "GpuPricing": "stepwall.core.roofline",
    "op_terms": "stepwall.core.roofline",
    "roof": "stepwall.core.roofline",
    "Scenario": "stepwall.core.scenario",
    "Collective": "stepwall.core.terms",
    "Constraint": "stepwall.core.terms",
    "Decoding": "stepwall.core.terms",
    "Engine": "stepwall.core.terms",
    "Layout": "stepwall.core.terms",
    "Op": "stepwall.core.terms",
    "OpKind": "stepwall.core.terms",
    "Step": "stepwall.core.terms",
    "Term": "stepwall.core.terms",
    "Workload": "stepwall.core.terms",
    "StepModel": "stepwall.model.compose",
    "build_model": "stepwall.model.compose",
    "load_scenario": "stepwall.model.compose",
    "Analysis": "stepwall.plugin.entries",
    "BlockKind": "stepwall.plugin.entries",
    "Command": "stepwall.plugin.entries",
    "Format": "stepwall.plugin.entries",
    "LayoutTable": "stepwall.plugin.entries",
    "Layouts": "stepwall.plugin.entries",
    "Metric": "stepwall.plugin.entries",
    "hookimpl": "stepwall.plugin.hookspecs",
    "Registry": "stepwall.plugin.registry",
    "build_registry": "stepwall.plugin.registry",
    "default_registry": "stepwall.plugin.registry",
}
# modules offered whole: every law (`stepwall.laws.floor_time`, the collectives, …), the units
_MODULES = {"laws": "stepwall.core.laws", "units": "stepwall.core.units"}
# a public name that is another name in its module
_RENAMED = {
    "default_registry": "default",
    "build_registry": "build",
    "load_scenario": "scenario_of",
}

__all__ = [
    "Analysis",
    "BlockKind",
    "Collective",
    "Command",
    "Constraint",
    "Decoding",
    "Derivation",
    "DimensionError",
    "Engine",
    "Format",
    "GpuPricing",
    "KindSpec",
    "Layout",
    "LayoutTable",
    "Layouts",
    "Metric",
    "Op",
    "OpKind",
    "PluginError",
    "Registry",
    "Scenario",
    "SpecError",
    "Step",
    "StepModel",
    "StepwallError",
    "Term",
    "Workload",
    "__version__",
    "build_model",
    "build_registry",
    "choice",
    "default_registry",
    "flag",
    "floor_time",
    "hookimpl",
    "law",
    "laws",
    "load_scenario",
    "op_terms",
    "option",
    "quantity",
    "roof",
    "units",
]

if TYPE_CHECKING:
    from stepwall.analyses.result import Derivation
    from stepwall.core import laws, units
    from stepwall.core.errors import DimensionError, PluginError, SpecError, StepwallError
    from stepwall.core.fields import KindSpec, choice, flag, quantity
    from stepwall.core.laws import floor_time, law
    from stepwall.core.options import option
    from stepwall.core.roofline import GpuPricing, op_terms, roof
    from stepwall.core.scenario import Scenario
    from stepwall.core.terms import (
        Collective,
        Constraint,
        Decoding,
        Engine,
        Layout,
        Op,
        OpKind,
        Step,
        Term,
        Workload,
    )
    from stepwall.model.compose import StepModel, build_model
    from stepwall.model.compose import scenario_of as load_scenario
    from stepwall.plugin.entries import (
        Analysis,
        BlockKind,
        Command,
        Format,
        Layouts,
        LayoutTable,
        Metric,
    )
    from stepwall.plugin.hookspecs import hookimpl
    from stepwall.plugin.registry import Registry
    from stepwall.plugin.registry import build as build_registry
    from stepwall.plugin.registry import default as default_registry


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name in _MODULES:
        value: Any = importlib.import_module(_MODULES[name])
    elif name in _API:
        value = getattr(importlib.import_module(_API[name]), _RENAMED.get(name, name))
    else:
        raise AttributeError(f"module 'stepwall' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, *_MODULES})
