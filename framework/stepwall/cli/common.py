"""What several commands share: their common arguments, loading the model, printing a result."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from stepwall.core.errors import SpecError
from stepwall.core.terminal import warn
from stepwall.io.formats import Table
from stepwall.model.compose import StepModel, build_model

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def set_arg(p: argparse.ArgumentParser, help_: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``sets``."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=help_)  # fmt: skip


def scenario_args(p: argparse.ArgumentParser) -> None:
    """SCENARIO and its ``--set`` overrides."""
    p.add_argument("scenario", metavar="SCENARIO", help="catalog name or path to a .toml")
    set_arg(p, "override a spec value, e.g. parallel.tp=16 (repeatable)")


def feasibility_arg(p: argparse.ArgumentParser) -> None:
    """``--allow-infeasible``."""
    p.add_argument(
        "--allow-infeasible",
        action="store_true",
        help="evaluate even where a constraint does not hold (memory, divisibility, …); the "
        "result is marked infeasible",
    )


def format_args(p: argparse.ArgumentParser, registry: Registry, what: str) -> None:
    """``--format NAME`` (the registry's formats) and ``--json``."""
    names = sorted(registry.formats)
    p.add_argument("--format", choices=names, default=None,
                   help=f"how to print {what} (default text)")  # fmt: skip
    p.add_argument("--json", action="store_const", const="json", dest="format",
                   help="the same as --format json: one JSON document")  # fmt: skip


def cache_arg(p: argparse.ArgumentParser) -> None:
    """``--no-cache``."""
    p.add_argument("--no-cache", action="store_true",
                   help="build the model afresh instead of loading its compiled form from the "
                   "cache (~/.cache/stepwall; STEPWALL_NO_CACHE=1 does the same)")  # fmt: skip


def load(ns: argparse.Namespace, registry: Registry, ref: str | None = None) -> StepModel:
    """The model of ``ref`` (default the command's SCENARIO) with its ``--set`` values, its
    warnings said."""
    warn(registry.slow_imports())
    model = build_model(ref or ns.scenario, ns.sets, registry)
    warn(model.scenario.warnings)
    return model


def emit(registry: Registry, name: str | None, obj: Any) -> None:
    """Write a result (a Table or a document) to stdout in a format."""
    fmt = registry.formats[name or "text"]
    if fmt.binary:
        raise SpecError("--format", fmt.name, "writes a file, not a terminal", "-o FILE")
    if not isinstance(obj, Table) and not fmt.documents:
        raise SpecError("--format", fmt.name, "writes tables; this result is a document",
                        "--format text or json")  # fmt: skip
    fmt.write(obj, sys.stdout)
