"""Validation: predictions against published end-to-end serving measurements.

A validation table is a TOML file of ``[[row]]`` tables (``specs/validation/*.toml`` ship
with stepwall). Each row names a scenario (catalog name or a path relative to the file) with
``--set``-style overrides, the metric, the measured value with its unit (and ``divide_by``
when the figure covers several GPUs, e.g. 8 for a per-node figure of a per-GPU metric), the
row's class and where it was published. The error of a row is predicted / measured − 1.

A ``frontier`` row is a best point, not a configuration: the best ``metric`` at the target
``at`` (search's ``--at``) over the space its ``search`` options spell (``stepwall search``'s
--gpus, --batch, --decoding, …), on the base scenario's model, hardware, cluster and engine.
Rows with the same scenario, space and overrides share one search. Rows of one ``ranking``
group share a target; their order by measured value is compared with their order by
prediction. Each prediction carries a band (`stepwall.apps.bands`).

These measurements are never fitted: hardware and engine values come from primitive
microbenchmarks (``stepwall calibrate``), so the error here is the model's, out of sample.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.apps import bands, disagg
from stepwall.apps.search import (
    DEFAULT_BATCH,
    Condition,
    SearchOptions,
    Spec,
    config_text,
    layout_degrees,
    metric_table,
    nearest_text,
    parse_condition,
    parse_counts,
    parse_only,
    plan_search,
    run_search,
    search_spec,
)
from stepwall.apps.search import Result as SearchResult
from stepwall.apps.sweep import metric_names, metric_unit, parse_vary, pick
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError, UnitError, did_you_mean, first_repeat
from stepwall.core.options import option, structure_options
from stepwall.core.units import parse_quantity, parse_unit
from stepwall.model.compose import build_model
from stepwall.model.metrics import DIAGNOSTIC_METRICS, METRICS, MINIMIZE
from stepwall.plugin import registry as registries
from stepwall.plugin.registry import Registry
from stepwall.spec.loader import find_spec_file, read_scenario, read_toml

CLASSES = {
    "tp_batch1": "tensor parallel at batch 1 (latency-bound)",
    "dp_ep_node": "attention data parallel + expert parallel on one node",
    "wide_ep": "expert parallel across nodes (disaggregated decode)",
    "prefill": "prefill throughput and time to first token",
    "dense": "dense and small-expert models (not DeepSeek-shaped)",
    "frontier": "best METRIC at ≥ TARGET through search",
    "disagg": "a P/D deployment at ≥ TARGET through search --disagg: throughput and GPUs",
    "latency": "TTFT / TPOT / ITL / end-to-end latency at real load",
    "middle": "single points at 8–256 requests per replica",
    "other": "anything else",
}


MAX_ROWS = 1000  # rows in the tables of one run: the shipped ones have 25; each costs a model


@attrs.frozen
class RowSpec:
    """One ``[[row]]`` of a validation table, as written."""

    id: str = option("a unique identifier")
    row_class: str = option("the regime the row tests", choices=tuple(CLASSES))
    scenario: str = option("a scenario: catalog name, or a path relative to the table")
    metric: str = option("the metric predicted, e.g. tokens_per_s_per_gpu")
    measured: str = option('the published value with its unit, e.g. "5393 tokens/s"')
    source: str = option("the publication: title and section")
    url: str = option("where it is published")
    set: tuple[str, ...] = option("--set overrides on the scenario", default=())
    divide_by: float = option(
        "the figure covers this many of the metric's units (8: a per-node figure of a "
        "per-GPU metric)",
        default=1.0,
    )
    fill_memory: bool = option(
        "the engine sized its batch to fill memory: workload.concurrency becomes the largest "
        "at which the configuration fits (searched by stepwall)",
        default=False,
    )
    date: str = option("when it was published (YYYY-MM or YYYY-MM-DD)", default="")
    evidence: str = option("the quoted figure as printed (25 words or fewer)", default="")
    notes: str = option("what the spec cannot express, and interpretations", default="")
    at: str = option(
        "a frontier row's target, as search's --at, e.g. tokens_per_s_per_user>=90", default=""
    )
    search: tuple[str, ...] = option(
        "a frontier row's space: stepwall search options, e.g. "
        '["--gpus", "8,16", "--decoding", "autoregressive,mtp", "--batch", "1..1024"]',
        default=(),
    )
    ranking: str = option(
        "a group of frontier rows at one target, ranked by measured against predicted value",
        default="",
    )
    deployed: str = option(
        'a disagg row\'s prefill and decode GPUs as deployed, "12:32"', default=""
    )


FRONTIER_ONLY = ("at", "search", "ranking")  # the keys only frontier and disagg rows have
SEARCHED = ("frontier", "disagg")  # the classes whose prediction is a search's best
SPACE_OPTIONS = (
    "--gpus, --workload, --isl, --osl, --decoding, --batch, --vary, --only, --where, --ttft, "
    "--prefill-gpus, --prefill-batch, --prefill-only, --max-gpus"
)
DISAGG_OPTIONS = ("--prefill-gpus", "--prefill-batch", "--prefill-only", "--max-gpus")
RATIO_FACTOR = 1.5  # a disagg row's prefill:decode GPU ratio "within" the deployed one's


@attrs.frozen
class Space:
    """A frontier row's search space, as its ``search`` options give it."""

    gpus: tuple[int, ...] = ()
    workload: str = "serving"
    isl: int = 1024
    osl: int = 1024
    decoding: tuple[str, ...] = ("autoregressive",)
    batch: tuple[int, ...] = DEFAULT_BATCH
    vary: tuple[str, ...] = ()
    where: tuple[Condition, ...] = ()
    only: tuple[tuple[str, tuple[int, ...]], ...] = ()
    prefill: tuple[str, ...] = ()  # a disagg row's prefill options, as given (search's flags)


