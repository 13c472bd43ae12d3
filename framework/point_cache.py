"""A repeated ``stepwall eval`` of an unchanged scenario, without building anything.

A feasible ``stepwall eval`` stores, in the cache folder (`stepwall.compiled.cache_dir`),
what its output needs besides the numbers: the compiled model, the parameter values, and
the scenario's name, overrides, cited sources and warnings. The entry's key is

- the scenario as the loader reads it: every key of every spec file it draws on, with the
  file it came from, after ``from`` chains and catalog references (so any edit to any of
  those files, or a new file that a reference now resolves to, is a different key);
- the ``--set`` assignments, in order;
- the code that turns it into a model (`stepwall.compiled.code_identity`: stepwall's and the
  installed plugins' sources, versions, the Python version, whether autoload is on).

A later run with the same key reads the spec files (tomllib only), loads the entry and runs
the compiled function: no sympy, no plugin imports, no validation, so a cold ``eval`` costs
a fraction of importing sympy. Its output is byte-identical to the full path's (a test
checks it). Anything the quick path does not handle (other options, a miss, an infeasible
point) returns None and the full path runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stepwall.errors import env_flag

if TYPE_CHECKING:
    from stepwall.compiled import CompiledModel
    from stepwall.scenario import Scenario

FORMAT = 1  # the layout of an entry; bump when it changes


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


def key(ref: str, sets: Sequence[str]) -> str | None:
    """The entry key of ``ref`` with ``sets`` (see the module doc); None when the scenario
    cannot be read (the full path then says why) or the code cannot be identified."""
    from stepwall.compiled import code_identity
    from stepwall.errors import StepwallError
    from stepwall.loader import expand_references, read_scenario

    try:
        path, flat = read_scenario(ref)
        flat, _ = expand_references(flat, (path.resolve(),))
    except (StepwallError, OSError, RecursionError):
        return None
    code = code_identity()
    if code is None:
        return None
    doc = [FORMAT, str(path.resolve()), sorted(flat.items()), list(sets), code]
    return json.dumps(doc, sort_keys=True, default=str)


def remember(ref: str, sets: Sequence[str], scenario: Scenario, numeric: CompiledModel) -> None:
    """Store what a later `run` of the same eval needs (a feasible point)."""
    from stepwall.compiled import cache_file, scenario_info, write_json

    k = key(ref, sets)
    path = cache_file("point", k) if k is not None else None
    if path is None:
        return
    entry = {
        "key": k,
        "model": numeric.to_json(),
        "values": {s.name: float(v) for s, v in scenario.values.items()},
        "info": scenario_info(scenario),
        "warnings": list(scenario.warnings),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, entry)
    except OSError:
        return  # a cache that cannot be written is only slower


def _lookup(k: str) -> Mapping[str, Any] | None:
    from stepwall.compiled import cache_file

    path = cache_file("point", k)
    if path is None or not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == k else None


def run(argv: Sequence[str]) -> int | None:
    """``stepwall eval ARGV`` from the cache: the exit code, or None to take the full path."""
    parsed = parse(argv)
    if parsed is None or env_flag("STEPWALL_NO_CACHE"):
        return None
    ref, sets, fmt = parsed
    k = key(ref, sets)
    entry = _lookup(k) if k is not None else None
    if entry is None:
        return None
    from stepwall.cli import render_breakdown, warn
    from stepwall.compiled import CompiledModel, summary_of
    from stepwall.formats import write_json

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
        write_json(doc, sys.stdout)
    else:
        print(render_breakdown(doc))
    return 0
