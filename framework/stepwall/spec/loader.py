"""Reading spec files: TOML -> flat ``key -> (value, file)`` maps, with ``from`` chains,
catalog references and ``--set`` overrides resolved. Nothing here knows about kinds or
fields (that is `stepwall.spec.validation`).

A scenario names catalog entries (``model = "kimi-k2.6-int4"``) or tables that start from
one (``[hardware] from = "b300"`` plus overrides); catalog entries and scenarios may
themselves start ``from`` another. Errors are one line: ``file:key: what is wrong``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError, did_you_mean
from stepwall.spec.hf import PREFIX, Importer, config_identity, imported_flat

# Sections a scenario may name from the catalog, and the catalog folder for each.
CATALOG_DIRS = {
    "model": "models",
    "hardware": "hardware",
    "cluster": "clusters",
    "engine": "engines",
}

Flat = dict[str, tuple[Any, str]]  # dotted key -> (value, file it came from)

# What each catalog folder holds, as a reference to it is described in errors.
FOLDER_KINDS = {**{f: s for s, f in CATALOG_DIRS.items()}, "scenarios": "scenario",
                "reports": "report"}  # fmt: skip


def catalog_names(folder: str) -> list[str]:
    return sorted(p.stem for p in (catalog_root() / folder).glob("*.toml"))


def find_spec_file(
    ref: str, folder: str, *, where: str, key: str, base: Path | None = None
) -> Path:
    """A catalog name (``b300``) or a path (``./my-gpu.toml``) -> the file.

    Stays whole: the lookup and its error share the candidates tried, and each error says which
    way the name was read.
    """
    if not isinstance(ref, str) or not ref:
        raise SpecError(where, key, f"reference {ref!r} is not a name", f"a {folder} name")
    # a name is a path when it says so, or when that file exists where it is looked up
    # (beside the referring file; the working folder for the command line)
    looks_like_path = (
        "/" in ref or ref.endswith(".toml") or (base or Path.cwd()).joinpath(ref).exists()
    )
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


def a_kind(kind: str) -> str:
    """``"a model"``, ``"an engine"``."""
    return f"{'an' if kind[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {kind}"


def same_kind(path: Path, folder: str, where: str, key: str) -> Path:
    """``path``, unless the catalog keeps it among specs of another kind than ``folder``'s (a
    hardware file given as a scenario, a ``from`` naming a model file): then an error at
    ``where``:``key``, or at ``path`` itself when ``key`` is empty."""
    home = path.resolve().parent
    if home.parent != catalog_root().resolve() or home.name == folder:
        return path
    kind, wanted = FOLDER_KINDS.get(home.name, home.name), FOLDER_KINDS.get(folder, folder)
    problem = f"is {a_kind(kind)} file"
    if not key:
        raise SpecError(str(path), "", problem, f"a {wanted} file or name")
    raise SpecError(where, key, f"{path.name} {problem}", f"a {wanted} file or name")


MAX_NESTING = 32  # tables within tables: specs need 3 levels; deeper is a mistake or an attack
MAX_SPEC_BYTES = 8 * 2**20  # specs are a few KB; a larger file is not one (a log, an image)


def read_toml(path: Path) -> dict[str, Any]:
    """A spec file's TOML; a one-line error when it is missing, empty, too large, not UTF-8,
    not TOML or nested absurdly deep."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except IsADirectoryError:
        raise SpecError(str(path), "", "is a folder", "a TOML file") from None
    except FileNotFoundError:
        raise SpecError(str(path), "", "not found", "a TOML file") from None
    except OSError as e:
        raise SpecError(str(path), "", f"cannot read file: {e.strerror}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(str(path), "", f"is larger than {MAX_SPEC_BYTES >> 20} MiB",
                        "a TOML spec of a few KB")  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "", f"is not UTF-8 (byte {e.start})", "a TOML file") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (some editors write one)
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


LABELS = ("name", "description")  # text in every spec kind and section


