"""Configuration search: the Pareto frontier of a model's serving layouts on several hardware
options, the best layout at each interactivity target, and why it is the best.

What is searched (`plan_search`). For each hardware option (a GPU spec with its cluster, and
an engine profile of ``--engine``'s list: one option per hardware and engine) and each
decoding kind, the model is compiled once (`stepwall.model.compose.compile_scenario`, from the
disk cache when its shape was compiled before): one *variant*. Each variant's space is the
product of

- layouts: for each deployment size N (``--gpus``), those the scenario's parallel kind lists
  (``stepwall_layouts``; the built-in one: every tp dividing N within one scale-up domain,
  every ep dividing N/tp, and dp = N/(tp·ep) replicas), the cluster sized to the
  deployment: its N GPUs and at least one scale-up domain (its ``nodes`` requirement,
  `deployment_nodes`);
- the batch per attention rank b (``--batch``): a replica of a layout with r attention ranks
  serves b·r users (the workload's ``users`` requirement; the built-in layouts: r = ep), so
  wide-EP layouts are searched at the same per-rank batches as TP layouts;
- any other numeric axes (``--vary KEY=VALUES``).

None of these keys decides the model's shape (a key that does, a *structural* key, splits the
variant into one compiled model per value), so a chunk of the space is one vectorized call of
the compiled closed form. Chunks are independent: each returns its own Pareto frontier and its
best point per target, and merging them gives the same answer in any order or grouping
(`merge`), which is what lets ``--dask`` spread chunks over processes or machines and still
agree exactly with the single-process run, in memory bounded by the chunk size.

Every reported point satisfies every constraint of the model (memory, divisibility, cluster
size, …: the compiled ``feasible``) and every ``--where``/``--ttft`` filter; its metrics are
evaluated again from its configuration at the end, and its ``command`` is the ``stepwall
eval`` line that reproduces it.

Pareto order. A point dominates another when it is at least as good on both axes and better
on one, or equal on both and earlier in the enumeration (its point id), so the frontier is
unique and independent of how the space was chunked.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
import logging
import math
import os
import re
import shlex
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.apps import launch
from stepwall.apps.report.plots import _figure, _svg
from stepwall.apps.sweep import MAX_VALUES, axis_values, check_points, parse_span, parse_vary
from stepwall.core.errors import SpecError, UnitError, did_you_mean, first_repeat
from stepwall.core.progress import ProgressBar
from stepwall.core.scenario import Scenario
from stepwall.core.terminal import visible, warn
from stepwall.core.units import parse_quantity, parse_unit
from stepwall.io import output
from stepwall.io.formats import Column, Table, write_json
from stepwall.model.compose import compile_scenario
from stepwall.model.economics import NEEDS
from stepwall.model.metrics import (
    BUILTIN_METRICS,
    METRIC_UNITS,
    METRICS,
    MINIMIZE,
    OPTIONAL_METRICS,
    declared,
)
from stepwall.numeric.compiled import CompiledModel, keep_freed_memory
from stepwall.plugin import registry as registries
from stepwall.plugin.entries import Layouts, LayoutTable, Metric
from stepwall.plugin.registry import Registry
from stepwall.plugin.requirements import path as requirement_path
from stepwall.spec.loader import CATALOG_DIRS, INLINE
from stepwall.spec.validation import load_scenario

CHUNK = 65_536
MAX_GPUS = 65_536  # GPUs in one deployment (--gpus)
# drafts an `mtp` search tries when none are given: the MTP1-MTP3 the engines' DeepSeek recipes
# run (TensorRT-LLM tech blog 1's ablation peaks at MTP3; InferenceX recipes mtp1-mtp3)
MTP_DRAFTS = (1, 2, 3)
DEFAULT_BATCH = (
    1,
    2,
    3,
    4,
    6,
    8,
    12,
    16,
    24,
    32,
    48,
    64,
    96,
    128,
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
)
AIC_CONFIGS_PER_S = 150.0  # aiconfigurator's own search rate (~900 configurations in ~6 s)


# ---------------------------------------------------------------- conditions


@attrs.frozen
class Condition:
    """``metric op value`` (value in SI), e.g. tokens_per_s_per_user >= 50."""

    metric: str
    op: str
    value: float
    text: str

    def holds(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.asarray(_OPS[self.op](x, self.value), dtype=bool)


_OPS: dict[str, Callable[[Any, float], Any]] = {
    ">=": np.greater_equal,
    "<=": np.less_equal,
    ">": np.greater,
    "<": np.less,
}
_COND = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)?\s*(>=|<=|>|<)\s*(\S.*?)\s*$")


def parse_condition(
    text: str, where: str, metric: str | None = None, known: Mapping[str, Metric] | None = None
) -> Condition:
    """``"tokens_per_s_per_user>=50"``, ``"ttft_s<=2s"``; with ``metric`` the name may be
    left out (``--ttft "<=2s"``). Values take units of the metric's dimension (2s, 500ms;
    a bare number is in the metric's own unit) and are > 0, as every metric is. ``known``:
    the metrics by name (default: the built-in ones; `metric_table` adds plugins')."""
    m = _COND.match(text)
    expect = 'METRIC>=VALUE or METRIC<=VALUE, e.g. "tokens_per_s_per_user>=50"'
    if not m or not (m.group(1) or metric):
        raise SpecError(where, text, "not a condition", expect)
    name = m.group(1) or metric or ""
    unit = (known or _BUILTIN)[check_metric(name, where, known)].unit
    try:
        value, dim = parse_quantity(m.group(3))
        want = parse_unit(unit)[1]
    except UnitError as e:
        raise SpecError(where, text, str(e), expect) from None
    if not math.isfinite(value):
        raise SpecError(where, text, "the value is not finite", expect)
    if dim != want and not dim.dimensionless:
        raise SpecError(where, text, f"{m.group(3)!r} is not {unit or 'a plain number'} "
                        f"({dim} is not {want})", f"a value in {unit or 'no unit'}, as {name} "
                        "is")  # fmt: skip
    if value <= 0:
        raise SpecError(where, text, f"{name} is positive, so {m.group(3)!r} cannot bound it",
                        f"a value > 0 in {unit or 'no unit'}")  # fmt: skip
    return Condition(name, m.group(2), value, f"{name}{m.group(2)}{m.group(3)}")


def check_consistent(conditions: Sequence[Condition], where: str) -> None:
    """Refuse conditions on one metric that no value meets together (x>=10 and x<=5)."""
    for name in dict.fromkeys(c.metric for c in conditions):
        own = [c for c in conditions if c.metric == name]
        lows = [c for c in own if c.op in (">=", ">")]
        highs = [c for c in own if c.op in ("<=", "<")]
        if not lows or not highs:
            continue
        lo = max(lows, key=lambda c: (c.value, c.op == ">"))
        hi = min(highs, key=lambda c: (c.value, c.op != "<"))
        if lo.value > hi.value or (lo.value == hi.value and (lo.op == ">" or hi.op == "<")):
            raise SpecError(where, f"{lo.text} and {hi.text}", "no value meets both",
                            f"conditions on {name} that some value meets")  # fmt: skip


_BUILTIN = {m.name: m for m in BUILTIN_METRICS}


def metric_table(registry: Registry) -> dict[str, Metric]:
    """The metrics a search may name: the built-in ones, then the plugins' (by name)."""
    return {m.name: m for m in declared(registry)}


def check_metric(name: str, where: str, known: Mapping[str, Metric] | None = None) -> str:
    """``name``, a metric of ``known`` (default: the built-in ones); else a SpecError."""
    names = tuple(known or _BUILTIN)
    if name not in names:
        raise SpecError(
            where,
            name,
            f"unknown metric{did_you_mean(name, names)}",
            f"one of: {', '.join(names)}",
        )
    return name


# ---------------------------------------------------------------- the plan


@attrs.frozen
class Option:
    """One hardware option: a GPU spec on a cluster, served by an engine profile ("": the
    plugin's default) (one curve on the chart)."""

    label: str
    hardware: str
    cluster: str
    engine: str = ""


@attrs.frozen
class Variant:
    """One compiled model and the space searched through it (see the module doc)."""

    option: Option
    decoding: str
    ref: str  # the inline scenario (model=…,hardware=…,…)
    sets: tuple[str, ...]  # --set assignments before the searched keys
    numeric: CompiledModel
    values: Mapping[str, float]  # the scenario's SI values
    layouts: LayoutTable  # the parallel kind's layouts (one row each)
    nodes: np.ndarray  # each layout's own nodes (`deployment_nodes`)
    batch: np.ndarray  # users per attention rank
    axes: tuple[tuple[str, tuple[Any, ...], np.ndarray], ...]  # (key, given, SI) of --vary
    ranges: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)  # ranged spec values
    provides: Mapping[str, str] = attrs.field(factory=dict)  # requirement -> its spec path
    pinned: Mapping[str, float] = attrs.field(factory=dict)  # structural --vary values (SI)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.layouts.gpus), len(self.batch), *(len(a[2]) for a in self.axes))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def searched(self) -> tuple[str, ...]:
        return _searched(tuple(self.layouts.degrees), self.provides)

    def columns(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """The searched keys' values (SI) at local point indices ``idx``."""
        return _columns(self._grid_data(), idx)

    def _grid_data(self) -> dict[str, Any]:
        """What `_values` reads: each layout's keys (the degrees, then the nodes), its
        attention ranks, the users key, the batch and the --vary axes."""
        layouts = {**self.layouts.degrees, self.provides["nodes"]: self.nodes}
        return {
            "layouts": {k: np.asarray(v) for k, v in layouts.items()},
            "ranks": np.asarray(self.layouts.ranks),
            "users": self.provides["users"],
            "batch": np.asarray(self.batch),
            "axes": [(k, list(g), np.asarray(s)) for k, g, s in self.axes],
        }

    def payload(self) -> dict[str, Any]:
        """What a worker needs to evaluate chunks (plain data: picklable, no functions). This
        process keeps the compiled model under the payload's key (`model_of` finds it: chunks
        run here are not recompiled from the JSON)."""
        key = f"{self.ref}|{self.sets}|{zlib.crc32(self.numeric.source.encode()):08x}"
        _remember(key, self.numeric)
        return {
            "key": key,
            "model": self.numeric.to_json(),
            "values": dict(self.values),
            **self._grid_data(),
        }


@attrs.frozen
class Spec:
    """What to compute in each chunk: the frontier's axes, the objective, the targets and
    the filters every reported point must pass."""

    x: str = "tokens_per_s_per_user"
    y: str = "tokens_per_s_per_gpu"
    objective: str = "tokens_per_s_per_gpu"
    targets: tuple[Condition, ...] = ()
    where: tuple[Condition, ...] = ()
    minimize: frozenset[str] = MINIMIZE  # the metrics less of which is better

    def sign(self, metric: str) -> float:
        """-1 for a metric to minimize, so that larger is better for every axis."""
        return -1.0 if metric in self.minimize else 1.0

    @property
    def needed(self) -> tuple[str, ...]:
        names = [self.x, self.y, self.objective, *(c.metric for c in (*self.targets, *self.where))]
        return tuple(dict.fromkeys(names))


@attrs.frozen
class Plan:
    model: str
    options: tuple[Option, ...]
    variants: tuple[Variant, ...]
    spec: Spec
    engines: tuple[str, ...]  # --engine's profiles ((): the plugin's default)
    workload: str
    warnings: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(v.size for v in self.variants)

    @property
    def offsets(self) -> list[int]:
        out, at = [], 0
        for v in self.variants:
            out.append(at)
            at += v.size
        return out


def _inline(model: str, hardware: str, cluster: str, engine: str) -> str:
    parts = [f"model={model}", f"hardware={hardware}", f"cluster={cluster}"]
    if engine:
        parts.append(f"engine={engine}")
    return ",".join(parts)


def _short(x: float) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.10g}"


