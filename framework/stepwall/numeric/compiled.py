"""The numeric side of a model: one compiled function over the parameters, and what its
outputs mean (metric, term, op and constraint names) as plain data.

A `CompiledModel` holds no sympy expression: it is what ``lambdify`` made of the model, as
Python source, plus the names needed to read its outputs. So it can be kept on disk and
loaded in a fresh process without building the symbolic model again (`ModelCache`), which is
what makes a cold ``stepwall eval`` cost little more than importing sympy.

The cache lives in the user's cache folder (``$STEPWALL_CACHE_DIR``, else
``$XDG_CACHE_HOME/stepwall``, else ``~/.cache/stepwall``). An entry is keyed by the model's
shape (kinds, choices and flags, the plugins with their versions and source files) and lists
the structural keys whose values it was built for; numeric values are not part of the key,
since they enter only at evaluation. Entries are written atomically, so concurrent writers
are safe; ``STEPWALL_NO_CACHE=1`` or ``--no-cache`` turns the cache off.
"""

from __future__ import annotations

import base64
import ctypes
import importlib.metadata
import importlib.util
import json
import marshal
import math
import numbers
import os
import sys
import types
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.core.errors import SpecError, env_flag, shown_path
from stepwall.numeric.files import atomic_write, json_text
from stepwall.numeric.namespace import FUNCTION, function_globals
from stepwall.plugin.hookspecs import DISABLE_ENV, DISABLED_ENV, ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from stepwall.core.scenario import Scenario
    from stepwall.plugin.registry import Registry

FORMAT = 8  # the layout of a cache entry; bump when it changes


@attrs.frozen
class TermInfo:
    name: str
    group: str
    plugin: str
    why: str
    overlap: str = ""


@attrs.frozen
class OpInfo:
    name: str
    group: str
    plugin: str


@attrs.frozen
class MetricInfo:
    """A metric as eval shows it: its declaration's (`stepwall.plugin.entries.Metric`)
    label, unit and layout in eval's JSON and text, as plain data."""

    name: str
    plugin: str
    label: str
    unit: str
    key: str
    place: int
    whole: bool
    optional: bool
    bounds: tuple[str, str] | None
    line: str


# eval's own keys (`summary_of`), which no metric's key may take
EVAL_KEYS = frozenset(
    ("scenario", "overrides", "feasible", "violations", "plugin_metrics", "groups",
     "parameters", "ops", "terms")
)  # fmt: skip


@attrs.frozen
class ConstraintInfo:
    name: str
    plugin: str
    message: str
    keys: tuple[str, ...]


