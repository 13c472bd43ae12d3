"""Frontier switch points (``stepwall search --switch-points``): the interactivity at which
the best layout along a hardware's frontier changes, from the two layouts' own expressions.

Along one layout's curve (its batch varied), tokens/s per GPU = u·c, with u the tokens/s per
user and c the users per GPU, so two curves meet in the (u, y) plane exactly where, at the
same users per GPU, their tokens/s per user are equal. The switch point between two
neighbours on the frontier is therefore the crossover of ``tokens_per_s_per_user`` between
their models along the users per GPU (`stepwall.analyses.crossover.crossover`, ``per_gpu``;
the batch continuous, as the crossover relaxes every count): its root c* in closed form where
the root machinery finds one (a polynomial, a logarithm, Lambert W, or an asymptotic regime
with its stated error against the numeric root), else by bisection, and its sensitivities
∂ln c*/∂ln p (`stepwall.analyses.sensitivity`). The switch is at u* = u(c*) and
y* = u*·c*. Neighbours whose curves do not cross (one ends where a constraint, such as
memory, stops it) have no root: the note says why. Layout, decoding kind and --vary values
all make a layout here; disaggregated deployments are not one model and have none.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from stepwall.analyses.crossover import crossover, share, side_names
from stepwall.analyses.sensitivity import attach
from stepwall.apps.search import Result
from stepwall.model.compose import StepModel, build_model

METRIC = "tokens_per_s_per_user"  # equal at the switch, at equal users per GPU
SENSITIVITIES = 5  # the largest elasticities a switch point reports
PER_REPLICA = ("concurrency", "users_per_rank")  # what a layout's points differ in


def identity(p: Mapping[str, Any]) -> tuple[Any, ...]:
    """A frontier point's layout: its configuration but the users (its batch)."""
    c = p["config"]
    return tuple((k, repr(v)) for k, v in sorted(c.items()) if k not in PER_REPLICA)


def model_of(p: Mapping[str, Any], registry: Any) -> StepModel:
    """The step model of a point's layout, from the ``stepwall eval`` command that
    reproduces it (the users are the crossover's axis)."""
    words = shlex.split(str(p["command"]))
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    return build_model(words[2], sets, registry)


def neighbours(frontier: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """Consecutive runs of one layout along a frontier (x descending): the last point of
    each run and the first of the next."""
    return [(a, b) for a, b in itertools.pairwise(frontier) if identity(a) != identity(b)]


def switch_point(a: Mapping[str, Any], b: Mapping[str, Any], registry: Any) -> dict[str, Any]:
    """Where the frontier passes from ``a``'s layout to ``b``'s (module doc)."""
    ma, mb = model_of(a, registry), model_of(b, registry)
    key = ma.provides["users"]
    d = attach(crossover(ma, mb, key, METRIC, per_gpu=True), show=True)
    sides = dict(zip(side_names(ma, mb), ("from", "to"), strict=True))
    labels = {ma.scenario.label: "from", mb.scenario.label: "to"}

    def named(text: str) -> str:  # the two layouts as "from" and "to", not their long labels
        for label, name in labels.items():
            text = text.replace(label, name)
        return text

    out: dict[str, Any] = {"option": a["option"], "from": a["config"], "to": b["config"],
                           "method": d.method, "closed_form": named(d.closed_form),
                           "note": named(d.note), "form": d.form, "regime": d.regime}  # fmt: skip
    if d.value is None:
        return {**out, "users_per_gpu": None, "tokens_per_s_per_user": None,
                "tokens_per_s_per_gpu": None, "sensitivities": []}  # fmt: skip
    c = float(d.value)
    u = float(np.asarray(ma.evaluate({key: c / share(ma, True)})[METRIC], dtype=float))
    rows = [{**r.to_json(), "side": sides.get(r.side, r.side)}
            for r in d.sensitivities[:SENSITIVITIES]]  # fmt: skip
    return {**out, "users_per_gpu": c, "tokens_per_s_per_user": u,
            "tokens_per_s_per_gpu": u * c, "sensitivities": rows}  # fmt: skip


def switch_points(
    result: Result, registry: Any, progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """Every switch point along every option's frontier, in frontier order."""
    pairs = []
    for o in result.plan.options:
        pairs += neighbours([p for p in result.frontier if p["option"] == o.label])
    out = []
    for i, (a, b) in enumerate(pairs):
        out.append(switch_point(a, b, registry))
        if progress is not None:
            progress(i + 1, len(pairs))
    return out
