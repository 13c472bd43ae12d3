"""Validating specs: flat keys (from `stepwall.spec.loader`) -> a `Scenario`, each section
structured into the attrs class its kind's plugin declares (`stepwall.core.fields`), every
numeric field made a `Parameter` with its SI value.

Errors are one line: ``file:key: what is wrong (expected …)``, naming the file that holds
the bad key (or, for a missing key, the file that should have had it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs

from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError, UnitError, did_you_mean
from stepwall.core.fields import META_KEYS, KindSpec
from stepwall.core.scenario import Scenario
from stepwall.core.symbols import Parameter, parameter
from stepwall.core.units import describe
from stepwall.spec.grammar import SYNTAX, is_range, parse_range
from stepwall.spec.hf import PREFIX, Importer
from stepwall.spec.loader import (
    CATALOG_DIRS,
    MAX_FROM_DEPTH,
    Flat,
    a_kind,
    catalog_names,
    expand_references,
    find_spec_file,
    flatten,
    load_flat,
    override_text,
    parse_set,
    read_scenario,
    read_toml,
    with_references,
)
from stepwall.spec.values import check_magnitude, check_quantity

Kinds = Mapping[tuple[str, str], KindSpec]


class UnknownKey(SpecError):
    """A scenario key that no section, or not its section's kind, takes."""


# Sections every scenario needs: the flow calls a plugin for each.
REQUIRED_SECTIONS = ("model", "hardware", "cluster", "cluster.scale_up")

# ---------------------------------------------------------------- one value