# the options that may be given again
REPEATED = ("--decoding", "--vary", "--where", "--only", "--prefill-only")


def _options(options: Sequence[str], where: str, key: str) -> dict[str, list[str]]:
    """``["--gpus", "8,16", "--isl=8192"]`` -> {"--gpus": ["8,16"], "--isl": ["8192"]}: each
    option of `SPACE_OPTIONS` with one value, as ``--flag VALUE`` or ``--flag=VALUE``."""
    expected = f"stepwall search options that spell the space: {SPACE_OPTIONS}"
    known = SPACE_OPTIONS.split(", ")
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(options):
        flag, eq, value = options[i].partition("=")
        if flag not in known:
            raise SpecError(where, key, f"{options[i]!r} is not an option of the space"
                            f"{did_you_mean(flag, known)}", expected)  # fmt: skip
        if not eq:
            if i + 1 >= len(options):
                raise SpecError(where, key, f"{flag} has no value", f"{flag} VALUE")
            i += 1
            value = options[i]
        if flag in out and flag not in REPEATED:
            raise SpecError(where, key, f"{flag} is given twice", "each option once")
        out.setdefault(flag, []).append(value)
        i += 1
    return out


def parse_space(options: Sequence[str], where: str, key: str) -> Space:
    """A frontier row's ``search`` options (the space: search's own flags) -> `Space`; a bad
    option is a one-line SpecError at ``where``:``key``."""
    given = _options(options, where, key)

    def one(flag: str) -> str | None:
        return given[flag][0] if flag in given else None

    try:
        conds = [parse_condition(w, "--where") for w in given.get("--where", [])]
        ttft = one("--ttft")
        if ttft is not None:
            conds.append(parse_condition(ttft, "--ttft", "ttft_s"))
        for v in given.get("--vary", []):
            parse_vary(v)
        workload = one("--workload") or "serving"
        if workload not in ("serving", "decode"):
            raise SpecError("search", "--workload", f"{workload!r} is not searched",
                            "serving or decode")  # fmt: skip
        lengths = [parse_counts(one(f) or "1024", f) for f in ("--isl", "--osl")]
        if any(len(n) != 1 for n in lengths):
            raise SpecError("search", "--isl/--osl", "takes one length", "e.g. --isl 1024")
        kinds = [k.strip() for d in given.get("--decoding", []) for k in d.split(",") if k.strip()]
        gpus, batch = one("--gpus"), one("--batch")
        prefill = _prefill_options(given)
        return Space(
            tuple(parse_counts(gpus, "--gpus")) if gpus is not None else (),
            workload,
            lengths[0][0],
            lengths[1][0],
            tuple(kinds or ["autoregressive"]),
            tuple(parse_counts(batch, "--batch")) if batch is not None else DEFAULT_BATCH,
            tuple(given.get("--vary", [])),
            tuple(conds),
            tuple(parse_only(o) for o in given.get("--only", [])),
            prefill,
        )
    except SpecError as e:
        raise SpecError(where, key, f"{e.key}: {e.problem}" if e.key else e.problem,
                        e.expected) from None  # fmt: skip


def _prefill_options(given: dict[str, list[str]]) -> tuple[str, ...]:
    """A disagg row's prefill options as search's flags, each value checked."""
    out: list[str] = []
    for flag in DISAGG_OPTIONS:
        for value in given.get(flag, []):
            if flag == "--prefill-only":
                parse_only(value)
            else:
                parse_counts(value, flag)
            out += [flag, value]
    return tuple(out)


@attrs.frozen
class TableSpec:
    """A validation table file."""

    description: str = option("what the rows are", default="")
    row: tuple[dict[str, Any], ...] = option("the rows ([[row]] tables)", default=())


@attrs.frozen
class Row:
    spec: RowSpec
    origin: Path  # the table file
    index: int  # its position in the file
    scenario: Path
    measured: float  # SI, per unit of the metric
    target: Condition | None = None  # a frontier row's `at`
    space: Space | None = None  # a frontier row's `search`
    deployed: tuple[int, int] | None = None  # a disagg row's prefill and decode GPUs

    @property
    def where(self) -> str:
        return f"{self.origin}:row[{self.index}]"


@attrs.frozen(eq=False)
class FrontierRun:
    """One search shared by frontier rows: the hardware, the nominal search, and the search
    again at the pessimistic and the optimistic end of the ranged inputs (None: none)."""

    hardware: str
    label: str  # the scenario and the space, for a plot's legend
    result: SearchResult
    ends: tuple[SearchResult, SearchResult] | None


