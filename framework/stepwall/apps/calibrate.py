"""Calibration: fit a hardware or cluster spec's fields to tables of microbenchmarks.

``stepwall calibrate SPEC --data FILE.csv -o OUT.toml`` reads measured times of primitives
(`stepwall.core.primitives`: a GEMM, a copy, an all-reduce, …), prices each row with the law the
model itself uses for that work, and fits the spec fields those laws read (efficiencies, n½,
floors, latencies, bandwidths) by bounded least squares on relative residuals
log(model/measured). It reports each field with a 95% confidence interval and flags, and the
residuals per primitive group, and rewrites the spec with tomlkit (comments and layout kept):
each fitted value, and a ``sources`` entry naming the data (SHA-256), the points and the
residual. ``--check`` re-fits the shipped calibrations (``specs/calibration/*.toml``) and
fails when a committed value is more than 0.1% off its fit.

The law of each (primitive, text values) group is built once and lambdified over the
group's rows; the fit only evaluates those functions.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt
import sympy as sp
import tomlkit
from tomlkit.items import Item

from stepwall.apps.report.plots import _COLORS, _figure, _svg
from stepwall.core import symbols
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import (
    DimensionError,
    PluginError,
    SpecError,
    UnitError,
    did_you_mean,
    first_repeat,
    shown_path,
)
from stepwall.core.primitives import Primitive
from stepwall.core.scenario import Scenario
from stepwall.core.symbols import constants_in, is_constant, parameter
from stepwall.core.terminal import visible
from stepwall.core.units import (
    BANDWIDTH,
    COMPUTE_RATE,
    INFORMATION,
    TIME,
    Dim,
    describe,
    format_quantity,
    parse_quantity,
    parse_unit,
    split_quantity,
)
from stepwall.io import output
from stepwall.io.output import write_file
from stepwall.numeric.printer import compile_function
from stepwall.spec.grammar import parse_range
from stepwall.spec.loader import CATALOG_DIRS, catalog_names, find_spec_file, load_flat, read_toml
from stepwall.spec.validation import REQUIRED_SECTIONS, _sections, _structure_all, entry_section

if TYPE_CHECKING:
    from stepwall.spec.validation import Kinds

Array = npt.NDArray[np.float64]

DRIFT = 1e-3  # --check: a committed value more than 0.1% off its fit has drifted
UPDATES = 8  # --check --update: writes and refits until the fit agrees with what it wrote
SECTIONS = ("hardware", "cluster")  # entries whose fields primitives fit
MANIFEST_KEYS = ("spec", "data", "fit", "description", "source", "frontier", "bound",
                 "ci95", "pi95")  # fmt: skip
# fields that scale a law's time (time ∝ value or 1/value): their prediction interval also
# takes the scatter of the rows they price; n½ and S½ shape the ramp and keep their CI
SCALE_SUFFIXES = ("efficiency", "floor", "bandwidth", "latency")
# the scale of a field whose spec value is 0 (a floor), by dimension: the fit's unit step
ZERO_SCALE = {TIME: 1e-6, BANDWIDTH: 1e11, COMPUTE_RATE: 1e14, INFORMATION: 1e6}
ZERO_UNIT = {TIME: "us", BANDWIDTH: "GB/s", COMPUTE_RATE: "TFLOP/s", INFORMATION: "B"}
SINGULAR = 1e-6  # smallest/largest singular value of the column-normalized Jacobian
AT_BOUND = 1e-6  # a fitted value this close to a bound (in units of its scale) is on it
TINY = 1e-300  # a law's time is clipped here before the log
MAX_ROWS = 100_000  # rows in one data file: the shipped tables have ~160; a fit is O(rows)
MAX_DATA_BYTES = 64 << 20  # bytes of one data file (a device or endless pipe stops here)


# ---------------------------------------------------------------- the spec entry


@attrs.frozen
class Entry:
    """A hardware or cluster spec, validated, as a scenario holding only its sections."""

    path: Path
    section: str  # "hardware" or "cluster"
    scenario: Scenario
    # fields the spec states as ranges (path -> (low, high)): what no table measures, priced at
    # their nominal value and never fitted
    ranges: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)

    def local(self, path: str) -> str:
        """A field's key in the file: ``hardware.bf16.efficiency`` -> ``bf16.efficiency``."""
        return path.removeprefix(self.section + ".")


def find_entry(ref: str, manifest: Path | None = None) -> Path:
    """A hardware or cluster catalog name (``b200``, ``hgx-b200-ib``) or a file path (relative
    to the ``manifest`` that names it, else the working folder) -> the file."""
    base = manifest.parent if manifest is not None else None
    root = base or Path.cwd()
    if "/" in ref or ref.endswith(".toml") or root.joinpath(ref).exists():
        return find_spec_file(ref, "hardware", where=str(manifest or ref),
                              key="spec" if manifest else "", base=base)  # fmt: skip
    for folder in ("hardware", "clusters"):
        candidate = catalog_root() / folder / f"{ref}.toml"
        if candidate.is_file():
            return candidate
    names = catalog_names("hardware") + catalog_names("clusters")
    raise SpecError(str(manifest) if manifest else "calibrate", "spec" if manifest else "SPEC",
                    f"no hardware or cluster entry named {ref!r}{did_you_mean(ref, names)}",
                    f"a file path or one of: {', '.join(names)}")  # fmt: skip


def load_entry(ref: str | Path, kinds: Kinds, *, manifest: Path | None = None,
               section: str | None = None) -> Entry:  # fmt: skip
    """Read and validate a hardware or cluster entry (following its ``from`` chain)."""
    path = (ref if isinstance(ref, Path) else find_entry(ref, manifest)).resolve()
    section = section or entry_section(path, kinds, "hardware")
    if section not in SECTIONS:
        what = f"a {section} entry" if section else "a scenario"
        raise SpecError(str(path), "", f"is {what}; calibrate fits the fields of a hardware or "
                        "cluster entry", "a spec such as b200 or hgx-b200-ib")  # fmt: skip
    flat = load_flat(path, CATALOG_DIRS[section], ())
    name = str(flat.pop("name", (path.stem, ""))[0])
    flat.pop("description", None)
    prefixed = {f"{section}.{k}": v for k, v in flat.items()}
    subsections = [s for s in _sections(kinds) if s == section or s.startswith(section + ".")]
    required = tuple(s for s in REQUIRED_SECTIONS if s in subsections)
    ranges: dict[str, tuple[float, float]] = {}
    structured, values, used, warnings = _structure_all(
        prefixed, subsections, kinds, str(path), {}, required, ranges
    )
    scenario = Scenario(name, str(path), structured, used, values,
                        {k: v[1] for k, v in prefixed.items()},
                        warnings=tuple(dict.fromkeys(warnings)))  # fmt: skip
    return Entry(path, section, scenario, ranges)


def fields_in_order(entry: Entry) -> list[str]:
    """The entry's numeric fields in declaration order (sections as validated, then each
    kind's fields): the order fits and reports list them in."""
    out = []
    for name, obj in entry.scenario.sections.items():
        for f in attrs.fields(type(obj)):
            path = f"{name}.{f.name}"
            if "dim" in f.metadata and entry.scenario.parameter(path) is not None:
                out.append(path)
    return out


# ---------------------------------------------------------------- measurement tables

_HEADER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[([^\[\]]*)\])?\s*")
REQUIRED_COLUMNS = ("primitive", "time", "source")


@attrs.frozen
class Row:
    """One measurement: sizes in SI, text values, the measured time in seconds."""

    file: str
    line: int
    primitive: str
    numbers: Mapping[str, float]
    texts: Mapping[str, str]
    time: float
    source: str


@attrs.frozen
class DataFile:
    """A table of measurements and the SHA-256 of its bytes."""

    path: Path
    sha256: str
    rows: tuple[Row, ...]

    @property
    def name(self) -> str:
        return self.path.name


def _columns(header: list[str], where: str) -> dict[str, tuple[int, str | None]]:
    """Column name -> (index, unit text or None when it has no brackets)."""
    out: dict[str, tuple[int, str | None]] = {}
    for i, raw in enumerate(header):
        m = _HEADER.fullmatch(raw)
        if m is None:
            continue  # a column no primitive reads (notes, a URL, …)
        name = m.group(1)
        if name in out:
            raise SpecError(
                where, "header", f"column {name!r} appears twice", "one column per name"
            )
        out[name] = (i, None if m.group(2) is None else m.group(2).strip())
    return out


def _unit_factor(columns: Mapping[str, tuple[int, str | None]], name: str, dim: Dim,
                 where: str) -> float:  # fmt: skip
    """The SI factor of a column's unit, checked against the dimension it must have."""
    _, unit = columns[name]
    header = f"{name} [{unit}]" if unit is not None else name
    if unit is None:
        if dim.dimensionless:
            return 1.0
        raise SpecError(where, f"column {header}", "has no unit",
                        f"{name} [UNIT] with {describe(dim)}")  # fmt: skip
    try:
        factor, found = parse_unit(unit)
    except UnitError as e:
        raise SpecError(where, f"column {header}", str(e), describe(dim)) from None
    if found != dim:
        raise SpecError(where, f"column {header}", f"unit {unit!r} is {found}, not {dim}",
                        describe(dim))  # fmt: skip
    return factor


