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
from stepwall.units import DIMENSIONLESS, NAMED, Dim, describe, implausible, parse_quantity

# Sections a scenario may name from the catalog, and the catalog folder for each.
CATALOG_DIRS = {"model": "models", "hardware": "hardware", "cluster": "clusters"}
# Sections every scenario needs: the flow calls a plugin for each.
REQUIRED_SECTIONS = ("model", "hardware", "cluster", "cluster.scale_up")
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
    """A validated scenario: structured sections, SI values, and where each value came from.

    Plugins read a section as ``scenario.model`` or ``scenario.section("cluster.scale_up")``
    (a `SectionView`) and its parameters (Symbols) as ``scenario.params.model.n_layers``.
    Reading a numeric field's *value* makes the model's shape depend on it: the path is
    recorded in ``reads`` (see `StepModel.structural_keys`).
    """

    name: str
    origin: str
    sections: Mapping[str, Any]
    kinds: Mapping[str, str]
    values: Mapping[sp.Symbol, float]
    provenance: Mapping[str, str]  # spec path -> the file (or "--set") that set it
    sources: Mapping[str, str] = attrs.field(factory=dict)  # spec path -> cited source
    overrides: tuple[str, ...] = ()  # the --set assignments applied, in order
    warnings: tuple[str, ...] = ()  # values far outside their quantity's physical range
    reads: set[str] = attrs.field(factory=set, eq=False, repr=False)

    @property
    def label(self) -> str:
        """The name, with the overrides applied to it: ``k26-b300-tp8-ddtree [parallel.tp=16]``."""
        return f"{self.name} [{', '.join(self.overrides)}]" if self.overrides else self.name

    def section(self, path: str) -> SectionView:
        return SectionView(self.sections[path], path, self.reads)

    def __getattr__(self, name: str) -> Any:
        sections = object.__getattribute__(self, "sections")
        if name in sections:
            return SectionView(sections[name], name, object.__getattribute__(self, "reads"))
        raise AttributeError(name)

    def value(self, path: str) -> float:
        self.reads.add(path)
        return self.values[symbols.lookup(path).symbol]

    def field(self, path: str) -> attrs.Attribute | None:
        """The declaration of a numeric field (``parallel.tp``), or None."""
        section, _, name = path.rpartition(".")
        obj = self.sections.get(section)
        f = attrs.fields_dict(type(obj)).get(name) if obj is not None else None
        return f if f is not None and "dim" in f.metadata else None

    def file_of(self, path: str) -> str:
        """The file that set ``path`` (or "--set"); the scenario's own file when a plugin
        default supplied it."""
        section = path
        while section:
            if section in self.provenance:
                return self.provenance[section]
            section = section.rpartition(".")[0]
        return self.origin

    @property
    def params(self) -> _Params:
        """Symbolic view: ``scenario.params.hardware.hbm_bandwidth`` is that Symbol."""
        return _Params(self, "")


class SectionView:
    """Read-only access to one validated section (an attrs object of the owning plugin).

    Reading a numeric field records ``section.field`` in the scenario's ``reads``: a value
    read while the model is built decides its shape (which terms exist), so a sweep over that
    key builds one model per value instead of evaluating one model over all of them.
    """

    __slots__ = ("_obj", "_path", "_reads")

    def __init__(self, obj: Any, path: str, reads: set[str]) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name: str) -> Any:
        obj = object.__getattribute__(self, "_obj")
        value = getattr(obj, name)
        f = attrs.fields_dict(type(obj)).get(name)
        if f is not None and "dim" in f.metadata:
            object.__getattribute__(self, "_reads").add(f"{self._path}.{name}")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"section {self._path} is read-only")

    @property
    def fields(self) -> type:
        """The attrs class of this section's kind."""
        return type(object.__getattribute__(self, "_obj"))


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
    looks_like_path = "/" in ref or ref.endswith(".toml") or Path(ref).exists()
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
    if looks_like_path:
        found = next((c for c in candidates if c.exists()), None)
        what = (
            "not found"
            if found is None
            else ("is a folder" if found.is_dir() else "is not a regular file")
        )
        if not key:  # the file named on the command line
            raise SpecError(ref, "", what, f"a TOML file, or a {folder} name")
        raise SpecError(where, key, f"{ref}: {what}", "a TOML file")
    dym = did_you_mean(ref, names)
    raise SpecError(
        where,
        key,
        f"no {folder} entry named {ref!r}{dym}",
        f"a file path or one of: {', '.join(names)}",
    )


MAX_NESTING = 32  # tables within tables: specs need 3 levels; deeper is a mistake or an attack


def read_toml(path: Path) -> dict[str, Any]:
    """A spec file's TOML; a one-line error when it is missing, empty, not UTF-8, not TOML
    or nested absurdly deep."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise SpecError(str(path), "", "is a folder", "a TOML file") from None
    except FileNotFoundError:
        raise SpecError(str(path), "", "not found", "a TOML file") from None
    except OSError as e:
        raise SpecError(str(path), "", f"cannot read file: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "", f"is not UTF-8 (byte {e.start})", "a TOML file") from None
    if _depth(text) > MAX_NESTING:
        raise SpecError(str(path), "", f"nests tables more than {MAX_NESTING} deep",
                        "a spec of a few levels")  # fmt: skip
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(str(path), "", f"TOML syntax error: {e}") from None
    except RecursionError:
        raise SpecError(str(path), "", "nests too deep to read", "a spec of a few levels") from None
    if not doc:
        raise SpecError(str(path), "", "is empty", "a TOML spec with keys")
    return doc


def _depth(text: str) -> int:
    """An upper bound on how deep inline tables and arrays nest (brackets outside strings are
    counted roughly: enough to refuse a 400-deep file before the parser recurses)."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
        elif ch == "\n":
            depth = max(depth, 0)
    return best


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


