"""``stepwall check``: validate a scenario, a catalog entry or a report; writes nothing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps.report.render import Report
from stepwall.core.terminal import visible, warn
from stepwall.model.compose import build_model, check_entry
from stepwall.spec.loader import read_toml
from stepwall.spec.validation import check_spec

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall check``."""
    p.add_argument("spec", metavar="SPEC", help="a scenario, or a catalog file of any kind")


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Validate the spec (a scenario's constraints and a report's blocks too) and say so."""
    path = Path(ns.spec)
    if path.is_file() and {"scenarios", "title"} <= set(read_toml(path)):
        Report(path, registry=registry).render()  # a report is valid when every block renders
        print(visible(f"ok: {path} is a valid report"))
        return 0
    checked = check_spec(ns.spec, registry.kinds)
    if checked.section is None:  # a scenario
        model = build_model(path if path.is_file() else ns.spec, registry=registry)
        warn(model.scenario.warnings)
        model.check()
    elif path.is_file():
        warn(check_entry(path, checked.section, registry))
    print(visible(checked.message, lines=True))
    return 0
