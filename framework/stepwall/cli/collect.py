"""``stepwall collect``: microbenchmark this machine's GPU into `calibrate`'s tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps.collect import COLLECTIVES, TABLES, collect
from stepwall.core.terminal import visible

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

EPILOG = """\
Times memory copies, a tiny kernel's launch, GEMMs vs rows (bf16, fp8 from compute capability
8.9, NVFP4 on Blackwell), one MoE layer's experts vs tokens, absorbed-MLA and grouped-query
decode attention vs batch and context and, on two or more GPUs, all-reduce and all-to-all vs
size over groups of 2, 4, … and all of them, with PyTorch (pip install 'stepwall[collect]'), and
writes one CSV per table in the format `stepwall calibrate` fits, each row naming the GPU,
driver, CUDA and torch versions and the date. About ten minutes on a GPU; --cpu --quick runs
the same code on the CPU at tiny sizes in seconds (to test the path, not to calibrate a CPU).

examples:
  stepwall collect -o bench/ --prefix my-h200
  stepwall calibrate h200 --data bench/my-h200-gemm.csv --data bench/my-h200-copy.csv \\
    -o my-h200.toml
  stepwall calibrate hgx-h200-ib --data bench/my-h200-allreduce.csv \\
    --data bench/my-h200-alltoall.csv -o my-node.toml
  stepwall collect --cpu --quick -o /tmp/bench
"""


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall collect``."""
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("-o", "--output", metavar="DIR", required=True,
                   help="folder for the tables (created)")  # fmt: skip
    p.add_argument("--prefix", default="collected",
                   help="file names PREFIX-TABLE.csv (default collected)")  # fmt: skip
    p.add_argument("--only", metavar="TABLE,…",
                   help=f"only these tables, of {', '.join((*TABLES, *COLLECTIVES))}")  # fmt: skip
    p.add_argument("--cpu", action="store_true", help="run on the CPU (tests the code path)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds, not minutes)")


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Collect and say where each table went."""
    known = (*TABLES, *COLLECTIVES)
    tables = tuple(ns.only.split(",")) if ns.only else known
    bad = [t for t in tables if t not in known]
    if bad:
        print(visible(f"stepwall: error: --only: no table {bad[0]!r} (expected one of "
                      f"{', '.join(known)})"), file=sys.stderr)  # fmt: skip
        return 2

    def say(line: str) -> None:
        print(visible(line), file=sys.stderr)

    collect(Path(ns.output), ns.prefix, ns.cpu, ns.quick, tables, progress=say)
    return 0