def _expand_references(flat: Flat, stack: tuple[Path, ...]) -> tuple[Flat, dict[str, str]]:
    """Replace ``model = "name"`` / ``[model] from = "name"`` by the entry's keys; also
    return, per section, the catalog file it was read from (where a missing key is blamed)."""
    out = dict(flat)
    files: dict[str, str] = {}
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
        found = resolve(value, folder, where=origin, key=key, base=Path(origin).parent)
        files[section] = str(found)
        entry = _load_flat(found, folder, stack)
        overrides = {k: v for k, v in out.items() if k.startswith(section + ".")}
        for k in overrides:
            del out[k]
        entry.pop("name", None)
        merged = {f"{section}.{k}": v for k, v in entry.items()}
        merged.update(overrides)
        out.update(merged)
    return out, files


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


def _check_value(
    f: attrs.Attribute, value: Any, where: str, key: str, warnings: list[str] | None = None
) -> Any:
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
    if found == DIMENSIONLESS and dim != found and isinstance(value, int | float):
        if not math.isfinite(magnitude):
            raise SpecError(where, key, f"{value!r} is not a finite number", describe(dim))
        raise SpecError(where, key, f"{value!r} has no unit", describe(dim))
    return check_magnitude(f, magnitude, found, repr(value), where, key, warnings)


def check_magnitude(
    f: attrs.Attribute,
    magnitude: float,
    found: Dim,
    shown: str,
    where: str,
    key: str,
    warnings: list[str] | None = None,
) -> float | int:
    """An SI magnitude of dimension ``found`` checked against a numeric field: dimension,
    finiteness, bounds, whole number; a value far outside its quantity's physical range adds
    a warning. ``shown`` is how the value reads in a message."""
    meta = f.metadata
    dim: Dim = meta["dim"]
    if not math.isfinite(magnitude):
        raise SpecError(where, key, f"{shown} is not a finite number", describe(dim))
    if found != dim:
        raise SpecError(where, key, f"{shown} is a {found} quantity, not {dim}", describe(dim))
    low, inclusive, high = meta["minimum"], meta["inclusive"], meta["maximum"]
    if magnitude < low or (magnitude == low and not inclusive):
        bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
        raise SpecError(where, key, f"{shown} is out of range", f"a value {bound}")
    if high is not None and magnitude > high:
        raise SpecError(where, key, f"{shown} is out of range", f"a value ≤ {high:g}")
    if meta["integer"]:
        if magnitude != int(magnitude):
            raise SpecError(where, key, f"{shown} is not a whole number", "an integer")
        return int(magnitude)
    odd = implausible(magnitude, dim)
    if odd and warnings is not None:
        warnings.append(f"{where}:{key}: {shown} is {odd}")
    return magnitude


_converter = cattrs.Converter(forbid_extra_keys=True)


def structure_section(
    section: str, spec: KindSpec, raw: Flat, where_default: str, warnings: list[str] | None = None
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
            listed = (
                f"one of: {', '.join(sorted(fields))}" if fields else "no keys: the kind takes none"
            )
            dym = did_you_mean(name, sorted(fields), prefix=f"{section}.", quote=False)
            raise SpecError(
                where,
                full,
                f"unknown key for {section} kind {spec.kind!r}{dym}",
                listed,
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
        data[name] = _check_value(fields[name], value, where, full, warnings)
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
    sets = tuple(sets)
    path = resolve(str(ref), "scenarios", where="scenario", key="", base=Path.cwd())
    flat = _load_flat(path, "scenarios", ())
    flat, files = _expand_references(flat, (path.resolve(),))
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
    warnings: list[str] = []
    for section in sections:
        raw = {
            k[len(section) + 1 :]: v for k, v in flat.items() if _section_of(k, sections) == section
        }
        kind = by_section.get(section)
        if kind is None:
            if raw:
                where = next(iter(raw.values()))[1]
                raise SpecError(where, f"{section}.kind", "missing", _kinds_list(kinds, section))
            if section in REQUIRED_SECTIONS:
                folder = CATALOG_DIRS.get(section)
                how = (
                    f'{section} = "NAME" (one of: {", ".join(catalog_names(folder))}) or a '
                    f"[{section}] table"
                    if folder
                    else f"a [{section}] table with {_kinds_list(kinds, section)}"
                )
                raise SpecError(str(path), section, "missing: every scenario needs it", how)
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
        home = files.get(section) or files.get(section.split(".")[0]) or str(path)
        obj, vals = structure_section(section, spec, raw, home, warnings)
        structured[section] = obj
        values.update(vals)
        kinds_used[section] = kind
    provenance = {k: v[1] for k, v in flat.items()}
    sources = {
        p.path: _source_of(p.path, flat)
        for p in (symbols.lookup(sym) for sym in values)
        if not p.path.startswith("const.")
    }
    overrides = tuple("=".join(x.strip() for x in a.partition("=")[::2]) for a in sets)
    return Scenario(
        name,
        str(path),
        structured,
        kinds_used,
        values,
        provenance,
        sources,
        overrides,
        tuple(dict.fromkeys(warnings)),
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
    name = key.rpartition(".")[2]
    if name in META_KEYS:
        return f"a value the model uses; {name} is a {'citation' if 'source' in name else 'label'}"
    keys = sorted(k for k in flat if k != key and k.rpartition(".")[2] not in META_KEYS)
    hint = difflib.get_close_matches(key, keys, n=1)
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
