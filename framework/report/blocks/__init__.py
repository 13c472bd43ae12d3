"""Report block kinds: each a `BlockKind` with an options class (validated like every options
class, path-qualified: ``report.toml:block[3].metric``) and a renderer returning Markdown
lines. Plugins add kinds through the ``stepwall_report_blocks`` hook; this package is the
built-in plugin declaring heading, prose, table, plot, formula, derivation, explorer,
validation and pareto, one module each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.hookspecs import hookimpl
from stepwall.options import structure_options

if TYPE_CHECKING:
    from stepwall.report.render import Report


def structured(report: Report, options: type, given: dict[str, Any], at: str) -> Any:
    """A block's keys as its options class, errors naming the report file and the block."""
    return structure_options(options, given, report.where, at)


@attrs.frozen
class BlockKind:
    """A block kind: ``render(report, options, at)`` returns Markdown lines and may add
    files (``report.outputs``) and values placeholders can name (``report.ns``). ``early``
    blocks render before the others (they compute what prose refers to); ``prepare`` turns
    the block's keys into options (default: the options class, validated).

    ``compute(report, options, at)``, where given, is the block's heavy work that depends
    only on the models and its options, not on other blocks: the report starts it before
    rendering, possibly in a helper process (`stepwall.parallel`), and ``render`` takes its
    result with ``report.computed(at, fallback)``. The result must pickle."""

    name: str
    doc: str
    options: type
    render: Callable[[Report, Any, str], list[str]]
    early: bool = False
    prepare: Callable[..., Any] = attrs.field(default=None)
    plugin: str = ""
    compute: Callable[[Report, Any, str], Any] | None = None

    def __attrs_post_init__(self) -> None:
        if self.prepare is None:
            object.__setattr__(
                self,
                "prepare",
                lambda report, given, at: structured(report, self.options, given, at),
            )


@hookimpl
def stepwall_report_blocks() -> list[BlockKind]:
    from stepwall.report.blocks import (
        derivation,
        explorer,
        formula,
        heading,
        pareto,
        plot,
        prose,
        table,
        validation,
    )

    return [heading.BLOCK, prose.BLOCK, table.BLOCK, plot.BLOCK, formula.BLOCK, derivation.BLOCK,
            explorer.BLOCK, validation.BLOCK, pareto.BLOCK]  # fmt: skip