@attrs.frozen
class Result:
    row: Row
    predicted: float  # SI; NaN where the configuration is infeasible
    infeasible: str = ""  # the first violated constraint, if any
    concurrency: int | None = None  # the batch found by fill_memory
    model: Any = attrs.field(default=None, eq=False, repr=False)  # the row's StepModel
    band: tuple[float, float] | None = None  # [low, high] over the ranged inputs; None: none
    chosen: str = ""  # a frontier row's best configuration, and what binds it
    run: FrontierRun | None = attrs.field(default=None, eq=False, repr=False)
    split: tuple[int, int] | None = None  # a disagg row's predicted prefill and decode GPUs

    @property
    def ratio_factor(self) -> float | None:
        """A disagg row's predicted prefill:decode GPU ratio over the deployed one's (None:
        no prediction, or not a disagg row)."""
        if self.split is None or self.row.deployed is None or self.infeasible:
            return None
        (p, d), (dp, dd) = self.split, self.row.deployed
        return (p / d) / (dp / dd)

    @property
    def error(self) -> float:
        """predicted / measured − 1 (NaN where infeasible)."""
        return self.predicted / self.row.measured - 1.0

    @property
    def inside(self) -> bool | None:
        """Whether the measurement lies in the band (None: no band, or infeasible)."""
        if self.band is None or self.infeasible:
            return None
        return self.band[0] <= self.row.measured <= self.band[1]


def default_tables() -> list[Path]:
    """The shipped tables: ``specs/validation/*.toml``, in name order."""
    return sorted((catalog_root() / "validation").glob("*.toml"))


def load_rows(paths: Iterable[Path]) -> list[Row]:
    """Read and check every row of the tables (ids unique across them); a bad row is a
    one-line `SpecError` naming the file, the row and the key.

    Stays whole: the checks of each row in the order their errors are reported, sharing the ids
    seen across the tables.
    """
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for path in paths:
        where = str(path)
        doc = read_toml(path)
        raw = {k: v for k, v in doc.items() if k in ("description", "row")}
        for k in doc:
            if k not in raw:
                raise SpecError(where, k, "unknown key", "description or [[row]] tables")
        listed = raw.get("row", [])
        if not isinstance(listed, list) or not listed:
            problem = "no rows" if listed == [] else f"{listed!r} is not a list of tables"
            raise SpecError(where, "row", problem, "[[row]] tables, each a published measurement")
        if len(rows) + len(listed) > MAX_ROWS:  # each row builds and evaluates a model
            raise SpecError(where, f"row[{MAX_ROWS - len(rows)}]", f"more than {MAX_ROWS:,} rows "
                            "in the tables", f"at most {MAX_ROWS:,} measurements")  # fmt: skip
        table: TableSpec = structure_options(TableSpec, raw, where)
        for i, given in enumerate(table.row):
            at = f"row[{i}]."
            if not isinstance(given, dict):
                raise SpecError(where, f"row[{i}]", "not a table", "[[row]] tables")
            named = {("row_class" if k == "class" else k): v for k, v in given.items()}
            if "row_class" in given:
                raise SpecError(where, at + "row_class", "unknown key", "class")
            try:
                spec: RowSpec = structure_options(RowSpec, named, where, at)
            except SpecError as e:  # the file says `class`, as the errors must
                said = [x.replace("row_class", "class") for x in (e.key, e.problem, e.expected)]
                raise SpecError(where, *said, why=e.why) from None
            for key in ("id", "source", "url"):
                if not getattr(spec, key).strip():
                    raise SpecError(where, at + key, "is empty", _expected(key))
            if spec.date and not re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", spec.date):
                raise SpecError(where, at + "date", f"{spec.date!r} is not a date",
                                _expected("date"))  # fmt: skip
            keys = [a.partition("=")[0].strip() for a in spec.set]
            twice = first_repeat(keys)
            if twice is not None:
                raise SpecError(where, at + "set", f"{twice} is set twice", "each key once")
            if spec.id in seen:
                raise SpecError(where, at + "id", f"{spec.id!r} is also {seen[spec.id]}",
                                "a unique identifier")  # fmt: skip
            seen[spec.id] = f"{where}:row[{i}]"
            scenario = find_spec_file(spec.scenario, "scenarios", where=where,
                                      key=at + "scenario", base=path.parent)  # fmt: skip
            target, space = _frontier(spec, where, at)
            rows.append(Row(spec, path, i, scenario, _measured(spec, where, at), target, space,
                            _deployed(spec, where, at)))  # fmt: skip
    _check_rankings(rows)
    return rows


