"""A repeated ``stepwall eval`` of an unchanged scenario, without building anything.

A feasible ``stepwall eval`` stores, in the cache folder (`stepwall.numeric.compiled.cache_dir`),
what its output needs besides the numbers: the compiled model, the parameter values, and
the scenario's name, overrides, cited sources and warnings. The entry's key is

- the scenario as the loader reads it: every key of every spec file it draws on, with the
  file it came from, after ``from`` chains and catalog references (so any edit to any of
  those files, or a new file that a reference now resolves to, is a different key);
- the ``--set`` assignments, in order;
- the code that turns it into a model (`stepwall.numeric.compiled.code_identity`: stepwall's and the
  installed plugins' sources, versions, the Python version, whether autoload is on).

A later run with the same key reads the spec files (tomllib only), loads the entry and runs
the compiled function: no sympy, no plugin imports, no validation, so a cold ``eval`` costs
a fraction of importing sympy. Its output is byte-identical to the full path's (a test
checks it). Anything the quick path does not handle (other options, a miss, an infeasible
point) returns None and the full path runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stepwall.core.errors import StepwallError
from stepwall.numeric.compiled import (
    CompiledModel,
    cache_file,
    code_identity,
    scenario_info,
)
from stepwall.numeric.files import atomic_write, json_text
from stepwall.spec.loader import expand_references, read_scenario

if TYPE_CHECKING:
    from stepwall.core.scenario import Scenario

FORMAT = 1  # the layout of an entry; bump when it changes


def key(ref: str, sets: Sequence[str]) -> str | None:
    """The entry key of ``ref`` with ``sets`` (see the module doc); None when the scenario
    cannot be read (the full path then says why) or the code cannot be identified."""
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
        atomic_write(path, json_text(entry))
    except OSError:
        return  # a cache that cannot be written is only slower


def lookup(k: str) -> Mapping[str, Any] | None:
    path = cache_file("point", k)
    if path is None or not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == k else None