def flatten(doc: Mapping[str, Any], origin: str, prefix: str = "") -> Flat:
    """``{"a": {"b": 1}}`` -> ``{"a.b": (1, origin)}`` (``sources`` tables stay whole); a
    ``name`` or ``description`` that is not text is an error."""
    out: Flat = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k != "sources":
            out.update(flatten(v, origin, key + "."))
        elif k in LABELS and not isinstance(v, str):
            raise SpecError(origin, key, f"{v!r} is not text", f'a string, e.g. {k} = "my-gpu"')
        else:
            out[key] = (v, origin)
    return out


MAX_FROM_DEPTH = 64  # files in one `from` chain: specs need 2 or 3; deeper is a mistake


def _foreign(ref: str, folder: str, importers: Mapping[str, Importer] | None, where: str,
             key: str) -> Flat:  # fmt: skip
    """The keys of a model read from a Hugging Face config (``hf:PATH``, `stepwall.spec.hf`);
    without the kinds' importers, what identifies the config (its files' digest)."""
    if folder != "models":
        raise SpecError(where, key, f"{ref}: a Hugging Face config is a model's source",
                        f"a {FOLDER_KINDS.get(folder, folder)} file or name")  # fmt: skip
    if importers is None:  # a caller without the kinds (the point cache's key): its identity
        return config_identity(ref.removeprefix(PREFIX), where, key)
    return imported_flat(ref.removeprefix(PREFIX), importers, where, key)


def load_flat(path: Path, folder: str, stack: tuple[Path, ...],
              importers: Mapping[str, Importer] | None = None) -> Flat:  # fmt: skip
    """A file's keys, flattened, after following its own ``from`` chain (iteratively, at
    most `MAX_FROM_DEPTH` files); a chain may end in a Hugging Face config (``hf:PATH``)."""
    chain: list[Flat] = []
    seen = list(stack)
    while True:
        path = path.resolve()
        if path in seen:
            cycle = " -> ".join(p.stem for p in (*seen, path))
            raise SpecError(str(seen[-1]), "from", f"reference cycle {cycle}",
                            "references to end")  # fmt: skip
        flat = flatten(read_toml(path), str(path))
        parent = flat.pop("from", None)
        chain.append(flat)
        seen.append(path)
        if parent is None:
            break
        if len(chain) == MAX_FROM_DEPTH:
            raise SpecError(str(path), "from", f"the from chain is longer than {MAX_FROM_DEPTH} "
                            "files", f"at most {MAX_FROM_DEPTH} files from a spec to its "
                            "first base")  # fmt: skip
        if isinstance(parent[0], str) and parent[0].startswith(PREFIX):
            chain.append(_foreign(parent[0], folder, importers, str(path), "from"))
            break
        found = find_spec_file(parent[0], folder, where=str(path), key="from", base=path.parent)
        path = same_kind(found, folder, str(path), "from")
    merged = chain.pop()
    while chain:
        merged = _over(merged, chain.pop())
    return merged


def _over(base: Flat, flat: Flat) -> Flat:
    """``flat``'s keys over its base's (whose name and description it does not inherit)."""
    base.pop("name", None)
    base.pop("description", None)
    merged = {**base, **flat}
    for key in base.keys() & flat.keys():  # a sources table extends its base's, entry by entry
        if key.rpartition(".")[2] == "sources":
            (theirs, _), (mine, origin) = base[key], flat[key]
            if isinstance(theirs, dict) and isinstance(mine, dict):
                merged[key] = ({**theirs, **mine}, origin)
    return merged