def _frontier(spec: RowSpec, where: str, at: str) -> tuple[Condition | None, Space | None]:
    """A frontier row's target and space (None, None for other rows, which may not give
    them)."""
    if spec.row_class not in SEARCHED:
        for key in FRONTIER_ONLY:
            if getattr(spec, key):
                raise SpecError(where, at + key, f"only frontier and disagg rows have {key}",
                                'class = "frontier" or "disagg", or no ' + key)  # fmt: skip
        return None, None
    if spec.fill_memory:
        raise SpecError(where, at + "fill_memory", "a frontier row's batch is searched",
                        "no fill_memory (search --batch spans the batch)")  # fmt: skip
    if not spec.at.strip():
        raise SpecError(where, at + "at", "missing", _expected("at"))
    try:
        target = parse_condition(spec.at, "at")
    except SpecError as e:
        raise SpecError(where, at + "at", f"{spec.at!r}: {e.problem}", e.expected) from None
    space = parse_space(spec.search, where, at + "search")
    if spec.row_class == "disagg" and "--workload" in spec.search:
        raise SpecError(where, at + "search", "a disagg row searches both pools' workloads",
                        "no --workload (decode and prefill pools are searched apart)")  # fmt: skip
    if space.prefill and spec.row_class != "disagg":
        raise SpecError(where, at + "search", f"{space.prefill[0]} is an option of a disaggregated "
                        "search", 'class = "disagg", or no ' + space.prefill[0])  # fmt: skip
    return target, space


def _deployed(spec: RowSpec, where: str, at: str) -> tuple[int, int] | None:
    """A disagg row's deployed prefill and decode GPUs (``"12:32"``); None for other rows,
    which may not give them."""
    if spec.row_class != "disagg":
        if spec.deployed:
            raise SpecError(where, at + "deployed", "only disagg rows have deployed",
                            'class = "disagg", or no deployed')  # fmt: skip
        return None
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", spec.deployed)
    if m is None or not all(int(g) > 0 for g in m.groups()):
        raise SpecError(where, at + "deployed", f"{spec.deployed!r}" if spec.deployed else
                        "missing", _expected("deployed"))  # fmt: skip
    return int(m.group(1)), int(m.group(2))


def _check_rankings(rows: Sequence[Row]) -> None:
    """Every ranking group's rows share one target and one metric."""
    first: dict[str, Row] = {}
    for r in rows:
        g = r.spec.ranking
        if not g:
            continue
        head = first.setdefault(g, r)
        for key in ("at", "metric"):
            if getattr(r.spec, key) != getattr(head.spec, key):
                raise SpecError(str(r.origin), f"row[{r.index}].{key}", f"{getattr(r.spec, key)!r}"
                                f" differs from {head.where} in ranking group {g!r}",
                                f"one {key} per ranking group")  # fmt: skip


def _expected(key: str) -> str:
    """What a row's ``key`` holds, from its declaration."""
    return str(attrs.fields_dict(RowSpec)[key].metadata.get("doc", "a value"))


def _measured(spec: RowSpec, where: str, at: str) -> float:
    if spec.metric not in METRICS and not spec.metric.startswith(("term.", "group.")):
        raise SpecError(where, at + "metric", f"unknown metric {spec.metric!r}"
                        f"{did_you_mean(spec.metric, METRICS)}",
                        "a metric such as tokens_per_s_per_gpu")  # fmt: skip
    unit = metric_unit(spec.metric)
    try:
        value, dim = parse_quantity(spec.measured)
        _, want = parse_unit(unit)
    except UnitError as e:
        raise SpecError(where, at + "measured", str(e), 'a value and unit, e.g. "5393 tokens/s"'
                        ) from None  # fmt: skip
    if dim != want:
        raise SpecError(where, at + "measured", f"{spec.measured!r} is not a {want} quantity",
                        f"a value in {unit or 'no unit'}, as {spec.metric} is")  # fmt: skip
    if not math.isfinite(value) or value <= 0:
        what = "positive" if math.isfinite(value) else "a finite number"
        raise SpecError(where, at + "measured", f"{spec.measured!r} is not {what}",
                        "a positive measured value")  # fmt: skip
    if not math.isfinite(spec.divide_by) or spec.divide_by <= 0:
        raise SpecError(where, at + "divide_by", f"{spec.divide_by} is not positive",
                        "a positive number")  # fmt: skip
    return value / spec.divide_by


def predict(
    rows: Sequence[Row],
    registry: Registry | None = None,
    progress: Callable[[int, int], None] | None = None,
    intervals: bands.Intervals | None = None,
) -> list[Result]:
    """Build each single-point row's model (shapes are shared, so a table costs a few builds)
    and read its metric; search once for each group of frontier rows (`predict_frontier`);
    band each prediction by the calibration ``intervals`` (default: the catalog manifests')
    and the stated ranges. ``progress(done, total)`` after each row."""
    registry = registry or registries.default()
    found = bands.calibration_intervals() if intervals is None else intervals
    searched = predict_frontier([r for r in rows if r.spec.row_class == "frontier"], registry,
                                found)  # fmt: skip
    searched.update(predict_disagg([r for r in rows if r.spec.row_class == "disagg"], registry,
                                   found))  # fmt: skip
    out: list[Result] = []
    for row in rows:
        out.append(searched[row.where] if row.space is not None else
                   _predict_point(row, registry, found))  # fmt: skip
        if progress:
            progress(len(out), len(rows))
    return out


