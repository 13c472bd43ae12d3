"""Block ``heading``: a Markdown heading (placeholders allowed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from stepwall.apps.report.placeholders import fill
from stepwall.core.options import option
from stepwall.plugin.entries import BlockKind

if TYPE_CHECKING:
    from stepwall.apps.report.render import Report


@attrs.frozen
class HeadingOptions:
    text: str = option("the heading")
    level: int = option("1 to 6 (#, ##, …)", default=2)


def render(report: Report, o: HeadingOptions, at: str) -> list[str]:
    if not 1 <= o.level <= 6:
        raise report.err(at + "level", f"{o.level} is not a heading level", "1 to 6")
    return ["#" * o.level + " " + fill(o.text, report.ns, report.where, at + "text")]


BLOCK = BlockKind("heading", "a Markdown heading", HeadingOptions, render)
