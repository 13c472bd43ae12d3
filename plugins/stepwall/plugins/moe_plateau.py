"""Analysis ``plateau`` of the MoE model plugin: the concurrency at which expert parallelism's
experts are all busy. A module of its own so that commands which derive nothing do not
import the analyses; `stepwall.plugins.moe_transformer` declares it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import sympy as sp

from stepwall.analyses import Derivation, option
from stepwall.analyses.base import AnalysisOptions, Context
from stepwall.analyses.common import number
from stepwall.core.errors import SpecError
from stepwall.core.laws import tokens_for_expert_fraction
from stepwall.core.symbols import Parameter, latex_names
from stepwall.core.units import DIMENSIONLESS
from stepwall.plugin.entries import Analysis

if TYPE_CHECKING:
    from stepwall.model.compose import StepModel


def plateau(model: StepModel, fraction: float = 0.9, symbolic: bool = False) -> Derivation:
    """Concurrency C* at which the expected fraction of routed experts hit per step reaches
    ``fraction``: E·(1 − (1 − k/E)^(C·M)) = φ·E, so C* = ln(1 − φ) / (M·ln(1 − k/E))."""
    if not 0 < fraction < 1:
        raise SpecError("derive", "--fraction", f"{fraction} is not in (0, 1)", "0 < F < 1")
    if model.scenario.model.n_experts <= 0:
        raise SpecError("derive", "model.n_experts", "the model has no routed experts")
    E = model.parameter("model.n_experts")
    k = model.parameter("model.experts_per_token")
    phi = Parameter("phi", DIMENSIONLESS, r"\varphi", "fraction of the experts hit")
    M = sp.sympify(model.decoding.verify_tokens)
    m_ = sp.Symbol("M", positive=True)
    # T = C·M tokens hit φ·E experts in expectation: the law inverted for T, divided by M
    general = tokens_for_expert_fraction(E, k, phi) / m_
    method, note = "symbolic", ""
    cstar = general.xreplace({m_: M})
    ar = general.xreplace({m_: sp.Integer(1)})
    vals = {**model.values, phi: fraction}
    cstar_value = number(cstar, vals)
    ratio = M  # C*(M = 1) / C*(M): the law depends on C only through T = C·M
    closed_expr = cstar if symbolic else cstar.xreplace({phi: sp.Float(fraction)})
    definition = (
        "C* where expected distinct experts hit per step E·(1 − (1 − k/E)^(C·M)) reaches "
        f"φ·E (φ = {fraction:g}); T = C·M tokens per replica per step (M verify tokens per "
        "user), uniform top-k routing"
    )
    m_value = number(M, vals)
    if m_value == 1:
        ratio_note = (
            "this scenario verifies one token per user (M = 1): C* is the autoregressive "
            "plateau itself"
        )
    else:
        ratio_note = (
            f"C*(autoregressive)/C* = M = {ratio} = {m_value:g}: verifying M tokens per user "
            "reaches the plateau with M times fewer users"
        )
    note = ratio_note + "; the law's symbols E, k, M are kept, φ substituted unless --symbolic"
    details = {
        "fraction": fraction,
        "verify_tokens": number(M, vals),
        "verify_tokens_expr": str(M),
        "general": str(general),
        "tokens_per_step": cstar_value * number(M, vals),
        "autoregressive_cstar": number(ar, vals),
        "ratio_autoregressive_over_this": str(ratio),
        "ratio_value": m_value,
    }
    return Derivation(
        kind="plateau",
        key="workload.concurrency",
        value=cstar_value,
        feasible_value=math.ceil(cstar_value - 1e-9),
        closed_form=str(closed_expr),
        latex=sp.latex(closed_expr, symbol_names=latex_names([closed_expr])),
        definition=definition,
        method=method,
        note=note,
        scenario=model.scenario.label,
        details=details,
    )


@attrs.frozen
class PlateauOptions(AnalysisOptions):
    fraction: float = option("the fraction φ of routed experts hit per step", default=0.9)


def _plateau(model: StepModel, o: PlateauOptions, context: Context) -> Derivation:
    return plateau(model, o.fraction, o.symbolic)


ANALYSIS = Analysis(
    "plateau",
    "the users C* at which a fraction φ of the routed experts is hit every step",
    PlateauOptions,
    _plateau,
)