_ROW_KEYS = {"--set": "set", "search": "search", "--vary": "search", "--decoding": "search"}


def _row_error(row: Row, e: SpecError) -> SpecError:
    """An error of a row's model or search, at the row (and its key, where one of the row's
    own values caused it)."""
    key = _ROW_KEYS.get(e.where, "")
    loc = e.key if key else f"{e.where}:{e.key}" if e.key else e.where
    return SpecError(str(row.origin), f"row[{row.index}]" + (f".{key}" if key else ""),
                     f"{loc}: {e.problem}", e.expected)  # fmt: skip


def _predict_point(row: Row, registry: Registry, intervals: bands.Intervals) -> Result:
    try:
        model = build_model(row.scenario, row.spec.set, registry)
    except SpecError as e:
        raise _row_error(row, e) from None
    names = metric_names(model)
    if row.spec.metric not in names:
        raise SpecError(str(row.origin), f"row[{row.index}].metric",
                        f"unknown metric {row.spec.metric!r}"
                        f"{did_you_mean(row.spec.metric, names)}",
                        "a metric such as tokens_per_s_per_gpu")  # fmt: skip
    overrides = {}
    filled = None
    if row.spec.fill_memory:
        users = model.provides["users"]  # the workload's users per replica
        filled = largest_feasible(model, users)
        overrides[users] = filled
    ev = model.evaluate(overrides)
    value = float(np.asarray(pick(model, ev, row.spec.metric), dtype=float))
    broken = model.violations(ev)
    if broken and row.spec.metric not in DIAGNOSTIC_METRICS:
        return Result(row, math.nan, broken[0].line, filled, model)
    ranged = bands.ranged_inputs(model, intervals, registry)
    band = bands.point_band(model, row.spec.metric, ranged, overrides)
    return Result(row, value, "", filled, model, band)


BASE = ("model", "hardware", "cluster", "engine")  # what a frontier row's scenario gives search


def search_base(row: Row) -> tuple[dict[str, str], list[str]]:
    """A frontier row's base scenario (after its ``from`` chain) as search takes it: the
    model, hardware, cluster and engine references (catalog names, or paths from the file
    that gave them), and those sections' other keys as --set assignments, but
    ``cluster.nodes`` (the search sizes the cluster) and ``sources``. Its workload, parallel
    and decoding are what the search spans (the row's ``set`` gives decoding settings)."""
    _, flat = read_scenario(str(row.scenario))
    refs: dict[str, str] = {}
    sets: list[str] = []
    for section in BASE:
        ref, origin = flat.get(section) or flat.get(f"{section}.from") or ("", "")
        if not isinstance(ref, str) or not (ref.strip() or section == "engine"):
            raise SpecError(str(row.origin), f"row[{row.index}].scenario",
                            f"{row.scenario} names no {section}", "a base scenario naming its "
                            "model, hardware and cluster (and engine)")  # fmt: skip
        refs[section] = str(Path(origin).parent / ref) if ref.endswith(".toml") else ref
        skip = {f"{section}.from", "cluster.nodes"}
        for key, (value, _) in flat.items():
            head, _, name = key.partition(".")
            if head == section and name and key not in skip and "sources" not in name.split("."):
                sets.append(f"{key}={json.dumps(value)}")
    return refs, sets


def predict_frontier(
    rows: Sequence[Row], registry: Registry, intervals: bands.Intervals
) -> dict[str, Result]:
    """Frontier rows' predictions by `Row.where`: one search per scenario, space, overrides
    and metric, with every target of its rows."""
    out: dict[str, Result] = {}
    for members in _groups(rows):
        run = _search(members, registry, intervals)
        for r in members:
            out[r.where] = _frontier_result(r, run)
    return out


def _search(members: Sequence[Row], registry: Registry, intervals: bands.Intervals
            ) -> FrontierRun:  # fmt: skip
    head = members[0]
    assert head.space is not None and head.target is not None  # frontier rows have both
    refs, sets = search_base(head)
    targets = tuple(dict.fromkeys(r.target for r in members if r.target is not None))
    known = metric_table(registry)
    minimize = frozenset(m.name for m in known.values() if m.minimize)
    metric, space = head.spec.metric, head.space
    spec = Spec(targets[0].metric, metric, metric, targets, space.where, minimize)
    try:
        plan = plan_search(refs["model"], [refs["hardware"]], [refs["cluster"]],
                           gpus=space.gpus, engines=[refs["engine"]], workload=space.workload,
                           isl=space.isl, osl=space.osl, decoding=space.decoding,
                           sets=(*sets, *head.spec.set), vary=[parse_vary(v) for v in space.vary],
                           batch=space.batch, spec=spec, registry=registry,
                           only=space.only)  # fmt: skip
    except SpecError as e:
        raise _row_error(head, e) from None
    result = run_search(plan)
    ends = bands.frontier_ends(result, bands.variant_ranges(plan, intervals, registry))
    label = f"{head.spec.scenario} ({space.isl}/{space.osl}, {', '.join(space.decoding)})"
    return FrontierRun(refs["hardware"], label, result, ends)


