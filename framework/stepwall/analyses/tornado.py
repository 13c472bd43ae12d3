"""Tornado: which ranged inputs matter most for a metric.

For each ranged parameter p (the scenario's ranges, docs/ranges.md; or, with ``spread``,
every continuous parameter the metric depends on at ±spread), the metric's exact swing over
p's range with every other parameter at its nominal value: max − min over [low, high], found
as `stepwall.analyses.ranges.bounds` finds them (the ends where the metric is monotone in p, else
split where ∂f/∂p changes sign). Beside it the first-order estimate |elasticity| × relative
width × metric, which ranks the same way when the metric is near-linear over the range.
Ranked by swing, largest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import metric_expr
from stepwall.analyses.ranges import RangedInput, bounds, inputs, shown
from stepwall.analyses.result import Derivation
from stepwall.core.errors import SpecError, shown_path
from stepwall.core.options import option
from stepwall.core.symbols import is_constant
from stepwall.model.metrics import METRIC_UNITS
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel

DEFINITION = (
    "swing = max − min of {metric} over each parameter's range, every other parameter at its "
    "nominal value; first order = |∂ln f/∂ln p| × (high − low)/nominal × f"
)


def spread_inputs(model: StepModel, metric: str, spread: float) -> list[RangedInput]:
    """±``spread`` around every continuous, non-structural parameter the metric depends on
    (whole-number keys and keys that shape the model are left out), clipped to each field's
    bounds."""

    sc = model.scenario
    free = metric_expr(model, metric).free_symbols
    out = []
    for sym in sorted(free, key=lambda s: s.name):
        f = sc.field(sym.name)
        v = float(model.values.get(sym, 0.0))
        if is_constant(sym) or f is None or f.metadata.get("integer") or v <= 0:
            continue
        if sym.name in model.structural_keys:
            continue
        meta = f.metadata
        low = max(v * (1 - spread), float(meta["minimum"]))
        high = v * (1 + spread)
        if meta["maximum"] is not None:
            high = min(high, float(meta["maximum"]))
        if low == high:
            continue
        unit = "" if sym.dim.dimensionless else str(sym.dim)
        out.append(RangedInput(sym.name, sym, low, high, v, shown_path(sc.file_of(sym.name)),
                               unit))  # fmt: skip
    return out


def tornado(
    model: StepModel,
    metric: str = "step_time_s",
    spread: float = 0.0,
    registry: Any = None,
) -> list[Derivation]:
    """One `Derivation` per ranged input (value: the metric's swing over its range), ranked
    by swing, largest first."""
    expr = metric_expr(model, metric)
    ranged = inputs(model, registry) if model.scenario.ranges else []
    if spread:
        given = {r.path for r in ranged}
        ranged += [r for r in spread_inputs(model, metric, spread) if r.path not in given]
    if not ranged and spread:
        raise SpecError("derive", "--spread", f"±{spread:g} moves no continuous parameter that "
                        f"{metric} depends on", "a metric such as step_time_s, or a larger "
                        "spread")  # fmt: skip
    if not ranged:
        raise SpecError("derive", "tornado", "the scenario has no ranged values",
                        'a range such as --set engine.memory_efficiency="0.6..0.8", or '
                        "--spread 0.1 (every parameter ±10%)")  # fmt: skip
    f0 = float(np.asarray(model.evaluate()[metric], dtype=float))
    definition = DEFINITION.format(metric=metric)
    out = []
    for r in ranged:
        b = bounds(model, [r], {metric: expr})[metric]
        ends = model.evaluate({r.symbol: np.array([r.low, r.high, r.nominal * (1 - 1e-6),
                                                   r.nominal * (1 + 1e-6)])})  # fmt: skip
        ys = np.broadcast_to(np.asarray(ends[metric], dtype=float), (4,))
        elasticity = (ys[3] - ys[2]) / (2e-6 * f0) if f0 else 0.0
        width = (r.high - r.low) / r.nominal if r.nominal else 0.0
        estimate = abs(elasticity) * width * abs(f0)
        swing = b.high - b.low
        out.append(Derivation(
            kind="tornado", key=r.path, value=swing, feasible_value=None, closed_form="",
            latex="", definition=definition, method=b.method, note=b.how,
            scenario=model.scenario.label,
            details={"metric": metric, "metric_value": f0, "nominal": r.nominal, "low": r.low,
                     "high": r.high, "unit": r.unit, "file": r.file,
                     "value_at_low": float(ys[0]), "value_at_high": float(ys[1]),
                     "min": b.low, "max": b.high, "at_min": b.at_low[r.path],
                     "at_max": b.at_high[r.path], "elasticity": float(elasticity),
                     "first_order": float(estimate)},
        ))  # fmt: skip
    out.sort(key=lambda d: (-round(d.value or 0.0, 12), d.key))
    return out


@attrs.frozen
class TornadoOptions(AnalysisOptions):
    metric: str = option("the metric", default="step_time_s")
    spread: float = option(
        "also vary every continuous parameter the metric depends on by ±this fraction "
        "(0.1 = ±10%) where the specs give it no range",
        default=0.0,
    )


def _run(model: StepModel, o: TornadoOptions, context: Context) -> list[Derivation]:
    if not 0 <= o.spread < 1:
        raise SpecError("--spread", str(o.spread), "is out of range", "a fraction in [0, 1)")
    return tornado(model, o.metric, o.spread, context.registry)


def _text(results: Sequence[Derivation]) -> str:
    d0 = results[0].details
    metric = d0["metric"]
    unit = METRIC_UNITS.get(metric, "")
    rows = [("parameter", "range", "at low", "at high", "swing", "first order", "method")]
    still = 0
    for d in results:
        x = d.details
        if not d.value and not x["first_order"]:
            still += 1
            continue
        u = x["unit"]
        rng = f"{shown(x['low'], u)} .. {shown(x['high'], u)}"
        ends = (shown(x["value_at_low"], unit), shown(x["value_at_high"], unit))
        rows.append((d.key, rng, *ends, shown(d.value or 0.0, unit),
                     shown(x["first_order"], unit), d.method))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"tornado of {metric} [{results[0].scenario}]: nominal {shown(d0['metric_value'], unit)}",
        f"  definition  {results[0].definition}",
        "",
    ]
    for i, r in enumerate(rows):
        cells = [c.ljust(w) if j in (0, 6) else c.rjust(w)
                 for j, (c, w) in enumerate(zip(r, widths, strict=True))]  # fmt: skip
        lines.append("  " + "  ".join(cells).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    if still:
        lines.append(f"  ({still} parameters with swing 0 not shown; --json lists all)")
    return "\n".join(lines)


def _table(results: Sequence[Derivation]) -> tuple[list[str], list[list[Any]]]:
    head = ["parameter", "low", "high", "at low", "at high", "swing", "first order"]
    rows = [[d.key, d.details["low"], d.details["high"], d.details["value_at_low"],
             d.details["value_at_high"], d.value, d.details["first_order"]]
            for d in results]  # fmt: skip
    return head, rows


ANALYSIS = Analysis(
    "tornado",
    "rank the ranged inputs by the metric's exact swing over each range (others nominal), "
    "beside elasticity × range width",
    TornadoOptions,
    _run,
    many=True,
    text=_text,
    table=_table,
    number_format=".4g",
    at_point=True,
)
