"""Reports: a TOML report spec -> REPORT.md (or a page FILE.md), one SVG per plot, one CSV per
table.

`stepwall.report.render` runs a report (`Report`, `write`, `write_page`);
`stepwall.report.blocks` holds the block kinds, `placeholders` the prose placeholders, `plots`
the figures. Importing this package is cheap: the registry imports the block kinds at start-up,
the rest loads on use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Report", "ReportSpec", "default_output", "write", "write_page"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from stepwall.report import render

        return getattr(render, name)
    raise AttributeError(name)
