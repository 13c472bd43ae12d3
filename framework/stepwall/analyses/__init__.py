"""Analyses: what ``stepwall derive`` and report ``derivation`` blocks compute from a model.

An analysis is an `Analysis` entry: a name, a one-line doc, an options class (frozen attrs,
fields declared with `option`) and a function ``run(model, options, context)`` that returns a
`Derivation` or a list of them. Plugins add analyses through the ``stepwall_analyses`` hook;
`stepwall.analyses.builtin` is the built-in plugin that declares wall, optimum, crossover,
elasticity, regime and tornado (the MoE model plugin adds plateau), and this package gathers
what an analysis's author needs. The command line's choices and options, report
validation, the reference docs and each options class's JSON Schema come from the registry.
A result that records the `Equation` defining its root gets that root's `Sensitivity` to
every parameter from `run`, whatever the analysis (`stepwall.analyses.sensitivity`).
"""

from stepwall.analyses.base import AnalysisOptions, Context, run
from stepwall.analyses.result import Derivation, Equation, Sensitivity
from stepwall.core.options import option
from stepwall.plugin.entries import Analysis

__all__ = [
    "Analysis",
    "AnalysisOptions",
    "Context",
    "Derivation",
    "Equation",
    "Sensitivity",
    "option",
    "run",
]