def _check_request(
    hardware: Sequence[str],
    clusters: Sequence[str],
    engines: Sequence[str],
    gpus: Sequence[int],
    workload: str,
    isl: int,
    osl: int,
    decoding: Sequence[str],
    sets: Sequence[str],
    vary: Sequence[tuple[str, Any]],
    batch: Sequence[float],
    spec: Spec,
    registry: Registry,
) -> None:
    """Reject a search request that is wrong before any scenario is loaded, naming the flag
    (`plan_search`'s arguments).

    Stays whole: a flat list of independent checks, one per flag, in the order the errors are
    reported.
    """
    for name in (spec.x, spec.y, spec.objective):
        check_metric(name, "search", metric_table(registry))
    if not hardware:
        raise SpecError("search", "--hardware", "missing", "one or more GPU specs, e.g. h200,b200")
    if len(clusters) not in (1, len(hardware)):
        raise SpecError(
            "search",
            "--cluster",
            f"{len(clusters)} clusters for {len(hardware)} hardware",
            "one cluster, or one per hardware in the same order",
        )
    if workload not in ("serving", "decode", "prefill"):  # prefill: a P/D search's pools
        raise SpecError(
            "search", "--workload", f"{workload!r} is not searched", "serving or decode"
        )
    for flag, tokens in (("--isl", isl), ("--osl", osl)):
        if tokens < 1:
            raise SpecError("search", flag, f"{tokens} tokens per request", "at least 1, e.g. 1024")
    for flag, given in (("--batch", batch), ("--gpus", gpus)):
        if len(given) > MAX_VALUES:
            raise SpecError("search", flag, f"{len(given):,} values",
                            f"at most {MAX_VALUES:,} on one axis")  # fmt: skip
    twice_engine = first_repeat(engines)
    if twice_engine is not None:
        raise SpecError("--engine", twice_engine, "is given twice", "each engine once")
    if not decoding:
        raise SpecError("search", "--decoding", "names no decoding kind",
                        "KIND[,KIND…], e.g. autoregressive,mtp")  # fmt: skip
    twice = first_repeat(decoding)
    if twice is not None:
        raise SpecError("--decoding", twice, "is given twice", "each decoding kind once")
    pairs = list(zip(hardware, list(clusters) * len(hardware) if len(clusters) == 1 else clusters,
                     strict=True))  # fmt: skip
    twice_pair = first_repeat(pairs)
    if twice_pair is not None:
        raise SpecError("--hardware", twice_pair[0], f"is given twice on {twice_pair[1]}",
                        "each hardware and cluster pair once")  # fmt: skip
    for flag, keys in (("--set", [a.partition("=")[0].strip() for a in sets]),
                       ("--vary", [k for k, _ in vary])):  # fmt: skip
        for k in keys:
            if k.removesuffix(".from") in CATALOG_DIRS:  # --set engine=NAME: an option's own
                raise SpecError(flag, k, "is named by the search's options",
                                "MODEL, --hardware, --cluster and --engine E[,E2,…]")  # fmt: skip
            if k == "decoding.kind":
                raise SpecError(flag, k, "is searched", "--decoding KIND[,KIND…]")
            if k.startswith("decoding.") and set(decoding) == {"autoregressive"}:
                raise SpecError(flag, k, "is a setting of no searched decoding kind "
                                "(autoregressive has none)", "--decoding with a kind that has "
                                "it, e.g. --decoding autoregressive,mtp")  # fmt: skip
    if any(b < 1 for b in batch) or not batch:
        raise SpecError("search", "--batch", "users per rank must be at least 1", "e.g. 1..2048:x2")
    if any(n < 1 for n in gpus):
        raise SpecError("search", "--gpus", "must be at least 1 GPU", "e.g. 8,16,72")
    if gpus and max(gpus) > MAX_GPUS:
        raise SpecError("search", "--gpus", f"{max(gpus):,} GPUs in one deployment",
                        f"at most {MAX_GPUS:,}")  # fmt: skip
    check_consistent(spec.where, "--where")
    for i, t in enumerate(spec.targets):
        check_consistent([*spec.where, t], "--at")
        if any((t.metric, t.op, t.value) == (u.metric, u.op, u.value) for u in spec.targets[:i]):
            raise SpecError("--at", t.text, "is given twice", "each target once")
    set_keys = {s.partition("=")[0].strip() for s in sets}
    for i, (k, _) in enumerate(vary):
        if any(k == j for j, _ in vary[:i]):  # as in sweep: the first would be dropped
            raise SpecError("--vary", k, "varied twice", "each key once")
        if k in set_keys:
            raise SpecError("--vary", k, "also given with --set", "a key either set or varied")


def _searched(degrees: tuple[str, ...], provides: Mapping[str, str]) -> tuple[str, ...]:
    """The keys a search sets at each point: the layout's ``degrees``, the cluster's nodes and
    the workload's users (by the paths that provide those requirements)."""
    return (*degrees, provides["nodes"], provides["users"])


def _searched_error(
    sets: Sequence[str], vary: Sequence[tuple[str, Any]], searched: Sequence[str]
) -> SpecError | None:
    """The refusal of a --set or --vary of a key the search sets itself (`_searched`); None
    when there is none."""
    for k, _ in vary:
        if k in searched:
            return SpecError(
                "search",
                "--vary",
                f"{k} is searched already",
                "--gpus and --batch shape the layouts",
            )
    for s in sets:
        k = s.partition("=")[0].strip()
        if k in searched:
            return SpecError("search", "--set", f"{k} is searched", "--gpus and --batch")
    return None


def plan_search(
    model: str,
    hardware: Sequence[str],
    clusters: Sequence[str],
    *,
    gpus: Sequence[int] = (),
    engines: Sequence[str] = (),
    workload: str = "serving",
    isl: int = 1024,
    osl: int = 1024,
    decoding: Sequence[str] = ("autoregressive",),
    sets: Sequence[str] = (),
    vary: Sequence[tuple[str, Any]] = (),
    batch: Sequence[float] = DEFAULT_BATCH,
    spec: Spec | None = None,
    registry: Any = None,
    cache: bool = True,
    only: Sequence[tuple[str, Sequence[int]]] = (),
    emit: str | None = None,
) -> Plan:
    """Check everything and compile one model per variant: all but the evaluation; ``only``
    keeps the layouts whose degree KEY is one of its values (``--only parallel.tp=8``), and
    ``emit`` those its engine launches as priced (`launch.runs_layouts`)."""

    registry = registry or registries.default()
    spec = spec or Spec()
    _check_request(hardware, clusters, engines, gpus, workload, isl, osl, decoding, sets, vary,
                   batch, spec, registry)  # fmt: skip
    options = _options(hardware, clusters, engines)
    base = [
        f"workload.kind={workload}",
        f"workload.input_tokens={isl}",
        f"workload.output_tokens={osl}",
    ]
    if workload == "decode":
        base.append(f"workload.context={_short(isl + osl / 2)}")
    users = requirement_path(registry.kinds, {"workload": workload}, "users")
    variants: list[Variant] = []
    warnings: list[str] = []
    total = 0  # points of the variants so far (structural ones included)
    for opt in options:
        ref = _inline(model, opt.hardware, opt.cluster, opt.engine)
        for kind in decoding:
            own = [*base, f"decoding.kind={kind}"]
            mine = [s for s in sets if not _foreign(s, kind)]
            kind_vary = _decoding_axes(kind, sets, vary)
            # a varied key needs a value to load the scenario: its first (the axis sets each)
            firsts = [f"{k}={_first(v)}" for k, v in kind_vary if not _skip(k, kind)]
            probe = [*own, *mine, *firsts, *([f"{users}=1"] if users else [])]
            sc = _load_variant(ref, registry, probe, model, opt, kind, kind_vary, sets)
            lay, provides, searched = _space(registry, sc, sets, kind_vary)
            warnings += sc.warnings
            axes = [axis_values(sc, k, v, warnings) for k, v in kind_vary if not _skip(k, kind)]
            values = {s.name: float(v) for s, v in sc.values.items()}
            domain, nodes, per_node = (int(values[provides[r]]) for r in
                                       ("scale_up_domain", "nodes", "gpus_per_node"))  # fmt: skip
            sizes = list(gpus) or [nodes * per_node]
            rest = len(set(batch)) * math.prod(len(a.si) for a in axes)
            total += lay.count(sizes, domain) * rest
            check_points(total, "search", "narrow --batch, --gpus or --vary")
            layouts = kept_layouts(lay.table(sizes, domain), lay.keys, only, emit, sizes)
            numeric = compile_scenario(sc, registry, cache=cache)
            bad = [k for k in searched if k in numeric.structural_keys]
            if bad:
                raise SpecError("search", bad[0], "decides the model's shape here",
                                "a model whose layout keys are numeric")  # fmt: skip
            layouts_of = functools.partial(_layouts_at, registry, sizes, domain, lay.keys, only,
                                           emit)  # fmt: skip
            found = _pinned_variants(opt, kind, ref, registry, probe, (*own, *mine), sc,
                                     numeric, values, layouts, layouts_of, batch, axes, cache,
                                     provides)  # fmt: skip
            if not found:
                raise SpecError("search", "--vary", f"no variant has a layout of "
                                f"{', '.join(map(str, sizes))} GPUs",
                                "pipeline stages that divide --gpus")  # fmt: skip
            variants += found
    return Plan(model, options, tuple(variants), spec, tuple(engines), workload,
                tuple(dict.fromkeys(warnings)))  # fmt: skip


