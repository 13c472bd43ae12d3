"""The built-in plugin ``analyses``: wall, optimum, crossover, elasticity, regime and tornado
(the MoE model plugin adds plateau)."""

from __future__ import annotations

from stepwall.analyses import crossover, elasticity, optimum, regime, tornado, wall
from stepwall.plugin.entries import Analysis
from stepwall.plugin.hookspecs import hookimpl


@hookimpl
def stepwall_analyses() -> list[Analysis]:
    return [wall.ANALYSIS, optimum.ANALYSIS, crossover.ANALYSIS, elasticity.ANALYSIS,
            regime.ANALYSIS, tornado.ANALYSIS]  # fmt: skip
