"""Energy and cost per token: symbolic metrics from the hardware's board power and the
cluster's price per GPU-hour and PUE, beside the throughput metrics they divide.

    joules per token        = P_GPU / r                  (board energy per output token)
    tokens/s per MW         = r / (P_GPU · PUE) · 10⁶ W  (provisioned: facility power)
    USD per million tokens  = c_GPU / r · 10⁶            (c_GPU in USD/s)

where r is tokens/s per GPU (`stepwall.model.compose`: C·τ / (t · GPUs per replica)). Each needs its
inputs, the requirements ``board_power``, ``pue`` and ``price_per_gpu_hour``
(`stepwall.plugin.requirements`: ``hardware.board_power``, ``cluster.pue`` and
``cluster.price_per_gpu_hour`` for the built-in kinds), stated in the specs; where one is
absent the metric is unknown, not guessed: it is left out of the model (`StepModel.metrics`),
compiles to NaN, reads ``null`` in ``eval --json`` and is not shown by ``eval``. An unknown
energy or cost does not make a point infeasible (`OPTIONAL_METRICS`).
"""

from __future__ import annotations

import sympy as sp

from stepwall.core.scenario import Scenario
from stepwall.plugin.registry import Registry

ENERGY_METRICS = ("joules_per_token", "tokens_per_s_per_mw", "usd_per_million_tokens")
# the requirements each one needs (`stepwall.plugin.requirements`), in the order an error
# names the first one a scenario does not state
NEEDS = {
    "joules_per_token": ("board_power",),
    "tokens_per_s_per_mw": ("board_power", "pue"),
    "usd_per_million_tokens": ("price_per_gpu_hour",),
}
MEGA = sp.Integer(10) ** 6


def energy_metrics(scenario: Scenario, per_gpu: sp.Expr, registry: Registry) -> dict[str, sp.Expr]:
    """The energy and cost metrics whose inputs the scenario states, as expressions in
    ``per_gpu`` (tokens/s per GPU) and the parameters that provide the requirements
    ``board_power``, ``pue`` and ``price_per_gpu_hour`` (`stepwall.plugin.requirements`)."""
    power = registry.parameter(scenario, "board_power")
    pue = registry.parameter(scenario, "pue")
    price = registry.parameter(scenario, "price_per_gpu_hour")
    out: dict[str, sp.Expr] = {}
    if power is not None:
        out["joules_per_token"] = power / per_gpu
        if pue is not None:
            out["tokens_per_s_per_mw"] = per_gpu * MEGA / (power * pue)
    if price is not None:
        out["usd_per_million_tokens"] = price * MEGA / per_gpu
    return out