def _options(
    hardware: Sequence[str], clusters: Sequence[str], engines: Sequence[str]
) -> tuple[Option, ...]:
    """One option per hardware (with its cluster) and engine, labelled by the hardware (and
    its cluster where a hardware is given twice), and by the engine where there are several."""
    cl_list = list(clusters) * (len(hardware) if len(clusters) == 1 else 1)
    labels = [
        h if hardware.count(h) == 1 else f"{h}/{c}" for h, c in zip(hardware, cl_list, strict=True)
    ]
    return tuple(
        Option(lb if len(engines) < 2 else f"{lb} {e}", h, c, e)
        for lb, h, c in zip(labels, hardware, cl_list, strict=True)
        for e in engines or [""]
    )


def _space(
    registry: Registry, sc: Scenario, sets: Sequence[str], vary: Sequence[tuple[str, Any]]
) -> tuple[Layouts, dict[str, str], tuple[str, ...]]:
    """The scenario's layouts (`_layouts`), the paths that provide its requirements and the
    keys the search sets (`_searched`), once no --set or --vary names one of those."""
    lay, provides = _layouts(registry, sc), registry.paths(sc)
    searched = _searched(lay.keys, provides)
    refused = _searched_error(sets, vary, searched)
    if refused is not None:
        raise refused
    return lay, provides, searched


def parse_only(text: str) -> tuple[str, tuple[int, ...]]:
    """``"parallel.tp=8"`` or ``"parallel.ep=1,8"`` -> (key, degrees); a bad one is a one-line
    SpecError on ``--only``."""
    key, eq, values = (t.strip() for t in text.partition("="))
    expected = "KEY=N[,N2,…] with KEY a layout degree, e.g. parallel.tp=8"
    if not eq or not key or not values:
        raise SpecError("search", "--only", f"{text!r} is not KEY=VALUES", expected)
    try:
        degrees = tuple(int(v) for v in values.split(","))
    except ValueError:
        raise SpecError("search", "--only", f"{values!r} are not whole numbers", expected) from None
    if any(d < 1 for d in degrees):
        raise SpecError("search", "--only", f"{values!r} has a degree below 1", expected)
    return key, degrees


def only_layouts(table: LayoutTable, keys: Sequence[str],
                 only: Sequence[tuple[str, Sequence[int]]], sizes: Sequence[int],
                 refuse: bool = True) -> LayoutTable:  # fmt: skip
    """The rows of ``table`` whose degree KEY is one of the values, for each (KEY, values) of
    ``only`` (a benchmark that ran one layout family, e.g. TP8 on one node); none left is
    refused unless ``refuse`` is false (one structural variant of several)."""
    if not only:
        return table
    keep = np.ones(len(table.gpus), dtype=bool)
    for key, values in only:
        if key not in keys:
            raise SpecError("search", "--only", f"{key} is not a degree the layouts set"
                            f"{did_you_mean(key, keys)}", f"one of {', '.join(keys)}")  # fmt: skip
        keep &= np.isin(table.degrees[key], np.asarray(values, dtype=table.degrees[key].dtype))
    if not keep.any() and refuse:
        said = " ".join(f"{k}={','.join(map(str, v))}" for k, v in only)
        gpus = ", ".join(map(str, sizes))
        raise SpecError("search", "--only", f"{said} leaves no layout of {gpus} GPUs",
                        "degrees the layouts have")  # fmt: skip
    return _rows(table, keep)


def kept_layouts(table: LayoutTable, keys: Sequence[str],
                 only: Sequence[tuple[str, Sequence[int]]], emit: str | None,
                 sizes: Sequence[int], refuse: bool = True) -> LayoutTable:  # fmt: skip
    """The rows of ``table`` that ``only`` keeps (`only_layouts`) and, with ``emit``, that
    engine launches as priced (`--emit`: a best point must be one it can run)."""
    table = only_layouts(table, keys, only, sizes, refuse)
    if emit is None:
        return table
    keep = launch.runs_layouts(emit, table.degrees)
    if refuse and len(keep) and not keep.any():
        raise SpecError("search", "--emit", f"{emit} launches none of the layouts searched as "
                        "priced: it runs tp = 1 or ep = 1, not a tp × ep mix",
                        "layouts with tp = 1 or ep = 1 (--only)")  # fmt: skip
    return _rows(table, keep)


def _rows(table: LayoutTable, keep: np.ndarray) -> LayoutTable:
    return LayoutTable(table.gpus[keep], {k: v[keep] for k, v in table.degrees.items()},
                       table.ranks[keep])  # fmt: skip


def _layouts_at(
    registry: Registry,
    sizes: Sequence[int],
    domain: int,
    keys: Sequence[str],
    only: Sequence[tuple[str, Sequence[int]]],
    emit: str | None,
    pinned: Scenario,
) -> LayoutTable:
    """A structural variant's own layouts of ``sizes`` GPUs (pipeline stages take GPUs of
    N), those --only keeps and the --emit engine launches; none is not refused here (another
    variant may have some)."""
    table = _layouts(registry, pinned).table(sizes, domain)
    return kept_layouts(table, keys, only, emit, sizes, refuse=False)


def _layouts(registry: Registry, sc: Scenario) -> Layouts:
    """How the scenario's parallel kind lays deployments out (``stepwall_layouts``)."""
    found: Layouts | None = registry.call_owner("stepwall_layouts", sc)
    if found is None:
        kind = sc.kinds.get("parallel", "")
        raise SpecError("search", "parallel", f"kind {kind!r} lists no layouts to search (plugin "
                        f"{registry.owner('parallel', kind)} implements no stepwall_layouts)",
                        "a parallel kind whose plugin does")  # fmt: skip
    return found


def _pinned_variants(
    opt: Option,
    kind: str,
    ref: str,
    registry: Any,
    probe: Sequence[str],
    sets: tuple[str, ...],
    sc: Scenario,
    numeric: CompiledModel,
    values: dict[str, float],
    layouts: LayoutTable,
    layouts_of: Callable[[Scenario], LayoutTable],
    batch: Sequence[float],
    axes: Sequence[Any],
    cache: bool,
    provides: Mapping[str, str],
) -> list[Variant]:
    """One hardware option's and decoding kind's variants: one per combination of the
    structural --vary values (each compiled on its own, with its own layouts: `layouts_of`;
    one with none, such as pipeline stages that do not divide N, is left out), the numeric
    axes searched in each."""
    variants: list[Variant] = []
    structural = [a for a in axes if a.key in numeric.structural_keys]
    free = [a for a in axes if a.key not in numeric.structural_keys]
    combos = _product(
        [[(a.key, g, s) for g, s in zip(a.given, a.si, strict=True)] for a in structural]
    )
    for combo in combos:
        pinned = [f"{k}={_given(g)}" for k, g, _ in combo]
        num, vals, table = numeric, values, layouts
        if pinned:
            sc2 = load_scenario(ref, registry.kinds, [*probe, *pinned])
            table = layouts_of(sc2)
            if not len(table.gpus):
                continue
            num = compile_scenario(sc2, registry, cache=cache)
            vals = {s.name: float(v) for s, v in sc2.values.items()}
        variants.append(
            Variant(
                option=opt,
                decoding=kind,
                ref=ref,
                sets=(*sets, *pinned),
                numeric=num,
                values=vals,
                layouts=table,
                nodes=deployment_nodes(
                    table.gpus, vals[provides["gpus_per_node"]], vals[provides["scale_up_domain"]]
                ),
                batch=np.asarray(sorted(set(batch)), dtype=float),
                axes=tuple((a.key, a.given, a.si) for a in free),
                ranges=dict(getattr(sc, "ranges", {}) or {}),
                provides=dict(provides),
                pinned={k: float(si) for k, _, si in combo},
            )
        )
    return variants


def deployment_nodes(gpus: np.ndarray, per_node: float, domain: float) -> np.ndarray:
    """The nodes a deployment of ``gpus`` GPUs takes (its reproduction command's
    ``cluster.nodes``): enough for its GPUs and for one whole scale-up domain (an NVL72 rack
    is one domain, whatever part of it a deployment uses), not the cluster spec's own size."""
    return np.maximum(np.ceil(gpus / per_node), np.ceil(domain / per_node))


def _load_variant(
    ref: str,
    registry: Any,
    probe: Sequence[str],
    model: str,
    opt: Option,
    kind: str,
    vary: Sequence[tuple[str, Any]],
    sets: Sequence[str],
) -> Scenario:
    """A variant's scenario, loaded with its first values; an error is blamed on the search
    flag that gave the value (--vary, --decoding, MODEL, --hardware, --cluster, --engine), or
    on the key being one the search sets (`_searched_error`, whatever its value)."""
    set_keys = {_key(s) for s in sets}
    try:
        return load_scenario(ref, registry.kinds, probe)
    except SpecError as e:  # a varied key's first value, or a decoding kind
        given = e.where == "--set" and (e.key in set_keys or any(e.key == k for k, _ in vary))
        if given:
            refused = _searched_error(sets, vary, _searched_without(ref, registry, probe, e.key))
            if refused is not None:
                raise refused from None
        if e.where == "--set" and any(e.key == k for k, _ in vary):
            raise SpecError("--vary", e.key, e.problem, e.expected) from None
        if e.where == "--set" and e.key == "decoding.kind" and e.key not in set_keys:
            raise SpecError("--decoding", kind, e.problem, e.expected) from None
        named = {"model": ("MODEL", model), "hardware": ("--hardware", opt.hardware),
                 "cluster": ("--cluster", opt.cluster),
                 "engine": ("--engine", opt.engine)}  # fmt: skip
        if e.where == INLINE and e.key in named:  # a name given on the command line
            flag, ref_given = named[e.key]
            raise SpecError(flag, ref_given, e.problem, e.expected) from None
        raise


def _searched_without(ref: str, registry: Any, probe: Sequence[str], key: str) -> tuple[str, ...]:
    """The keys a search sets (`_searched`) in the scenario loaded with 1 for ``key`` (whose
    given value did not load); none when it does not load even so."""
    try:
        sc = load_scenario(ref, registry.kinds, [*(a for a in probe if _key(a) != key), f"{key}=1"])
        return _searched(_layouts(registry, sc).keys, registry.paths(sc))
    except SpecError:
        return ()


def _key(assignment: str) -> str:
    """The key of a ``KEY=VALUE`` assignment."""
    return assignment.partition("=")[0].strip()