@attrs.frozen
class CompiledModel:
    """One function from the parameters (in ``parameters`` order, by path) to every output:
    the metrics, the term times, each op's bytes and FLOPs and whether each constraint
    holds."""

    parameters: tuple[str, ...]
    constants: Mapping[str, float]
    source: str
    terms: tuple[TermInfo, ...]
    ops: tuple[OpInfo, ...]
    constraints: tuple[ConstraintInfo, ...]
    structural_keys: frozenset[str]
    metric_info: tuple[MetricInfo, ...]  # the metrics, in output order (`stepwall.model.metrics`)
    # their names, and those that may be unknown (NaN) on a feasible point
    metrics: tuple[str, ...] = attrs.field(
        init=False, default=attrs.Factory(lambda self: tuple(m.name for m in self.metric_info),
                                          takes_self=True)
    )  # fmt: skip
    optional_metrics: frozenset[str] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: frozenset(m.name for m in self.metric_info if m.optional), takes_self=True
        ),
    )
    imports: tuple[tuple[str, str], ...] = ()  # (module, name) the source needs beyond numpy's
    scalar_source: str = ""  # the same outputs for one point, in plain Python (no numpy)
    scalar_imports: tuple[tuple[str, str], ...] = ()
    _fn: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    # marshalled code objects of the sources ("numpy", "math"), kept in the disk cache so a
    # fresh process does not compile the source again (only for this Python's bytecode)
    _code: dict[str, bytes] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def plugin_metrics(self) -> tuple[MetricInfo, ...]:
        """The metrics plugins declared (``stepwall_metrics``), after the built-in ones."""
        return tuple(m for m in self.metric_info if m.plugin)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its functions (made again from the source on first use)."""
        state = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        state["_fn"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def _compiled(self, key: str) -> Any:
        if key in self._code:
            return marshal.loads(self._code[key])
        source = self.scalar_source if key == "math" else self.source
        code = compile(source, f"<stepwall model ({key})>", "exec")
        self._code[key] = marshal.dumps(code)
        return code

    def function(self, scalar: bool = False) -> Any:
        """The compiled function: numpy (vectorized) or, for one point, plain Python."""
        key = "math" if scalar else "numpy"
        if key not in self._fn:
            code = self._compiled(key)
            imports = self.scalar_imports if scalar else self.imports
            namespace = function_globals(code, key, imports)
            if namespace is None:  # the printer checked every name: an entry of other code
                raise RuntimeError(f"compiled model ({key}) reads a name it cannot resolve")
            exec(code, namespace)
            self._fn[key] = namespace[FUNCTION]
        return self._fn[key]

    def evaluate(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every output at ``values`` (by path; numpy arrays broadcast together). One point
        with a plain-Python form compiled runs without numpy."""
        args = [values[p] if p in values else self.constants[p] for p in self.parameters]
        if self.scalar_source and one_point(args):
            return self._results(self._scalar(args), scalar=True)
        import numpy as np  # numpy on first use (a cached eval runs without it)

        with np.errstate(all="ignore"):  # numpy's float64 for every argument: x/0 is inf
            out = self.function()(*(np.asarray(a, dtype=np.float64) for a in args))
        return self._results(out, scalar=False)

    def _scalar(self, args: list[Any]) -> Any:
        try:
            return self.function(scalar=True)(*(float(a) for a in args))
        except (ZeroDivisionError, OverflowError, ValueError):  # as numpy would: inf or nan
            import numpy as np  # numpy on first use (a cached eval runs without it)

            with np.errstate(all="ignore"):
                return [
                    v.item() if hasattr(v, "item") else v
                    for v in self.function()(*(np.float64(a) for a in args))
                ]

    def _results(self, out: Any, scalar: bool) -> dict[str, Any]:
        result: dict[str, Any] = dict(zip(self.metrics, out[: len(self.metrics)], strict=True))
        n, k = len(self.metrics), len(self.terms)
        result["terms"] = dict(zip((t.name for t in self.terms), out[n : n + k], strict=True))
        w = 2 * len(self.ops)
        work = out[n + k : n + k + w]
        result["ops"] = {
            op.name: {"bytes": work[2 * i], "flops": work[2 * i + 1]}
            for i, op in enumerate(self.ops)
        }
        holds = out[n + k + w :]
        if scalar:
            result["constraints"] = {
                c.name: bool(h) for c, h in zip(self.constraints, holds, strict=True)
            }
            result["feasible"] = all(result["constraints"].values()) and all(
                math.isfinite(float(result[m]))
                for m in self.metrics
                if m not in self.optional_metrics
            )
            return result
        import numpy as np  # numpy on first use (a cached eval runs without it)

        result["constraints"] = {
            c.name: np.asarray(h, dtype=bool) for c, h in zip(self.constraints, holds, strict=True)
        }
        checks = [*result["constraints"].values()] + [
            np.isfinite(np.asarray(result[m], dtype=float))
            for m in self.metrics
            if m not in self.optional_metrics
        ]
        result["feasible"] = _conjunction(checks)
        return result

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": list(self.parameters),
            "constants": dict(self.constants),
            "source": self.source,
            "terms": [attrs.astuple(t) for t in self.terms],
            "ops": [attrs.astuple(o) for o in self.ops],
            "constraints": [[c.name, c.plugin, c.message, list(c.keys)] for c in self.constraints],
            "structural_keys": sorted(self.structural_keys),
            "metric_info": [attrs.astuple(m) for m in self.metric_info],
            "imports": [list(i) for i in self.imports],
            "scalar_source": self.scalar_source,
            "scalar_imports": [list(i) for i in self.scalar_imports],
            "code": self._code_json(),
        }

    def _code_json(self) -> dict[str, str]:
        out = {"tag": sys.implementation.cache_tag or ""}
        for key in ("numpy", "math") if self.scalar_source else ("numpy",):
            self._compiled(key)
            out[key] = base64.b64encode(self._code[key]).decode()
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CompiledModel:
        return cls(
            tuple(doc["parameters"]),
            dict(doc["constants"]),
            doc["source"],
            tuple(TermInfo(*t) for t in doc["terms"]),
            tuple(OpInfo(*o) for o in doc["ops"]),
            tuple(ConstraintInfo(n, p, m, tuple(k)) for n, p, m, k in doc["constraints"]),
            frozenset(doc["structural_keys"]),
            tuple(
                MetricInfo(*m[:-2], *[tuple(m[-2]) if m[-2] else None, m[-1]])
                for m in doc["metric_info"]
            ),
            tuple((m, n) for m, n in doc["imports"]),
            doc["scalar_source"],
            tuple((m, n) for m, n in doc["scalar_imports"]),
            code=(
                {k: base64.b64decode(v) for k, v in doc["code"].items() if k != "tag"}
                if doc.get("code", {}).get("tag") == sys.implementation.cache_tag
                else {}
            ),
        )


