"""A repeated ``stepwall eval``, or one with new ``--set`` values of the same keys, answered
from the point cache (`stepwall.numeric.point_cache`) before anything heavy is imported: no
sympy, no plugins, no validation beyond checking the new values."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from stepwall.core.errors import env_flag
from stepwall.core.terminal import warn
from stepwall.io.breakdown import render_breakdown
from stepwall.numeric.compiled import CompiledModel, summary_of
from stepwall.numeric.files import json_text
from stepwall.numeric.point_cache import lookup


def parse(argv: Sequence[str]) -> tuple[str, tuple[str, ...], str] | None:
    """``SCENARIO [--set K=V]... [--json | --format text|json]`` -> (scenario, sets, format);
    None for anything else (help, other options, abbreviations), which argparse handles."""
    ref, sets, fmt = None, [], "text"
    fmts: list[str] = []  # as given: two that differ are argparse's to refuse
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--set" and args:
            sets.append(args.pop(0))
        elif a.startswith("--set="):
            sets.append(a[len("--set=") :])
        elif a == "--json":
            fmt = "json"
            fmts.append(fmt)
        elif a == "--format" and args and args[0] in ("text", "json"):
            fmt = args.pop(0)
            fmts.append(fmt)
        elif a in ("--format=text", "--format=json"):
            fmt = a.split("=", 1)[1]
            fmts.append(fmt)
        elif not a.startswith("-") and ref is None:
            ref = a
        else:
            return None
    if ref is None or len(set(fmts)) > 1:
        return None
    return ref, tuple(sets), fmt


def run(argv: Sequence[str]) -> int | None:
    """``stepwall eval ARGV`` from the cache: the exit code, or None to take the full path."""
    parsed = parse(argv)
    if parsed is None or env_flag("STEPWALL_NO_CACHE"):
        return None
    ref, sets, fmt = parsed
    entry = lookup(ref, sets)
    if entry is None:
        return None

    try:
        numeric = CompiledModel.from_json(entry["model"])
        ev = numeric.evaluate(entry["values"])
        if not ev["feasible"]:
            return None
        doc = summary_of(entry["info"], numeric, [], ev)
    except (KeyError, TypeError, ValueError):  # an entry of another layout: rebuild it
        return None
    warn(entry.get("warnings", []))
    if fmt == "json":
        # the bytes the json format writes, without importing the formats
        sys.stdout.write(json_text(doc, indent=2, finite=True) + "\n")
    else:
        print(render_breakdown(doc, numeric.metric_info))
    return 0