def expand_references(flat: Flat, stack: tuple[Path, ...],
                      importers: Mapping[str, Importer] | None = None,
                      ) -> tuple[Flat, dict[str, str]]:  # fmt: skip
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
        if isinstance(value, str) and value.startswith(PREFIX):
            entry = _foreign(value, folder, importers, origin, key)
            files[section] = next(iter(entry.values()))[1]  # every key's file: the config
        else:
            found = find_spec_file(value, folder, where=origin, key=key,
                                   base=Path(origin).parent)  # fmt: skip
            same_kind(found, folder, origin, key)
            files[section] = str(found)
            entry = load_flat(found, folder, stack, importers)
        overrides = {k: v for k, v in out.items() if k.startswith(section + ".")}
        for k in overrides:
            del out[k]
        entry.pop("name", None)
        merged = {f"{section}.{k}": v for k, v in entry.items()}
        merged.update(overrides)
        out.update(merged)
    return out, files


INLINE = "inline scenario"  # where an inline scenario's keys come from, in errors


def read_scenario(ref: str) -> tuple[Path, Flat]:
    """A scenario's file and keys (after its own ``from`` chain). ``ref`` is a catalog name,
    a path, or an inline composition of catalog entries (what ``stepwall search`` prints in
    the commands that reproduce its points)::

        model=deepseek-v3-fp8,hardware=h200,cluster=hgx-h200-ib,engine=trtllm

    The other sections (workload, parallel, decoding) then come from ``--set``."""
    if "=" in ref and not Path(ref).exists():
        flat: Flat = {"name": (ref, INLINE)}
        for part in ref.split(","):
            key, sep, value = (x.strip() for x in part.partition("="))
            if not sep or key not in CATALOG_DIRS or not value:
                expect = (
                    f"SECTION=NAME with SECTION one of: {', '.join(CATALOG_DIRS)}; "
                    "e.g. model=deepseek-v3-fp8,hardware=h200,cluster=hgx-h200-ib"
                )
                raise SpecError(INLINE, key or part, "not a catalog reference", expect)
            if key in flat:
                raise SpecError(INLINE, key, "given twice", f"one {key}=NAME")
            flat[key] = (value, INLINE)
        return Path(INLINE), flat
    path = find_spec_file(ref, "scenarios", where="scenario", key="", base=Path.cwd())
    same_kind(path, "scenarios", "", "")
    return path, load_flat(path, "scenarios", ())


def parse_set(assignment: str) -> tuple[str, Any]:
    """``"parallel.tp=16"`` -> ("parallel.tp", 16); values read like TOML, else as text."""
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError("--set", assignment, "not an assignment", "KEY=VALUE, e.g. parallel.tp=16")
    raw = raw.strip()
    if "\n" in raw or "\r" in raw:  # TOML would read the first line and drop the rest
        raise SpecError("--set", key, "the value spans more than one line", "one value")
    if _depth(raw) > MAX_NESTING:
        raise SpecError("--set", key, f"nests more than {MAX_NESTING} deep", "one value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def with_references(flat: Flat, sets: Sequence[str]) -> tuple[Flat, tuple[str, ...]]:
    """``--set engine=NAME`` or ``--set engine.from=NAME`` (any catalog section): ``flat`` with
    that entry in place of the one the scenario names (keys the scenario itself sets in the
    section still apply over it, as over a ``from``); and the other assignments, in order."""
    out, rest = dict(flat), []
    for assignment in sets:
        key, value = parse_set(assignment)
        section = key.removesuffix(".from")
        if section not in CATALOG_DIRS:
            rest.append(assignment)
            continue
        if not isinstance(value, str) or not value:
            names = catalog_names(CATALOG_DIRS[section])
            raise SpecError("--set", key, f"{value!r} is not a name",
                            f"a file path or one of: {', '.join(names)}")  # fmt: skip
        for k in (section, f"{section}.from"):
            out.pop(k, None)
        out[key] = (value, "--set")
    return out, tuple(rest)


def override_text(assignment: str) -> str:
    """How a ``--set`` assignment reads in a scenario's label and eval's ``overrides``: key and
    value without the spaces around them (``"parallel.tp = 16"`` -> ``"parallel.tp=16"``)."""
    return "=".join(x.strip() for x in assignment.partition("=")[::2])