def check_value(
    f: attrs.Attribute,  # type: ignore[type-arg]
    value: Any,
    where: str,
    key: str,
    warnings: list[str] | None = None,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> Any:
    """A spec value checked against its field: a boolean, a choice, text, or a quantity
    with the field's dimension and bounds. A quantity written as a range (``"7.2..8 TB/s"``,
    `stepwall.analyses.ranges`) gives its nominal value and records (low, high) in ``ranges``."""
    meta = f.metadata
    if meta.get("bool"):
        if not isinstance(value, bool):
            raise SpecError(where, key, f"{value!r} is not a boolean", "true or false")
        return value
    if "choices" in meta:
        if value not in meta["choices"]:
            dym = did_you_mean(str(value), meta["choices"])
            raise SpecError(
                where,
                key,
                f"{value!r} is not allowed{dym}",
                f"one of: {', '.join(meta['choices'])}",
            )
        return value
    if value is None and f.default is None:
        return None
    if "dim" not in meta:  # free text such as a source
        if not isinstance(value, str):
            raise SpecError(where, key, f"{value!r} is not text", "a string")
        if meta.get("pattern") and not re.fullmatch(meta["pattern"], value):
            raise SpecError(where, key, f"{value!r} is not {meta['doc']}", meta["example"])
        return value
    if is_range(value):
        return check_range(f, value, where, key, warnings, ranges)
    return check_quantity(meta, value, where, key, warnings)


# ---------------------------------------------------------------- one section

_converter = cattrs.Converter(forbid_extra_keys=True)


def structure_section(
    section: str,
    spec: KindSpec,
    raw: Flat,
    home: str,
    warnings: list[str] | None = None,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> tuple[Any, dict[Parameter, float]]:
    """One section's keys checked against its kind's fields (``home`` is the file blamed for
    a missing key); returns the attrs object and its parameters with SI values (ranged values
    at their nominal value, their ends recorded in ``ranges``).

    Stays whole: one pass over the section's keys (a case per meta key), then the required
    keys, the attrs object and its parameters, all from one field table.
    """
    fields = {f.name: f for f in attrs.fields(spec.fields)}
    known = set(fields) | set(META_KEYS)
    data: dict[str, Any] = {}
    for key, (value, where) in raw.items():
        name = key.split(".", 1)[0]
        full = f"{section}.{key}"
        if name not in known or ("." in key and name != "sources"):
            listed = (
                f"one of: {', '.join(sorted(fields))}" if fields else "no keys: the kind takes none"
            )
            dym = did_you_mean(name, sorted(fields), prefix=f"{section}.", quote=False)
            raise UnknownKey(
                where, full, f"unknown key for {section} kind {spec.kind!r}{dym}", listed
            )
        if name in META_KEYS:
            if name == "sources" and not (
                isinstance(value, dict)
                and all(k in fields and isinstance(v, str) for k, v in value.items())
            ):
                raise SpecError(
                    where,
                    full,
                    "sources must map field names to text",
                    f"keys among: {', '.join(sorted(fields))}",
                )
            if name == "source" and not isinstance(value, str):
                raise SpecError(where, full, f"{value!r} is not text", "a citation string")
            if name == "from":  # followed at a file's top and in catalog sections, else ignored
                tables = "], [".join(CATALOG_DIRS)
                raise SpecError(where, full, f"{section} cannot start from another spec",
                                f"from in [{tables}] or at a file's top")  # fmt: skip
            continue
        data[name] = check_value(fields[name], value, where, full, warnings, ranges)
    for name, f in fields.items():
        if name not in data and f.default is attrs.NOTHING:
            raise SpecError(
                home, f"{section}.{name}", "missing required key", f.metadata.get("doc", "a value")
            )
    try:
        obj: Any = _converter.structure(data, spec.fields)
    except (cattrs.BaseValidationError, TypeError, ValueError) as e:
        detail = (
            "; ".join(cattrs.transform_error(e, path=section))
            if isinstance(e, cattrs.BaseValidationError)
            else str(e)
        )
        raise SpecError(home, section, f"cannot build section: {detail}") from None
    values: dict[Parameter, float] = {}
    for name, f in fields.items():
        if "dim" in f.metadata and getattr(obj, name) is not None:
            meta = f.metadata
            sym = parameter(f"{section}.{name}", meta["dim"], meta["latex"], meta["doc"])
            values[sym] = float(getattr(obj, name))
    return obj, values


def _sections(kinds: Kinds) -> list[str]:
    return sorted({s for s, _ in kinds}, key=lambda s: (s.count("."), s))


def _section_of(key: str, sections: Iterable[str]) -> str | None:
    best = None
    for s in sections:
        if key.startswith(s + ".") and (best is None or len(s) > len(best)):
            best = s
    return best


def kind_of(section: str, flat: Flat, kinds: Kinds) -> tuple[str | None, str]:
    """The kind a section names (``[section] kind = …``), else its default kind, else None;
    and the file that named it ("" for a default)."""
    entry = flat.get(f"{section}.kind")
    if entry is not None:
        value, where = entry
        if not isinstance(value, str):
            raise SpecError(
                where, f"{section}.kind", f"{value!r} is not a kind name", 'a string such as "gpu"'
            )
        return value, where
    defaults = [k for (s, k), spec in kinds.items() if s == section and spec.default]
    if defaults:
        return defaults[0], ""
    # a section with keys whose only kind is obvious needs no `kind =` (hardware.fp8)
    only = [k for (s, k) in kinds if s == section]
    given = any(key.startswith(f"{section}.") for key in flat)
    return (only[0], "") if given and len(only) == 1 else (None, "")


def _spec_for(section: str, kind: str, where: str, kinds: Kinds) -> KindSpec:
    spec = kinds.get((section, kind))
    if spec is None:
        hint = did_you_mean(kind, sorted(k for s, k in kinds if s == section))
        raise SpecError(
            where,
            f"{section}.kind",
            f"no plugin provides kind {kind!r}{hint}",
            _kinds_list(kinds, section),
        )
    return spec


def _kinds_list(kinds: Kinds, section: str) -> str:
    names = sorted(k for s, k in kinds if s == section)
    return f"kind one of: {', '.join(names)}" if names else "no plugin declares this section"


def _structure_all(
    flat: Flat,
    sections: list[str],
    kinds: Kinds,
    home: str,
    files: Mapping[str, str],
    required: tuple[str, ...],
    ranges: dict[str, tuple[float, float]] | None = None,
) -> tuple[dict[str, Any], dict[Parameter, float], dict[str, str], list[str]]:
    """Every section of ``flat``: (objects, parameter values, kinds used, warnings); ranged
    values go into ``ranges`` (path -> (low, high)) when it is given, else are an error."""
    structured: dict[str, Any] = {}
    values: dict[Parameter, float] = {}
    used: dict[str, str] = {}
    warnings: list[str] = []
    for section in sections:
        raw = {
            k[len(section) + 1 :]: v for k, v in flat.items() if _section_of(k, sections) == section
        }
        kind, named_in = kind_of(section, flat, kinds)
        if kind is None:
            if raw:
                where = next(iter(raw.values()))[1]
                raise SpecError(where, f"{section}.kind", "missing", _kinds_list(kinds, section))
            if section in required:
                folder = CATALOG_DIRS.get(section)
                how = (
                    f'{section} = "NAME" (one of: {", ".join(catalog_names(folder))}) or a '
                    f"[{section}] table"
                    if folder
                    else f"a [{section}] table with {_kinds_list(kinds, section)}"
                )
                raise SpecError(home, section, "missing: a scenario needs it", how)
            continue
        spec = _spec_for(section, kind, named_in or home, kinds)
        where = files.get(section) or files.get(section.split(".")[0]) or home
        if not named_in:  # a key of another kind of the section: its `kind =` is missing
            names = {f.name for f in attrs.fields(spec.fields)} | set(META_KEYS)
            others = {f.name for (s, _), o in kinds.items() if s == section
                      for f in attrs.fields(o.fields)}  # fmt: skip
            stray = next((k for k in raw if k not in names and k in others), None)
            if stray is not None:
                listed = _kinds_list(kinds, section)
                raise SpecError(raw[stray][1], f"{section}.kind", f"missing, and the default "
                                f"kind {kind!r} takes no {stray}", listed)  # fmt: skip
        obj, vals = structure_section(section, spec, raw, where, warnings, ranges)
        structured[section] = obj
        values.update(vals)
        used[section] = kind
    return structured, values, used, warnings


# ---------------------------------------------------------------- scenarios and entries


# Keys renamed since the first release: still read, with a warning naming the new key.
RENAMED = {
    "overhead.per_step": "engine.per_step",
    "overhead.per_layer": "engine.per_layer",
    "overhead.native": "engine.native",
    "parallel.overlap": "engine.two_batch_overlap",
}
DROPPED = {"overhead.kind": "fixed", "overhead.source": None, "overhead.sources": None}


def _renamed(flat: Flat, warnings: list[str]) -> Flat:
    """``flat`` with renamed keys under their new names (a warning each)."""
    out = {}
    for k, (v, origin) in flat.items():
        if k in DROPPED and (DROPPED[k] is None or v == DROPPED[k]):
            continue
        if k in RENAMED:
            warnings.append(f"{origin}:{k} is now {RENAMED[k]} (renamed; please update)")
            k = RENAMED[k]
        out[k] = (v, origin)
    return out


def importers_of(kinds: Kinds) -> dict[str, Importer]:
    """Every Hugging Face architecture the kinds import, and the importer of each."""
    return {arch: fn for spec in kinds.values() for arch, fn in spec.importers.items()}


def load_scenario(ref: str | Path, kinds: Kinds, sets: Iterable[str] = ()) -> Scenario:
    """Read, merge, override and validate a scenario (a catalog name or a file path)."""
    sets = tuple(sets)
    given = Path(str(ref))
    entry = entry_section(given, kinds) if given.is_file() else None
    if entry is not None:  # e.g. a hardware file outside the catalog, given as a scenario
        raise SpecError(str(given), "", f"is {a_kind(entry)} entry, not a scenario",
                        "a scenario naming model, hardware and cluster")  # fmt: skip
    path, flat = read_scenario(str(ref))
    flat, values_set = with_references(flat, sets)
    flat, files = expand_references(flat, (path.resolve(),), importers_of(kinds))
    renames: list[str] = []
    flat = _renamed(flat, renames)
    name = str(flat.pop("name", (path.stem, ""))[0])
    flat.pop("description", None)
    sections = _sections(kinds)
    for assignment in values_set:
        key, value = parse_set(assignment)
        if key in RENAMED:
            renames.append(f"--set {key} is now {RENAMED[key]} (renamed; please update)")
            key = RENAMED[key]
        section = _section_of(key, sections)
        is_kind = section is not None and key == f"{section}.kind"
        if not is_kind and (section is None or not _is_field(key, section, flat, kinds)):
            raise SpecError("--set", key, "no such key in this scenario", _set_hint(key, flat))
        flat[key] = (value, "--set")
    top_level = [k for k in flat if _section_of(k, sections) is None]
    if top_level:
        k = top_level[0]
        head = k.split(".", 1)[0]
        dym = did_you_mean(head, sorted({s.split(".")[0] for s in sections}), quote=False)
        raise UnknownKey(
            flat[k][1], k, f"unknown key{dym}", f"one of the sections: {', '.join(sections)}"
        )
    ranges: dict[str, tuple[float, float]] = {}
    structured, values, used, warnings = _structure_all(
        flat, sections, kinds, str(path), files, REQUIRED_SECTIONS, ranges
    )
    return Scenario(
        name,
        str(path),
        structured,
        used,
        values,
        {k: v[1] for k, v in flat.items()},
        {p.name: _source_of(p.name, flat) for p in values},
        tuple(override_text(a) for a in sets),
        tuple(dict.fromkeys([*renames, *warnings])),
        ranges=ranges,
    )


def _source_of(path: str, flat: Flat) -> str:
    """What a value rests on: its entry in the section's ``sources`` table, else the
    section's ``source``; ``--set`` and plugin defaults say so."""
    section, _, name = path.rpartition(".")
    if path not in flat:
        return "the plugin's default"
    if flat[path][1] == "--set":
        return "--set on the command line"
    cited = flat.get(f"{section}.sources", ({}, ""))[0]
    if isinstance(cited, dict) and name in cited:
        return str(cited[name])
    while section:  # the nearest enclosing section's source
        if f"{section}.source" in flat:
            return str(flat[f"{section}.source"][0])
        section = section.rpartition(".")[0]
    return ""


def _is_field(key: str, section: str, flat: Flat, kinds: Kinds) -> bool:
    kind, _ = kind_of(section, flat, kinds)
    spec = kinds.get((section, kind)) if kind else None
    name = key[len(section) + 1 :]
    return spec is not None and name in {f.name for f in attrs.fields(spec.fields)}


def _set_hint(key: str, flat: Flat) -> str:
    name = key.rpartition(".")[2]
    if name in META_KEYS:
        return f"a value the model uses; {name} is a {'citation' if 'source' in name else 'label'}"
    keys = sorted(k for k in flat if k != key and k.rpartition(".")[2] not in META_KEYS)
    hint = difflib.get_close_matches(key, keys, n=1)
    return f"an existing key such as {hint[0]}" if hint else "an existing key"


def entry_section(path: Path, kinds: Kinds, folder: str = "scenarios") -> str | None:
    """Which catalog section a file is an entry of (models/hardware/clusters), or None for a
    scenario: by its folder, its ``kind``, a ``scale_up`` table, or what its ``from`` chain
    starts from (a catalog name or a path, followed as the loader follows it; a name of no
    catalog entry is looked up in ``folder``, which its error names).

    Stays whole: one loop along the `from` chain, each file's own evidence checked before the
    next file is followed.
    """
    seen: set[Path] = set()
    while path.resolve() not in seen and len(seen) < MAX_FROM_DEPTH:
        seen.add(path.resolve())
        own = flatten(read_toml(path), str(path))
        section = {v: k for k, v in CATALOG_DIRS.items()}.get(path.parent.name)
        if section is None and "kind" in own:
            kind = own["kind"][0]
            if not isinstance(kind, str):
                raise SpecError(
                    str(path), "kind", f"{kind!r} is not a kind name", 'a string such as "gpu"'
                )
            owners = [s for (s, k) in kinds if k == kind and s in CATALOG_DIRS]
            if not owners:  # not a scenario either: a scenario has no top-level kind
                names = sorted({k for (s, k) in kinds if s in CATALOG_DIRS})
                dym = did_you_mean(kind, names)
                raise SpecError(str(path), "kind", f"no plugin provides an entry of kind "
                                f"{kind!r}{dym}", f"one of: {', '.join(names)}")  # fmt: skip
            section = owners[0]
        if section is None and any(k.startswith("scale_up.") for k in own):
            section = "cluster"
        ref = own.get("from", (None,))[0]
        if section is not None or not isinstance(ref, str):
            return section
        if ref.startswith(PREFIX):  # a model read from a Hugging Face config
            return "model"
        # `from = "b300"`: the entry is of whatever kind b300 is; a path: of its file's kind
        found = [
            s for s, f in CATALOG_DIRS.items() if (catalog_root() / f / f"{ref}.toml").is_file()
        ]
        if found:
            return found[0]
        path = find_spec_file(ref, folder, where=str(path), key="from", base=path.parent)
    return None


@attrs.frozen
class Checked:
    """A spec file validated by `check_spec`: where it is, the catalog section it is an entry
    of (None for a scenario) and the one-line confirmation."""

    path: Path
    section: str | None
    message: str


def check_spec(ref: str | Path, kinds: Kinds) -> Checked:
    """Validate a scenario or a catalog entry."""
    path = Path(str(ref))
    if not path.is_file():
        path = find_spec_file(str(ref), "scenarios", where="check", key="")
    section = entry_section(path, kinds)
    if section is None:
        scenario = load_scenario(path, kinds)
        return Checked(path, None, f"ok: {path} is a valid scenario ({scenario.name})")
    flat = load_flat(path, CATALOG_DIRS[section], (), importers_of(kinds))
    prefixed = {f"{section}.{k}": v for k, v in flat.items() if k not in ("name", "description")}
    subsections = [s for s in _sections(kinds) if s == section or s.startswith(section + ".")]
    required = tuple(s for s in REQUIRED_SECTIONS if s in subsections)
    _structure_all(prefixed, subsections, kinds, str(path), {}, required, {})
    return Checked(path, section, f"ok: {path} is a valid {section} entry")


def check_file(ref: str | Path, kinds: Kinds) -> str:
    """Validate a scenario or a catalog entry; return a one-line confirmation."""
    return check_spec(ref, kinds).message


def check_range(
    f: Any,
    text: str,
    where: str,
    key: str,
    warnings: list[str] | None,
    ranges: dict[str, tuple[float, float]] | None,
) -> float:
    """A range value of a numeric field: each end and the nominal value checked like a scalar
    (`stepwall.spec.values.check_magnitude`); records (low, high) in ``ranges`` under ``key``
    and returns the nominal value."""
    meta = f.metadata
    if ranges is None:
        raise SpecError(where, key, f"{text!r} is a range; ranges are not accepted here",
                        "a single value")  # fmt: skip
    if meta.get("integer"):
        raise SpecError(where, key, f"{text!r} is a range, but {key} takes whole numbers",
                        "one value (sweep a whole-number key with --vary)")  # fmt: skip
    try:
        low, nominal, high, dim = parse_range(text)
    except UnitError as e:
        raise SpecError(where, key, str(e), f"{SYNTAX}; {describe(meta['dim'])}") from None
    for v in (low, high, nominal):
        check_magnitude(meta, v, dim, repr(text), where, key, warnings)
    ranges[key] = (low, high)
    return float(nominal)
