"""``stepwall explore``: a scenario's interactive explorer, one self-contained HTML page."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from stepwall.apps.explore import explorer_html
from stepwall.cli.common import load, scenario_args
from stepwall.core.errors import SpecError
from stepwall.io import output

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

EXPLORE_EPILOG = """\
The page is one HTML file with nothing to fetch: open it from disk, offline. The model's
metrics, term times and constraints run in it as JavaScript compiled from the same closed form
`stepwall eval` evaluates (same numbers); each control updates the metrics, the breakdown by
term group, the memory fit, the failed constraints and a chart with the wall (as `stepwall
derive SCENARIO wall KEY` defines it) or the optimum marked. docs/explorer.md has the details.

Controls (--free): by default the whole-number parallel degrees, workload.concurrency and the
--top parameters with the largest elasticity of step time (`stepwall derive SCENARIO
elasticity` ranks them; `stepwall eval SCENARIO --json` lists every key under "parameters").
Structural keys (those that decide which terms exist, e.g. decoding.accepted_tokens where a
plugin reads it) cannot be controls: fix them with --set. The chart starts on --chart, else
parallel.tp, else parallel.ep, else the first control; the page switches metric and key.

examples:
  stepwall explore k26-b300-tp8-ddtree -o k26.html
  stepwall explore k26-b300-tp8-ddtree --free parallel.tp,hardware.hbm_bandwidth -o x.html
  stepwall explore k26-b300-tp8-ddtree --top 0 -o layout.html   # degrees and users only
  stepwall explore k26-gb300nvl72-ep72 --set workload.concurrency=64 --chart parallel.ep
"""


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall explore``."""
    p.epilog = EXPLORE_EPILOG
    p.description = (
        "Write an interactive explorer of a scenario: one self-contained HTML page with\n"
        "sliders for chosen parameters, the metrics, breakdown, constraints and a chart, all\n"
        "computed in the page from the compiled closed form."
    )
    scenario_args(p)
    p.add_argument("--free", action="append", default=[], metavar="KEY,KEY,…",
                   help="the parameters given controls, comma-separated (repeatable; "
                   "default: parallel degrees, workload.concurrency and the --top most "
                   "elastic)")  # fmt: skip
    p.add_argument("--top", type=int, default=6, metavar="N",
                   help="how many of the most elastic parameters the default adds "
                   "(default 6)")  # fmt: skip
    p.add_argument("--chart", default="", metavar="KEY",
                   help="the control on the chart's x axis at first (default parallel.tp, "
                   "else parallel.ep, else the first control)")  # fmt: skip
    p.add_argument("--eps", type=float, default=0.15, metavar="E",
                   help="the wall's tolerance ε: t(N)/t(∞) − 1 < ε (default 0.15)")  # fmt: skip
    p.add_argument("-o", "--output", metavar="FILE.html",
                   help="where to write the page (default explorer-SCENARIO.html)")  # fmt: skip


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Build the model and write its explorer page."""
    if ns.top < 0:
        raise SpecError("--top", str(ns.top), "is negative", "0 or more")
    free = [k.strip() for item in ns.free for k in item.split(",")]
    if "" in free:
        raise SpecError("--free", "", "names an empty key", "KEY,KEY,… such as parallel.tp")
    if ns.output is not None:
        target = output.file_target(ns.output, suffixes=(".html", ".htm"))
    model = load(ns, registry)
    if ns.output is None:
        target = output.file_target(f"explorer-{model.scenario.name}.html")
    cmd = ["stepwall", "explore", ns.scenario, *(a for s in ns.sets for a in ("--set", s))]
    if free:
        cmd += ["--free", ",".join(free)]
    for flag, value, default in (("--top", ns.top, 6), ("--chart", ns.chart, ""),
                                 ("--eps", ns.eps, 0.15)):  # fmt: skip
        if value != default:
            cmd += [flag, str(value)]
    cmd += ["-o", str(target)]
    page = explorer_html(model, free or None, registry=registry, command=shlex.join(cmd),
                         top=ns.top, eps=ns.eps, chart_key=ns.chart)  # fmt: skip
    output.write_file(target, page)
    output.announce(target, f"wrote {target} ({len(page) / 1024:.0f} KB); open it in a browser "
                    "(it works offline)")  # fmt: skip
    return 0
