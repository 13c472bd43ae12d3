"""Prediction bands: a prediction as an interval over what its inputs are known to within.

Two sources make an input uncertain (docs/validation.md, "Bands"):

- the calibration's 95% prediction intervals: a manifest ``specs/calibration/<gpu>.toml`` (or
  ``<cluster>.toml``) may carry a ``[pi95]`` table of field = ``"LOW..HIGH"`` for the hardware
  or cluster spec its ``spec`` key names (``"moe_efficiency" = "0.47..0.76"``): where the
  fitted value lies, widened by how far the table's own points scatter about the law
  (`stepwall.apps.calibrate.prediction_interval`); a manifest with only ``[ci95]`` (the
  confidence intervals) gives those. An interval applies where the spec file it calibrates set
  the value (a ``--set`` of the field, or another spec, keeps it exact);
- the stated ranges of the specs themselves (docs/ranges.md), e.g. an engine's unmeasured
  overlap efficiency written ``"0.5..1 (1)"``.

Both become `stepwall.analyses.ranges.RangedInput` boxes around the nominal values, so a single
point's band is `stepwall.analyses.ranges.bounds` of its metric over the box. A searched best
(a frontier row) is banded by searching again with every ranged input at the end that lowers
the objective at the nominal choice, then at the end that raises it (`frontier_ends`): the
best at a target may change layout across the box, which the chosen configuration alone would
miss, and two passes cost what the 2^k corners would not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.analyses import ranges
from stepwall.analyses.ranges import RangedInput
from stepwall.apps.search import Plan, Result, describe, evaluate, evaluate_points
from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError, UnitError
from stepwall.plugin.registry import Registry
from stepwall.spec.grammar import SYNTAX, is_range, parse_range
from stepwall.spec.loader import catalog_names, find_spec_file, read_toml
from stepwall.spec.validation import load_scenario

INTERVAL_EXPECTED = 'LOW..HIGH, the 95% interval of the fitted value, e.g. "0.57..0.63"'
TABLES = ("pi95", "ci95")  # the interval tables a band takes, the first a manifest has


@attrs.frozen
class Interval:
    """A calibrated hardware or cluster value's 95% interval (SI) and the manifest that states
    it."""

    path: str  # hardware.FIELD or cluster.FIELD
    low: float
    high: float
    text: str  # as written
    manifest: str
    table: str = "pi95"  # the manifest's table that states it

    @property
    def field(self) -> str:
        """The field as its manifest names it: ``fp8.efficiency``, ``scale_up.hop_latency``."""
        return self.path.split(".", 1)[1]


Intervals = Mapping[Path, Mapping[str, Interval]]  # spec file -> path -> interval


def calibration_intervals(folder: Path | None = None) -> dict[Path, dict[str, Interval]]:
    """The ``[pi95]`` (else the ``[ci95]``) of every calibration manifest in ``folder``
    (default: the catalog's ``calibration/``), by the hardware or cluster spec file each
    calibrates (resolved)."""
    out: dict[Path, dict[str, Interval]] = {}
    root = catalog_root() / "calibration" if folder is None else folder
    for manifest in sorted(root.glob("*.toml")):
        where = str(manifest)
        doc = read_toml(manifest)
        name = next((t for t in TABLES if t in doc), None)
        if name is None:
            continue
        given = doc[name]
        if not isinstance(given, dict):
            raise SpecError(where, name, "is not a table", f"field = {INTERVAL_EXPECTED}")
        spec = doc.get("spec")
        if not isinstance(spec, str) or not spec.strip():
            raise SpecError(where, "spec", "missing",
                            "the hardware or cluster spec the manifest calibrates")  # fmt: skip
        # a cluster entry's fields are cluster.*, a GPU's hardware.*
        section = "cluster" if spec in catalog_names("clusters") else "hardware"
        kind = "clusters" if section == "cluster" else "hardware"
        hw = find_spec_file(spec, kind, where=where, key="spec").resolve()
        own = out.setdefault(hw, {})
        for field, text in flat_keys(given):
            key = f"{name}.{field}"
            if not is_range(text):
                raise SpecError(where, key, f"{text!r} is not a range", INTERVAL_EXPECTED)
            try:
                low, _, high, _ = parse_range(str(text))
            except UnitError as e:
                raise SpecError(where, key, str(e), SYNTAX) from None
            own[f"{section}.{field}"] = Interval(f"{section}.{field}", low, high, str(text),
                                                 where, name)  # fmt: skip
    return out


def flat_keys(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{"fp8": {"efficiency": "…"}}`` -> ``[("fp8.efficiency", "…")]``; ``sources`` tables
    (citations, not values) left out."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        if k == "sources":
            continue
        if isinstance(v, dict):
            out += flat_keys(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _calibrated(sc: Any, intervals: Intervals) -> list[tuple[Interval, Any]]:
    """The intervals that apply to scenario ``sc``: those of the hardware file that set each
    value, with the value's Parameter."""
    out = []
    for hw, fields in intervals.items():
        for path, iv in sorted(fields.items()):
            sym, src = sc.parameter(path), sc.provenance.get(path)  # src: None for a default
            if sym is None or path in sc.ranges or src is None or Path(src).resolve() != hw:
                continue
            nominal = float(sc.values[sym])
            if not iv.low <= nominal <= iv.high:
                raise SpecError(iv.manifest, f"{iv.table}.{iv.field}", f"{iv.text!r} does not "
                                f"hold the spec's value {nominal:.6g}",
                                "the 95% interval around the fitted value")  # fmt: skip
            out.append((iv, sym))
    return out


def ranged_inputs(
    model: Any, intervals: Intervals, registry: Registry | None = None
) -> list[RangedInput]:
    """A built model's stated ranges (`ranges.inputs`), then the calibration intervals of the
    values its hardware spec files set, each around the value as nominal."""
    out = ranges.inputs(model, registry)
    calibrated = _calibrated(model.scenario, intervals)
    shaping = [iv for iv, _ in calibrated if iv.path in model.structural_keys]
    for iv in _changing_shape(model, shaping, registry):
        raise SpecError(iv.manifest, f"{iv.table}.{iv.field}", "decides which terms "
                        "the model has, so it cannot take an interval",
                        "a continuous value")  # fmt: skip
    for iv, sym in calibrated:
        unit = "" if sym.dim.dimensionless else str(sym.dim)
        out.append(RangedInput(iv.path, sym, iv.low, iv.high, float(model.scenario.values[sym]),
                               iv.manifest, unit))  # fmt: skip
    return out


def _changing_shape(
    model: Any, shaping: Sequence[Interval], registry: Registry | None
) -> list[Interval]:
    """The intervals among ``shaping`` (keys a plugin read while building) whose ends change
    the model's expressions: two builds with every one at its low end, then its high end, and
    one key at a time only where those differ (a key read only to see that it is given, as the
    per-precision kernel families are, keeps the shape)."""
    if not shaping:
        return []
    lows, highs = ({iv.path: iv.low for iv in shaping}, {iv.path: iv.high for iv in shaping})
    if ranges.same_shape_at(model, lows, registry) and ranges.same_shape_at(model, highs, registry):
        return []
    return [iv for iv in shaping
            if not ranges.same_shape(model, iv.path, (iv.low, iv.high), registry)]  # fmt: skip


def point_band(
    model: Any, metric: str, ranged: Sequence[RangedInput], at: Mapping[str, float]
) -> tuple[float, float] | None:
    """``metric``'s [low, high] over the box of ``ranged`` with the keys of ``at`` (path ->
    SI) fixed; None for an output `ranges.outputs` does not list (a group)."""
    if not ranged:
        return None
    model = ranges.at_point(model, at) if at else model
    exprs = ranges.outputs(model)
    if metric not in exprs:
        return None
    b = ranges.bounds(model, ranged, {metric: exprs[metric]})[metric]
    return b.low, b.high


# ---------------------------------------------------------------- searched bests


def variant_ranges(
    plan: Plan, intervals: Intervals, registry: Registry
) -> list[dict[str, tuple[float, float]]]:
    """Each variant's ranged inputs (path -> SI ends): its spec's stated ranges, then the
    calibration intervals that apply to its scenario."""
    out = []
    for v in plan.variants:
        probe = [*v.sets, f"{v.provides['users']}=1"]  # the search sets the users per point
        sc = load_scenario(v.ref, registry.kinds, probe)
        own = dict(v.ranges)
        own.update({iv.path: (iv.low, iv.high) for iv, _ in _calibrated(sc, intervals)})
        out.append(own)
    return out


def _directions(plan: Plan, gid: int, boxes: Sequence[Mapping[str, tuple[float, float]]]
                ) -> dict[str, bool]:  # fmt: skip
    """Per ranged path: whether its low end lowers the objective (larger is better after the
    objective's sign) at the point ``gid`` (in its variant; another variant's paths at the
    same local point, the last one where that variant is smaller)."""
    offsets = np.asarray(plan.offsets, dtype=np.int64)
    vi = int(np.searchsorted(offsets, gid, side="right")) - 1
    local = gid - int(offsets[vi])
    sign = plan.spec.sign(plan.spec.objective)
    order = [vi, *(i for i in range(len(plan.variants)) if i != vi)]
    out: dict[str, bool] = {}
    for i in order:
        v = plan.variants[i]
        idx = np.array([min(local, v.size - 1)], dtype=np.int64)
        for path, (lo, hi) in boxes[i].items():
            if path in out or path not in v.values:
                continue
            got = []
            for end in (lo, hi):
                ev = evaluate_points(v.numeric, {**v.values, path: end}, v.columns(idx))
                value = np.asarray(ev[plan.spec.objective], dtype=float).ravel()[0]
                got.append(sign * float(value))
            out[path] = not got[0] > got[1]
    return out


def frontier_ends(
    result: Result, boxes: Sequence[Mapping[str, tuple[float, float]]]
) -> tuple[Result, Result] | None:
    """The search again at the pessimistic end of every ranged input, then at the optimistic
    end (their directions at the first target's nominal best, `_directions`); None where no
    input is ranged or no target has a best point."""
    plan = result.plan
    gid = next((o["point"]["id"] for e in result.best for o in e["options"] if o["point"]), None)
    if gid is None or not any(boxes):
        return None
    low, high = end_plans(plan, int(gid), boxes)
    return describe(low, evaluate(low)), describe(high, evaluate(high))


def end_plans(
    plan: Plan, gid: int, boxes: Sequence[Mapping[str, tuple[float, float]]]
) -> tuple[Plan, Plan]:
    """``plan`` with every ranged input of ``boxes`` (one per variant) at its pessimistic
    end, then at its optimistic end, as each moves the objective at the point ``gid``
    (`_directions`)."""
    low_first = _directions(plan, gid, boxes)
    ends = []
    for pessimistic in (True, False):
        variants = []
        for v, box in zip(plan.variants, boxes, strict=True):
            values = dict(v.values)
            for path, (lo, hi) in box.items():
                if path in low_first:
                    values[path] = lo if low_first[path] == pessimistic else hi
            variants.append(attrs.evolve(v, values=values))
        ends.append(attrs.evolve(plan, variants=tuple(variants)))
    return ends[0], ends[1]


__all__ = [
    "Interval",
    "calibration_intervals",
    "end_plans",
    "flat_keys",
    "frontier_ends",
    "point_band",
    "ranged_inputs",
    "variant_ranges",
]
