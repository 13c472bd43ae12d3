"""Specs: TOML files -> a validated, frozen `Scenario` with SI magnitudes and symbols.

A scenario names catalog entries (``model = "kimi-k2.6-int4"``) or tables that start from
one (``[hardware] from = "b300"`` plus overrides); catalog entries and scenarios may
themselves start ``from`` another. ``--set key=value`` overrides last. Each section is
structured into the frozen attrs class that the plugin owning its ``kind`` declares; every
numeric field becomes a catalog parameter (a Symbol) with its SI value.

Errors are one line: ``file:key: what is wrong (expected …)``.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import cattrs
import sympy as sp

from stepwall import symbols
from stepwall.errors import SpecError, UnitError, did_you_mean
from stepwall.units import DIMENSIONLESS, NAMED, Dim, describe, parse_quantity

# Sections a scenario may name from the catalog, and the catalog folder for each.
CATALOG_DIRS = {"model": "models", "hardware": "hardware", "cluster": "clusters"}
# Keys any section may carry besides its fields.
META_KEYS = ("kind", "name", "description", "source", "sources", "from")

# ---------------------------------------------------------------- field declarations


def quantity(
    dim: str | Dim,
    doc: str,
    *,
    default: Any = attrs.NOTHING,
    latex: str = "",
    integer: bool = False,
    minimum: float = 0.0,
    inclusive: bool = False,
    maximum: float | None = None,
) -> Any:
    """Declare a numeric spec field: its dimension, bounds and LaTeX name.

    Values are positive by default (``minimum=0`` exclusive); ``inclusive=True`` allows the
    minimum itself. Integer fields (parallel degrees, counts) reject fractional values.
    """
    d = NAMED[dim] if isinstance(dim, str) else dim
    meta = {
        "dim": d,
        "doc": doc,
        "latex": latex,
        "integer": integer,
        "minimum": minimum,
        "inclusive": inclusive,
        "maximum": maximum,
    }
    return attrs.field(default=default, metadata=meta, kw_only=True)


def choice(options: Iterable[str], doc: str, *, default: Any = attrs.NOTHING) -> Any:
    """Declare a string field that must be one of ``options``."""
    return attrs.field(
        default=default, metadata={"choices": tuple(options), "doc": doc}, kw_only=True
    )


def flag(doc: str, *, default: bool = False) -> Any:
    """Declare a boolean field."""
    return attrs.field(default=default, metadata={"bool": True, "doc": doc}, kw_only=True)


@attrs.frozen
class KindSpec:
    """A plugin's claim: section ``section`` with ``kind = kind`` has these fields."""

    section: str
    kind: str
    fields: type
    doc: str = ""
    default: bool = False  # used when the section names no kind
    plugin: str = ""


# ---------------------------------------------------------------- the scenario


@attrs.frozen
class Scenario:
    """A validated scenario: structured sections, SI values, and where each value came from."""

    name: str
    origin: str
    sections: Mapping[str, Any]
    kinds: Mapping[str, str]
    values: Mapping[sp.Symbol, float]
    provenance: Mapping[str, str]  # spec path -> the file (or "--set") that set it
    sources: Mapping[str, str] = attrs.field(factory=dict)  # spec path -> cited source

    def section(self, path: str) -> Any:
        return self.sections[path]

    def __getattr__(self, name: str) -> Any:
        sections = object.__getattribute__(self, "sections")
        if name in sections:
            return sections[name]
        raise AttributeError(name)

    def value(self, path: str) -> float:
        return self.values[symbols.lookup(path).symbol]

    @property
    def params(self) -> _Params:
        """Symbolic view: ``scenario.params.hardware.hbm_bandwidth`` is that Symbol."""
        return _Params(self, "")


class _Params:
    def __init__(self, scenario: Scenario, prefix: str) -> None:
        self._scenario, self._prefix = scenario, prefix

    def __getattr__(self, name: str) -> Any:
        path = f"{self._prefix}{name}"
        if path in self._scenario.sections:
            return _Params(self._scenario, path + ".")
        try:
            sym = symbols.lookup(path).symbol
        except KeyError:
            raise AttributeError(f"no parameter {path}") from None
        if sym not in self._scenario.values:
            raise AttributeError(f"parameter {path} is not part of this scenario")
        return sym


# ---------------------------------------------------------------- reading files

Flat = dict[str, tuple[Any, str]]  # dotted key -> (value, file it came from)


def catalog_root() -> Path:
    return Path(str(resources.files("stepwall.specs")))


def catalog_names(folder: str) -> list[str]:
    return sorted(p.stem for p in (catalog_root() / folder).glob("*.toml"))


