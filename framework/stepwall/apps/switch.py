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
all make a layout here.

On a ``search --disagg`` frontier a P/D deployment of x prefill instances of N_p GPUs and y
decode instances of N_d is, along its curve, its decode model with each decode instance
charged its share of the prefill pool, x·N_p/y GPUs more (``besides``): users per GPU
c = C/(N_d + x·N_p/y) at C users per decode instance. That holds the deployment's prefill
GPUs per decode GPU at the frontier point's; the switch reports the prefill pool's
utilisation ρ there (ρ at the point, scaled by the decode demand C·u), which must stay below
1 (and below the TTFT limit's ρ*) for the pool to keep up.
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


def _layout(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple((k, repr(v)) for k, v in sorted(c.items()) if k not in PER_REPLICA)


def disaggregated(p: Mapping[str, Any]) -> bool:
    return p.get("mode") == "disaggregated"


def identity(p: Mapping[str, Any]) -> tuple[Any, ...]:
    """A frontier point's layout: its configuration but the users (its batch); a P/D
    point's decode and prefill configurations (its instance counts may change along it)."""
    if disaggregated(p):
        return ("disaggregated", _layout(p["decode"]["config"]), _layout(p["prefill"]["config"]))
    return _layout(p["config"])


def model_of(p: Mapping[str, Any], registry: Any) -> StepModel:
    """The step model of a point's layout, from the ``stepwall eval`` command that
    reproduces it (a P/D point's decode command; the users are the crossover's axis)."""
    command = p["decode"]["command"] if disaggregated(p) else p["command"]
    words = shlex.split(str(command))
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    return build_model(words[2], sets, registry)


def besides(p: Mapping[str, Any]) -> float:
    """GPUs each replica of a point's curve is charged beyond its own: a P/D decode
    instance's share of the prefill pool, x·N_p/y (module doc); 0 for an aggregated one."""
    return float(p["prefill_gpus"]) / float(p["decode_instances"]) if disaggregated(p) else 0.0


def side(p: Mapping[str, Any]) -> dict[str, Any]:
    """A switch's side as its point states it: the configuration, or a P/D deployment's."""
    if not disaggregated(p):
        return dict(p["config"])
    keys = ("prefill_instances", "decode_instances", "prefill_gpus", "decode_gpus")
    return {"mode": "disaggregated", "prefill": p["prefill"]["config"],
            "decode": p["decode"]["config"], **{k: p[k] for k in keys}}  # fmt: skip


def utilisation(p: Mapping[str, Any], users: float, u: float) -> float | None:
    """A P/D side's prefill utilisation at the switch (``users`` per decode instance, u
    tokens/s per user): the point's, scaled by the decode demand C·u against the point's
    (None: aggregated)."""
    if not disaggregated(p):
        return None
    at_point = float(p["decode"]["config"]["concurrency"]) * float(p["tokens_per_s_per_user"])
    return float(p["prefill_utilisation"]) * users * u / at_point


def neighbours(frontier: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """Consecutive runs of one layout along a frontier (x descending): the last point of
    each run and the first of the next. Where the frontier alternates between two layouts
    (their batches interleave), the pair is taken once, where it first meets: one crossing
    of the two curves."""
    out, seen = [], set()
    for a, b in itertools.pairwise(frontier):
        pair = frozenset((identity(a), identity(b)))
        if len(pair) == 2 and pair not in seen:
            seen.add(pair)
            out.append((a, b))
    return out


def switch_point(a: Mapping[str, Any], b: Mapping[str, Any], registry: Any) -> dict[str, Any]:
    """Where the frontier passes from ``a``'s layout to ``b``'s (module doc)."""
    ma, mb = model_of(a, registry), model_of(b, registry)
    key = ma.provides["users"]
    extra = (besides(a), besides(b))
    d = attach(crossover(ma, mb, key, METRIC, per_gpu=True, besides=extra), show=True)
    sides = dict(zip(side_names(ma, mb), ("from", "to"), strict=True))
    labels = {ma.scenario.label: "from", mb.scenario.label: "to"}

    def named(text: str) -> str:  # the two layouts as "from" and "to", not their long labels
        for label, name in labels.items():
            text = text.replace(label, name)
        return text

    out: dict[str, Any] = {"option": a["option"], "from": side(a), "to": side(b),
                           "method": d.method, "closed_form": named(d.closed_form),
                           "note": named(d.note), "form": d.form, "regime": d.regime}  # fmt: skip
    pd = disaggregated(a) or disaggregated(b)
    if d.value is None:
        gone = {"prefill_utilisation": [None, None]} if pd else {}
        return {**out, "users_per_gpu": None, "tokens_per_s_per_user": None,
                "tokens_per_s_per_gpu": None, "sensitivities": [], **gone}  # fmt: skip
    c = float(d.value)
    users = [c / share(m, True, e) for m, e in zip((ma, mb), extra, strict=True)]
    u = float(np.asarray(ma.evaluate({key: users[0]})[METRIC], dtype=float))
    rows = [{**r.to_json(), "side": sides.get(r.side, r.side)}
            for r in d.sensitivities[:SENSITIVITIES]]  # fmt: skip
    rho = {
        "prefill_utilisation": [utilisation(p, n, u) for p, n in zip((a, b), users, strict=True)]
    }
    return {**out, "users_per_gpu": c, "tokens_per_s_per_user": u,
            "tokens_per_s_per_gpu": u * c, "sensitivities": rows,
            **(rho if pd else {})}  # fmt: skip


def switch_points(
    result: Result, registry: Any, progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """Every switch point along every option's frontier, in frontier order."""
    labels = [o.label for o in result.plan.options]
    return along_frontier(result.frontier, labels, registry, progress)


def along_frontier(
    frontier: Sequence[Mapping[str, Any]],
    options: Sequence[str],
    registry: Any,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every switch point along each option's part of ``frontier`` (aggregated points, and
    P/D ones on a ``search --disagg`` frontier), in frontier order."""
    pairs = []
    for label in options:
        pairs += neighbours([p for p in frontier if p["option"] == label])
    out = []
    for i, (a, b) in enumerate(pairs):
        out.append(switch_point(a, b, registry))
        if progress is not None:
            progress(i + 1, len(pairs))
    return out