def one_point(values: Iterable[Any]) -> bool:
    """Whether ``values`` are single numbers (what the plain-Python form takes), not arrays
    or lists of them."""
    values = list(values)
    if {type(v) for v in values} <= {float, int}:  # the common case, quickly
        return True
    return all(
        isinstance(v, float | int) or getattr(v, "ndim", None) == 0 or isinstance(v, numbers.Real)
        for v in values
    )


_ALLOCATOR: list[bool] = []  # whether keep_freed_memory ran in this process
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> None:
    """Have glibc keep the memory numpy frees, for the next vectorized call (once per
    process; a no-op elsewhere): a process-wide setting, so only a program that evaluates
    many points calls it (the CLI, a search's workers), never the library on its own. Each
    call of a compiled model allocates a few hundred arrays of the chunk's size and frees
    them; by default glibc serves blocks that large with fresh mappings and returns freed
    memory at the heap's top to the kernel, so every call faults its memory in again, page
    by page: about 70% of a 65,536-point call's time (benchmarks/bench_search.py). Blocks
    up to 32 MiB then come from the heap, and up to 128 MiB of free heap is kept."""
    if _ALLOCATOR:
        return
    _ALLOCATOR.append(True)
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: its allocator's own policy stays
        return
    mallopt(M_MMAP_THRESHOLD, 32 << 20)
    mallopt(M_TRIM_THRESHOLD, 128 << 20)


def _conjunction(checks: Sequence[Any]) -> Any:
    """The elementwise ``and`` of boolean arrays broadcast together: what ``True & a & b …``
    gives, with the 0-d ones folded in Python first, then the arrays of each shape together
    (on a grid, a check that depends on one axis is a row or a column), then those into one
    array in place (numpy's ``&`` of an array with a 0-d one is many times slower than of
    two arrays)."""
    import numpy as np  # numpy on first use (a cached eval runs without it)

    shape = np.broadcast_shapes(*(h.shape for h in checks))
    groups: dict[tuple[int, ...], Any] = {}
    for h in checks:
        if h.ndim:
            if h.shape in groups:
                groups[h.shape] &= h
            else:
                groups[h.shape] = h.copy()
    feasible = np.full(shape, all(bool(h) for h in checks if not h.ndim))
    for h in groups.values():
        feasible &= h
    return feasible if feasible.ndim else feasible[()]


def cache_dir() -> Path | None:
    """Where compiled models are kept, or None when the cache is off."""
    if env_flag("STEPWALL_NO_CACHE"):
        return None
    explicit = os.environ.get("STEPWALL_CACHE_DIR")
    if explicit:
        if Path(explicit).exists() and not Path(explicit).is_dir():
            raise SpecError("STEPWALL_CACHE_DIR", "", f"{explicit} is not a folder",
                            "a folder for compiled models, or STEPWALL_NO_CACHE=1")  # fmt: skip
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stepwall"


