"""Block ``prose``: Markdown with placeholders filled from models, tables and derivations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from stepwall.apps.report.placeholders import fill
from stepwall.core.options import option
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report


@attrs.frozen
class ProseOptions:
    text: str = option("Markdown with {placeholders}")


def render(report: Report, o: ProseOptions, at: str) -> list[str]:
    return [fill(o.text.strip(), report.ns, report.where, at + "text")]


BLOCK = BlockKind("prose", "Markdown with {placeholders} filled from results", ProseOptions, render)