def _number(cell: str, where: str, key: str, what: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        problem = f"{cell!r} is not a number" if cell.strip() else "the cell is empty"
        raise SpecError(where, key, problem, what) from None
    if not math.isfinite(value):
        raise SpecError(where, key, f"{cell.strip()} is not a finite number", what)
    if value <= 0:
        raise SpecError(where, key, f"{cell.strip()} is not positive", what)
    return value


def read_data(path: Path, primitives: Mapping[str, Primitive], section: str) -> DataFile:
    """Read and check a CSV of measurements of primitives of ``section``'s fields.

    Stays whole: the checks of one file in reading order (bytes, text, header, rows, then each
    row's cells), each a one-line error naming where in the file it is.
    """
    where = str(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_DATA_BYTES + 1)
    except IsADirectoryError:
        raise SpecError(where, "", "is a folder", "a CSV file") from None
    except FileNotFoundError:
        raise SpecError(where, "", "not found", "a CSV file") from None
    except OSError as e:
        raise SpecError(where, "", f"cannot read file: {e.strerror}") from None
    if len(raw) > MAX_DATA_BYTES:
        raise SpecError(where, "", f"is larger than {MAX_DATA_BYTES >> 20} MiB",
                        f"a CSV table of at most {MAX_ROWS:,} measurements")  # fmt: skip
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(where, "", f"is not UTF-8 (byte {e.start})", "a CSV file") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next((r for r in reader if any(c.strip() for c in r)), None)
    if header is None:
        raise SpecError(where, "", "is empty", "a CSV file with a header and rows")
    columns = _columns(header, where)
    for name in REQUIRED_COLUMNS:
        if name not in columns:
            found = ", ".join(c.strip() for c in header)
            raise SpecError(where, "header", f"no {name!r} column (columns: {found})",
                            "primitive, its size columns, time [UNIT], source")  # fmt: skip
    cells = []
    for r in reader:
        if any(c.strip() for c in r):
            cells.append((reader.line_num, r))
            if len(cells) > MAX_ROWS:
                raise SpecError(where, f"line {reader.line_num}", f"more than {MAX_ROWS:,} rows",
                                f"at most {MAX_ROWS:,} measurements in one file")  # fmt: skip
    mine = sorted(n for n, p in primitives.items() if _applies(p, section))
    factors: dict[str, float] = {"time": _unit_factor(columns, "time", TIME, where)}
    rows = []
    for line, r in cells:

        def cell(name: str, r: list[str] = r) -> str:
            i = columns[name][0]
            return r[i].strip() if i < len(r) else ""

        at = f"line {line}"
        if len(r) > len(header):
            raise SpecError(where, at, f"{len(r)} fields but the header has {len(header)}",
                            "one field per column (quote a field that holds a comma)")  # fmt: skip
        name = cell("primitive")
        prim = primitives.get(name)
        if prim is None or not _applies(prim, section):
            known = mine if prim is None else []
            problem = (f"unknown primitive {name!r}{did_you_mean(name, sorted(primitives))}"
                       if prim is None else
                       f"primitive {name!r} fits {prim.section} fields, not {section}")  # fmt: skip
            listed = ", ".join(known or mine) or "none"
            raise SpecError(where, f"{at}, primitive", problem, f"a {section} primitive: {listed}")
        numbers = {}
        for col, dim in prim.numbers.items():
            if col not in columns:
                raise SpecError(where, f"{at}, {col}", f"no {col!r} column for primitive {name}",
                                _needs(prim))  # fmt: skip
            if col not in factors:
                factors[col] = _unit_factor(columns, col, dim, where)
            value = _number(cell(col), where, f"{at}, {col}", f"a size > 0; {_needs(prim)}")
            if dim.dimensionless and not value.is_integer():  # a count: tokens, GPUs, heads
                raise SpecError(where, f"{at}, {col}", f"{cell(col)} is not a whole number",
                                f"a count; {_needs(prim)}")  # fmt: skip
            numbers[col] = value * factors[col]
        texts = {}
        for col, allowed in prim.texts.items():
            if col not in columns and col not in prim.optional:
                raise SpecError(where, f"{at}, {col}", f"no {col!r} column for primitive {name}",
                                _needs(prim))  # fmt: skip
            word = cell(col) if col in columns else prim.optional[col]
            if word not in allowed:
                raise SpecError(where, f"{at}, {col}",
                                f"{word!r} is not allowed{did_you_mean(word, allowed)}",
                                f"one of: {', '.join(allowed)}")  # fmt: skip
            texts[col] = word
        t = _number(cell("time"), where, f"{at}, time", "a measured time > 0")
        rows.append(Row(path.name, line, name, numbers, texts, t * factors["time"], cell("source")))
    if not rows:
        raise SpecError(where, "", "has a header but no rows", "measurements, one per row")
    return DataFile(path, hashlib.sha256(raw).hexdigest(), tuple(rows))


def _applies(prim: Primitive, section: str) -> bool:
    return prim.section == section or prim.section.startswith(section + ".")


def _needs(prim: Primitive) -> str:
    """The columns a primitive's rows need, as a header reads."""
    cols = [c if d.dimensionless else f"{c} [{d}]" for c, d in prim.numbers.items()]
    cols += [c if c not in prim.optional else f"{c} (optional)" for c in prim.texts]
    return f"{prim.name} rows need: {', '.join([*cols, 'time [s]'])}"


# ---------------------------------------------------------------- laws, compiled per group


def data_symbols(prim: Primitive) -> dict[str, Any]:
    """One Parameter per numeric column (``data.m``), with the column's dimension."""

    return {col: parameter(f"data.{col}", d) for col, d in prim.numbers.items()}


def law_of(prim: Primitive, scenario: Scenario, texts: Mapping[str, str]) -> Any:
    """The time of one call of ``prim`` as a sympy expression, its dimension checked (an
    optional text column not given takes its default)."""

    try:
        expr = prim.law(scenario, data_symbols(prim), {**prim.optional, **texts})
        found = symbols.dim(expr)
    except SpecError:
        raise
    except DimensionError as e:
        raise PluginError(f"plugin {prim.plugin}: primitive {prim.name}: {e}") from None
    except Exception as e:
        raise PluginError(f"plugin {prim.plugin}: primitive {prim.name}: the law raised "
                          f"{type(e).__name__}: {e}") from None  # fmt: skip
    if found != TIME:
        raise PluginError(f"plugin {prim.plugin}: primitive {prim.name}: the law is {found}, "
                          "not a time")  # fmt: skip
    return expr


@attrs.define
class Group:
    """The rows of one primitive with one combination of text values, and their law
    lambdified once over the rows (numpy, vectorized)."""

    primitive: Primitive
    texts: tuple[tuple[str, str], ...]
    rows: tuple[Row, ...]
    expr: Any
    params: tuple[str, ...]  # the spec paths the law reads
    data: dict[str, Array]
    measured: Array
    _fn: Callable[..., Any]
    _args: tuple[tuple[bool, str], ...]  # (a data column?, its name or path) per argument

    @property
    def label(self) -> str:
        optional = self.primitive.optional
        return " ".join(
            [self.primitive.name, *(f"{k}={v}" for k, v in self.texts if optional.get(k) != v)]
        )

    def times(self, values: Mapping[str, float], data: Mapping[str, Array] | None = None
              ) -> Array:  # fmt: skip
        """The law's time per row at ``values`` (spec path -> SI value); ``data`` replaces
        the rows' sizes (for a plot's curve)."""
        cols = self.data if data is None else data
        n = len(next(iter(cols.values()))) if cols else len(self.measured)
        args = [np.broadcast_to(np.asarray(cols[name] if is_col else values[name], float), (n,))
                for is_col, name in self._args]  # fmt: skip
        out = np.broadcast_to(np.asarray(self._fn(*args), dtype=float), (n,))
        return np.array(out, dtype=float)


def make_group(prim: Primitive, texts: tuple[tuple[str, str], ...], rows: Sequence[Row],
               scenario: Scenario) -> Group:  # fmt: skip
    """Build the group's law and lambdify it once."""

    expr = law_of(prim, scenario, dict(texts))
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    args: list[tuple[bool, str]] = []
    for s in symbols:
        if s.name.startswith("data.") and s.name[5:] in prim.numbers:
            args.append((True, s.name[5:]))
        elif is_constant(s) or scenario.parameter(s.name) is not None:
            args.append((False, s.name))
        else:
            raise PluginError(f"plugin {prim.plugin}: primitive {prim.name}: the law reads "
                              f"{s.name}, which the spec does not give")  # fmt: skip
    fn = compile_function(symbols, expr, "numpy")
    data = {col: np.array([r.numbers[col] for r in rows]) for col in prim.numbers}
    params = tuple(name for is_col, name in args if not is_col and not name.startswith("const."))
    return Group(prim, texts, tuple(rows), expr, params, data,
                 np.array([r.time for r in rows]), fn, tuple(args))  # fmt: skip


@attrs.frozen
class Problem:
    """Everything a fit needs: the entry, the data, the groups and the candidate fields."""

    entry: Entry
    files: tuple[DataFile, ...]
    groups: tuple[Group, ...]
    candidates: tuple[str, ...]  # fields the data's laws depend on, in declaration order
    values: Mapping[str, float]  # every spec path and constant -> SI value (the start)

    @property
    def measured(self) -> Array:
        return np.concatenate([g.measured for g in self.groups])

    @property
    def rows(self) -> list[Row]:
        return [r for g in self.groups for r in g.rows]

    def model(self, values: Mapping[str, float]) -> Array:
        """The law's time of every row (in group order) at ``values``."""
        return np.concatenate([g.times(values) for g in self.groups])


def build_problem(entry: Entry, files: Sequence[DataFile], primitives: Mapping[str, Primitive]
                  ) -> Problem:  # fmt: skip
    """Group the rows, build each group's law once, and check that the spec's own values
    price every row (a finite time > 0)."""

    buckets: dict[tuple[str, tuple[tuple[str, str], ...]], list[Row]] = {}
    for f in files:
        for r in f.rows:
            check = primitives[r.primitive].check
            wrong = check(entry.scenario, r.numbers) if check is not None else None
            if wrong is not None:
                raise SpecError(str(f.path), f"line {r.line}, {wrong[0]}", wrong[1], wrong[2])
            key = (r.primitive, tuple((k, r.texts[k]) for k in primitives[r.primitive].texts))
            buckets.setdefault(key, []).append(r)
    groups = tuple(make_group(primitives[p], texts, rows, entry.scenario)
                   for (p, texts), rows in sorted(buckets.items()))  # fmt: skip
    values = {s.name: v for s, v in entry.scenario.values.items()}
    values.update({s.name: v for s, v in constants_in(g.expr for g in groups).items()})
    paths = {f.name: str(f.path) for f in files}  # a row names its file; errors, its path
    used = set()
    for g in groups:
        declared = {f"{g.primitive.section}.{f}" for f in g.primitive.fields}
        used |= declared & set(g.params)
        start = g.times(values)
        bad = ~(np.isfinite(start) & (start > 0))
        if bad.any():
            r = g.rows[int(np.argmax(bad))]
            raise SpecError(paths.get(r.file, r.file), f"line {r.line}", f"the {g.label} law gives "
                            f"{start[bad][0]:g} s for this row at the spec's values",
                            "sizes the law can price (e.g. more than one GPU)")  # fmt: skip
    candidates = tuple(p for p in fields_in_order(entry) if p in used)
    return Problem(entry, tuple(files), groups, candidates, values)


# ---------------------------------------------------------------- the fit


@attrs.frozen
class FieldFit:
    """One field: its start and fitted value (SI), 95% interval, flags and the points that
    inform it with their residual (percent)."""

    path: str
    dim: Dim
    start: float
    value: float
    low: float
    high: float
    fitted: bool  # False: not identifiable, kept at its spec value
    flags: tuple[str, ...]
    points: int
    files: tuple[str, ...]
    rms: float
    max: float
    # a new measurement's 95% half-width in ln(time) about the law: t₀.₉₇₅·s over the n points
    # that inform the field, s² = Σ ln(model/measured)² / (n − fields they inform)
    spread: float = 0.0
    bounds: tuple[float, float] = (0.0, math.inf)  # the values the field may take


@attrs.frozen
class GroupFit:
    label: str
    primitive: str
    texts: tuple[tuple[str, str], ...]
    points: int
    rms: float
    max: float


@attrs.frozen
class Fit:
    problem: Problem
    fields: tuple[FieldFit, ...]
    groups: tuple[GroupFit, ...]
    predicted: Array
    values: Mapping[str, float]  # every path -> SI value after the fit
    points: int
    rms: float
    max: float
    converged: bool
    message: str

    @property
    def written(self) -> tuple[FieldFit, ...]:
        return tuple(f for f in self.fields if f.fitted)


def resolve_fields(problem: Problem, requested: Iterable[str], where: str = "--fit"
                   ) -> list[str]:  # fmt: skip
    """``--fit`` names -> candidate paths. A field is named by its path
    (``cluster.scale_up.hop_latency``), its key in the entry (``scale_up.hop_latency``) or
    in its primitive's section (``hop_latency``); one the data's laws do not use is an error."""
    entry, out = problem.entry, []
    local = {entry.local(p): p for p in problem.candidates}
    alias = dict(local)
    for g in problem.groups:
        head = g.primitive.section + "."
        alias.update({p.removeprefix(head): p for p in problem.candidates if p.startswith(head)})
    for name in requested:
        path = name if name in problem.candidates else alias.get(name)
        if path is None:
            other = entry.scenario.parameter(name) or entry.scenario.parameter(
                f"{entry.section}.{name}"
            )
            why = ("is not a field the data's primitives fit" if other is not None
                   else f"is not a field of this {entry.section} entry")  # fmt: skip
            hint = did_you_mean(name, list(alias))
            raise SpecError(
                where,
                name if where == "--fit" else f"fit: {name}",
                f"{why}{hint}",
                f"one of: {', '.join(local) or 'none (no row reads a field)'}",
            )
        if path in entry.ranges:
            raise SpecError(where, name if where == "--fit" else f"fit: {name}",
                            "is stated as a range in the spec, with its reasoning; calibrate "
                            "fits single values", "a single value in the spec to fit it, or "
                            "leave it out of --fit")  # fmt: skip
        if path not in out:
            out.append(path)
    return out


def _bounds(scenario: Scenario, path: str, scale: float) -> tuple[float, float]:
    f = scenario.field(path)
    meta = f.metadata if f is not None else {}
    low = float(meta.get("minimum", 0.0))
    if not meta.get("inclusive", False):
        low += 1e-9 * scale
    high = meta.get("maximum")
    return low, (math.inf if high is None else float(high))


def _solve(problem: Problem, fields: Sequence[str], measured: Array
           ) -> tuple[Array, Array, Array, Any]:  # fmt: skip
    """Bounded least squares of log(model/measured) over ``fields``: (values, scales,
    Jacobian in scaled units, scipy's result)."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    sc = problem.entry.scenario
    start = np.array([problem.values[p] for p in fields])
    dims = [sc.parameter(p).dim for p in fields]  # type: ignore[union-attr]
    scale = np.array([abs(v) if v != 0 else ZERO_SCALE.get(d, 1.0)
                      for v, d in zip(start, dims, strict=True)])  # fmt: skip
    bounds = [_bounds(sc, p, s) for p, s in zip(fields, scale, strict=True)]
    low = np.array([b[0] for b in bounds]) / scale
    high = np.array([b[1] for b in bounds]) / scale
    z0 = np.clip(start / scale, low, high)
    values = dict(problem.values)

    def residuals(z: Array) -> Array:
        values.update(zip(fields, (z * scale).tolist(), strict=True))
        model = problem.model(values)
        return np.asarray(np.log(np.maximum(model, TINY) / measured), dtype=float)

    tol = {"ftol": 1e-12, "xtol": 1e-12, "gtol": 1e-12, "max_nfev": 200 * (len(fields) + 1)}
    res = least_squares(residuals, z0, jac="3-point", bounds=(low, high), method="trf", **tol)
    z = np.asarray(res.x, dtype=float)
    near_low = np.abs(z - low) <= AT_BOUND * np.maximum(1.0, np.abs(low))
    near_high = np.isfinite(high) & (np.abs(z - high) <= AT_BOUND * np.maximum(1.0, np.abs(high)))
    z = np.where(near_low, low, np.where(near_high, high, z))  # on a bound: exactly on it
    return z * scale, scale, np.asarray(res.jac, dtype=float), res


def _unidentifiable(jac: Array, fields: Sequence[str]) -> dict[str, str]:
    """Fields the data cannot determine: a zero column of the Jacobian (no point depends on
    the field), else, for a (near-)singular one, the field that leans most on the direction
    the data leave free."""
    norms = np.linalg.norm(jac, axis=0)
    top = float(norms.max()) if len(norms) else 0.0
    zero = [f for f, n in zip(fields, norms, strict=True) if n <= 1e-10 * top or n == 0]
    if zero:
        return {f: "no point's time depends on it" for f in zero}
    # fewer points than fields: vt's rows past the points span the null space (U stays small)
    _, s, vt = np.linalg.svd(jac / norms, full_matrices=len(jac) < len(fields))
    smallest = s[-1] if len(s) == len(fields) else 0.0
    if smallest > SINGULAR * s[0]:
        return {}
    v = np.abs(vt[-1])
    worst = int(np.argmax(v))
    partners = [fields[i] for i in np.argsort(-v) if i != worst and v[i] > 0.1]
    tail = f"confounded with {', '.join(partners)}" if partners else "the data leave it free"
    return {fields[worst]: tail}


def _enough(problem: Problem, fields: Sequence[str], n: int) -> None:
    """Fewer points than fields: an error."""
    if n < len(fields):
        names = ", ".join(problem.entry.local(f) for f in fields)
        raise SpecError(", ".join(f.name for f in problem.files), "",
                        f"too few points: {n} for {len(fields)} fields ({names})",
                        f"at least {len(fields)} points, or fewer fields with --fit")  # fmt: skip


def fit(problem: Problem, requested: Sequence[str] | None = None,
        measured: Array | None = None, where: str = "--fit") -> Fit:  # fmt: skip
    """Fit the requested fields (default: every candidate the data identify but those the
    spec states as ranges) to the measured times (default: the data's own); ``where`` names
    where the request came from.

    Stays whole: the loop that drops unidentifiable fields, the covariance and each field's
    flags all read the same solution, Jacobian and residuals.
    """
    from scipy import stats  # type: ignore[import-untyped]

    measured = problem.measured if measured is None else measured
    explicit = bool(requested)
    fields = (resolve_fields(problem, requested, where) if requested
              else [p for p in problem.candidates if p not in problem.entry.ranges])  # fmt: skip
    entry = problem.entry
    n = len(measured)
    if not fields:
        raise SpecError(str(entry.path), "", "no row's law reads a field that could be fitted",
                        "rows of primitives whose fields the spec states")  # fmt: skip
    if explicit:
        _enough(problem, fields, n)
    dropped: dict[str, str] = {}
    while True:
        x, scale, jac, res = _solve(problem, fields, measured)
        bad = _unidentifiable(jac, fields)
        if not bad:
            break
        if "no point" not in next(iter(bad.values())):  # fields some point depends on
            _enough(problem, fields, n)
        if explicit:
            path, why = next(iter(bad.items()))
            raise SpecError(where, entry.local(path) if where == "--fit" else
                            f"fit: {entry.local(path)}", f"not identifiable from the data: {why}",
                            "data that vary what it governs, or leave it out of --fit")  # fmt: skip
        dropped.update(bad)
        fields = [f for f in fields if f not in bad]
        if not fields:
            raise SpecError(", ".join(f.name for f in problem.files), "",
                            "no field is identifiable from the data",
                            "rows that vary the sizes each field governs")  # fmt: skip
    values = dict(problem.values)
    values.update(zip(fields, x.tolist(), strict=True))
    predicted = problem.model(values)
    rel = 100.0 * (predicted / measured - 1.0)
    r = np.log(predicted / measured)
    dof = n - len(fields)
    cov = np.linalg.pinv(jac.T @ jac) * (float(r @ r) / dof if dof > 0 else math.inf)
    tq = float(stats.t.ppf(0.975, dof)) if dof > 0 else math.inf
    sc = entry.scenario
    informs = np.abs(jac) > 1e-9 * np.maximum(np.abs(jac).max(axis=0), TINY)
    out: list[FieldFit] = []
    for path in problem.candidates:
        param = sc.parameter(path)
        assert param is not None
        start = problem.values[path]
        if path in dropped:
            flag = f"not identifiable: {dropped[path]}; spec value kept"
            out.append(FieldFit(path, param.dim, start, start, start, start, False, (flag,), 0,
                                (), 0.0, 0.0, 0.0, _bounds(sc, path, 0.0)))  # fmt: skip
            continue
        if path not in fields:
            continue  # not asked for with --fit
        j = fields.index(path)
        low_b, high_b = _bounds(sc, path, scale[j])
        half = tq * math.sqrt(max(float(cov[j, j]), 0.0)) * scale[j] if dof > 0 else math.nan
        value = float(x[j])
        rows = informs[:, j]
        partners = informs[rows].any(axis=0).sum()
        flags = []
        if value <= low_b:
            flags.append(f"at its lower bound {_shown(low_b, param.dim)}")
        if value >= high_b:
            flags.append(f"at its upper bound {_shown(high_b, param.dim)}")
        if int(rows.sum()) <= int(partners):
            flags.append(f"too few points: {int(rows.sum())} inform it and {int(partners)} "
                         "fields")  # fmt: skip
        cited = tuple(dict.fromkeys(r.file for r, used in zip(problem.rows, rows, strict=True)
                                    if used))  # fmt: skip
        err = rel[rows]
        out.append(FieldFit(path, param.dim, start, value,
                            max(value - half, low_b) if math.isfinite(half) else half,
                            min(value + half, high_b) if math.isfinite(half) else half,
                            True, tuple(flags), int(rows.sum()), cited,
                            _rms(err), float(np.abs(err).max()) if len(err) else 0.0,
                            _spread(r[rows], int(partners), lambda d: float(stats.t.ppf(0.975, d))),
                            (low_b, high_b)))  # fmt: skip
    groups, at = [], 0
    for g in problem.groups:
        err = rel[at : at + len(g.rows)]
        at += len(g.rows)
        groups.append(GroupFit(g.label, g.primitive.name, g.texts, len(g.rows), _rms(err),
                               float(np.abs(err).max())))  # fmt: skip
    return Fit(problem, tuple(out), tuple(groups), predicted, values, n, _rms(rel),
               float(np.abs(rel).max()), bool(res.status > 0), str(res.message))  # fmt: skip


def _rms(err: Array) -> float:
    return float(np.sqrt(np.mean(err**2))) if len(err) else 0.0


def _spread(log_err: Array, fields: int, t975: Callable[[int], float]) -> float:
    """The 95% half-width of a new point's ln(time) about the law: Student's t₀.₉₇₅ with
    n − k degrees of freedom (``t975``) times s = √(Σ r² / (n − k)), over n residuals r that
    k fitted fields inform (none left over: 0, no spread can be told)."""
    dof = len(log_err) - fields
    if dof < 1:
        return 0.0
    return t975(dof) * math.sqrt(float(log_err @ log_err) / dof)


# ---------------------------------------------------------------- values as spec text


def value_text(value: float, dim: Dim, integer: bool = False, like: object = None
               ) -> str | float | int:  # fmt: skip
    """How a fitted value is written into a spec: a quantity string with ~4 significant
    digits (``"5.523 us"``, ``"6.8 TB/s"``) in the unit of ``like`` (the value it replaces)
    where that reads well, else in a readable one; a plain number when dimensionless."""
    if dim.dimensionless:
        return round(value) if integer else float(f"{value:.4g}")
    unit = _unit_of(like, dim)
    if value == 0:
        return f"0 {unit or ZERO_UNIT.get(dim, str(dim))}"
    factor = parse_unit(unit)[0] if unit else 0.0
    if unit and 0.01 <= abs(value / factor) < 1000:
        text = f"{value / factor:.4g} {unit}"
    else:
        text = format_quantity(value, dim)
    mag, found = parse_quantity(text)
    if found != dim or abs(mag - value) > 1e-3 * abs(value):  # a unit it cannot spell
        text = f"{value:.4g} {dim}"
    return text


def _unit_of(text: object, dim: Dim) -> str:
    """The unit a spec value is written in (``"300 GB/s"`` -> ``GB/s``), when it has ``dim``."""
    if not isinstance(text, str):
        return ""
    try:
        unit = split_quantity(text)[1]
        return unit if unit and parse_unit(unit)[1] == dim else ""
    except UnitError:
        return ""


def _shown(value: float, dim: Dim) -> str:
    if math.isinf(value):
        return "∞"
    return f"{value:.4g}" if dim.dimensionless else str(value_text(value, dim))


def _pct(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:.0f}"


CLAIM = "stepwall calibrate: "  # how a fitted value's sources entry begins


def source_text(f: FieldFit, files: Sequence[DataFile]) -> str:
    """The ``sources`` entry of a fitted value: the data (name and SHA-256), the points that
    inform it and their residual."""
    cited = ", ".join(f"{d.name} (sha256 {d.sha256[:12]})" for d in files if d.name in f.files)
    return f"{CLAIM}{cited}, {f.points} points, RMS {_pct(f.rms)}%, max {_pct(f.max)}%"


# ---------------------------------------------------------------- the calibrated spec


def calibrated_toml(fit: Fit, target: Path) -> str:
    """The entry's file with each fitted value and its ``sources`` entry set (tomlkit keeps
    every comment and the layout). An override file (``from``) stays one: only the fitted
    keys are added; a relative ``from`` path is rebased onto ``target``'s folder.

    Stays whole: one tomlkit edit of one document: each fitted key and its source set in place,
    then the `from` path rebased.
    """

    entry = fit.problem.entry
    doc = tomlkit.parse(entry.path.read_text(encoding="utf-8-sig"))  # a byte-order mark: dropped
    for f in fit.written:
        *tables, key = entry.local(f.path).split(".")
        table: Any = doc
        for name in tables:
            if name not in table:
                table[name] = tomlkit.table()
            table = table[name]
        meta = entry.scenario.field(f.path)
        old = table.get(key)
        before = old.as_string() if isinstance(old, Item) else None
        table[key] = value_text(f.value, f.dim, bool(meta and meta.metadata.get("integer")),
                                old.unwrap() if isinstance(old, Item) else old)  # fmt: skip
        new = table[key]
        if before is not None and isinstance(new, Item) and new.trivia.comment:
            # keep a trailing comment in its column
            shift = len(new.as_string()) - len(before)
            new.trivia.comment_ws = " " * max(1, len(new.trivia.comment_ws) - shift)
        if "sources" not in table:
            table["sources"] = tomlkit.table()
        table["sources"][key] = source_text(f, fit.problem.files)
    _mark_unread(doc, fit)
    ref = doc.get("from")
    if isinstance(ref, str):
        base = entry.path.parent
        if ("/" in ref or ref.endswith(".toml") or (base / ref).exists()) and not Path(
                ref).is_absolute():  # fmt: skip
            moved = os.path.relpath((base / ref).resolve(), target.resolve().parent)
            if Path(moved) != Path(ref):
                doc["from"] = Path(moved).as_posix()
    return tomlkit.dumps(doc)


KEPT = ("kept from an earlier stepwall calibrate fit (no row of these tables sets it now: "
        "each is priced by its precision's own value; it is the default where none is "
        "stated): ")  # fmt: skip


def _mark_unread(doc: Any, fit: Fit) -> None:
    """Rewrite the ``sources`` entry of each field this fit leaves unset whose source claims a
    fit to one of these tables: the claim no longer holds (`KEPT` says what does)."""
    entry, written = fit.problem.entry, {f.path for f in fit.written}
    names = [f"{d.name} (sha256" for d in fit.problem.files]
    for path in fields_in_order(entry):
        *tables, key = entry.local(path).split(".")
        table: Any = doc
        for name in [*tables, "sources"]:
            table = table.get(name) if hasattr(table, "get") else None
        text = table.get(key) if hasattr(table, "get") else None
        if (path not in written and isinstance(text, str) and text.startswith(CLAIM)
                and any(n in text for n in names)):  # fmt: skip
            table[key] = KEPT + text.removeprefix(CLAIM)


def write_spec(target: Path, text: str, entry: Entry, kinds: Kinds) -> None:
    """Write ``text`` to ``target`` atomically, once it reads back as a valid entry of the
    same section (beside the target, so a relative ``from`` resolves as it will)."""
    write_file(target, text, check=lambda tmp: load_entry(tmp, kinds, section=entry.section))


# ---------------------------------------------------------------- reports


def _table(rows: list[list[str]], right: Sequence[int] = ()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(r, widths, strict=True))]  # fmt: skip
        out.append("  ".join(cells).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def render_text(fit: Fit) -> str:
    """The residual table per group and the fit of each field, as text."""
    p = fit.problem
    entry = p.entry
    lines = [f"calibrate {shown_path(str(entry.path))} ({entry.section}): {fit.points} points "
             f"from {len(p.files)} file{'s' if len(p.files) != 1 else ''}"]  # fmt: skip
    for d in p.files:
        lines.append(f"  {shown_path(str(d.path))}  sha256 {d.sha256[:12]}  {len(d.rows)} points")
    lines += ["", "residuals, model vs measured"]
    rows = [["primitive", "points", "RMS", "max"]]
    rows += [[g.label, str(g.points), f"{_pct(g.rms)}%", f"{_pct(g.max)}%"] for g in fit.groups]
    rows.append(["all", str(fit.points), f"{_pct(fit.rms)}%", f"{_pct(fit.max)}%"])
    lines += _table(rows, right=(1, 2, 3))
    lines += ["", "fields (95% CI: where the fit lies; 95% PI: where a new kernel's time puts it)"]
    rows = [["field", "start", "fit", "95% CI", "95% PI", "points", "flags"]]
    for f in fit.fields:
        start = _shown(f.start, f.dim)
        if not f.fitted:
            rows.append([entry.local(f.path), start, "-", "-", "-", "-", "; ".join(f.flags)])
            continue
        ci, pi = (
            (f"{_shown(lo, f.dim)} .. {_shown(hi, f.dim)}" if math.isfinite(lo) else "undetermined")
            for lo, hi in ((f.low, f.high), prediction_interval(f))
        )
        rows.append([entry.local(f.path), start, _shown(f.value, f.dim), ci, pi, str(f.points),
                     "; ".join(f.flags)])  # fmt: skip
    lines += _table(rows, right=(1, 2, 5))
    if not fit.converged:
        lines.append(f"the fit stopped before converging: {fit.message}")
    return "\n".join(lines)


def fit_document(fit: Fit) -> dict[str, Any]:
    """The fit as one JSON-ready document (SI values)."""
    p = fit.problem
    entry = p.entry

    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return {
        "spec": shown_path(str(entry.path)),
        "section": entry.section,
        "data": [
            {"file": shown_path(str(d.path)), "sha256": d.sha256, "points": len(d.rows)}
            for d in p.files
        ],
        "points": fit.points,
        "rms_pct": fit.rms,
        "max_pct": fit.max,
        "converged": fit.converged,
        "groups": [
            {
                "primitive": g.primitive,
                "texts": dict(g.texts),
                "points": g.points,
                "rms_pct": g.rms,
                "max_pct": g.max,
            }
            for g in fit.groups
        ],
        "fields": [
            {
                "path": f.path,
                "key": entry.local(f.path),
                "unit": "" if f.dim.dimensionless else str(f.dim),
                "start": f.start,
                "value": f.value,
                "ci95": [num(f.low), num(f.high)],
                "pi95": [num(v) for v in prediction_interval(f)],
                "spread": f.spread,
                "text": value_text(f.value, f.dim) if f.fitted else None,
                "fitted": f.fitted,
                "flags": list(f.flags),
                "points": f.points,
                "rms_pct": f.rms,
                "max_pct": f.max,
                "source": source_text(f, p.files) if f.fitted else None,
            }
            for f in fit.fields
        ],
    }


# ---------------------------------------------------------------- the plot


def _main_size(g: Group) -> str | None:
    """The column a group's plot runs along: the one with the most distinct values."""
    best, count = None, 1
    for col in g.primitive.numbers:
        k = len(np.unique(g.data[col]))
        if k > count:
            best, count = col, k
    return best


def _size_text(col: str, value: float, d: Dim) -> str:
    return f"{col}={value:g}" if d.dimensionless else f"{col}={format_quantity(value, d)}"


def plot_svg(fit: Fit) -> bytes:
    """Measured points against the law over each group's main size (log axes), one panel
    per group; deterministic SVG."""

    groups = fit.problem.groups
    cols = 1 if len(groups) == 1 else 2
    nrows = math.ceil(len(groups) / cols)
    fig, first = _figure(5.2 * cols, 3.4 * nrows)
    fig.delaxes(first)
    at = 0
    for i, (g, gf) in enumerate(zip(groups, fit.groups, strict=True)):
        ax = fig.add_subplot(nrows, cols, i + 1)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        predicted = fit.predicted[at : at + len(g.rows)]
        at += len(g.rows)
        x_col = _main_size(g)
        if x_col is None:  # no size varies: measured and law by point
            xs = np.arange(1, len(g.rows) + 1, dtype=float)
            ax.plot(xs, g.measured * 1e6, "o", markersize=3, color=_COLORS[0], label="measured")
            ax.plot(xs, predicted * 1e6, "-", color=_COLORS[1], label="law")
            ax.set_xlabel("point")
        else:
            others = [c for c in g.primitive.numbers if c != x_col]
            keys = sorted({tuple(g.data[c][k] for c in others) for k in range(len(g.rows))})
            x = g.data[x_col]
            if len(keys) <= 6:
                for j, key in enumerate(keys):
                    color = _COLORS[j % len(_COLORS)]
                    pick = np.all([g.data[c] == v for c, v in zip(others, key, strict=True)],
                                  axis=0) if others else np.ones(len(x), bool)  # fmt: skip
                    lo, hi = float(x[pick].min()), float(x[pick].max())
                    grid = np.geomspace(lo, hi, 96) if hi > lo else np.array([lo])
                    data = {c: np.full(len(grid), v) for c, v in zip(others, key, strict=True)}
                    data[x_col] = grid
                    label = ", ".join(_size_text(c, v, g.primitive.numbers[c])
                                      for c, v in zip(others, key, strict=True))  # fmt: skip
                    ax.plot(grid, g.times(fit.values, data) * 1e6, "-", color=color,
                            linewidth=1.0, label=label or "law")  # fmt: skip
                    ax.plot(x[pick], g.measured[pick] * 1e6, "o", markersize=3, color=color)
            else:
                order = np.argsort(x, kind="stable")
                ax.plot(x[order], g.measured[order] * 1e6, "o", markersize=3, color=_COLORS[0],
                        label="measured")  # fmt: skip
                ax.plot(x[order], predicted[order] * 1e6, "x", markersize=3, color=_COLORS[1],
                        label="law")  # fmt: skip
            d = g.primitive.numbers[x_col]
            ax.set_xlabel(x_col if d.dimensionless else f"{x_col} [{d}]")
            if x.min() > 0 and x.max() > 8 * x.min():
                ax.set_xscale("log")
        ys = np.concatenate([g.measured, predicted])
        if ys.min() > 0 and ys.max() > 8 * ys.min():
            ax.set_yscale("log")
        ax.set_ylabel("time [us]")
        ax.set_title(f"{gf.label}: RMS {_pct(gf.rms)}%, max {_pct(gf.max)}%", fontsize=8)
        ax.legend(fontsize=6, frameon=False)
    return _svg(fig)


# ---------------------------------------------------------------- shipped calibrations


@attrs.frozen
class Manifest:
    """A shipped calibration: which spec, fitted to which tables (paths relative to the
    manifest), and optionally which fields."""

    path: Path
    spec: str
    data: tuple[Path, ...]
    fit: tuple[str, ...]
    # primitive -> column -> (low, high): the sizes the frontier uses (the rows the bound holds on)
    frontier: Mapping[str, Mapping[str, tuple[float, float]]] = attrs.field(factory=dict)
    bound: Mapping[str, float] = attrs.field(factory=dict)  # table -> frontier RMS bound, %
    ci95: Mapping[str, str] = attrs.field(factory=dict)  # field key -> "LOW..HIGH (FIT)"
    pi95: Mapping[str, str] = attrs.field(factory=dict)  # the same, prediction intervals


def _frontier(doc: Any, where: str) -> dict[str, dict[str, tuple[float, float]]]:
    """A manifest's ``[frontier]``: ``PRIMITIVE = { COLUMN = [LOW, HIGH] }``, sizes in the
    column's (dimensionless) units."""
    if not isinstance(doc, dict):
        raise SpecError(where, "frontier", "not a table",
                        "[frontier] gemm = { m = [1, 4096] }")  # fmt: skip
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for prim, cols in doc.items():
        if not isinstance(cols, dict) or not cols:
            raise SpecError(where, f"frontier.{prim}", "not a table of columns",
                            "{ COLUMN = [LOW, HIGH] }, e.g. { m = [1, 4096] }")  # fmt: skip
        out[prim] = {}
        for col, span in cols.items():
            ok = (isinstance(span, list) and len(span) == 2
                  and all(isinstance(v, int | float) and not isinstance(v, bool) for v in span)
                  and 0 < span[0] <= span[1])  # fmt: skip
            if not ok:
                raise SpecError(where, f"frontier.{prim}.{col}", f"{span!r} is not a span",
                                "[LOW, HIGH] with 0 < LOW ≤ HIGH")  # fmt: skip
            out[prim][col] = (float(span[0]), float(span[1]))
    return out


def _bound(doc: Any, data: Sequence[str], where: str) -> dict[str, float]:
    """A manifest's ``[bound]``: ``"TABLE.csv" = PERCENT`` for tables it lists."""
    if not isinstance(doc, dict):
        raise SpecError(where, "bound", "not a table", '[bound] "b200-gemm.csv" = 10')
    for name, pct in doc.items():
        if name not in data:
            raise SpecError(where, f"bound.{name}",
                            f"not a table of data{did_you_mean(name, data)}",
                            f"one of: {', '.join(data)}")  # fmt: skip
        if not isinstance(pct, int | float) or isinstance(pct, bool) or not pct > 0:
            raise SpecError(where, f"bound.{name}", f"{pct!r} is not a percentage > 0",
                            "the RMS residual in percent, e.g. 10")  # fmt: skip
    return {Path(k).name: float(v) for k, v in doc.items()}  # as the residuals name tables


def read_manifest(path: Path) -> Manifest:
    """Read and check a manifest.

    Stays whole: one check per key of one small file, in the order the file reads.
    """
    doc = read_toml(path)
    where = str(path)
    for key in doc:
        if key not in MANIFEST_KEYS:
            raise SpecError(where, key, f"unknown key{did_you_mean(key, MANIFEST_KEYS)}",
                            f"one of: {', '.join(MANIFEST_KEYS)}")  # fmt: skip
    spec = doc.get("spec")
    if not isinstance(spec, str) or not spec:
        raise SpecError(where, "spec", "missing or not text",
                        'a hardware or cluster name or path, e.g. spec = "b200"')  # fmt: skip
    data = doc.get("data")
    if not isinstance(data, list) or not data or not all(isinstance(d, str) for d in data):
        raise SpecError(where, "data", "missing or not a list of file names",
                        'CSV files beside the manifest, e.g. data = ["b200-gemm.csv"]')  # fmt: skip
    twice = first_repeat(data)
    if twice is not None:
        raise SpecError(where, "data", f"{twice!r} is listed twice",
                        "each table once; a copy is not another measurement")  # fmt: skip
    for key in ("description", "source"):
        if key in doc and not isinstance(doc[key], str):
            raise SpecError(where, key, f"{doc[key]!r} is not text", "a string")
    fields = doc.get("fit", [])
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise SpecError(where, "fit", "not a list of field names",
                        'e.g. fit = ["hbm_efficiency", "bf16.efficiency"]')  # fmt: skip
    tables = {}
    for key in ("ci95", "pi95"):
        given = doc.get(key, {})
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            raise SpecError(where, key, "not a table of ranges",
                            'written by stepwall calibrate --check --update')  # fmt: skip
        tables[key] = dict(given)
    return Manifest(path, spec, tuple((path.parent / d).resolve() for d in data), tuple(fields),
                    _frontier(doc.get("frontier", {}), where), _bound(doc.get("bound", {}), data,
                    where), tables["ci95"], tables["pi95"])  # fmt: skip


def manifests_in(refs: Sequence[str]) -> tuple[list[Path], str]:
    """The manifest files named (files, or folders of ``*.toml``), default the catalog's
    ``calibration/`` folder; and how to name where they came from."""
    if not refs:
        folder = catalog_root() / "calibration"
        return (sorted(folder.glob("*.toml")) if folder.is_dir() else []), shown_path(str(folder))
    out: list[Path] = []
    for ref in refs:
        p = Path(ref)
        if p.is_dir():
            found = sorted(p.glob("*.toml"))
            if not found:
                raise SpecError(ref, "", "holds no calibration manifests (*.toml)",
                                "a folder of manifests or a manifest file")  # fmt: skip
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise SpecError(ref, "", "not found", "a calibration manifest or a folder of them")
        resolved = [q.resolve() for q in out]
        if len(set(resolved)) < len(resolved):
            raise SpecError(ref, "", "names a manifest given already", "each manifest once")
    return out, ", ".join(refs)


def calibrate(entry: Entry, data: Sequence[Path], registry: Any,
              requested: Sequence[str] = (), where: str = "--fit",
              warn: Callable[[Sequence[str]], None] | None = None) -> Fit:  # fmt: skip
    """Read the tables (rows that repeat another left out, with a ``warn`` line), build the
    problem and fit it."""
    primitives = registry.primitives
    tables: list[DataFile] = []
    for p in data:
        tables.append(read_data(p, primitives, entry.section))
        if sum(len(t.rows) for t in tables) > MAX_ROWS:
            raise SpecError(str(p), "", f"brings the data to more than {MAX_ROWS:,} rows",
                            f"at most {MAX_ROWS:,} measurements in all")  # fmt: skip
    files, repeated = distinct(tables)
    if repeated and warn is not None:
        left = sum(len(f.rows) for f in files)
        warn([f"{repeated} rows repeat another row exactly (primitive, sizes, time) and count "
              f"once: {left} distinct point{'s' if left != 1 else ''}"])  # fmt: skip
    return fit(build_problem(entry, files, primitives), list(requested) or None, where=where)


def distinct(files: Sequence[DataFile]) -> tuple[list[DataFile], int]:
    """The files without rows that repeat an earlier row exactly (primitive, sizes, texts and
    time, in any file): a copy is not another measurement, and counted again it would narrow
    every interval. Also how many rows were left out."""
    seen: set[tuple[Any, ...]] = set()
    out, repeated = [], 0
    for f in files:
        kept = []
        for r in f.rows:
            same = (r.primitive, *sorted(r.numbers.items()), *sorted(r.texts.items()), r.time)
            repeated += same in seen
            if same not in seen:
                seen.add(same)
                kept.append(r)
        out.append(attrs.evolve(f, rows=tuple(kept)))
    return out, repeated


@attrs.frozen
class TableFit:
    """The residual of one table's rows of one primitive group (``label`` "all": the whole
    table), over all its rows and over the sizes the frontier uses (``sizes``)."""

    table: str
    label: str
    points: int
    rms: float
    max: float
    sizes: str
    frontier_points: int
    frontier_rms: float
    frontier_max: float


def _in_frontier(fit: Fit, frontier: Mapping[str, Mapping[str, tuple[float, float]]],
                 where: str) -> Array:  # fmt: skip
    """Per row (in group order): whether its sizes lie in the frontier's spans."""
    out = []
    for g in fit.problem.groups:
        spans = frontier.get(g.primitive.name, {})
        keep = np.ones(len(g.rows), bool)
        for col, (lo, hi) in spans.items():
            if col not in g.data or not g.primitive.numbers[col].dimensionless:
                raise SpecError(where, f"frontier.{g.primitive.name}.{col}",
                                f"is not a count column of primitive {g.primitive.name}",
                                ", ".join(c for c, d in g.primitive.numbers.items()
                                          if d.dimensionless))  # fmt: skip
            keep &= (g.data[col] >= lo) & (g.data[col] <= hi)
        out.append(keep)
    return np.concatenate(out) if out else np.zeros(0, bool)


def _sizes_text(frontier: Mapping[str, Mapping[str, tuple[float, float]]], prims: Iterable[str]
                ) -> str:  # fmt: skip
    spans = [f"{col} {lo:g}..{hi:g}" for p in dict.fromkeys(prims)
             for col, (lo, hi) in frontier.get(p, {}).items()]  # fmt: skip
    return ", ".join(spans) or "all"


def table_fits(fit: Fit, frontier: Mapping[str, Mapping[str, tuple[float, float]]],
               where: str = "") -> list[TableFit]:  # fmt: skip
    """The residuals per table and primitive group, then per table, over all rows and over
    the frontier's sizes."""
    rel = 100.0 * (fit.predicted / fit.problem.measured - 1.0)
    front = _in_frontier(fit, frontier, where)
    files = np.array([r.file for r in fit.problem.rows])
    labels = np.array([g.label for g in fit.problem.groups for _ in g.rows])
    prims = [g.primitive.name for g in fit.problem.groups for _ in g.rows]
    out = []
    for d in fit.problem.files:
        mine = files == d.name
        keys = [(lab, labels == lab) for lab in dict.fromkeys(labels[mine].tolist())]
        for label, pick in [*keys, ("all", np.ones(len(rel), bool))]:
            rows = mine & pick
            err, near = rel[rows], rel[rows & front]
            used = [p for p, r in zip(prims, rows, strict=True) if r]
            out.append(TableFit(d.name, label, int(rows.sum()), _rms(err), _peak(err),
                                _sizes_text(frontier, used), len(near), _rms(near),
                                _peak(near)))  # fmt: skip
    return out


def _peak(err: Array) -> float:
    return float(np.abs(err).max()) if len(err) else 0.0


def ci95_text(f: FieldFit) -> str | None:
    """A fitted field's 95% interval as a spec range, ``"LOW..HIGH (FIT)"`` (the grammar of
    `stepwall.spec.grammar.parse_range`); None where the fit leaves it undetermined."""
    if not (f.fitted and math.isfinite(f.low) and math.isfinite(f.high)):
        return None
    return f"{_shown(f.low, f.dim)}..{_shown(f.high, f.dim)} ({_shown(f.value, f.dim)})"


def prediction_interval(f: FieldFit) -> tuple[float, float]:
    """A fitted field's 95% prediction interval. For a field that scales a law's time
    (`SCALE_SUFFIXES`), each side of its 95% confidence interval in log space, c = ln(v/low)
    or ln(high/v) about the fitted v, joined in quadrature with the spread w of a new point
    about the law (`FieldFit.spread`: t₀.₉₇₅ times the residual standard deviation of the
    points that inform it): v·e^(∓√(c² + w²)), within the field's bounds (a regression's
    prediction interval: the fitted value's uncertainty and a new measurement's scatter,
    docs/calibration.md, "Prediction intervals"); one fitted at zero (a floor on its bound)
    has no log-space side below and widens its upper end by the spread, high·e^w. Other
    fields (n½, S½: the ramp's shape) keep their confidence interval."""
    if not any(f.path.endswith(s) for s in SCALE_SUFFIXES):
        return f.low, f.high
    if f.value <= 0:
        return f.low, min(f.high * math.exp(f.spread), f.bounds[1])
    spread = f.spread**2
    down = math.log(f.value / f.low) if f.low > 0 else math.inf
    up = math.log(f.high / f.value)
    low = f.value * math.exp(-math.sqrt(down**2 + spread)) if math.isfinite(down) else f.low
    high = f.value * math.exp(math.sqrt(up**2 + spread))
    return max(low, f.bounds[0]), min(high, f.bounds[1])


def pi95_text(f: FieldFit) -> str | None:
    """`prediction_interval` as a spec range, ``"LOW..HIGH (FIT)"``; None where the fit
    leaves the field undetermined."""
    if ci95_text(f) is None:
        return None
    low, high = prediction_interval(f)
    return f"{_shown(low, f.dim)}..{_shown(high, f.dim)} ({_shown(f.value, f.dim)})"


def _ci_drifted(committed: str | None, fitted: str | None) -> bool:
    """Whether a committed interval is more than `DRIFT` off the fitted one (at any end)."""
    if committed is None or fitted is None:
        return committed != fitted
    try:
        a, b = parse_range(committed), parse_range(fitted)
    except UnitError:
        return True
    return a[3] != b[3] or any(abs(x - y) > DRIFT * max(abs(x), abs(y))
                               for x, y in zip(a[:3], b[:3], strict=True))  # fmt: skip


def _residual_lines(fits: Sequence[TableFit], bound: Mapping[str, float]) -> list[str]:
    rows = [["table", "primitive", "points", "RMS", "max", "frontier sizes", "points", "RMS",
             "max", "bound"]]  # fmt: skip
    for t in fits:
        limit = bound.get(t.table) if t.label == "all" else None
        rows.append([t.table, t.label, str(t.points), f"{_pct(t.rms)}%", f"{_pct(t.max)}%",
                     t.sizes, str(t.frontier_points), f"{_pct(t.frontier_rms)}%",
                     f"{_pct(t.frontier_max)}%", f"{_pct(limit)}%" if limit else ""])  # fmt: skip
    return ["  " + line for line in _table(rows, right=(2, 3, 4, 6, 7, 8, 9))]


def _write_intervals(m: Manifest, tables: Mapping[str, Mapping[str, str]]) -> None:
    """Set the manifest's interval tables (``ci95``, ``pi95``) to ``tables`` (comments and
    layout kept)."""
    doc = tomlkit.parse(m.path.read_text(encoding="utf-8-sig"))
    for name, texts in tables.items():
        table = tomlkit.table()
        for key, text in texts.items():
            table[key] = text
        doc[name] = table
    write_file(m.path, tomlkit.dumps(doc), check=read_manifest)


def _intervals(entry: Entry, result: Fit) -> dict[str, dict[str, str]]:
    """The fit's interval tables: field key -> range text, confidence (``ci95``) and
    prediction (``pi95``)."""
    out: dict[str, dict[str, str]] = {"ci95": {}, "pi95": {}}
    for f in result.written:
        for name, text in (("ci95", ci95_text(f)), ("pi95", pi95_text(f))):
            if text is not None:
                out[name][entry.local(f.path)] = text
    return out


def _committed(m: Manifest) -> dict[str, Mapping[str, str]]:
    return {"ci95": m.ci95, "pi95": m.pi95}


def _settled(result: Fit, m: Manifest, entry: Entry) -> bool:
    """Whether every fitted value and interval agrees with the committed one."""
    moved = any(abs(f.value - f.start) > DRIFT * abs(f.start) or (f.start == 0 and f.value != 0)
                for f in result.written)  # fmt: skip
    fitted, committed = _intervals(entry, result), _committed(m)
    return not moved and not any(_ci_drifted(committed[t].get(k), fitted[t].get(k))
                                 for t in fitted
                                 for k in dict.fromkeys([*fitted[t], *committed[t]]))  # fmt: skip


def _refit(path: Path, registry: Any, updates: int) -> tuple[Manifest, Entry, Fit]:
    """Fit a manifest's spec to its data; with ``updates`` > 0, write the fit (values into the
    spec, intervals into the manifest's ``[ci95]`` and ``[pi95]``) and refit from there until
    it agrees with what is written (a fit from a new start can move a loosely determined
    field), at most ``updates`` times; each write also marks the sources this fit no longer
    sets (`KEPT`)."""
    for i in range(updates + 1):
        m = read_manifest(path)
        entry = load_entry(m.spec, registry.kinds, manifest=path)
        result = calibrate(entry, m.data, registry, m.fit, str(path))
        if i == updates or (i > 0 and _settled(result, m, entry)):  # written once at least
            break
        write_spec(entry.path, calibrated_toml(result, entry.path), entry, registry.kinds)
        _write_intervals(m, _intervals(entry, result))
    return m, entry, result


def check(refs: Sequence[str], registry: Any, update: bool = False) -> tuple[list[str], int]:
    """Re-fit each manifest's spec to its data: a line per manifest (``ok …``), its residuals
    per table and primitive group (all rows, and the sizes its ``[frontier]`` names, against
    its ``[bound]``), a line per drifted value or interval and per table over its bound; and
    how many failed. ``update``: write the refit values into the spec and the intervals into
    the manifest's ``[ci95]`` and ``[pi95]`` first (what drifted no longer does).

    Stays whole: one pass per manifest — fit, compare, report — whose lines and counts share
    the fit.
    """
    paths, origin = manifests_in(refs)
    if not paths:
        return [f"ok: no calibration manifests in {origin}"], 0
    lines: list[str] = []
    drifted = total = over = 0
    for path in paths:
        m, entry, result = _refit(path, registry, UPDATES if update else 0)
        spec = shown_path(str(entry.path))
        intervals = _intervals(entry, result)
        bad = []
        for f in result.written:
            total += 1
            off = abs(f.value - f.start)
            if off > DRIFT * abs(f.start) or (f.start == 0 and off > 0):
                drifted += 1
                change = f" ({100 * (f.value / f.start - 1):+.2f}%)" if f.start else ""
                bad.append(f"{spec}:{f.path}: committed {_shown(f.start, f.dim)}, fit "
                           f"{_shown(f.value, f.dim)}{change} (by {shown_path(str(path))}; "
                           "refit with stepwall calibrate --check --update)")  # fmt: skip
        for name, committed in _committed(m).items():
            if not committed:  # a manifest without intervals states none (--update writes them)
                continue
            fitted_t = intervals[name]
            for key in dict.fromkeys([*fitted_t, *committed]):
                if _ci_drifted(committed.get(key), fitted_t.get(key)):
                    drifted += 1
                    bad.append(f"{shown_path(str(path))}:{name}.{key}: committed "
                               f"{committed.get(key, 'none')}, fit {fitted_t.get(key, 'none')} "
                               "(refit with stepwall calibrate --check --update)")  # fmt: skip
        fitted = f"{result.points} points (RMS {_pct(result.rms)}%, max {_pct(result.max)}%)"
        if bad:
            lines.append(f"drift: {shown_path(str(path))}: {len(bad)} of {len(result.written)} "
                         f"values of {spec} off their fit to {fitted}")  # fmt: skip
        else:
            lines.append(f"ok: {shown_path(str(path))}: {len(result.written)} values of {spec} "
                         f"within {100 * DRIFT:g}% of their fit to {fitted}")  # fmt: skip
        fits = table_fits(result, m.frontier, str(path))
        lines += _residual_lines(fits, m.bound)
        for t in fits:
            limit = m.bound.get(t.table)
            if t.label == "all" and limit is not None and t.frontier_rms > limit:
                over += 1
                bad.append(f"over: {shown_path(str(path))}: {t.table}: RMS {_pct(t.frontier_rms)}"
                           f"% over the frontier sizes ({t.sizes}) exceeds its bound "
                           f"{_pct(limit)}%")  # fmt: skip
        lines += bad
    if drifted or over:
        lines.append(f"FAILED: {drifted} of {total} calibrated values drifted by more than "
                     f"{100 * DRIFT:g}% from their fit, {over} tables over their "
                     "bound")  # fmt: skip
    else:
        lines.append(f"ok: {len(paths)} calibration{'s' if len(paths) != 1 else ''}, {total} "
                     f"values within {100 * DRIFT:g}% of their fit")  # fmt: skip
    return lines, drifted + over


# ---------------------------------------------------------------- the primitives, listed


def _first_paragraph(doc: str | None) -> str:
    text = (doc or "").strip().split("\n\n")[0]
    return " ".join(text.replace("``", "").split())


def _default_text(prim: Primitive, column: str) -> str:
    """``; optional: VALUE`` for a text column a table may leave out, else nothing."""
    return f"; optional: {prim.optional[column]}" if column in prim.optional else ""


def describe_primitives(primitives: Mapping[str, Primitive], entry: Entry | None = None) -> str:
    """Each primitive: its columns, the fields it fits and its law (in words; with an entry,
    as a formula over that entry's fields, for the first combination of text values)."""

    out = []
    for name, prim in sorted(primitives.items()):
        if entry is not None and not _applies(prim, entry.section):
            continue
        cols = [c if d.dimensionless else f"{c} [{d}]" for c, d in prim.numbers.items()]
        cols += [f"{c} ({'|'.join(v)}{_default_text(prim, c)})" for c, v in prim.texts.items()]
        out += [f"{name}: {prim.doc}",
                f"  section  {prim.section} (plugin {prim.plugin})",
                f"  columns  {', '.join([*cols, 'time [s]', 'source'])}",
                f"  fits     {', '.join(prim.fields)}",
                f"  law      {_first_paragraph(prim.law.__doc__)}"]  # fmt: skip
        if entry is not None:
            texts = {k: v[0] for k, v in prim.texts.items()}
            expr = law_of(prim, entry.scenario, texts)
            rename = {s: sp.Symbol(_short(s.name, entry.section)) for s in expr.free_symbols}
            at = ", ".join(f"{k}={v}" for k, v in texts.items())
            out.append(f"  t{f' ({at})' if at else ''} = {sp.sstr(expr.xreplace(rename))}")
        out.append("")
    return "\n".join(out).rstrip()


def _short(name: str, section: str) -> str:
    for prefix in ("data.", "const.", f"{section}."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


# ---------------------------------------------------------------- the command


@attrs.frozen
class CalibrateOptions:
    """What ``stepwall calibrate`` was asked (its options, as parsed)."""

    spec: list[str] = attrs.Factory(list)
    data: list[str] = attrs.Factory(list)
    output: str | None = None
    fit: list[str] = attrs.Factory(list)
    plot: str | None = None
    json: bool = False
    check: bool = False
    primitives: bool = False
    update: bool = False


def run_cli(ns: CalibrateOptions, registry: Any, warn: Callable[[Sequence[str]], None]) -> int:
    """``stepwall calibrate``: fit (and write), ``--check`` or ``--primitives``.

    Stays whole: the command's three modes (--primitives, --check, a fit) one after the other,
    each checking its own flags and printing its own output.
    """

    if ns.primitives:
        if len(ns.spec) > 1 or ns.data or ns.check:
            raise SpecError("calibrate", "--primitives", "takes at most one SPEC and no --data",
                            "stepwall calibrate --primitives [SPEC]")  # fmt: skip
        entry = load_entry(ns.spec[0], registry.kinds) if ns.spec else None
        print(describe_primitives(registry.primitives, entry))
        return 0
    if ns.update and not ns.check:
        raise SpecError("calibrate", "--update", "goes only with --check",
                        "stepwall calibrate --check --update [MANIFEST|FOLDER …]")  # fmt: skip
    if ns.check:
        for flag, given in (("--data", ns.data), ("-o", ns.output), ("--fit", ns.fit),
                            ("--plot", ns.plot)):  # fmt: skip
            if given is not None and given != []:  # -o "" too
                raise SpecError("calibrate", flag, "does not go with --check",
                                "stepwall calibrate --check [MANIFEST|FOLDER …]")  # fmt: skip
        lines, drifted = check(ns.spec, registry, update=ns.update)
        if ns.json:
            print(json.dumps({"ok": not drifted, "lines": lines}, indent=2))
        else:
            print(visible("\n".join(lines), lines=True))
        return 1 if drifted else 0
    if len(ns.spec) != 1:
        raise SpecError("calibrate", "SPEC", f"needs one spec, got {len(ns.spec)}",
                        "stepwall calibrate SPEC --data FILE.csv [-o OUT.toml]")  # fmt: skip
    if not ns.data:
        raise SpecError("calibrate", "--data", "missing: nothing to fit",
                        "--data FILE.csv (repeatable), see docs/calibration.md")  # fmt: skip
    target = (  # read back beside it before it is written: no stream
        output.file_target(ns.output, suffixes=(".toml",), streams=False)
        if ns.output is not None
        else None
    )
    plot = output.file_target(ns.plot, "--plot", (".svg",)) if ns.plot is not None else None
    entry = load_entry(ns.spec[0], registry.kinds)
    warn(entry.scenario.warnings)
    if any(not item.strip(" ,") for item in ns.fit):  # --fit "": not "every field"
        raise SpecError("calibrate", "--fit", "names no field",
                        "FIELD[,FIELD…], e.g. --fit hbm_efficiency,kernel_floor")  # fmt: skip
    requested = [f.strip() for item in ns.fit for f in item.split(",") if f.strip()]
    tables: dict[Path, str] = {}
    for d in ns.data:
        if not d:
            raise SpecError("calibrate", "--data", "'' is not a file", "--data FILE.csv")
        same = tables.setdefault(Path(d).resolve(), d)
        if same != d or ns.data.count(d) > 1:
            raise SpecError("--data", d, f"the same file as --data {same}",
                            "each table once; a copy is not another measurement")  # fmt: skip
    result = calibrate(entry, [Path(d) for d in ns.data], registry, requested, warn=warn)
    svg = plot_svg(result) if plot is not None else None
    if target is not None:
        write_spec(target, calibrated_toml(result, target), entry, registry.kinds)
    if plot is not None and svg is not None:
        output.write_file(plot, svg)
    if ns.json:
        doc = fit_document(result)
        doc["output"] = str(target) if target is not None else None
        doc["plot"] = str(plot) if plot is not None else None
        print(json.dumps(doc, indent=2))
        return 0
    print(visible(render_text(result), lines=True))
    print()
    if target is not None:
        print(f"wrote {target} ({len(result.written)} values and their sources)")
    else:
        print("nothing written (add -o OUT.toml to write the calibrated spec)")
    if plot is not None:
        output.announce(plot, f"wrote {plot}")
    return 0