class ModelCache:
    """Compiled models on disk, one file per shape, each listing the structural values it
    was built for. A broken or unreadable entry is a miss, never an error."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    def _file(self, shape: str) -> Path | None:
        return cache_file("model", shape) if self.enabled else None

    def get(self, shape: str, reads: Mapping[str, Any]) -> CompiledModel | None:
        """The model compiled for ``shape`` (the text of `shape_text`) and these structural
        values, if any process stored one."""
        path = self._file(shape)
        if path is None or not path.is_file():
            return None
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            for entry in entries:
                if (
                    entry["format"] == FORMAT
                    and entry["shape"] == shape
                    and all(reads.get(k) == v for k, v in entry["reads"].items())
                ):
                    return CompiledModel.from_json(entry["model"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return None

    def put(self, shape: str, reads: Mapping[str, Any], model: CompiledModel) -> None:
        path = self._file(shape)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                entries = json.loads(path.read_text(encoding="utf-8"))
                entries = [e for e in entries if e.get("shape") == shape]
            except (OSError, ValueError, AttributeError):
                entries = []
            entries = [e for e in entries if e.get("reads") != dict(reads)][-15:]
            entries.append(
                {"format": FORMAT, "shape": shape, "reads": dict(reads), "model": model.to_json()}
            )
            atomic_write(path, json_text(entries))
        except OSError:
            return  # a cache that cannot be written is only slower


def cache_file(prefix: str, key: str) -> Path | None:
    """The cache file for ``key`` (a short name from its checksums; the entry keeps the
    whole key to compare), or None when the cache is off."""
    root = cache_dir()
    if root is None:
        return None
    raw = key.encode()
    return root / f"{prefix}-{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"


def shape_text(parts: Sequence[Any]) -> str:
    """A model's shape (kinds, choices, flags, plugins and their code) as stable text."""
    return json.dumps(parts, sort_keys=True, default=str)


# ---------------------------------------------------------------- scenarios


def group_times(numeric: CompiledModel, ev: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for t in numeric.terms:
        out[t.group] += float(ev["terms"][t.name])
    return dict(out)


def cache_key(scenario: Scenario, registry: Registry) -> tuple[str, dict[str, Any]] | None:
    """A scenario's entry in the `ModelCache`: its shape (kinds, choices, flags, plugins and
    their code) and the values of its numeric keys; None when a plugin's code cannot be
    identified (then nothing is cached)."""
    code = code_identity(registry)
    if code is None:
        return None
    shape = shape_text([repr(shape_key(scenario)), *code])
    return shape, {p: _jsonable(value_of(scenario, p)) for p in scenario.numeric_paths()}


def _known(x: Any) -> float | None:
    """A metric's value, or None where the specs do not give it (NaN)."""
    v = float(x)
    return v if math.isfinite(v) else None


def _all(x: Any) -> bool:
    return bool(x.all()) if hasattr(x, "all") else bool(x)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def code_identity(registry: Registry | None = None) -> list[Any] | None:
    """What a compiled model depends on besides the spec: the Python version, the size and
    modification time of stepwall's sources (core and built-in plugins), and each installed
    plugin (unless autoload is off) with its version and the sources beside its module. With
    a ``registry``, its other plugins too. None when a plugin is not a module with a file (a
    class or instance made in a test or a notebook): its code cannot be identified, so its
    models are not cached. Needs no plugin imported."""

    here = Path(__file__).resolve().parents[1]  # the stepwall package, every layer
    builtin = importlib.util.find_spec("stepwall.plugins")
    folders = {here} | ({Path(builtin.origin).parent} if builtin and builtin.origin else set())
    out: list[Any] = [sys.implementation.cache_tag, sys.version, os.environ.get(DISABLED_ENV, "")]
    if not env_flag(DISABLE_ENV):
        for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)):
            out.append((ep.name, ep.value, ep.dist.version if ep.dist else ""))
            try:
                spec = importlib.util.find_spec(ep.value.split(":")[0])
            except (ImportError, ValueError):
                return None
            if spec is None or not spec.origin:
                return None
            folders.add(Path(spec.origin).resolve().parent)
    if registry is not None:
        for name, plugin in sorted(registry.plugins(), key=lambda np_: np_[0]):
            f = getattr(plugin, "__file__", None)
            if not isinstance(plugin, types.ModuleType) or not f:
                return None
            out.append(name)
            folders.add(Path(f).resolve().parent)
    out += sorted({entry for folder in folders for entry in _sources(folder)})
    return out