def resolve(ref: str, folder: str, *, where: str, key: str, base: Path | None = None) -> Path:
    """A catalog name (``b300``) or a path (``./my-gpu.toml``) -> the file."""
    if not isinstance(ref, str) or not ref:
        raise SpecError(where, key, f"reference {ref!r} is not a name", f"a {folder} name")
    looks_like_path = "/" in ref or ref.endswith(".toml")
    candidates = []
    if looks_like_path:
        p = Path(ref)
        candidates.append(p if p.is_absolute() or base is None else base / p)
        candidates.append(p)
    else:
        candidates.append(catalog_root() / folder / f"{ref}.toml")
    for c in candidates:
        if c.is_file():
            return c
    names = catalog_names(folder)
    dym = did_you_mean(ref, names)
    raise SpecError(
        where,
        key,
        f"no {folder} entry named {ref!r}{dym}",
        f"a file path or one of: {', '.join(names)}",
    )


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(str(path), "", f"TOML syntax error: {e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "", f"not UTF-8 text (byte {e.start})", "a TOML file") from None
    except OSError as e:
        raise SpecError(str(path), "", f"cannot read file: {e.strerror}") from None


def _flatten(doc: Mapping[str, Any], origin: str, prefix: str = "") -> Flat:
    out: Flat = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k != "sources":
            out.update(_flatten(v, origin, key + "."))
        else:
            out[key] = (v, origin)
    return out


def _load_flat(path: Path, folder: str, stack: tuple[Path, ...]) -> Flat:
    """A file's keys, flattened, after following its own ``from`` chain."""
    path = path.resolve()
    if path in stack:
        chain = " -> ".join(p.stem for p in (*stack, path))
        raise SpecError(str(stack[-1]), "from", f"reference cycle {chain}", "references to end")
    flat = _flatten(read_toml(path), str(path))
    parent = flat.pop("from", None)
    if parent is None:
        return flat
    base = _load_flat(
        resolve(parent[0], folder, where=str(path), key="from", base=path.parent),
        folder,
        (*stack, path),
    )
    base.pop("name", None)
    base.pop("description", None)
    return {**base, **flat}


def _expand_references(flat: Flat, stack: tuple[Path, ...]) -> Flat:
    """Replace ``model = "name"`` / ``[model] from = "name"`` by the entry's keys."""
    out = dict(flat)
    for section, folder in CATALOG_DIRS.items():
        # `model = "…"` and `[model] from = "…"` may both be present when a scenario starts
        # from another: the one merged last (the more derived file) wins.
        keys = [k for k in out if k in (section, f"{section}.from")]
        if not keys:
            continue
        key = keys[-1]
        ref = out[key]
        for k in keys:
            del out[k]
        value, origin = ref
        if isinstance(value, dict):
            continue
        entry = _load_flat(
            resolve(value, folder, where=origin, key=key, base=Path(origin).parent),
            folder,
            stack,
        )
        overrides = {k: v for k, v in out.items() if k.startswith(section + ".")}
        for k in overrides:
            del out[k]
        entry.pop("name", None)
        merged = {f"{section}.{k}": v for k, v in entry.items()}
        merged.update(overrides)
        out.update(merged)
    return out


def parse_set(assignment: str) -> tuple[str, Any]:
    """``"parallel.tp=16"`` -> ("parallel.tp", 16); values read like TOML, else as text."""
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError("--set", assignment, "not an assignment", "KEY=VALUE, e.g. parallel.tp=16")
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


# ---------------------------------------------------------------- validation


def _check_value(f: attrs.Attribute, value: Any, where: str, key: str) -> Any:
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
        return value
    dim: Dim = meta["dim"]
    try:
        magnitude, found = parse_quantity(value)
    except UnitError as e:
        raise SpecError(where, key, str(e), describe(dim)) from None
    if not math.isfinite(magnitude):
        raise SpecError(where, key, f"{value!r} is not a finite number", describe(dim))
    if found != dim:
        if found == DIMENSIONLESS and isinstance(value, int | float):
            raise SpecError(where, key, f"{value!r} has no unit", describe(dim))
        raise SpecError(where, key, f"{value!r} is a {found} quantity, not {dim}", describe(dim))
    low, inclusive, high = meta["minimum"], meta["inclusive"], meta["maximum"]
    if magnitude < low or (magnitude == low and not inclusive):
        bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
        raise SpecError(where, key, f"{value!r} is out of range", f"a value {bound}")
    if high is not None and magnitude > high:
        raise SpecError(where, key, f"{value!r} is out of range", f"a value ≤ {high:g}")
    if meta["integer"]:
        if magnitude != int(magnitude):
            raise SpecError(where, key, f"{value!r} is not a whole number", "an integer")
        return int(magnitude)
    return magnitude


_converter = cattrs.Converter(forbid_extra_keys=True)


def structure_section(
    section: str, spec: KindSpec, raw: Flat, where_default: str
) -> tuple[Any, dict[sp.Symbol, float]]:
    """Validate one section's keys against its kind's fields; make its parameters."""
    fields = {f.name: f for f in attrs.fields(spec.fields)}
    known = set(fields) | set(META_KEYS)
    data: dict[str, Any] = {}
    values: dict[sp.Symbol, float] = {}
    for key, (value, where) in raw.items():
        name = key.split(".", 1)[0]
        full = f"{section}.{key}"
        if name not in known or ("." in key and name != "sources"):
            dym = did_you_mean(name, sorted(fields), prefix=f"{section}.", quote=False)
            raise SpecError(
                where,
                full,
                f"unknown key for {section} kind {spec.kind!r}{dym}",
                f"one of: {', '.join(sorted(fields))}",
            )
        if name in META_KEYS:
            if name == "sources" and not (
                isinstance(value, dict) and all(k in fields for k in value)
            ):
                raise SpecError(
                    where,
                    full,
                    "sources must map field names to text",
                    f"keys among: {', '.join(sorted(fields))}",
                )
            continue
        data[name] = _check_value(fields[name], value, where, full)
    for name, f in fields.items():
        if name not in data and f.default is attrs.NOTHING:
            raise SpecError(
                where_default,
                f"{section}.{name}",
                "missing required key",
                f.metadata.get("doc", "a value"),
            )
    try:
        obj = _converter.structure(data, spec.fields)
    except Exception as e:  # cattrs wraps type errors in exception groups
        raise SpecError(where_default, section, f"cannot build section: {e}") from None
    for name, f in fields.items():
        if "dim" in f.metadata and getattr(obj, name) is not None:
            sym = symbols.parameter(
                f"{section}.{name}", f.metadata["dim"], f.metadata["latex"], f.metadata["doc"]
            )
            values[sym] = float(getattr(obj, name))
    return obj, values


def load_scenario(
    ref: str | Path,
    kinds: Mapping[tuple[str, str], KindSpec],
    sets: Iterable[str] = (),
) -> Scenario:
    """Read, merge, override and validate a scenario (a catalog name or a file path)."""
    path = resolve(str(ref), "scenarios", where="scenario", key="", base=Path.cwd())
    flat = _load_flat(path, "scenarios", ())
    flat = _expand_references(flat, (path.resolve(),))
    name = str(flat.pop("name", (path.stem, ""))[0])
    flat.pop("description", None)

    sections = sorted({s for s, _ in kinds}, key=lambda s: (s.count("."), s))
    by_section: dict[str, str] = {}
    for section in sections:
        kind_entry = flat.get(f"{section}.kind")
        if kind_entry is not None:
            by_section[section] = _kind_text(kind_entry[0], kind_entry[1], f"{section}.kind")
        else:
            defaults = [k for (s, k), spec in kinds.items() if s == section and spec.default]
            if defaults:
                by_section[section] = defaults[0]

    for assignment in sets:
        key, value = parse_set(assignment)
        section = _section_of(key, sections)
        if key.endswith(".kind") and section is not None and key == f"{section}.kind":
            by_section[section] = _kind_text(value, "--set", key)
        elif section is None or not _is_field(key, section, by_section, kinds):
            raise SpecError("--set", key, "no such key in this scenario", _set_hint(key, flat))
        flat[key] = (value, "--set")

    top_level = [k for k in flat if _section_of(k, sections) is None]
    if top_level:
        k = top_level[0]
        head = k.split(".", 1)[0]
        dym = did_you_mean(head, sorted({s.split(".")[0] for s in sections}), quote=False)
        raise SpecError(
            flat[k][1], k, f"unknown key{dym}", f"one of the sections: {', '.join(sections)}"
        )

    structured: dict[str, Any] = {}
    values: dict[sp.Symbol, float] = {}
    kinds_used: dict[str, str] = {}
    for section in sections:
        raw = {
            k[len(section) + 1 :]: v for k, v in flat.items() if _section_of(k, sections) == section
        }
        kind = by_section.get(section)
        if kind is None:
            if raw:
                where = next(iter(raw.values()))[1]
                raise SpecError(where, f"{section}.kind", "missing", _kinds_list(kinds, section))
            continue
        spec = kinds.get((section, kind))
        if spec is None:
            where = flat.get(f"{section}.kind", (None, str(path)))[1]
            raise SpecError(
                where,
                f"{section}.kind",
                f"no plugin provides kind {kind!r}{_kind_hint(kinds, section, kind)}",
                _kinds_list(kinds, section),
            )
        obj, vals = structure_section(section, spec, raw, str(path))
        structured[section] = obj
        values.update(vals)
        kinds_used[section] = kind
    provenance = {k: v[1] for k, v in flat.items()}
    sources = {
        p.path: _source_of(p.path, flat)
        for p in (symbols.lookup(sym) for sym in values)
        if not p.path.startswith("const.")
    }
    return Scenario(name, str(path), structured, kinds_used, values, provenance, sources)


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


def _section_of(key: str, sections: Iterable[str]) -> str | None:
    best = None
    for s in sections:
        if key.startswith(s + ".") and (best is None or len(s) > len(best)):
            best = s
    return best


def _is_field(key: str, section: str, by_section: Mapping[str, str], kinds: Mapping) -> bool:
    spec = kinds.get((section, by_section.get(section)))
    name = key[len(section) + 1 :]
    return spec is not None and name in {f.name for f in attrs.fields(spec.fields)}


def _set_hint(key: str, flat: Flat) -> str:
    hint = difflib.get_close_matches(key, sorted(flat), n=1)
    return f"an existing key such as {hint[0]}" if hint else "an existing key"


def _kind_text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise SpecError(where, key, f"{value!r} is not a kind name", 'a string such as "gpu"')
    return value


def _kind_hint(kinds: Mapping[tuple[str, str], KindSpec], section: str, kind: str) -> str:
    return did_you_mean(kind, sorted(k for s, k in kinds if s == section))


def _kinds_list(kinds: Mapping[tuple[str, str], KindSpec], section: str) -> str:
    names = sorted(k for s, k in kinds if s == section)
    return f"kind one of: {', '.join(names)}" if names else "no plugin declares this section"


def check_file(ref: str | Path, kinds: Mapping[tuple[str, str], KindSpec]) -> str:
    """Validate a scenario or a catalog entry; return a one-line confirmation.

    A file under specs/models|hardware|clusters (or one with a ``kind`` naming a model or
    hardware kind) is checked as that catalog entry; anything else as a scenario.
    """
    path = Path(str(ref))
    if not path.is_file():
        return check_file(resolve(str(ref), "scenarios", where="check", key=""), kinds)
    own = _flatten(read_toml(path), str(path))
    section = {v: k for k, v in CATALOG_DIRS.items()}.get(path.parent.name)
    if section is None and "kind" in own:
        kind = _kind_text(own["kind"][0], str(path), "kind")
        owners = [s for (s, k) in kinds if k == kind and s in CATALOG_DIRS]
        section = owners[0] if owners else None
    if section is None and any(k.startswith("scale_up.") for k in own):
        section = "cluster"
    if section is None and isinstance(own.get("from", (None,))[0], str):
        ref = own["from"][0]  # `from = "b300"`: the entry is of whatever kind b300 is
        found = [
            s for s, f in CATALOG_DIRS.items() if (catalog_root() / f / f"{ref}.toml").is_file()
        ]
        section = found[0] if found else None
    if section is None:
        scenario = load_scenario(path, kinds)
        return f"ok: {path} is a valid scenario ({scenario.name})"
    flat = _load_flat(path, CATALOG_DIRS[section], ())
    prefixed = {f"{section}.{k}": v for k, v in flat.items()}
    sections = sorted({s for s, _ in kinds}, key=lambda s: (s.count("."), s))
    for sub in [s for s in sections if s == section or s.startswith(section + ".")]:
        raw = {k[len(sub) + 1 :]: v for k, v in prefixed.items() if _section_of(k, sections) == sub}
        kind = raw.get("kind", (None,))[0]
        if kind is not None:
            kind = _kind_text(kind, raw["kind"][1], f"{sub}.kind")
        if kind is None:
            defaults = [k for (s, k), spec in kinds.items() if s == sub and spec.default]
            if not defaults:
                raise SpecError(str(path), f"{sub}.kind", "missing", _kinds_list(kinds, sub))
            kind = defaults[0]
        spec = kinds.get((sub, kind))
        if spec is None:
            raise SpecError(
                str(path),
                f"{sub}.kind",
                f"no plugin provides kind {kind!r}{_kind_hint(kinds, sub, kind)}",
                _kinds_list(kinds, sub),
            )
        structure_section(sub, spec, raw, str(path))
    return f"ok: {path} is a valid {section} entry"
