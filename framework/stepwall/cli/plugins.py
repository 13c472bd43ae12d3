"""``stepwall plugins``: the installed plugins, what each declares, and import times."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall plugins``."""
    p.add_argument("--json", action="store_true", help="print one JSON document")


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Print one paragraph (or one JSON object) per plugin."""
    rows = registry.describe()
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        secs = r.get("import_seconds")
        took = f"  (imported in {secs * 1e3:.0f} ms)" if secs is not None else ""
        print(f"{r['name']} {r['version']}{took}")
        if r["kinds"]:
            print(f"  kinds: {', '.join(r['kinds'])}")
        for what in ("analyses", "blocks", "formats", "commands"):
            if r.get(what):
                print(f"  {what}: {', '.join(r[what])}")
        print(f"  hooks: {', '.join(r['hooks'])}")
        if r.get("problem"):
            print(f"  {r['problem']}")
    return 0