def _sources(folder: Path) -> list[tuple[str, int, int]]:
    """(path, size, mtime) of the .py files in ``folder`` and its package subfolders."""
    out = []
    with os.scandir(folder) as entries:
        for e in entries:
            if e.name.endswith(".py") and e.is_file():
                st = e.stat()
                out.append((e.path, st.st_size, st.st_mtime_ns))
            elif (
                e.is_dir()
                and not e.name.startswith((".", "__"))
                and os.path.exists(os.path.join(e.path, "__init__.py"))
            ):
                out += _sources(Path(e.path))
    return out


def shape_key(scenario: Scenario) -> tuple[Any, ...]:
    """What fixes a model's shape besides the structural keys: the kinds, every field
    that is not a number (choices, flags), and which optional numbers are absent (a model
    without ``hardware.board_power`` has no energy metrics, so no such parameter)."""
    parts: list[Any] = [tuple(sorted(scenario.kinds.items()))]
    for name in sorted(scenario.sections):
        obj = scenario.sections[name]
        parts += [
            (name, f.name, repr(getattr(obj, f.name)))
            for f in attrs.fields(type(obj))
            if "dim" not in f.metadata
        ]
        parts += [
            (name, f.name, "absent")
            for f in attrs.fields(type(obj))
            if "dim" in f.metadata and getattr(obj, f.name) is None
        ]
    return tuple(parts)


def value_of(scenario: Scenario, path: str) -> Any:
    """The value of a spec path as the section holds it (a number, or None)."""
    section, _, name = path.rpartition(".")
    return getattr(scenario.sections[section], name, None) if section in scenario.sections else None


def scenario_info(scenario: Scenario) -> dict[str, Any]:
    """What an eval summary says about the scenario itself: name, overrides, and each
    cited parameter with its value, unit, file and source (plain data, kept by
    `stepwall.numeric.point_cache`)."""
    by_path = {s.name: s for s in scenario.values}
    return {
        "scenario": scenario.name,
        "overrides": list(scenario.overrides),
        "parameters": [
            {
                "path": path,
                "value": float(scenario.values[by_path[path]]),
                "unit": "" if by_path[path].dim.dimensionless else str(by_path[path].dim),
                "file": shown_path(scenario.provenance.get(path, "")),
                "source": text,
            }
            for path, text in sorted(scenario.sources.items())
        ],
    }


def summary_of(
    info: Mapping[str, Any],
    numeric: CompiledModel,
    violations: Sequence[Mapping[str, Any]],
    ev: Mapping[str, Any],
) -> dict[str, Any]:
    """`summary` from `scenario_info` and an evaluation: the metrics where their
    declarations place them (`MetricInfo`), those without a key as ``plugin_metrics``
    (absent where there are none), then the objects of dotted keys."""
    plain: dict[str, Any] = {}
    objects: dict[str, dict[str, Any]] = {}
    listed = []
    for m in sorted(numeric.metric_info, key=lambda m: m.place):
        x = ev[m.name]
        if not m.key:
            listed.append({"name": m.name, "plugin": m.plugin, "label": m.label,
                           "unit": m.unit, "value": _known(x)})  # fmt: skip
            continue
        obj, _, key = m.key.rpartition(".")
        at = objects.setdefault(obj, {}) if obj else plain
        at[key] = _known(x) if m.optional else round(float(x)) if m.whole else float(x)
        if m.bounds:
            obj, _, key = m.bounds[0].rpartition(".")
            within = float(ev[m.bounds[1]]) <= float(x)
            (objects.setdefault(obj, {}) if obj else plain)[key] = within
    return {
        "scenario": info["scenario"],
        "overrides": list(info["overrides"]),
        "feasible": not violations and _all(ev["feasible"]),
        "violations": list(violations),
        **plain,
        **({"plugin_metrics": listed} if listed else {}),
        **objects,
        "groups": group_times(numeric, ev),
        "parameters": list(info["parameters"]),
        "ops": [
            {
                "name": op.name,
                "group": op.group,
                "plugin": op.plugin,
                "bytes_per_gpu": float(ev["ops"][op.name]["bytes"]),
                "flops_per_gpu": float(ev["ops"][op.name]["flops"]),
            }
            for op in numeric.ops
        ],
        "terms": [
            {
                "name": t.name,
                "plugin": t.plugin,
                "group": t.group,
                "overlap": t.overlap,
                "seconds": float(ev["terms"][t.name]),
                "why": t.why,
            }
            for t in numeric.terms
        ],
    }
