"""Elasticities: ∂ln(metric)/∂ln(p) for every parameter p at the point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import sympy as sp

from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import (
    metric_expr,
    number,
    parameter,
    relax,
    resolution_note,
    resolve_branches,
)
from stepwall.analyses.ranges import at_point
from stepwall.analyses.result import Derivation
from stepwall.core.errors import SpecError
from stepwall.core.options import option
from stepwall.core.symbols import is_constant
from stepwall.core.terminal import visible
from stepwall.core.units import TIME
from stepwall.plugin.entries import Analysis
from stepwall.spec.values import check_magnitude

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def elasticity(
    model: StepModel,
    metric: str = "step_time_s",
    at: Mapping[str, float] | None = None,
    symbolic: bool = False,
) -> list[Derivation]:
    """∂ln(metric)/∂ln(p) = p·∂f/∂p / f for every parameter p, sorted by magnitude."""
    expr = metric_expr(model, metric)
    vals = dict(model.values)
    for k, v in (at or {}).items():
        vals[parameter(model, k)] = float(v)
    ch: list[str] = []
    f = resolve_branches(relax(expr), vals, ch)
    f0 = number(f, vals)
    where = ", ".join(f"{k} = {v:g}" for k, v in (at or {}).items()) or "the scenario's point"
    definition = f"∂ln({metric})/∂ln(p) = p·(∂f/∂p)/f at {where}; " + resolution_note(
        ch, "at that point"
    )
    out = []
    free = f.free_symbols
    for p in sorted(vals, key=lambda s: s.name):
        if is_constant(p):
            continue
        if p not in free:
            e_val, closed = 0.0, "0"
        else:
            others = {s: sp.Float(v, 15) for s, v in vals.items() if s != p}
            fp = f.xreplace(others)
            e = p * sp.diff(fp, p) / fp
            e_val = float(e.xreplace({p: sp.Float(vals[p], 15)}).evalf())
            closed = str(p * sp.diff(f, p) / f) if symbolic else str(e)
        dim = p.dim
        out.append(
            Derivation(
                kind="elasticity",
                key=p.name,
                value=e_val,
                feasible_value=None,
                closed_form=closed if len(closed) < 4000 else closed[:4000] + " ...",
                latex="",
                definition=definition,
                method="symbolic",
                note="",
                scenario=model.scenario.label,
                details={
                    "metric": metric,
                    "metric_value": f0,
                    "dimension": str(dim),
                    "is_time": dim == TIME,
                    "value_of_parameter": vals[p],
                },
            )
        )
    out.sort(key=lambda d: (-round(abs(d.value or 0.0), 9), d.key))  # ties: by name
    return out


@attrs.frozen
class ElasticityOptions(AnalysisOptions):
    metric: str = option("the metric", default="step_time_s")
    at: tuple[str, ...] = option("evaluate at KEY=VALUE (SI units; repeatable)", default=(),
                                 metavar="KEY=VALUE")  # fmt: skip


def _run(model: StepModel, o: ElasticityOptions, context: Context) -> list[Derivation]:
    at: dict[str, float] = {}
    for item in o.at:
        k, sep, v = item.partition("=")
        k = k.strip()
        if not sep:
            raise SpecError("--at", item, "missing '='", "KEY=VALUE")
        if k in at:
            raise SpecError("--at", k, "given twice", "each KEY once")
        try:
            x = float(v)
        except ValueError:
            raise SpecError("--at", k, f"{v!r} is not a number", "KEY=SI value") from None
        field = model.scenario.field(parameter(model, k).name)
        meta = field.metadata if field is not None else None
        at[k] = x if meta is None else check_magnitude(meta, x, meta["dim"], v.strip(), "--at", k)
    if at and not context.allow_infeasible:
        at_point(model, at, "--at").check()  # the point moved: its constraints must hold
    return elasticity(model, o.metric, at, o.symbolic)


def _text(results: Sequence[Derivation]) -> str:
    lines = [
        f"elasticities of {results[0].details['metric']} [{visible(results[0].scenario)}]",
        f"  definition  {results[0].definition}",
    ]
    lines += [f"  {d.value:+.4f}  {d.key}" for d in results if d.value]
    zero = sum(1 for d in results if not d.value)
    lines.append(f"  ({zero} parameters with elasticity 0 not shown; --json lists all)")
    return "\n".join(lines)


def _table(results: Sequence[Derivation]) -> tuple[list[str], list[list[Any]]]:
    return ["parameter", "elasticity"], [[d.key, d.value] for d in results]


ANALYSIS = Analysis(
    "elasticity",
    "∂ln(metric)/∂ln(p) for every parameter p at the point: which lever moves it most",
    ElasticityOptions,
    _run,
    many=True,
    text=_text,
    table=_table,
    number_format="+.3f",
    at_point=True,
)
