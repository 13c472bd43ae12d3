"""``stepwall calibrate``: fit a hardware or cluster spec to microbenchmark tables (the work
is `stepwall.apps.calibrate`; this module is its command line)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import attrs

from stepwall.apps.calibrate import CalibrateOptions, run_cli
from stepwall.core.terminal import warn

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

CALIBRATE_EPILOG = """\
Each --data file is a CSV table of measurements, one row per call of a primitive:

  primitive,m,n,k,weight_bits [bit],precision,time [us],source
  gemm,1,7168,7168,16,bf16,19.4,my H200 bench 2026-07-01
  memory_copy,...              (stepwall calibrate --primitives lists each primitive's
                                columns, the fields it fits and its law)

Sizes carry their unit in the header (bytes [GB], weight_bits [bit]; dimensions are checked),
the measured time is required (time [us], time [ms], ...); other columns are ignored. Rows
are priced by the laws the model itself uses, and the spec fields those laws read (those the
primitives name; --fit to choose) are fitted by bounded least squares on log(model/measured),
starting from the spec's values. The output shows the residual per primitive group and each
field with its 95% confidence and prediction intervals and flags (on a bound, not
identifiable: kept at the spec value, too few points). -o writes the spec back with comments
and layout kept, each fitted value replaced and its sources entry naming the data's SHA-256,
points and residual.

--check re-fits every shipped calibration (specs/calibration/*.toml: spec = "b200",
data = ["b200-gemm.csv", ...], optional fit = [...], [frontier] sizes, [bound] per table,
[ci95] confidence and [pi95] prediction intervals) and prints the RMS and max residual per
table and primitive group, over all rows and over the sizes the frontier uses; it exits 1
with a line per committed value or interval more than 0.1% off its fit and per table over its
bound; exit 0 when all agree. --check --update writes the refit values and intervals first.
A prediction interval joins a field's confidence interval with the scatter of the points it
prices about the law (where a new kernel's time falls); validate's bands take it. Bad data
is one line, exit 2.

examples:
  stepwall calibrate --primitives                       # the primitives and their columns
  stepwall calibrate b200 --data gemm.csv --data copy.csv            # fit and show
  stepwall calibrate b200 --data gemm.csv -o my-b200.toml --plot fit.svg
  stepwall calibrate hgx-b200-ib --data nccl.csv --fit hop_latency,bus_bandwidth --json
  stepwall calibrate --check                            # the shipped calibrations
  stepwall calibrate --check --update                   # refit them: values and intervals
docs/calibration.md has the format, each primitive's law and a walk-through for a new GPU.
"""


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall calibrate``."""
    p.epilog = CALIBRATE_EPILOG
    p.description = (
        "Fit a hardware or cluster spec's efficiencies, n½, floors, latencies and bandwidths "
        "to microbenchmark tables, with the laws the model prices that work by."
    )
    p.add_argument("spec", nargs="*", metavar="SPEC",
                   help="a hardware or cluster catalog name or .toml path (with --check: "
                   "manifests or folders of them, default specs/calibration/)")  # fmt: skip
    p.add_argument("--data", action="append", default=[], metavar="FILE.csv",
                   help="a CSV of measurements (repeatable)")  # fmt: skip
    p.add_argument("-o", "--output", metavar="OUT.toml",
                   help="write the calibrated spec here (default: write nothing)")  # fmt: skip
    p.add_argument("--fit", action="append", default=[], metavar="FIELD,…",
                   help="fit only these fields, e.g. hbm_efficiency,bf16.efficiency "
                   "(default: every field the data's primitives identify)")  # fmt: skip
    p.add_argument("--plot", metavar="FILE.svg",
                   help="write the measured points against the fitted law, per group "
                   "(SVG)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--check", action="store_true",
                   help="re-fit the shipped calibrations; exit 1 if a committed value drifted "
                   "by more than 0.1%%")  # fmt: skip
    p.add_argument("--update", action="store_true",
                   help="with --check: first write each refit value into its spec and the 95%% "
                   "intervals into the manifest's [ci95] and [pi95]")  # fmt: skip
    p.add_argument("--primitives", action="store_true",
                   help="list the primitives (columns, fields, law); with SPEC, each law as a "
                   "formula over its fields")  # fmt: skip


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Calibrate with the parsed options."""
    fields = attrs.fields(CalibrateOptions)
    options = CalibrateOptions(**{f.name: getattr(ns, f.name) for f in fields})
    return run_cli(options, registry, warn)
