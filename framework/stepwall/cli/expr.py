"""``stepwall expr``: the closed-form step time with chosen parameters left symbolic."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import sympy as sp

from stepwall.analyses.common import check_key
from stepwall.cli.common import feasibility_arg, load, scenario_args
from stepwall.core.symbols import latex_names

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall expr``."""
    scenario_args(p)
    p.add_argument("--free", action="append", default=[], metavar="KEY",
                   help="keep this parameter symbolic, e.g. parallel.tp (repeatable)")  # fmt: skip
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of text")
    feasibility_arg(p)


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Print ``t_step = …`` (or its LaTeX) with the ``--free`` keys symbolic."""
    model = load(ns, registry)
    if not ns.allow_infeasible:
        model.check()
    free = [model.parameter(key, "--free") for key in ns.free]
    for sym in free:
        check_key(model, sym, "--free")  # its value decides the terms: it cannot stay symbolic
    expr = model.substituted(model.step_time, free)
    if ns.latex:
        print(sp.latex(expr, symbol_names=latex_names([expr])))
    else:
        print(f"t_step = {expr}")
    return 0