def _groups(rows: Sequence[Row]) -> list[list[Row]]:
    """Rows that share one search: the same scenario, space, overrides and metric."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.scenario, r.spec.search, r.spec.set, r.spec.metric), []).append(r)
    return list(groups.values())


def _counts(values: Sequence[int]) -> str | None:
    return ",".join(map(str, values)) if values else None


def disagg_options(members: Sequence[Row]) -> SearchOptions:
    """A group of disagg rows as ``stepwall search --disagg`` options: the base scenario's
    model, hardware, cluster and engine, the space, every row's target, the metric as the
    frontier's y and objective."""
    head = members[0]
    assert head.space is not None  # disagg rows have one
    refs, sets = search_base(head)
    space, metric = head.space, head.spec.metric
    prefill = dict(zip(space.prefill[::2], space.prefill[1::2], strict=True))
    ttft = [c.text for c in space.where]
    return SearchOptions(
        refs["model"], refs["hardware"], refs["cluster"], gpus=_counts(space.gpus),
        engine=refs["engine"] or None, isl=space.isl, osl=space.osl,
        decoding=list(space.decoding), batch=_counts(space.batch), vary=list(space.vary),
        only=[f"{k}={_counts(v)}" for k, v in space.only], sets=[*sets, *head.spec.set],
        y=metric, objective=metric, where=ttft,
        at=list(dict.fromkeys(r.spec.at for r in members)), disagg=True,
        prefill_gpus=prefill.get("--prefill-gpus"), prefill_batch=prefill.get("--prefill-batch"),
        prefill_only=[v for f, v in zip(space.prefill[::2], space.prefill[1::2], strict=True)
                      if f == "--prefill-only"],
        max_gpus=int(prefill["--max-gpus"]) if "--max-gpus" in prefill else None, quiet=True,
    )  # fmt: skip


def predict_disagg(
    rows: Sequence[Row], registry: Registry, intervals: bands.Intervals
) -> dict[str, Result]:
    """Disagg rows' predictions by `Row.where`: one disaggregated search (its pools alone,
    no aggregated space) per group of rows (`_groups`), each row the best deployment at its
    target, with its prefill and decode GPUs and its band (`_disagg_ends`)."""
    out: dict[str, Result] = {}
    for members in _groups(rows):
        head = members[0]
        try:
            ns = disagg_options(members)
            spec = search_spec(ns, registry)
            _, decode, prefill, request = disagg.plans(ns, registry, spec, aggregated=False)
        except SpecError as e:
            raise _row_error(head, e) from None
        result = disagg.combine(None, decode, prefill, request, spec=spec)
        ends = _disagg_ends(result, intervals, registry)
        degrees = tuple(dict.fromkeys((*layout_degrees(decode), *layout_degrees(prefill))))
        for r in members:
            t = ns.at.index(r.spec.at)
            p = result.best[t]["options"][0]["point"]
            if p is None:
                out[r.where] = Result(r, math.nan, f"no deployment of the space meets {r.spec.at}")
                continue
            chosen = (f"{p['prefill_gpus']}:{p['decode_gpus']} GPUs, "
                      f"{disagg.deployment_text(p, degrees)}")  # fmt: skip
            split = (int(p["prefill_gpus"]), int(p["decode_gpus"]))
            metric = r.spec.metric
            band = None
            if ends is not None:
                band = _band([_best(e, t, metric) for e in ends], metric in spec.minimize)
            out[r.where] = Result(r, float(p[metric]), "", band=band, chosen=chosen, split=split)
    return out


def _disagg_ends(
    result: disagg.DisaggResult, intervals: bands.Intervals, registry: Registry
) -> tuple[disagg.DisaggResult, disagg.DisaggResult] | None:
    """The disaggregated search again with both pools at the pessimistic end of every ranged
    input, then at the optimistic end (each pool's directions at the first target's nominal
    best deployment's point in it); None where neither pool has a ranged input or no target
    has a deployment."""
    best = next((o["point"] for e in result.best for o in e["options"] if o["point"]), None)
    if best is None:
        return None
    pools = []
    for plan, side in ((result.decode, "decode"), (result.prefill, "prefill")):
        boxes = bands.variant_ranges(plan, intervals, registry)
        if not any(boxes):
            pools.append((plan, plan))
            continue
        pools.append(bands.end_plans(plan, int(best[side]["id"]), boxes))
    if all(low is high for low, high in pools):
        return None
    (d_low, d_high), (p_low, p_high) = pools
    return (disagg.combine(None, d_low, p_low, result.request, spec=result.spec),
            disagg.combine(None, d_high, p_high, result.request, spec=result.spec))  # fmt: skip


def _best(result: SearchResult | disagg.DisaggResult, t: int, metric: str) -> float | None:
    """The best ``metric`` at the ``t``-th target (None: no configuration meets it)."""
    p = result.best[t]["options"][0]["point"]
    return None if p is None or p[metric] is None else float(p[metric])


