"""``stepwall check``: validate a scenario, a catalog entry or a report; writes nothing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps.report.render import Report
from stepwall.core.terminal import visible, warn
from stepwall.model.compose import build_model, check_entry
from stepwall.spec.loader import load_flat, read_toml
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
    release = ""
    if checked.section is None:  # a scenario
        model = build_model(path if path.is_file() else ns.spec, registry=registry)
        warn(model.scenario.warnings)
        model.check()
        engine = model.scenario.sections.get("engine")
        if engine is not None:
            name = Path(model.scenario.file_of("engine.version")).stem
            release = _release(name, engine.version, engine.date)
    elif path.is_file():
        warn(check_entry(path, checked.section, registry))
    if checked.section == "engine":
        flat = load_flat(checked.path, "engines", ())
        release = _release(checked.path.stem, flat.get("version", ("",))[0],
                           flat.get("date", ("",))[0])  # fmt: skip
    print(visible(checked.message, lines=True))
    if release:
        print(visible(release))
    return 0


def _release(name: str, version: str, date: str) -> str:
    """``engine trtllm: release 1.3.0rc20 (2026-08)``, or that the profile states none."""
    if not version and not date:
        return f"engine {name}: states no release (engine.version, engine.date)"
    return f"engine {name}: release {version or 'unstated'}" + (f" ({date})" if date else "")
