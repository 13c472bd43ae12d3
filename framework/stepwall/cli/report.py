"""``stepwall report``: render a report spec to Markdown, SVG plots and CSV tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps.report import render as report
from stepwall.cli.common import set_arg
from stepwall.io import output

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall report``."""
    p.add_argument("report", metavar="REPORT", help="catalog name (specs/reports/) or a .toml path")
    set_arg(p, "override a spec value in every scenario of the report (repeatable)")
    p.add_argument("-o", "--output", metavar="DIR|FILE.md",
                   help="output folder (default: out/NAME); a FILE.md puts the Markdown there "
                   "and its plots and tables in the folder FILE/ beside it")  # fmt: skip


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Render the report into its folder (or a page and a folder beside it)."""
    page = ns.output is not None and ns.output.endswith(".md")
    if page:  # the page, and its files in a folder beside it
        output.file_target(ns.output, suffixes=(".md",))
        output.folder_target(str(Path(ns.output).with_suffix("")), page=Path(ns.output))
    elif ns.output is not None:
        output.folder_target(ns.output)
    rep = report.Report(ns.report, ns.sets, registry=registry)
    if page:
        files = report.write_page(rep, Path(ns.output))
        output.announce(Path(ns.output), f"wrote {ns.output} and {len(files) - 1} files to "
                        f"{Path(ns.output).with_suffix('')}")  # fmt: skip
        return 0
    out = Path(ns.output) if ns.output is not None else report.default_output(rep)
    output.folder_target(str(out))
    files = report.write(rep, out)
    print(f"wrote {len(files)} files to {out}")
    return 0
