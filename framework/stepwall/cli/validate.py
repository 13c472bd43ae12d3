"""``stepwall validate``: predict published serving measurements and report each error."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps import validate
from stepwall.apps.validate import CLASSES
from stepwall.cli.common import emit
from stepwall.core.errors import SpecError, did_you_mean
from stepwall.core.progress import ProgressBar, quiet_argument
from stepwall.core.terminal import visible

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

VALIDATE_EPILOG = """\
A validation table is a TOML file of [[row]] tables, each a published end-to-end
measurement: the scenario and --set overrides that describe the configuration, the metric,
the measured value with its unit, the class of the regime it tests and the source:

  [[row]]
  id = "trtllm-b200-dsr1-fp4-maxtput-896"
  class = "dp_ep_node"
  scenario = "dsr1-fp4-b200-adp-ep8"
  set = ["workload.concurrency=896"]
  metric = "tokens_per_s_per_gpu"
  measured = "5393 tokens/s"        # divide_by = 8 for a per-node figure
  source = "TensorRT-LLM: best performance practice on DeepSeek-R1"
  url = "https://github.com/NVIDIA/TensorRT-LLM/..."

A frontier row is the best METRIC at a target through `stepwall search` (rows with the
same scenario, search and set share one search; a ranking group's rows share a target):

  [[row]]
  id = "trtllm-b200-dsr1-fp4-1k1k-90"
  class = "frontier"
  scenario = "dsr1-fp4-b200-tp8"       # its model, hardware, cluster, engine
  metric = "tokens_per_s_per_gpu"
  measured = "2400 tokens/s"
  at = "tokens_per_s_per_user>=90"
  search = ["--gpus", "8,16", "--decoding", "autoregressive,mtp", "--batch", "1..1024"]
  ranking = "dsr1-fp4-1k1k-90"         # optional
  source = "…"
  url = "…"

Each prediction has a band over the calibration's 95% prediction intervals ([pi95] of
specs/calibration/*.toml) and the specs' stated ranges; the summary gives the share of
measurements inside their bands (coverage) and each ranking group's two orders.

The error of a row is predicted/measured - 1. The rows are never fitted (hardware and
engine values come from primitive microbenchmarks: stepwall calibrate), so these errors are
out of sample. --max-median and --max-worst make it a gate (exit 1 when exceeded). A row
whose configuration breaks a constraint is listed as infeasible, with no error: it is left out
of the median and the worst (a line says how many), and --max-worst fails on it.
A run takes at most 1,000 rows (each builds a model), each table once.

examples:
  stepwall validate                                   # the shipped tables
  stepwall validate --class tp_batch1 --json          # one class, as JSON
  stepwall validate my-measurements.toml --max-median 0.15 --max-worst 0.40
docs/validation.md has the shipped table, the plot and what dominates each class.
"""


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall validate``."""
    p.epilog = VALIDATE_EPILOG
    p.add_argument("tables", nargs="*", metavar="TABLE",
                   help="validation tables (.toml); default: specs/validation/*.toml")  # fmt: skip
    p.add_argument("--class", dest="classes", action="append", default=[], choices=sorted(CLASSES),
                   help="only rows of this class (repeatable)")  # fmt: skip
    p.add_argument("--row", dest="ids", action="append", default=[], metavar="ID",
                   help="only this row (repeatable)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-median", type=_error_bound, metavar="FRACTION",
                   help="exit 1 if the median |error| exceeds this (0.15 or 15%%)")  # fmt: skip
    p.add_argument("--max-worst", type=_error_bound, metavar="FRACTION",
                   help="exit 1 if any |error| exceeds this (0.40 or 40%%) or a row is "
                   "infeasible")  # fmt: skip
    quiet_argument(p)


def _error_bound(text: str) -> float:
    """A relative error bound: a fraction in [0, 1] (0.15) or a percentage (15%, 250%). A bare
    number above 1 is refused: '15' is far more often meant as 15% than as 1500%."""
    percent = text.endswith("%")
    try:
        value = float(text[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number (expected 0.15 or 15%)"
        ) from None
    if not math.isfinite(value) or value < 0 or (value > 1 and not percent):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a fraction in [0, 1] or a percentage (expected 0.15 or 15%)"
        )
    return value


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Predict the rows, print their errors; exit 1 when a gate fails.

    Stays whole: the argument checks in the order their errors are reported, then predict and
    print.
    """
    paths = [Path(t) for t in ns.tables] or validate.default_tables()
    for p in paths:
        if not p.is_file():
            what = ("is a folder" if p.is_dir() else
                    "is not a regular file" if p.exists() else "not found")  # fmt: skip
            raise SpecError(str(p), "", what, "a validation table (.toml)")
        if [q.resolve() for q in paths].count(p.resolve()) > 1:
            raise SpecError(str(p), "", "is given twice", "each table once")
    rows = validate.load_rows(paths)  # every table has rows (or is refused)
    known = {r.spec.id for r in rows}
    for i in ns.ids:
        if i not in known:
            raise SpecError("--row", i, f"no such row{did_you_mean(i, sorted(known))}",
                            "a row id of the tables")  # fmt: skip
    rows = [r for r in rows if (not ns.classes or r.spec.row_class in ns.classes)
            and (not ns.ids or r.spec.id in ns.ids)]  # fmt: skip
    if not rows:  # --class, or --class with --row
        also = f" among --row {', '.join(ns.ids)}" if ns.ids else ""
        raise SpecError("--class", ",".join(ns.classes), f"selects no rows{also}",
                        "a class that the tables (and the rows) have")  # fmt: skip
    progress = ProgressBar(what="rows", quiet=ns.quiet)
    results = validate.predict(rows, registry, progress)
    if ns.json:
        emit(registry, "json", validate.document(results))  # infinite errors as null
    else:
        sys.stdout.write(visible(validate.text(results), lines=True))
    s = validate.summary(results)  # NaN where no row is feasible: that fails a gate too
    failed = (ns.max_median is not None and not s["median_abs_error"] <= ns.max_median) or (
        ns.max_worst is not None and (s["infeasible"] or not s["worst_abs_error"] <= ns.max_worst)
    )
    return 1 if failed else 0
