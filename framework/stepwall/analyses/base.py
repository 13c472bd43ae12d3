"""What every analysis shares: the options all take, the `Context` a caller gives, and `run`
(options structured, the analysis run, each root's sensitivities attached).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from stepwall.analyses.result import Derivation
from stepwall.analyses.sensitivity import attach
from stepwall.core.errors import PluginError
from stepwall.core.options import option, structure_options
from stepwall.model.compose import StepModel
from stepwall.plugin.entries import Analysis
from stepwall.plugin.registry import Registry


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
