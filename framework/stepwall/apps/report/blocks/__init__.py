"""Report block kinds: each a `BlockKind` (`stepwall.plugin.entries`) with an options class
(validated like every options
class, path-qualified: ``report.toml:block[3].metric``) and a renderer returning Markdown
lines. Plugins add kinds through the ``stepwall_report_blocks`` hook; this package is the
built-in plugin declaring heading, prose, table, plot, formula, derivation, explorer,
validation and pareto, one module each.
"""

from __future__ import annotations

from stepwall.apps.report.blocks import (
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
from stepwall.plugin.entries import BlockKind
from stepwall.plugin.hookspecs import hookimpl


@hookimpl
def stepwall_report_blocks() -> list[BlockKind]:
    return [heading.BLOCK, prose.BLOCK, table.BLOCK, plot.BLOCK, formula.BLOCK, derivation.BLOCK,
            explorer.BLOCK, validation.BLOCK, pareto.BLOCK]  # fmt: skip