def _foreign(assignment: str, kind: str) -> bool:
    """A decoding setting that the variant's decoding kind does not have (autoregressive has
    none): left out of that variant."""
    key = assignment.partition("=")[0].strip()
    return key.startswith("decoding.") and kind == "autoregressive"


def _skip(key: str, kind: str) -> bool:
    return key.startswith("decoding.") and kind == "autoregressive"


def _decoding_axes(
    kind: str, sets: Sequence[str], vary: Sequence[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """The --vary axes of one decoding kind: an `mtp` search given no drafts (by --set or
    --vary) and no measured τ searches `MTP_DRAFTS`, each count compiled on its own at its
    own τ(n); a measured ``accepted_tokens`` holds at one draft count, so it is refused with
    drafts varied."""
    if kind != "mtp":
        return list(vary)
    given = {_key(s) for s in sets}
    varied = any(k == "decoding.drafts" for k, _ in vary)
    if varied and "decoding.accepted_tokens" in given:
        raise SpecError("--set", "decoding.accepted_tokens", "is a measured τ at one draft "
                        "count, but --vary decoding.drafts searches several", "--set "
                        "decoding.acceptance (the chain law at each count), or one drafts "
                        "value")  # fmt: skip
    if varied or given & {"decoding.drafts", "decoding.accepted_tokens"}:
        return list(vary)
    return [*vary, ("decoding.drafts", list(MTP_DRAFTS))]


def _first(values: Any) -> str:
    """The first value of a --vary axis (a list, or a `stepwall.apps.sweep.Span`), as text."""
    if hasattr(values, "lo"):
        return f"{_short(values.lo)}{values.unit}"
    return _given(values[0])


def _given(v: Any) -> str:
    return v if isinstance(v, str) else _short(v)


def _product(lists: list[list[Any]]) -> list[list[Any]]:
    out: list[list[Any]] = [[]]
    for items in lists:
        out = [[*o, i] for o in out for i in items]
    return out


# ---------------------------------------------------------------- one chunk

_MODELS: dict[str, CompiledModel] = {}  # a worker's compiled models, by payload key


def model_of(payload: Mapping[str, Any]) -> CompiledModel:
    """The compiled model of a variant's payload, compiled once per process."""
    key = payload["key"]
    if key not in _MODELS:
        _remember(key, CompiledModel.from_json(payload["model"]))
    return _MODELS[key]


def _remember(key: str, model: CompiledModel) -> None:
    """Keep ``model`` under ``key`` (at most 65 models: the cache starts over past that)."""
    if key not in _MODELS and len(_MODELS) > 64:
        _MODELS.clear()
    _MODELS[key] = model


def evaluate_points(
    numeric: CompiledModel, values: Mapping[str, float], columns: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """The compiled model at the points ``columns`` (arrays of equal length by key)."""
    vals: dict[str, Any] = dict(values)
    vals.update(columns)
    return numeric.evaluate(vals)


def _columns(payload: Mapping[str, Any], idx: np.ndarray) -> dict[str, np.ndarray]:
    """The searched keys' values at flat point indices ``idx`` of a variant."""
    shape = (len(payload["ranks"]), len(payload["batch"]), *(len(a[2]) for a in payload["axes"]))
    coords = np.unravel_index(idx, shape)
    return _values(payload, coords[0], coords[1:])


def _grid(payload: Mapping[str, Any], rows: slice, cols: slice) -> dict[str, np.ndarray]:
    """The searched keys' values on a block of the variant's grid seen as layouts × the
    rest (users per rank, then each --vary axis): layout keys as a column, the others as a
    row, so that numpy computes what depends on one side once per row or column."""
    rest = (len(payload["batch"]), *(len(a[2]) for a in payload["axes"]))
    coords = np.unravel_index(np.arange(cols.start, cols.stop), rest)
    layouts = np.arange(rows.start, rows.stop)[:, None]
    return _values(payload, layouts, tuple(c[None, :] for c in coords))


def _values(
    payload: Mapping[str, Any], layout: np.ndarray, rest: Sequence[np.ndarray]
) -> dict[str, np.ndarray]:
    """The searched keys' values at layout indices ``layout`` and indices ``rest`` into the
    users per rank and each --vary axis (index arrays broadcast together): each layout's
    keys, then the users (users per rank × the layout's attention ranks)."""
    out = {k: v[layout] for k, v in payload["layouts"].items()}
    out[payload["users"]] = payload["batch"][rest[0]] * payload["ranks"][layout]
    for (key, _, si), c in zip(payload["axes"], rest[1:], strict=True):
        out[key] = si[c]
    return out


def _blocks(start: int, stop: int, width: int) -> Iterator[tuple[slice, slice]]:
    """Points [start, stop) of a row-major grid ``width`` wide as (rows, columns) blocks: the
    rest of the first row, the whole rows, the start of the last."""
    while start < stop:
        row, col = divmod(start, width)
        if col or stop - start < width:
            end = min(stop, (row + 1) * width)
            yield slice(row, row + 1), slice(col, end - row * width)
        else:
            rows = (stop - start) // width
            end = start + rows * width
            yield slice(row, row + rows), slice(0, width)
        start = end


def evaluate_block(
    numeric: CompiledModel,
    payload: Mapping[str, Any],
    start: int,
    stop: int,
    names: Any,
    failed: dict[str, int] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The metrics ``names`` and feasibility at points [start, stop) of a variant, flat in
    point order, evaluated block by block on the grid (`_grid`); ``failed`` gains, per
    constraint, how many points of each block with no feasible point break it (what an
    empty search reports; counted only there, as it costs a pass over every constraint)."""
    width = len(payload["batch"]) * math.prod(len(a[2]) for a in payload["axes"])
    parts: list[tuple[dict[str, np.ndarray], np.ndarray]] = []
    for rows, cols in _blocks(start, stop, width):
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        ev = evaluate_points(numeric, payload["values"], _grid(payload, rows, cols))
        got = {m: np.broadcast_to(np.asarray(ev[m], dtype=float), shape).ravel() for m in names}
        parts.append((got, np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), shape).ravel()))
        if failed is not None and not parts[-1][1].any():
            for c in numeric.constraints:
                holds = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), shape)
                failed[c.name] = failed.get(c.name, 0) + holds.size - int(np.count_nonzero(holds))
    if len(parts) == 1:
        return parts[0][0], parts[0][1].copy()
    return (
        {m: np.concatenate([g[m] for g, _ in parts]) for m in names},
        np.concatenate([ok for _, ok in parts]),
    )


def run_chunk(
    payload: Mapping[str, Any], offset: int, start: int, stop: int, spec: Spec
) -> dict[str, Any]:
    """Evaluate points [start, stop) of one variant; return the chunk's Pareto frontier
    (global ids and axis values), its best point per target, and counts. A pure function of
    its arguments (run in a worker process by ``--dask``)."""
    keep_freed_memory()  # a worker of a search: many vectorized calls (once per process)
    numeric = model_of(payload)
    idx = np.arange(start, stop, dtype=np.int64)
    failed: dict[str, int] = {}
    got, ok = evaluate_block(numeric, payload, start, stop, spec.needed, failed)
    n = idx.size
    feasible = int(ok.sum())
    filtered = []  # per filter: the feasible points it removes
    for c in spec.where:
        holds = c.holds(got[c.metric])
        filtered.append(int(np.count_nonzero(ok & ~holds)))
        ok &= holds
    for m in (spec.x, spec.y):
        ok &= np.isfinite(got[m])
    ids = idx + offset
    x, y = spec.sign(spec.x) * got[spec.x][ok], spec.sign(spec.y) * got[spec.y][ok]
    keep = pareto(x, y, ids[ok])
    best, reach = [], []
    obj = spec.sign(spec.objective) * got[spec.objective]
    for t in spec.targets:
        mask = ok & t.holds(got[t.metric]) & np.isfinite(obj)
        best.append(_best(obj[mask], ids[mask]))
        signed = toward(t) * got[t.metric]
        near = ok & np.isfinite(signed)
        reach.append(_best(signed[near], ids[near]))
    return {
        "frontier": (ids[ok][keep], x[keep], y[keep]),
        "best": best,
        "reach": reach,
        "evaluated": n,
        "feasible": feasible,
        "passed": int(ok.sum()),
        "failed": failed,
        "filtered": filtered,
    }


def toward(target: Condition) -> int:
    """+1 where a target asks for more of its metric (>=, >), −1 where it asks for less."""
    return 1 if target.op in (">=", ">") else -1


def _best(values: np.ndarray, ids: np.ndarray) -> tuple[float, int] | None:
    """The largest value, the smallest id among equals; None when there is none."""
    if values.size == 0:
        return None
    top = values.max()
    at = ids[values == top].min()
    return float(top), int(at)


def pareto(x: np.ndarray, y: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (both axes maximised; among equal points the
    smallest id), ordered by x descending."""
    if x.size == 0:
        return np.zeros(0, dtype=np.intp)
    order = np.lexsort((ids, -y, -x))
    ys = y[order]
    running = np.maximum.accumulate(ys)
    prev = np.concatenate(([-np.inf], running[:-1]))
    return order[ys > prev]


# ---------------------------------------------------------------- the whole search


@attrs.frozen
class Result:
    plan: Plan
    frontier: tuple[dict[str, Any], ...]
    best: tuple[dict[str, Any], ...]
    evaluated: int
    feasible: int
    passed: int
    # points breaking each constraint, in blocks with no feasible point (all, when none is)
    failed: Mapping[str, int] = attrs.field(factory=dict)
    filtered: tuple[int, ...] = ()  # feasible points each --where filter removes
    switches: tuple[dict[str, Any], ...] | None = None  # --switch-points (None: not asked)


def tasks(plan: Plan, chunk: int = CHUNK) -> Iterator[tuple[int, int, int]]:
    """(variant index, start, stop) of every chunk, in order: whole rows of the variant's
    grid (layouts × the rest) up to ``chunk`` points, or a row in pieces where one row is
    longer, so that each chunk is one block of the grid (`_grid`)."""
    for vi, v in enumerate(plan.variants):
        width = v.size // v.shape[0] if v.size else 1
        step = width * (chunk // width) if width <= chunk else chunk
        row_starts = range(0, v.size, width) if width > chunk else (0,)
        for row in row_starts:
            end = min(v.size, row + width) if width > chunk else v.size
            for start in range(row, end, step):
                yield vi, start, min(end, start + step)


def run_search(
    plan: Plan,
    *,
    chunk: int = CHUNK,
    progress: Callable[[int, int], None] | None = None,
    client: Any = None,
    spread: float = 0.0,
) -> Result:
    """Evaluate every chunk (here, or on a dask ``client``), merge, and describe the
    frontier and the best points; with ``spread``, also how the ranking at each target moves
    when efficiencies move (`robustness`: two more passes over the space, which ``progress``
    counts too)."""
    if not 0 <= spread < 1:
        raise SpecError("search", "--spread", f"{spread} is not a fraction", "0 ≤ F < 1")
    passes = 3 if spread and plan.spec.targets else 1
    tick = _pass(progress, 0, passes)
    result = describe(plan, evaluate(plan, chunk=chunk, progress=tick, client=client))
    if passes > 1:
        result = robustness(result, spread, chunk=chunk, client=client, progress=progress)
    return result


def _pass(
    progress: Callable[[int, int], None] | None, k: int, passes: int
) -> Callable[[int, int], None] | None:
    """``progress`` for the k-th of ``passes`` evaluations of the same space."""
    if progress is None:
        return None
    report = progress
    return lambda done, total: report(k * total + done, passes * total)


def evaluate(
    plan: Plan,
    *,
    chunk: int = CHUNK,
    progress: Callable[[int, int], None] | None = None,
    client: Any = None,
) -> list[dict[str, Any]]:
    """Every chunk's result, in chunk order (whatever order they finished in)."""
    if chunk < 1:
        raise SpecError("search", "--chunk", "must be at least 1", "e.g. 65536")
    offsets = plan.offsets
    jobs = list(tasks(plan, chunk))
    done = [0]

    def finished(i: int) -> None:
        done[0] += jobs[i][2] - jobs[i][1]
        if progress:
            progress(done[0], plan.total)

    args = [(vi, (offsets[vi], s, e, plan.spec)) for vi, s, e in jobs]
    return gather_in_order(run_chunk, [v.payload() for v in plan.variants], args, client,
                           finished)  # fmt: skip


def gather_in_order(
    fn: Callable[..., Any],
    payloads: Sequence[Mapping[str, Any]],
    jobs: Sequence[tuple[int, tuple[Any, ...]]],
    client: Any = None,
    finished: Callable[[int], Any] | None = None,
) -> list[Any]:
    """``fn(payloads[i], *args)`` for each job ``(i, args)``, here or on a dask ``client``
    (each payload sent to every worker once), in job order whatever order they finished
    in; ``finished(k)`` as job k completes."""
    parts: list[tuple[int, Any]] = []
    if client is None:
        for k, (vi, args) in enumerate(jobs):
            parts.append((k, fn(payloads[vi], *args)))
            if finished:
                finished(k)
        return [p for _, p in parts]
    as_completed = _distributed().as_completed
    # a list, not the dict: scattering a dict names the data by its keys (same in every one)
    shared = [client.scatter([p], broadcast=True)[0] for p in payloads]
    futures = {client.submit(fn, shared[vi], *args, pure=False): k
               for k, (vi, args) in enumerate(jobs)}  # fmt: skip
    for fut in as_completed(list(futures)):
        k = futures[fut]
        parts.append((k, fut.result()))
        if finished:
            finished(k)
    parts.sort(key=lambda p: p[0])
    return [p for _, p in parts]


EFFICIENCY = re.compile(r"^hardware\.(?:[a-z0-9]+\.)?(?:[a-z_]*efficiency)$")


def scaled(plan: Plan, factor: float) -> Plan:
    """The plan with every hardware efficiency (``hardware.*efficiency``) at its range's end
    where the spec gives one as a range (docs/ranges.md: ``factor`` < 1 the low end, > 1 the
    high end), else multiplied by ``factor`` (at most 1)."""
    variants = []
    for v in plan.variants:
        values = dict(v.values)
        for k, x in v.values.items():
            if EFFICIENCY.match(k):
                lo_hi = v.ranges.get(k)
                if lo_hi is not None:
                    values[k] = lo_hi[0] if factor < 1 else lo_hi[1]
                else:
                    values[k] = min(1.0, x * factor)
        variants.append(attrs.evolve(v, values=values))
    return attrs.evolve(plan, variants=tuple(variants))


def objective_span(
    nominal: float | None, at_ends: Sequence[float]
) -> tuple[float | None, float | None]:
    """An option's best objective over its efficiencies' span: the least and greatest of its
    values at the span's two ends and at the nominal efficiencies, so the interval holds the
    nominal wherever the ends lie (a spec range's ends are the spec's, whatever value a
    --set gives). An option with no nominal point has no interval: a spread does not rank
    what the specs as stated do not reach."""
    if nominal is None:
        return None, None
    values = sorted([nominal, *at_ends])
    return values[0], values[-1]


def robustness(
    result: Result,
    spread: float,
    *,
    chunk: int = CHUNK,
    client: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> Result:
    """Each target's ranking again with every option's efficiencies low (×(1−spread), or
    their ranges' low ends) and high: each option's objective becomes an interval, and the
    ranking is robust where no two options' intervals overlap in the wrong order. ``progress``
    sees these as the 2nd and 3rd of three passes (the first: `run_search`'s)."""
    plan = result.plan
    ends = {}
    for i, (name, factor) in enumerate((("low", 1 - spread), ("high", 1 + spread))):
        other = scaled(plan, factor)
        tick = _pass(progress, i + 1, 3)
        _, best = merge(other, evaluate(other, chunk=chunk, progress=tick, client=client))
        ends[name] = best
    sign = plan.spec.sign(plan.spec.objective)
    entries = []
    for t, entry in enumerate(result.best):
        rows = []
        for o in entry["options"]:
            lab = o["option"]
            p = o["point"]
            nominal = None if p is None else p[plan.spec.objective]
            at_ends = [sign * b[0] for b in (ends["low"][t][lab], ends["high"][t][lab])
                       if b is not None]  # fmt: skip
            low, high = objective_span(nominal, at_ends)
            rows.append({"option": lab, "nominal": nominal, "low": low, "high": high})
        ranks = {}
        for name in ("low", "high"):
            got = [(b[0], -b[1], lab) for lab, b in ends[name][t].items() if b is not None]
            ranks[name] = [lab for _, _, lab in sorted(got, reverse=True)]
        # adjacent options in the nominal ranking whose intervals overlap could swap
        by = {r["option"]: r for r in rows}
        swaps = []
        order = entry["ranking"]
        for a, b in itertools.pairwise(order):
            ra, rb = by[a], by[b]
            if None in (ra["low"], ra["high"], rb["low"], rb["high"]):
                continue
            worst_a = ra["low"] if sign > 0 else ra["high"]
            best_b = rb["high"] if sign > 0 else rb["low"]
            if sign * worst_a <= sign * best_b:
                swaps.append([a, b])
        entries.append({**entry, "robustness": {
            "spread": spread, "options": rows, "ranking_low": ranks["low"],
            "ranking_high": ranks["high"], "may_swap": swaps, "robust": not swaps,
        }})  # fmt: skip
    return attrs.evolve(result, best=tuple(entries))


def merge(plan: Plan, parts: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    """Per option: the frontier ids of all chunks merged; per option and target: the best."""
    owner = _owner(plan)
    fronts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
        o.label: [] for o in plan.options
    }
    for p in parts:
        ids, x, y = p["frontier"]
        if ids.size:
            fronts[owner(int(ids[0]))].append((ids, x, y))
    out: dict[str, Any] = {}
    for label, chunks in fronts.items():
        if not chunks:
            out[label] = np.zeros(0, dtype=np.int64)
            continue
        ids = np.concatenate([c[0] for c in chunks])
        x = np.concatenate([c[1] for c in chunks])
        y = np.concatenate([c[2] for c in chunks])
        out[label] = ids[pareto(x, y, ids)]
    return out, per_target(plan, parts, "best")


def per_target(
    plan: Plan, parts: Sequence[Mapping[str, Any]], key: str
) -> list[dict[str, tuple[float, int] | None]]:
    """Per target and option, the largest of the chunks' ``key`` entries (value, id), the
    smallest id among equals: ``best`` (the objective where the target holds) or ``reach``
    (the target's own metric, signed toward it, over every point that passes the filters)."""
    owner = _owner(plan)
    out: list[dict[str, tuple[float, int] | None]] = [
        {o.label: None for o in plan.options} for _ in plan.spec.targets
    ]
    for p in parts:
        for t, b in enumerate(p[key]):
            if b is None:
                continue
            label = owner(b[1])
            cur = out[t][label]
            if cur is None or b[0] > cur[0] or (b[0] == cur[0] and b[1] < cur[1]):
                out[t][label] = b
    return out


def _owner(plan: Plan) -> Callable[[int], str]:
    offsets = np.asarray(plan.offsets, dtype=np.int64)

    def owner(gid: int) -> str:
        vi = int(np.searchsorted(offsets, gid, side="right")) - 1
        return plan.variants[vi].option.label

    return owner


def _locate(plan: Plan, gid: int) -> tuple[int, int]:
    offsets = np.asarray(plan.offsets, dtype=np.int64)
    vi = int(np.searchsorted(offsets, gid, side="right")) - 1
    return vi, gid - int(offsets[vi])


def points(plan: Plan, gids: Sequence[int]) -> list[dict[str, Any]]:
    """Each point by global id: its metrics (evaluated again from its configuration), its
    configuration and the command that reproduces it, in ``gids`` order."""
    by_variant: dict[int, list[tuple[int, int]]] = {}
    for pos, g in enumerate(gids):
        vi, local = _locate(plan, int(g))
        by_variant.setdefault(vi, []).append((pos, local))
    out: list[dict[str, Any]] = [{} for _ in gids]
    for vi, items in by_variant.items():
        v = plan.variants[vi]
        idx = np.array([loc for _, loc in items], dtype=np.int64)
        rows = np.unravel_index(idx, v.shape)[0]  # each point's layout
        cols = v.columns(idx)
        ev = evaluate_points(v.numeric, v.values, cols)
        n = idx.size
        feas = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), (n,))
        groups = _groups(v.numeric, ev, n)
        names = (*METRICS, *(m.name for m in v.numeric.plugin_metrics))
        for j, (pos, _) in enumerate(items):
            metrics = {m: _value(ev[m], j, n) for m in names}
            at = {k: float(c[j]) for k, c in cols.items()}
            out[pos] = {
                "id": int(gids[pos]),
                **metrics,
                "feasible": bool(feas[j]),
                "groups": {g: float(t[j]) for g, t in groups.items()},
                "config": _config(plan, v, at, int(rows[j])),
                "command": command(plan, v, at),
            }
    return out


def _value(x: Any, j: int, n: int) -> float | None:
    v = float(np.broadcast_to(np.asarray(x, dtype=float), (n,))[j])
    return v if math.isfinite(v) else None


def _groups(numeric: CompiledModel, ev: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for t in numeric.terms:
        if t.name.startswith("ttft."):
            continue
        v = np.broadcast_to(np.asarray(ev["terms"][t.name], dtype=float), (n,))
        out[t.group] = out.get(t.group, np.zeros(n)) + v
    return out


def _degree(key: str) -> str:
    """A layout key's name in a configuration: its field (``"parallel.tp"`` -> ``"tp"``)."""
    return key.rpartition(".")[2]


def _config(plan: Plan, v: Variant, at: Mapping[str, float], row: int) -> dict[str, Any]:
    """A point's configuration: its option, its layout (``row`` of the variant's) by degree,
    the users per replica and per attention rank, the nodes, and its --vary values."""
    c = int(at[v.provides["users"]])
    out: dict[str, Any] = {
        "hardware": v.option.hardware,
        "cluster": v.option.cluster,
        "engine": v.option.engine or None,
        "decoding": v.decoding,
        "gpus": int(v.layouts.gpus[row]),
        **{_degree(k): int(at[k]) for k in v.layouts.degrees},
        "concurrency": c,
        "users_per_rank": c // int(v.layouts.ranks[row]),
        "nodes": int(at[v.provides["nodes"]]),
    }
    extra = {**v.pinned, **{k: at[k] for k in at if k not in v.searched}}
    if extra:
        out["vary"] = extra
    return out


def command(plan: Plan, v: Variant, at: Mapping[str, float]) -> str:
    """The ``stepwall eval`` line that reproduces a point."""
    args = ["stepwall", "eval", v.ref]
    sets = list(v.sets)
    given = {k: g for k, g, _ in v.axes}
    for k, si in at.items():
        if k in given:  # a --vary axis: as the user wrote its value (with its unit)
            idx = int(np.argmin(np.abs(dict((a[0], a[2]) for a in v.axes)[k] - si)))
            sets.append(f"{k}={_given(given[k][idx])}")
        else:
            sets.append(f"{k}={_short(si)}")
    for s in sets:
        args += ["--set", s]
    return shlex.join(args)


def describe(plan: Plan, parts: Sequence[Mapping[str, Any]]) -> Result:
    fronts, best = merge(plan, parts)
    reach = per_target(plan, parts, "reach")
    frontier: list[dict[str, Any]] = []
    spec = plan.spec
    overall_ids = _overall(plan, fronts)
    for opt in plan.options:
        ids = list(fronts[opt.label])
        for p in points(plan, ids):
            p["option"] = opt.label
            p["overall"] = p["id"] in overall_ids
            frontier.append(p)
    bests: list[dict[str, Any]] = []
    for t, per, near in zip(spec.targets, best, reach, strict=True):
        entry: dict[str, Any] = {"target": t.text, "objective": spec.objective, "options": []}
        winners = []
        for opt in plan.options:
            b = per[opt.label]
            if b is None:
                entry["options"].append(_unmet(t, near[opt.label], opt.label))
                continue
            (p,) = points(plan, [b[1]])
            entry["options"].append(
                {"option": opt.label, "point": p, "binding": binding(plan, b[1], t)}
            )
            winners.append((b[0], -b[1], opt.label))
        entry["ranking"] = [lb for _, _, lb in sorted(winners, reverse=True)]
        bests.append(entry)
    failed: dict[str, int] = {}
    for part in parts:
        for k, c in part["failed"].items():
            failed[k] = failed.get(k, 0) + c
    return Result(
        plan,
        tuple(frontier),
        tuple(bests),
        sum(p["evaluated"] for p in parts),
        sum(p["feasible"] for p in parts),
        sum(p["passed"] for p in parts),
        failed,
        tuple(sum(p["filtered"][i] for p in parts) for i in range(len(spec.where))),
    )


def empty_error(result: Result) -> SpecError | None:
    """Why a search found nothing: the constraint that rules out the most configurations,
    or the filter that removes the most feasible ones; None when something passed."""
    if result.passed:
        return None
    n = f"{result.evaluated:,} configurations"
    spec = result.plan.spec
    if result.feasible and any(result.filtered):
        i = max(range(len(spec.where)), key=lambda j: result.filtered[j])
        return SpecError("search", "--where", f"of {n}, {result.feasible:,} are feasible and "
                         f"{spec.where[i].text} removes {result.filtered[i]:,} of them",
                         "a filter that some feasible configuration passes")  # fmt: skip
    if result.feasible:
        return SpecError("search", "--x/--y", f"of {n}, {result.feasible:,} are feasible but "
                         f"none has a finite {spec.x} and {spec.y}",
                         "metrics that the specs state")  # fmt: skip
    messages = {c.name: c.message for v in result.plan.variants for c in v.numeric.constraints}
    worst = max(result.failed, key=lambda k: result.failed[k], default="")
    if not result.failed.get(worst):
        return SpecError("search", "", f"none of {n} gives finite metrics",
                         why="check the spec values")  # fmt: skip
    return SpecError("search", "", f"none of {n} is feasible; the constraint that fails most "
                     f"often is {worst} ({messages[worst]}): {result.failed[worst]:,} of them "
                     "fail it",
                     why="widen --gpus or --batch, or another --hardware/--cluster")  # fmt: skip


def _overall(plan: Plan, fronts: Mapping[str, np.ndarray]) -> set[int]:
    """Ids on the frontier of all options together."""
    if not any(len(f) for f in fronts.values()):
        return set()
    ids = np.concatenate([np.asarray(f, dtype=np.int64) for f in fronts.values()])
    pts = points(plan, list(ids))
    spec = plan.spec
    x = np.array([spec.sign(spec.x) * p[spec.x] for p in pts], dtype=float)
    y = np.array([spec.sign(spec.y) * p[spec.y] for p in pts], dtype=float)
    return {int(i) for i in ids[pareto(x, y, ids)]}


def _unmet(target: Condition, near: tuple[float, int] | None, option: str) -> dict[str, Any]:
    """An option's entry at a target no configuration meets: with ``nearest``, the value of
    the target's metric closest to it over the configurations that pass the filters (its
    point's id) and how far it falls short, nearest / target − 1 (None: none passes)."""
    if near is None:
        return {"option": option, "point": None, "binding": "no configuration meets the target",
                "nearest": None}  # fmt: skip
    nearest = {**nearest_of(target, toward(target) * near[0]), "id": near[1]}
    gives = f"the nearest gives {nearest_text(nearest)}"
    return {
        "option": option,
        "point": None,
        "binding": f"no configuration meets the target ({gives})",
        "nearest": nearest,
    }


def nearest_of(target: Condition, value: float) -> dict[str, Any]:
    """The ``nearest`` entry of an unmet target: its metric, the nearest value and the gap,
    value / target − 1."""
    return {"metric": target.metric, "value": value, "gap": value / target.value - 1}


def nearest_text(nearest: Mapping[str, Any]) -> str:
    """``METRIC VALUE, GAP`` for an unmet target's ``nearest`` entry (the gap as a
    percentage short or over, as a multiple of the target from 2× on, or, for a strict
    target, its bound itself)."""
    gap = nearest["gap"]
    if gap >= 1:
        far = f"{gap + 1:.3g}× the target"
    else:
        far = f"{abs(gap):.1%} {'short' if gap < 0 else 'over'}" if gap else "the bound itself"
    return f"{nearest['metric']} {nearest['value']:.4g}, {far}"


def binding(plan: Plan, gid: int, target: Condition | None) -> str:
    """What stops the best point at a target (or, with none, at the filters alone) from
    doing better: the same layout with the next larger batch per rank breaks a constraint
    (memory, …), misses the target or a filter, or does no better; or the batch grid
    ends."""
    vi, local = _locate(plan, gid)
    v = plan.variants[vi]
    coords = list(np.unravel_index(local, v.shape))
    if coords[1] + 1 >= len(v.batch):
        return "the largest batch searched (--batch)"
    coords[1] += 1
    nxt = int(np.ravel_multi_index(tuple(coords), v.shape))
    idx = np.array([local, nxt], dtype=np.int64)
    ev = evaluate_points(v.numeric, v.values, v.columns(idx))
    feas = np.broadcast_to(np.asarray(ev["feasible"], dtype=bool), (2,))
    if not feas[1]:
        for c in v.numeric.constraints:
            holds = np.broadcast_to(np.asarray(ev["constraints"][c.name], dtype=bool), (2,))
            if not holds[1]:
                return f"{c.name} ({c.message}) at {int(v.batch[coords[1]])} users per rank"
        return "a metric is not finite at the next batch"
    got = {m: np.broadcast_to(np.asarray(ev[m], dtype=float), (2,)) for m in plan.spec.needed}
    if target is not None and not target.holds(got[target.metric][1:])[0]:
        return f"the target {target.text} (the next batch gives {got[target.metric][1]:.4g})"
    for w in plan.spec.where:
        if not w.holds(got[w.metric][1:])[0]:
            return f"the filter {w.text} (the next batch gives {got[w.metric][1]:.4g})"
    return f"{plan.spec.objective} peaks here (the next batch does no better)"


# ---------------------------------------------------------------- output


def document(result: Result) -> dict[str, Any]:
    """The ``--json`` document."""
    plan, spec = result.plan, result.plan.spec
    return {
        "model": plan.model,
        "engine": plan.engines[0] if len(plan.engines) == 1 else None,
        "workload": plan.workload,
        "x": spec.x,
        "y": spec.y,
        "objective": spec.objective,
        "filters": [c.text for c in spec.where],
        "options": [
            {
                "label": o.label,
                "hardware": o.hardware,
                "cluster": o.cluster,
                "engine": o.engine or None,
                "variants": sum(1 for v in plan.variants if v.option == o),
                "points": sum(v.size for v in plan.variants if v.option == o),
            }
            for o in plan.options
        ],
        "evaluated": result.evaluated,
        "feasible": result.feasible,
        "passed_filters": result.passed,
        "units": {m: METRIC_UNITS.get(m, "") for m in METRICS},
        "frontier": list(result.frontier),
        "targets": list(result.best),
        **({"switch_points": list(result.switches)} if result.switches is not None else {}),
        "warnings": list(plan.warnings),
    }


def layout_degrees(plan: Plan) -> tuple[str, ...]:
    """The layout degrees' names (`_degree`) of every variant, in order."""
    return tuple(dict.fromkeys(_degree(k) for v in plan.variants for k in v.layouts.degrees))


def config_text(c: Mapping[str, Any], degrees: Sequence[str]) -> str:
    """A configuration in one line: ``tp8 ep1 dp1 C=64``, the decoding, the --vary values."""
    layout = "".join(f"{d}{c[d]} " for d in degrees if d in c)
    text = f"{layout}C={c['concurrency']}"
    if c["decoding"] != "autoregressive":
        text += f" {c['decoding']}"
    for k, v in c.get("vary", {}).items():
        text += f" {k}={_short(v)}"
    return text


def _num(v: float | None, digits: int = 4) -> str:
    return "unknown" if v is None else f"{v:.{digits}g}"


def text(result: Result) -> str:
    """The human summary: counts, each option's frontier, the best at each target.

    Stays whole: the summary's lines in the order they print: one loop over the options, one
    over the targets.
    """
    plan, spec = result.plan, result.plan.spec
    lines = [
        f"search {plan.model}: {result.evaluated:,} configurations, {result.feasible:,} "
        f"feasible, {result.passed:,} pass the filters"
        + (f" ({', '.join(c.text for c in spec.where)})" if spec.where else ""),
    ]
    extra = [m for m in ("joules_per_token", "usd_per_million_tokens") if m not in (spec.x, spec.y)]
    head = (spec.x, spec.y, *extra, "config")
    degrees = layout_degrees(plan)
    many = len(plan.options) > 1
    for opt in plan.options:
        pts = [p for p in result.frontier if p["option"] == opt.label]
        where = (
            f" on {opt.cluster}"
            if opt.label in (opt.hardware, f"{opt.hardware} {opt.engine}")
            else ""
        )
        lines += ["", f"frontier {opt.label}{where}: {len(pts)} points"]
        rows = [head] + [
            (
                _num(p[spec.x]),
                _num(p[spec.y]),
                *(_num(p[m], 3) for m in extra),
                config_text(p["config"], degrees) + (" *" if p["overall"] and many else ""),
            )
            for p in pts
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        for r in rows:
            lines.append(
                "  "
                + "  ".join(
                    c.ljust(w) if j == len(head) - 1 else c.rjust(w)
                    for j, (c, w) in enumerate(zip(r, widths, strict=True))
                ).rstrip()
            )
    if len(plan.options) > 1:
        lines += ["", "* on the frontier of all options together"]
    for entry in result.best:
        lines += [
            "",
            f"best {entry['objective']} at {entry['target']}"
            + (f", {', '.join(c.text for c in spec.where)}" if spec.where else ""),
        ]
        for o in entry["options"]:
            p = o["point"]
            if p is None:
                lines.append(f"  {o['option']}: {o['binding']}")
                continue
            lines.append(
                f"  {o['option']}: {_num(p[entry['objective']])} "
                f"({config_text(p['config'], degrees)}; {spec.x} {_num(p[spec.x])})"
            )
            lines.append(f"    bound by {o['binding']}")
            groups = ", ".join(f"{g} {1e3 * t:.3g} ms" for g, t in p["groups"].items() if t > 0)
            lines.append(f"    step {1e3 * (p['step_time_s'] or 0):.3g} ms: {groups}")
            lines.append(f"    {p['command']}")
            lines += [f"    {line}" for line in launch.lines_of(o.get("launch"))]
        if entry["ranking"]:
            lines.append(f"  ranking: {' > '.join(entry['ranking'])}")
        rob = entry.get("robustness")
        if rob and entry["ranking"]:
            spans = ", ".join(
                f"{r['option']} {_num(r['low'])}..{_num(r['high'])}"
                for r in rob["options"]
                if r["low"] is not None
            )
            lines.append(f"  efficiencies ±{rob['spread']:.0%} (or their ranges): {spans}")
            if rob["robust"]:
                lines.append("  the ranking holds over these intervals")
            else:
                pairs = ", ".join(f"{a} and {b}" for a, b in rob["may_swap"])
                lines.append(f"  may swap: {pairs}")
    if result.switches is not None:
        lines += switch_lines(result.switches, degrees)
    return "\n".join(lines)


def switch_lines(
    points: Sequence[Mapping[str, Any]],
    degrees: Sequence[str],
    describe: Callable[[Mapping[str, Any], Sequence[str]], str] = config_text,
    what: str = "layout",
) -> list[str]:
    """The frontier's switch points (`stepwall.apps.switch`) as text: where, between which
    layouts (each side as ``describe`` writes it: a P/D frontier's deployments), how the root
    was found, a P/D side's prefill utilisation there, its largest sensitivities."""
    out = [f"switch points (where the best {what} along the frontier changes):"]
    if not points:
        out.append(f"  none: one {what} holds each frontier")
    for s in points:
        head = f"  {s['option']}: {describe(s['from'], degrees)} → {describe(s['to'], degrees)}"
        if s["users_per_gpu"] is None:
            out.append(f"{head}: their curves do not cross ({s['note']})")
            continue
        rho = [f"{r:.3g}" for r in s.get("prefill_utilisation", []) if r is not None]
        load = f"; prefill utilisation there {' and '.join(rho)}" if rho else ""
        out.append(f"{head}: at {_num(s['tokens_per_s_per_user'])} tokens/s per user, "
                   f"{_num(s['tokens_per_s_per_gpu'])} tokens/s per GPU, "
                   f"{_num(s['users_per_gpu'])} users per GPU ({s['method']}){load}")  # fmt: skip
        top = ", ".join(f"{r['parameter']} [{r['side']}] {r['elasticity']:+.3g}"
                        for r in s["sensitivities"][:3])  # fmt: skip
        if top:
            out.append(f"    ∂ln c*/∂ln p: {top}")
    return out


def frontier_table(result: Result) -> Any:
    """The frontier as a `Table` (csv, md, parquet)."""

    keys = (
        "option",
        "hardware",
        "cluster",
        "engine",
        "decoding",
        "gpus",
        *layout_degrees(result.plan),
        "concurrency",
    )
    cols = [Column(k, kind="text" if k in keys[:5] else "int") for k in keys]
    cols += [Column(m, METRIC_UNITS.get(m, "")) for m in METRICS]
    cols += [Column("overall", kind="bool"), Column("command", kind="text")]
    rows = []
    for p in result.frontier:
        c = p["config"]
        rows.append(
            [
                p["option"],
                *(c.get(k) for k in keys[1:]),
                *(float("nan") if p[m] is None else p[m] for m in METRICS),
                p["overall"],
                p["command"],
            ]
        )
    return Table.of_rows(cols, rows, document=document(result))


def plot(result: Result, title: str = "") -> bytes:
    """The frontiers of all options on one chart (deterministic SVG)."""

    spec = result.plan.spec
    fig, ax = _figure(7.0, 4.4)
    for opt in result.plan.options:
        pts = [p for p in result.frontier if p["option"] == opt.label]
        pts.sort(key=lambda p: p[spec.x])
        xs = [p[spec.x] for p in pts]
        ys = [p[spec.y] for p in pts]
        ax.plot(xs, ys, marker="o", markersize=3, label=opt.label)
    targets = [t for t in spec.targets if any(e["target"] == t.text for e in result.best)]
    return frontier_chart(fig, ax, spec, targets, title or f"{result.plan.model}: Pareto frontier")


def frontier_chart(fig: Any, ax: Any, spec: Spec, targets: Sequence[Condition], title: str,
                   legend: int = 8) -> bytes:  # fmt: skip
    """A frontier chart finished: a dashed line at each target on the x axis, log axes
    labelled with the x and y metrics, the legend and the title (deterministic SVG)."""
    for t in targets:
        if t.metric == spec.x:
            ax.axvline(t.value, color="#444444", linestyle="--", linewidth=0.8)
            ax.annotate(t.text, (t.value, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -12), textcoords="offset points", fontsize=7)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(_label(spec.x))
    ax.set_ylabel(_label(spec.y))
    ax.legend(fontsize=legend)
    ax.set_title(title)
    data: bytes = _svg(fig)
    return data


def _label(metric: str) -> str:
    return {
        "tokens_per_s_per_user": "tokens/s per user",
        "tokens_per_s_per_gpu": "tokens/s per GPU",
        "tokens_per_s_per_mw": "tokens/s per MW (provisioned)",
        "usd_per_million_tokens": "USD per million tokens",
        "joules_per_token": "J per token",
    }.get(metric, metric)


# ---------------------------------------------------------------- dask


def _distributed() -> Any:
    """dask.distributed, an optional dependency (``pip install 'stepwall[dask]'``), untyped
    here so that type checks pass with or without it."""

    return importlib.import_module("dask.distributed")


def dask_client(scheduler: str = "", workers: int = 0) -> Any:
    """A dask.distributed client: to ``scheduler`` if given, else a LocalCluster of
    ``workers`` single-threaded processes (default: the CPUs)."""
    try:
        dd = _distributed()
        Client, LocalCluster = dd.Client, dd.LocalCluster
    except ImportError:
        raise SpecError(
            "search", "--dask", "dask.distributed is not installed", "pip install 'stepwall[dask]'"
        ) from None
    if scheduler:
        try:
            return Client(scheduler, timeout="10s")
        except (OSError, ValueError, TypeError) as e:  # unreachable, or not an address
            raise SpecError(
                "search",
                "--scheduler",
                f"cannot connect to {scheduler}: {e}",
                "tcp://HOST:8786 of a running dask scheduler",
            ) from None

    n = workers or os.cpu_count() or 1
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,  # no worker chatter on stderr (a closing heartbeat)
    )
    return Client(cluster)


def close_client(client: Any) -> None:
    """Close the client and, if this search started it, its LocalCluster."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def progress_bar(quiet: bool = False) -> Callable[[int, int], None]:
    return ProgressBar(sys.stderr, quiet=quiet)


# ---------------------------------------------------------------- command line


def parse_sla(
    text_: str, flag: str, metrics: Mapping[str, str], command: str = "search"
) -> tuple[str, str]:
    """``"p90<=2s"`` -> ("ttft_p90_s", "<=2s"): a percentile prefix (p50/median, p90, p99)
    picks the metric of ``metrics``; none means the median (``metrics[""]``)."""
    t = text_.strip()
    for prefix, metric in metrics.items():
        if prefix and t.startswith(prefix) and _COMPARATOR.match(t[len(prefix) :]):
            return metric, t[len(prefix) :].strip()
    named = _PERCENTILE.match(t)
    if named:
        priced = ", ".join(k for k in metrics if k)
        example = "p90<=2s" if "p90" in metrics else "<=30ms"
        raise SpecError(command, flag, f"{named.group(1)} is not a percentile stepwall prices",
                        f"one of {priced}, or none for the median, e.g. {example}")  # fmt: skip
    return metrics[""], t  # no prefix: the median, or a metric the condition names


_PERCENTILE = re.compile(r"(p\d+(?:\.\d+)?)\s*[<>=]")  # a percentile asked for: p95<=2s
_COMPARATOR = re.compile(r"\s*[<>=]")

# each SLA flag's percentile prefixes and the metric each picks ("": none, the median)
TTFT = {"p50": "ttft_s", "median": "ttft_s", "p90": "ttft_p90_s", "p99": "ttft_p99_s", "": "ttft_s"}
TPOT = {"p50": "tpot_s", "median": "tpot_s", "": "tpot_s"}
ITL = {"p50": "itl_s", "median": "itl_s", "": "itl_s"}


def sla_conditions(
    ttft: str, tpot: str, where: Sequence[str], itl: str = "", command: str = "search"
) -> list[tuple[str, str, str]]:
    """The SLA filters as (flag, text, default metric), for `parse_condition`."""
    out = []
    for flag, given, metrics in (("--ttft", ttft, TTFT), ("--tpot", tpot, TPOT),
                                 ("--itl", itl, ITL)):  # fmt: skip
        if given:
            metric, cond = parse_sla(given, flag, metrics, command)
            out.append((flag, cond, metric))
    out += [("--where", w, "") for w in where]
    return out


@attrs.frozen
class SearchOptions:
    """What ``stepwall search`` was asked (its options, as parsed: texts still to be read)."""

    model: str
    hardware: str
    cluster: str
    gpus: str | None = None
    engine: str | None = None
    workload: str = "serving"
    isl: int = 1024
    osl: int = 1024
    decoding: list[str] = attrs.Factory(list)
    batch: str | None = None
    vary: list[str] = attrs.Factory(list)
    only: list[str] = attrs.Factory(list)
    sets: list[str] = attrs.Factory(list)
    x: str = "tokens_per_s_per_user"
    y: str = "tokens_per_s_per_gpu"
    objective: str = "tokens_per_s_per_gpu"
    at: list[str] = attrs.Factory(list)
    ttft: str = ""
    tpot: str = ""
    itl: str = ""
    where: list[str] = attrs.Factory(list)
    format: str | None = None
    output: str | None = None
    plot: str | None = None
    spread: float = 0.1
    chunk: int = CHUNK
    dask: bool = False
    scheduler: str = ""
    workers: int | None = None
    no_cache: bool = False
    quiet: bool = False
    emit: str | None = None
    disagg: bool = False
    prefill_gpus: str | None = None
    prefill_batch: str | None = None
    prefill_hardware: str | None = None
    prefill_engine: str | None = None
    prefill_cluster: str | None = None
    prefill_only: list[str] = attrs.Factory(list)
    max_gpus: int | None = None
    switch_points: bool = False


def parse_counts(text: str, where: str) -> list[int]:
    """Whole numbers ≥ 1 from ``8,16,72`` or a span ``8..72:8`` (option ``where``)."""
    text = text.strip()
    if ".." in text:
        labels = parse_span("", text, where).labels(True)
        vals = [float(v) for v in labels]
    else:
        try:
            vals = [float(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise SpecError(
                "search", where, f"cannot read {text!r}", "whole numbers, e.g. 8,16,72 or 8..72:8"
            ) from None
    if not vals or any(not math.isfinite(v) or v != int(v) or v < 1 for v in vals):
        raise SpecError(
            "search",
            where,
            f"{text!r} is not a list of whole numbers ≥ 1",
            "e.g. 8,16,72 or 8..72:8",
        )
    return sorted({int(v) for v in vals})


def names(text: str | None) -> list[str]:
    """A comma-separated list of names (``h200,b200``), blanks dropped."""
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def search_spec(ns: SearchOptions, registry: Any) -> Spec:
    """The frontier's axes, objective, targets and filters (--at, --where and the SLA flags
    --ttft, --tpot, --itl with their percentile prefixes), each metric checked by name."""
    known = metric_table(registry)
    targets = tuple(parse_condition(t, "--at", known=known) for t in ns.at)
    slas = [*sla_conditions("", "", ns.where), *sla_conditions(ns.ttft, ns.tpot, (), ns.itl)]
    where = [parse_condition(text, flag, metric or None, known) for flag, text, metric in slas]
    return Spec(
        check_metric(ns.x, "--x", known),
        check_metric(ns.y, "--y", known),
        check_metric(ns.objective, "--objective", known),
        targets,
        tuple(where),
        frozenset(m.name for m in known.values() if m.minimize),
    )


def plan_of(ns: SearchOptions, registry: Any, spec: Spec, **override: Any) -> Plan:
    """`plan_search` of the command line's request, with ``override`` of its arguments
    (a disaggregated search's pools)."""
    kinds = [k for d in ns.decoding or ["autoregressive"] for k in names(d)]
    args: dict[str, Any] = {
        "gpus": parse_counts(ns.gpus, "--gpus") if ns.gpus is not None else (),
        "engines": names(ns.engine),
        "workload": ns.workload,
        "isl": ns.isl,
        "osl": ns.osl,
        "decoding": kinds,
        "sets": ns.sets,
        "vary": [parse_vary(v) for v in ns.vary],
        "only": [parse_only(o) for o in ns.only],
        "emit": ns.emit,
        "batch": parse_counts(ns.batch, "--batch") if ns.batch is not None else DEFAULT_BATCH,
        "spec": spec,
        "registry": registry,
        "cache": not ns.no_cache,
    }
    args.update(override)
    hardware = args.pop("hardware", names(ns.hardware))
    clusters = args.pop("clusters", names(ns.cluster))
    return plan_search(ns.model, hardware, clusters, **args)


def run_cli(
    ns: SearchOptions, registry: Any, annotate: Callable[[Result], Result] | None = None
) -> int:
    """``stepwall search``: plan, evaluate (here or on dask), ``annotate`` the result (the
    frontier's switch points), print or write.

    Stays whole: the command line's checks in the order their errors are reported, then plan
    and run, then one case per output destination.
    """

    if ns.workers is not None and ns.workers < 1:
        raise SpecError("search", "--workers", f"{ns.workers} worker processes", "at least 1")
    if ns.workers is not None and not (ns.dask or ns.scheduler):
        raise SpecError("search", "--workers", "has no effect without --dask", "--dask --workers N")
    if ns.engine is not None and not ns.engine.strip(" ,"):  # not "the plugin's default"
        raise SpecError("search", "--engine", f"{ns.engine!r} names no engine",
                        "catalog names, e.g. trtllm or trtllm,vllm")  # fmt: skip
    if ns.emit and not ns.at:
        raise SpecError("search", "--emit", "has no point to launch without a target",
                        '--at, e.g. --at "tokens_per_s_per_user>=50": each option\'s best '
                        "there is launched")  # fmt: skip
    spec = search_spec(ns, registry)
    target = None
    if ns.output is not None:
        target = output.file_target(
            ns.output, suffixes=(".json", ".csv", ".md", ".parquet", ".svg"), streams=False
        )  # the suffix picks the format
    plot_target = output.file_target(ns.plot, "--plot", (".svg",)) if ns.plot is not None else None
    suffix = {"json": ".json", "csv": ".csv", "markdown": ".md"}.get(ns.format or "", "")
    if target is not None and ns.format is not None and Path(str(target)).suffix != suffix:
        raise SpecError("search", "--format", f"{ns.format} does not go with -o {ns.output} "
                        "(its suffix picks the format)", "one or the other")  # fmt: skip
    same = target is not None and plot_target is not None and (
        Path(str(target)).resolve() == Path(str(plot_target)).resolve())  # fmt: skip
    if same:
        raise SpecError("--plot", str(ns.plot), "is the -o file too", "another file for the chart")
    plan = plan_of(ns, registry, spec)
    warn(plan.warnings)
    _check_known(plan)
    client = dask_client(ns.scheduler, ns.workers or 0) if ns.dask or ns.scheduler else None
    try:
        result = run_search(
            plan, chunk=ns.chunk, progress=progress_bar(ns.quiet), client=client, spread=ns.spread
        )
    finally:
        if client is not None:
            close_client(client)
    empty = empty_error(result)
    if empty is not None:
        raise empty
    if ns.emit:
        result = with_launches(result, ns.emit, registry.kinds)
    if annotate is not None:
        result = annotate(result)
    if plot_target is not None:
        output.write_file(plot_target, plot(result))
        print(f"wrote {plot_target}", file=sys.stderr)
    if target is not None:
        suffix = Path(str(target)).suffix
        if suffix == ".svg":
            output.write_file(target, plot(result))
        elif suffix == ".json":
            output.write_file(target, json.dumps(document(result), indent=2) + "\n")
        else:
            fmt = registry.formats[
                {".csv": "csv", ".md": "markdown", ".parquet": "parquet"}[suffix]
            ]
            output.write_stream(target, fmt, frontier_table(result))
        output.announce(target, f"wrote {target} ({len(result.frontier)} frontier points)")
        return 0
    if ns.format in (None, "text"):
        print(visible(text(result), lines=True))
    elif ns.format == "json":
        write_json(document(result), sys.stdout)
    else:
        registry.formats[ns.format].write(frontier_table(result), sys.stdout)
    return 0


def with_launches(result: Result, emit: str, kinds: Any) -> Result:
    """Each target's best point per option with its launch for ``emit`` (`launch.for_points`),
    under ``launch`` (a document, or the reason it has none)."""
    best = []
    for t in result.best:
        found = launch.for_points([o["point"] for o in t["options"]], emit, kinds)
        options = [{**o, "launch": launch.json_of(lau)}
                   for o, lau in zip(t["options"], found, strict=True)]  # fmt: skip
        best.append({**t, "options": options})
    return attrs.evolve(result, best=tuple(best))


def _check_known(plan: Plan) -> None:
    """An energy or cost metric asked for where a spec does not state its inputs: say which."""

    spec = plan.spec
    asked = {spec.x, spec.y, spec.objective, *(c.metric for c in (*spec.targets, *spec.where))}
    for v in plan.variants:
        for m in sorted(asked & OPTIONAL_METRICS):
            paths = [v.provides.get(r, r) for r in NEEDS[m]]  # its kind's field, if any
            lacking = [p for p in paths if p not in v.values]
            if lacking:
                raise SpecError(
                    v.ref,
                    lacking[0],
                    f"not stated, so {m} is unknown",
                    f"--set {lacking[0]}=… or a spec that states it",
                )
