"""Analyses: what ``stepwall derive`` and report ``derivation`` blocks compute from a model.

An analysis is an `Analysis` entry: a name, a one-line doc, an options class (frozen attrs,
fields declared with `option`) and a function ``run(model, options, context)`` that returns a
`Derivation` or a list of them. Plugins add analyses through the ``stepwall_analyses`` hook;
this module is the built-in plugin that declares wall, optimum, crossover, elasticity and
regime (the MoE model plugin adds plateau). The command line's choices and options, report
validation, the reference docs and each options class's JSON Schema come from the registry.
A result that records the `Equation` defining its root gets that root's `Sensitivity` to
every parameter from `run`, whatever the analysis (`stepwall.analyses.sensitivity`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.analyses.result import Derivation, Equation, Sensitivity
from stepwall.errors import PluginError
from stepwall.hookspecs import hookimpl
from stepwall.options import option, structure_options

if TYPE_CHECKING:
    from stepwall.model import StepModel
    from stepwall.registry import Registry

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


@attrs.frozen
class AnalysisOptions:
    """Options every analysis takes."""

    symbolic: bool = option("keep the other parameters symbolic in the closed form",
                            default=False)  # fmt: skip
    sensitivity: bool = option(
        "print each root's sensitivities: ∂ln x*/∂ln p to every parameter by implicit "
        "differentiation of its defining equation, largest first (--json always carries them)",
        default=False,
    )


@attrs.frozen
class Context:
    """What an analysis may ask of its caller: the registry, and other models by reference
    (a scenario on the command line, an alias in a report) with the same overrides."""

    registry: Registry
    model_of: Callable[[str, str], StepModel]  # (reference, option name) -> model
    allow_infeasible: bool = False  # analyses at a point the options move (--at) check it


def _many_text(results: Sequence[Derivation]) -> str:
    return "\n\n".join(d.render() for d in results)


def _rows(results: Sequence[Derivation]) -> tuple[list[str], list[list[Any]]]:
    head = ["key", "value", "feasible_value", "method", "note"]
    return head, [[d.key, d.value, d.feasible_value, d.method, d.note] for d in results]


@attrs.frozen
class Analysis:
    """One analysis: ``run(model, options, context)`` returns a `Derivation` (or a list when
    ``many``). ``text`` renders the results for a terminal, ``table`` as rows (report tables,
    CSV); both have sensible defaults."""

    name: str
    doc: str
    options: type
    run: Callable[..., Derivation | list[Derivation]]
    many: bool = False
    text: Callable[[Sequence[Derivation]], str] = _many_text
    table: Callable[[Sequence[Derivation]], tuple[list[str], list[list[Any]]]] = _rows
    number_format: str = ".4g"  # how a report shows the values of a list of results
    at_point: bool = False  # a property of the scenario's point: refused where infeasible
    plugin: str = ""


def run(
    analysis: Analysis,
    model: StepModel,
    given: Mapping[str, Any],
    context: Context,
    where: str = "derive",
    prefix: str = "",
) -> list[Derivation]:
    """Structure ``given`` into the analysis's options (errors name ``where`` and the
    option, with ``prefix``) and run it; always a list."""
    from stepwall.analyses.sensitivity import attach

    opts = structure_options(analysis.options, given, where, prefix)
    out = analysis.run(model, opts, context)
    results = list(out) if isinstance(out, list | tuple) else [out]
    bad = [type(d).__name__ for d in results if not isinstance(d, Derivation)]
    if bad or not (results or analysis.many):
        raise PluginError(f"plugin {analysis.plugin or '?'}: analysis {analysis.name!r} returned "
                          f"{(bad or ['nothing'])[0]} where a Derivation was expected")  # fmt: skip
    symbolic = bool(getattr(opts, "symbolic", False))
    show = bool(getattr(opts, "sensitivity", False))

    def whole(path: str) -> bool:
        f = model.scenario.field(path)
        return f is not None and bool(f.metadata.get("integer"))

    return [attach(d, symbolic, show, whole) for d in results]


@hookimpl
def stepwall_analyses() -> list[Analysis]:
    from stepwall.analyses import crossover, elasticity, optimum, regime, tornado, wall

    return [wall.ANALYSIS, optimum.ANALYSIS, crossover.ANALYSIS, elasticity.ANALYSIS,
            regime.ANALYSIS, tornado.ANALYSIS]  # fmt: skip
