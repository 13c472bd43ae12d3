"""``stepwall sweep``: a scenario over a grid of parameter values, through one compiled model."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from stepwall.apps import sweep
from stepwall.cli.common import cache_arg, scenario_args
from stepwall.core.errors import SpecError
from stepwall.core.progress import ProgressBar, quiet_argument
from stepwall.core.terminal import warn
from stepwall.io import output
from stepwall.io.formats import format_for

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall sweep``."""
    scenario_args(p)
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        required=True,
        metavar="KEY=VALUES",
        help="values of a numeric key: a list (parallel.tp=8,16,36,72; units allowed: "
        "hardware.hbm_bandwidth=8TB/s,9TB/s) or a range: 1..256 (step 1), 8..72:8 (step), "
        "1..256:x2 (factor), 1..4096:20log or 0.5..1:6lin (points), 7TB/s..9TB/s:0.5TB/s "
        "(repeatable; the grid is the cartesian product)",
    )
    p.add_argument("--metric", action="append", default=[], metavar="NAME",
                   help="a metric, group.<group> or term.<term> (repeatable; default: step time "
                   "and throughputs)")  # fmt: skip
    p.add_argument(
        "--feasible-only",
        action="store_true",
        help="leave out points where a constraint does not hold (every row has a feasible "
        "column and names the first violated constraint otherwise)",
    )
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE (its suffix picks the format: .csv .json .md .parquet) "
                   "or - for stdout; the grid streams in chunks")  # fmt: skip
    p.add_argument("--format", choices=sorted(registry.formats), default=None,
                   help="the output format (default: text on a terminal, else by -o's suffix; "
                   "csv for -o -)")  # fmt: skip
    cache_arg(p)
    quiet_argument(p)


TEXT_LIMIT = 100_000  # a text table on a terminal; larger grids go to a file


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Plan the grid, evaluate it in chunks and print or write the table."""
    target = None
    if ns.output is not None and ns.output != "-":
        target = output.file_target(ns.output)
        fmt = format_for(registry.formats, ns.format, ns.output)
    else:
        fmt = registry.formats[ns.format or ("csv" if ns.output == "-" else "text")]
        if fmt.binary:
            raise SpecError("--format", fmt.name, "writes a file, not a terminal", "-o FILE")
    vary = [sweep.parse_vary(v) for v in ns.vary]
    plan = sweep.plan_sweep(ns.scenario, vary, ns.sets, ns.metric or sweep.DEFAULT_METRICS,
                            registry=registry, cache=not ns.no_cache)  # fmt: skip
    warn(plan.warnings)
    if target is None and fmt.name == "text" and plan.total > TEXT_LIMIT:
        raise SpecError("sweep", "--vary", f"{plan.total:,} points are too many for a text table",
                        f"at most {TEXT_LIMIT:,}, or -o FILE / --format csv")  # fmt: skip
    table = plan.table(ns.feasible_only, progress=ProgressBar(quiet=ns.quiet))
    if target is None:
        fmt.write(table, sys.stdout)
        return 0
    counts = output.write_stream(target, fmt, table)
    output.announce(target, f"wrote {target} ({counts} rows)")
    return 0