def _frontier_result(row: Row, run: FrontierRun) -> Result:
    """A frontier row's best at its target, its configuration and band (an end where the
    target is out of reach is 0, or infinite for a metric to minimise)."""
    plan = run.result.plan
    t = plan.spec.targets.index(row.target)
    metric = row.spec.metric
    entry = run.result.best[t]["options"][0]
    best = _best(run.result, t, metric)
    if best is None:
        near = entry.get("nearest")
        why = f"no configuration of the space meets {row.spec.at}"
        near_text = f"; the nearest gives {nearest_text(near)}" if near else ""
        return Result(row, math.nan, why + near_text, run=run)
    c = entry["point"]["config"]
    gpus = f"{c['gpus']} GPU{'s' if c['gpus'] != 1 else ''}"
    chosen = f"{gpus} {config_text(c, layout_degrees(plan))}; {entry['binding']}"
    band = None
    if run.ends is not None:
        band = _band([_best(e, t, metric) for e in run.ends], metric in plan.spec.minimize)
    return Result(row, best, "", None, None, band, chosen, run)


def _band(ends: Sequence[float | None], minimize: bool) -> tuple[float, float]:
    """[low, high] of a searched best at the two ends of its ranged inputs; an end where the
    target is out of reach counts as 0, or infinite for a metric to minimise."""
    vals = [(math.inf if minimize else 0.0) if v is None else v for v in ends]
    return min(vals), max(vals)


def largest_feasible(model: Any, key: str, limit: int = 1 << 22) -> int:
    """The largest whole value of ``key`` at which every constraint holds (1 if none does),
    by doubling then bisection: feasibility falls once as the value grows (memory)."""

    def ok(v: int) -> bool:
        return bool(np.all(model.evaluate({key: v})["feasible"]))

    if not ok(1):
        return 1
    lo, hi = 1, 2
    while hi < limit and ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Median and worst |error| over all rows and per class. An infeasible row has no
    prediction: it is counted (``infeasible``) and left out of the median and the worst,
    which are NaN where no row is feasible."""

    def stats(rs: Sequence[Result]) -> dict[str, Any]:
        ok = [r for r in rs if r.infeasible == ""]
        errs = [abs(r.error) for r in ok]
        worst = max(range(len(ok)), key=lambda i: errs[i], default=None)
        return {
            "rows": len(rs),
            "infeasible": len(rs) - len(ok),
            "median_abs_error": float(np.median(errs)) if errs else math.nan,
            "worst_abs_error": math.nan if worst is None else errs[worst],
            "worst_row": "" if worst is None else ok[worst].row.spec.id,
            "within_15pct": sum(e <= 0.15 for e in errs),
        }

    classes = sorted({r.row.spec.row_class for r in results}, key=list(CLASSES).index)
    return {
        **stats(results),
        "classes": {c: stats([r for r in results if r.row.spec.row_class == c]) for c in classes},
        "coverage": coverage(results),
        "rankings": rankings(results),
        "splits": splits(results),
    }


def coverage(results: Sequence[Result]) -> dict[str, Any]:
    """How many feasible rows have a band, how many measurements lie inside theirs, and that
    fraction (NaN where no row has a band)."""
    banded = [r for r in results if r.inside is not None]
    inside = sum(bool(r.inside) for r in banded)
    return {
        "banded": len(banded),
        "inside": inside,
        "fraction": inside / len(banded) if banded else math.nan,
        "unbanded": sum(1 for r in results if r.inside is None and not r.infeasible),
    }


def rankings(results: Sequence[Result]) -> list[dict[str, Any]]:
    """Per ranking group: its rows ordered best first by measured value and by prediction
    (rows without a prediction last, in measured order), and whether the orders match."""
    groups: dict[str, list[Result]] = {}
    for r in results:
        if r.row.spec.ranking:
            groups.setdefault(r.row.spec.ranking, []).append(r)
    out = []
    for name, rs in groups.items():
        sign = -1.0 if rs[0].row.spec.metric in MINIMIZE else 1.0
        measured = sorted(rs, key=lambda r: -sign * r.row.measured)
        predicted = sorted(
            measured, key=lambda r: (bool(r.infeasible), 0 if r.infeasible else -sign * r.predicted)
        )
        out.append({
            "group": name,
            "at": rs[0].row.spec.at,
            "measured": [r.row.spec.id for r in measured],
            "predicted": [r.row.spec.id for r in predicted],
            "match": measured == predicted,
        })  # fmt: skip
    return out


def document(results: Sequence[Result]) -> dict[str, Any]:
    """The JSON document of ``stepwall validate --json``."""
    return {
        "rows": [
            {
                "id": r.row.spec.id,
                "class": r.row.spec.row_class,
                "scenario": r.row.spec.scenario,
                "set": list(r.row.spec.set),
                "metric": r.row.spec.metric,
                "unit": metric_unit(r.row.spec.metric),
                "measured": r.row.measured,
                "predicted": None if r.infeasible else r.predicted,
                "error": None if r.infeasible else r.error,
                "infeasible": r.infeasible or None,
                "filled_concurrency": r.concurrency,
                "band": None if r.band is None or r.infeasible else list(r.band),
                "inside_band": r.inside,
                "at": r.row.spec.at or None,
                "chosen": r.chosen or None,
                "deployed": _split(r.row.deployed),
                "predicted_split": None if r.infeasible else _split(r.split),
                "ratio_factor": r.ratio_factor,
                "source": r.row.spec.source,
                "url": r.row.spec.url,
                "date": r.row.spec.date,
                "table": str(r.row.origin),
            }
            for r in results
        ],
        "summary": summary(results),
    }


def _split(gpus: tuple[int, int] | None) -> str | None:
    """Prefill and decode GPUs as ``"12:32"`` (None: none)."""
    return None if gpus is None else f"{gpus[0]}:{gpus[1]}"


def splits(results: Sequence[Result]) -> dict[str, Any]:
    """How many disagg rows pick a prefill:decode GPU ratio within `RATIO_FACTOR` of the
    deployed one's, of those with a prediction."""
    got = [r.ratio_factor for r in results if r.ratio_factor is not None]
    within = sum(1 / RATIO_FACTOR <= f <= RATIO_FACTOR for f in got)
    return {"rows": len(got), "within": within, "factor": RATIO_FACTOR}


