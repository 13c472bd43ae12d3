"""A repeated ``stepwall eval``, or one with new ``--set`` values, without building anything.

A feasible ``stepwall eval`` stores, in the cache folder (`stepwall.numeric.compiled.cache_dir`),
what its output needs besides the numbers: the compiled model, the parameter values, and
the scenario's name, overrides, cited sources and warnings. Two entries, each keyed by

- the scenario as the loader reads it: every key of every spec file it draws on, with the
  file it came from, after ``from`` chains and catalog references (so any edit to any of
  those files, or a new file that a reference now resolves to, is a different key);
- the code that turns it into a model (`stepwall.numeric.compiled.code_identity`: stepwall's and the
  installed plugins' sources, versions, the Python version, whether autoload is on);

and by the ``--set`` assignments, in order (the *point* entry: the same eval again), or by
their keys alone (the *shape* entry: the same keys with other values). A shape entry is kept
only when every key set is a number that does not shape the model (not a kind, a choice, a
flag or a structural key: `stepwall.numeric.compiled.CompiledModel.structural_keys`) in a section
whose class checks nothing beyond its fields' metadata, which it keeps for each key
(dimension, bounds, whole number, plausible range); a new value is read and checked as the
full path reads it (`stepwall.spec.loader.parse_set`, `stepwall.spec.values.check_quantity`)
and substituted.

A later run with a known key reads the spec files (tomllib only), loads the entry and runs
the compiled function: no sympy, no plugin imports, no validation beyond that, so a cold
``eval`` costs a fraction of importing sympy. Its output is byte-identical to the full path's
(tests check it). Anything the quick path is not sure of (other options, a miss, a value
that is a range, is refused or draws a warning, an infeasible point) returns None and the
full path runs, which gives the canonical output or error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.core.errors import StepwallError
from stepwall.core.units import parse_dim
from stepwall.numeric.compiled import (
    CompiledModel,
    cache_file,
    code_identity,
    scenario_info,
)
from stepwall.numeric.files import atomic_write, json_text
from stepwall.spec.grammar import is_range
from stepwall.spec.loader import (
    expand_references,
    override_text,
    parse_set,
    read_scenario,
    with_references,
)
from stepwall.spec.values import check_quantity

if TYPE_CHECKING:
    from pathlib import Path

    from stepwall.core.scenario import Scenario

FORMAT = 2  # the layout of an entry; bump when it changes
# the annotations of a numeric field whose value cattrs keeps as checked (int ones only for
# whole-number fields: cattrs would truncate another value); None: a field of a class made
# by `stepwall.core.fields.combined`, passed through
_NUMBER_TYPES: tuple[Any, ...] = (None, float, "float", float | None, "float | None")
_WHOLE_TYPES: tuple[Any, ...] = (int, "int", int | None, "int | None")


def _identity(ref: str, sets: Sequence[str]) -> list[Any] | None:
    """What both entry keys of ``ref`` start with (see the module doc), with the catalog
    entries ``sets`` swap in (``--set engine=NAME``); None when the scenario cannot be read
    (the full path then says why) or the code cannot be identified."""
    try:
        path, flat = read_scenario(ref)
        flat, _ = with_references(flat, sets)
        flat, _ = expand_references(flat, (path.resolve(),))
    except (StepwallError, OSError, RecursionError):
        return None
    code = code_identity()
    if code is None:
        return None
    return [str(path.resolve()), sorted(flat.items()), code]


def remember(ref: str, sets: Sequence[str], scenario: Scenario, numeric: CompiledModel) -> None:
    """Store what a later `lookup` of the same eval, or of the same keys set to other values,
    needs (a feasible point, without ranges)."""
    identity = _identity(ref, sets)
    if identity is None:
        return
    entry = {
        "model": numeric.to_json(),
        "values": {s.name: float(v) for s, v in scenario.values.items()},
        "info": scenario_info(scenario),
        "warnings": list(scenario.warnings),
    }
    _write("point", identity, sets, entry)
    keys = [parse_set(a)[0] for a in sets]
    fields = {k: _field(scenario, numeric, k) for k in keys}
    if keys and all(fields.values()):
        said = tuple(f"--set:{k}: " for k in keys)  # a warning about a value set: not kept
        warnings = [w for w in scenario.warnings if not w.startswith(said)]
        _write("shape", identity, keys, {**entry, "warnings": warnings, "fields": fields})


def _field(scenario: Scenario, numeric: CompiledModel, path: str) -> dict[str, Any] | None:
    """The metadata that checks a new value of ``path``, as JSON; None unless a new value
    needs nothing else: a numeric field that is not structural, of a plainly typed field in
    a section class without validators, converters or init hooks."""
    f = scenario.field(path)
    if f is None or path in numeric.structural_keys:
        return None
    cls = type(scenario.sections[path.rpartition(".")[0]])
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return None
    if any(a.validator is not None or a.converter is not None for a in attrs.fields(cls)):
        return None
    meta = f.metadata
    if f.type not in _NUMBER_TYPES + (_WHOLE_TYPES if meta["integer"] else ()):
        return None
    if parse_dim(str(meta["dim"])) != meta["dim"]:
        return None
    plausible = meta.get("plausible")
    return {
        "dim": str(meta["dim"]),
        "minimum": meta["minimum"],
        "inclusive": meta["inclusive"],
        "maximum": meta["maximum"],
        "integer": meta["integer"],
        "plausible": list(plausible) if plausible is not None else None,
    }


def lookup(ref: str, sets: Sequence[str]) -> Mapping[str, Any] | None:
    """What ``stepwall eval ref --set sets…`` prints, as `remember` stored it: the compiled
    model (as JSON), the values, the scenario's info and the warnings; from the point entry,
    else from the shape entry with the new values; None when neither serves."""
    identity = _identity(ref, sets)
    if identity is None:
        return None
    found = _read("point", identity, sets)
    if found is not None:
        return found
    try:
        given = [parse_set(a) for a in sets]
    except StepwallError:
        return None
    shape = _read("shape", identity, [k for k, _ in given]) if given else None
    if shape is None:
        return None
    try:
        return _at(shape, dict(given), sets)
    except (StepwallError, KeyError, TypeError, ValueError):  # refused, or an odd entry
        return None


def _at(
    shape: Mapping[str, Any], given: Mapping[str, Any], sets: Sequence[str]
) -> dict[str, Any] | None:
    """A shape entry at the values ``given`` (path -> value as parsed), checked as the full
    path checks them; None for a range or a value that draws a warning (the full path says
    it). Raises SpecError for a value the full path refuses."""
    values = dict(shape["values"])
    for path, value in given.items():
        if is_range(value):
            return None
        meta = shape["fields"][path]
        plausible = meta["plausible"]
        meta = {**meta, "dim": parse_dim(meta["dim"]),
                "plausible": tuple(plausible) if plausible is not None else None}  # fmt: skip
        warned: list[str] = []
        values[path] = float(check_quantity(meta, value, "--set", path, warned))
        if warned:
            return None
    info = shape["info"]
    info = {
        **info,
        "overrides": [override_text(a) for a in sets],
        "parameters": [{**p, "value": values[p["path"]]} for p in info["parameters"]],
    }
    return {"model": shape["model"], "values": values, "info": info, "warnings": shape["warnings"]}


def _file(kind: str, identity: list[Any], sets: Sequence[str]) -> tuple[str, Path | None]:
    """The key of a ``"point"`` entry (``sets``: the assignments) or a ``"shape"`` one (the
    keys), and its file (None when the cache is off)."""
    key = json.dumps([FORMAT, kind, *identity, list(sets)], sort_keys=True, default=str)
    return key, cache_file(kind, key)


def _write(kind: str, identity: list[Any], sets: Sequence[str], entry: Mapping[str, Any]) -> None:
    key, path = _file(kind, identity, sets)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json_text({"key": key, **entry}))
    except OSError:
        return  # a cache that cannot be written is only slower


def _read(kind: str, identity: list[Any], sets: Sequence[str]) -> Mapping[str, Any] | None:
    key, path = _file(kind, identity, sets)
    if path is None or not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key else None