def fmt_error(r: Result) -> str:
    return "infeasible" if r.infeasible else f"{r.error:+.1%}"


def fmt_value(v: float) -> str:
    if not math.isfinite(v):
        return "—"
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def text(results: Sequence[Result]) -> str:
    """The table ``stepwall validate`` prints: each row, then the summary."""
    head = ("id", "class", "metric", "measured", "predicted", "error", "band")
    body = [
        (r.row.spec.id, r.row.spec.row_class, r.row.spec.metric, fmt_value(r.row.measured),
         fmt_value(r.predicted), fmt_error(r), fmt_band(r))
        for r in results
    ]  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    right = {3, 4, 5}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body), ""]
    s = summary(results)
    out.append(_summary_line("all", s))
    for c, cs in s["classes"].items():
        out.append(_summary_line(c, cs))
    out += [_coverage_line(s["coverage"]), *(_ranking_line(g) for g in s["rankings"])]
    for r in results:
        if r.concurrency is not None:
            out.append(f"{r.row.spec.id}: batch that fills memory: {r.concurrency} per replica")
    if s["splits"]["rows"]:
        sp_ = s["splits"]
        out.append(f"P/D split: {sp_['within']} of {sp_['rows']} disagg rows pick a prefill:decode "
                   f"GPU ratio within ×{sp_['factor']:g} of the deployed one's")  # fmt: skip
    for r in results:
        if r.chosen:
            ratio = r.ratio_factor
            versus = (f" (deployed {_split(r.row.deployed)}: ratio ×{ratio:.2f})"
                      if ratio is not None else "")  # fmt: skip
            out.append(f"{r.row.spec.id}: best at {r.row.spec.at}: {r.chosen}{versus}")
    for r in results:
        if r.infeasible:
            out.append(f"{r.row.spec.id}: infeasible ({r.infeasible})")
    if s["infeasible"]:
        many = s["infeasible"] > 1
        out.append(f"{s['infeasible']} infeasible row{'s have' if many else ' has'} no "
                   "prediction: left out of the median, the worst and within 15%")  # fmt: skip
    return "\n".join(out) + "\n"


def fmt_band(r: Result) -> str:
    """``[low, high]`` (``in`` after it where the measurement lies inside); "—" for none."""
    if r.band is None or r.infeasible:
        return "—"
    return f"[{fmt_value(r.band[0])}, {fmt_value(r.band[1])}]" + (" in" if r.inside else "")


def _coverage_line(c: dict[str, Any]) -> str:
    if not c["banded"]:
        return f"band coverage: no row has a band ({c['unbanded']} without a ranged input)"
    rest = f"; {c['unbanded']} rows without a ranged input" if c["unbanded"] else ""
    return (f"band coverage: {c['inside']} of {c['banded']} measurements inside their band "
            f"({c['fraction']:.0%}){rest}")  # fmt: skip


def _ranking_line(g: dict[str, Any]) -> str:
    word = "match" if g["match"] else "MISMATCH"
    return (f"ranking {g['group']} at {g['at']}: {word}; measured {' > '.join(g['measured'])}; "
            f"predicted {' > '.join(g['predicted'])}")  # fmt: skip


def _summary_line(name: str, s: dict[str, Any]) -> str:
    median, worst = s["median_abs_error"], s["worst_abs_error"]
    if not math.isfinite(worst):
        return f"{name:<11} {s['rows']:>3} rows  none feasible"
    return (
        f"{name:<11} {s['rows']:>3} rows  median |error| {median:.1%}  "
        f"worst {worst:.1%} ({s['worst_row']})  within 15%: {s['within_15pct']}"
        + (f"  infeasible: {s['infeasible']}" if s["infeasible"] else "")
    )


__all__ = [
    "CLASSES",
    "Result",
    "Row",
    "RowSpec",
    "Space",
    "coverage",
    "default_tables",
    "document",
    "largest_feasible",
    "load_rows",
    "metric_unit",
    "parse_space",
    "predict",
    "predict_frontier",
    "rankings",
    "search_base",
    "splits",
    "summary",
    "text",
]
