"""Sizing: the cheapest deployment that serves R requests per second within a service level
(``stepwall recommend``).

Each candidate is a point of a configuration search (`stepwall.apps.search`: a layout of N
GPUs, a batch, a decoding kind, on one hardware option) that passes every constraint and
every SLA filter (``--ttft``, ``--tpot``, ``--where``), priced as benchmark clients run it: a
closed loop at its concurrency C, completing ``request_rate_per_s`` = q requests per second
over its dp replicas. Serving R takes k = ⌈R/q⌉ copies of it, k·N GPUs; each copy then
carries R/k ≤ q, no more load than its SLA was checked at. The cost minimised is k·N GPUs,
k·N·c USD per hour (c: the cluster's price per GPU-hour) or k·N·P·PUE megawatts (P: the
GPU's board power), each from the specs; where a spec states no price or power the request
is refused up front, naming the key. The answer is exact over the space searched (every
point's k·N, not a per-GPU rate), deterministic (ties to the earlier point), and every
candidate comes with the ``stepwall eval`` line that reproduces its copy and with what bounds
it (`stepwall.apps.search.binding`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from stepwall.apps.search import (
    Plan,
    Variant,
    binding,
    config_text,
    evaluate_block,
    layout_degrees,
    nearest_of,
    nearest_text,
    points,
    tasks,
    toward,
)
from stepwall.core.errors import SpecError

# what --minimize can take: its label, and the requirements (`stepwall.plugin.requirements`)
# a per-GPU cost needs
COSTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpus": ("GPUs", ()),
    "usd": ("USD per hour", ("price_per_gpu_hour",)),
    "mw": ("MW", ("board_power", "pue")),
}
SECONDS_PER_HOUR = 3600.0  # the SI price (USD/s) per GPU-hour
WATTS_PER_MW = 1e6


@attrs.frozen
class Sizing:
    """What a deployment must serve: ``rate`` requests per second; ``minimize`` one of
    `COSTS`; ``keep`` candidates reported (the best first, then runners-up, one per replica
    layout)."""

    rate: float
    minimize: str = "gpus"
    keep: int = 5


def per_gpu_cost(v: Variant, minimize: str, where: str = "--minimize") -> float:
    """One GPU's share of the cost: 1 GPU, its price in USD per hour, or its facility power
    in MW (board power × PUE), from the variant's spec values."""
    label, needs = COSTS[minimize]
    missing = [r for r in needs if r not in v.provides or v.provides[r] not in v.values]
    if missing:
        key = v.provides.get(missing[0], missing[0])
        raise SpecError(where, minimize, f"{v.option.label}: the specs state no {missing[0]} "
                        f"({key}), so {label} are unknown",
                        f"a {missing[0]} in its spec, or --minimize gpus")  # fmt: skip
    if minimize == "usd":
        return float(v.values[v.provides["price_per_gpu_hour"]]) * SECONDS_PER_HOUR
    if minimize == "mw":
        power = float(v.values[v.provides["board_power"]])
        return power * float(v.values[v.provides["pue"]]) / WATTS_PER_MW
    return 1.0


def size_chunk(
    plan: Plan, vi: int, payload: Mapping[str, Any], start: int, stop: int, sizing: Sizing
) -> list[tuple[Any, ...]]:
    """Points [start, stop) of variant ``vi`` (its ``payload``) that pass every constraint
    and filter, each as (cost, global id, replica, copies), the cheapest of each replica
    layout only (`replica_of`)."""
    v = plan.variants[vi]
    names = (*plan.spec.needed, "request_rate_per_s", "gpus")
    got, ok = evaluate_block(v.numeric, payload, start, stop, tuple(dict.fromkeys(names)))
    for c in plan.spec.where:
        ok &= c.holds(got[c.metric])
    rate = got["request_rate_per_s"]
    ok &= np.isfinite(rate) & (rate > 0)
    idx = np.arange(start, stop, dtype=np.int64)[ok]
    if idx.size == 0:
        return []
    copies = np.ceil(sizing.rate / rate[ok])
    cost = copies * got["gpus"][ok] * per_gpu_cost(v, sizing.minimize)
    rows = np.unravel_index(idx, v.shape)[0]
    replica = replica_of(v)
    offset = plan.offsets[vi]
    order = np.lexsort((idx, cost))  # cheapest first, ties to the earlier point
    out, seen = [], set()
    for j in order:
        key = replica[int(rows[j])]
        if key in seen:
            continue
        seen.add(key)
        out.append((float(cost[j]), int(idx[j] + offset), key, int(copies[j])))
    return out


def nearest_to_filters(plan: Plan) -> str:
    """Where no configuration passes every filter, how close each comes alone: over the
    configurations that satisfy every constraint, the value of its metric nearest to it
    (`stepwall.apps.search.nearest_text`), one clause per filter that none of them meets;
    "" where none satisfies every constraint, and a sentence saying so where each filter is
    met by some configuration but no configuration meets them together."""
    where = plan.spec.where
    best: list[float | None] = [None] * len(where)
    payloads: dict[int, Mapping[str, Any]] = {}
    names = tuple(dict.fromkeys(c.metric for c in where))
    for vi, start, stop in tasks(plan):
        v = plan.variants[vi]
        payload = payloads.setdefault(vi, v.payload())
        got, ok = evaluate_block(v.numeric, payload, start, stop, names)
        for i, c in enumerate(where):
            signed = toward(c) * got[c.metric][ok]
            signed = signed[np.isfinite(signed)]
            held = best[i]
            if signed.size and (held is None or float(signed.max()) > held):
                best[i] = float(signed.max())
    if all(b is None for b in best):
        return ""
    clauses = []
    for c, b in zip(where, best, strict=True):
        value = None if b is None else toward(c) * b
        if value is not None and not c.holds(np.array([value]))[0]:
            clauses.append(nearest_text(nearest_of(c, value)))
    if not clauses:
        return "each filter is met by some configuration, but none meets them together"
    return "the nearest gives " + "; ".join(clauses)


def replica_of(v: Variant) -> list[tuple[float, ...]]:
    """Each layout row's replica: its degrees but the replica count (``*.dp``), so that dp
    replicas of one replica layout, which copies replicate too, are one candidate."""
    keys = [k for k in v.layouts.degrees if not k.endswith(".dp")]
    cols = [np.asarray(v.layouts.degrees[k], dtype=float) for k in keys]
    return [tuple(float(c[i]) for c in cols) for i in range(len(v.layouts.gpus))]


@attrs.frozen
class Recommendation:
    plan: Plan
    sizing: Sizing
    candidates: tuple[dict[str, Any], ...]
    evaluated: int


# the most GPUs one answer deploys: more than any installation holds (the largest clusters
# of 2026 hold a few hundred thousand), so a rate that needs more is refused, not sized
MAX_FLEET_GPUS = 1 << 20


def within_fleet(candidates: tuple[dict[str, Any], ...], rate: float
                 ) -> tuple[dict[str, Any], ...]:  # fmt: skip
    """The candidates that deploy at most `MAX_FLEET_GPUS` GPUs; a one-line error, naming the
    fewest GPUs any candidate needs, where none does."""
    kept = tuple(c for c in candidates if c["gpus_total"] <= MAX_FLEET_GPUS)
    if candidates and not kept:
        fewest = min(c["gpus_total"] for c in candidates)
        raise SpecError("recommend", "--rate", f"{rate:g} requests/s needs {fewest:,.0f} GPUs "
                        "at the least, more than any installation holds",
                        f"a rate that at most {MAX_FLEET_GPUS:,} GPUs serve")  # fmt: skip
    return kept


def recommend(
    plan: Plan, sizing: Sizing, progress: Callable[[int, int], None] | None = None
) -> Recommendation:
    """The ``keep`` cheapest deployments for ``sizing``, one per replica layout of each
    variant, cheapest first, then the best of each option not among them; an empty tuple
    where no point passes every constraint and filter."""
    if not (math.isfinite(sizing.rate) and sizing.rate > 0):
        raise SpecError("recommend", "--rate", f"{sizing.rate} requests/s", "a rate > 0")
    if sizing.minimize not in COSTS:
        raise SpecError("recommend", "--minimize", repr(sizing.minimize), " or ".join(COSTS))
    for v in plan.variants:  # an unknown price or power refuses before any work
        per_gpu_cost(v, sizing.minimize)
    best: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # (variant, replica) -> the cheapest
    done, payloads = 0, dict[int, dict[str, Any]]()
    for vi, start, stop in tasks(plan):
        if vi not in payloads:  # once per variant (it serialises the compiled model)
            payloads[vi] = plan.variants[vi].payload()
        payload = payloads[vi]
        for cost, gid, replica, copies in size_chunk(plan, vi, payload, start, stop, sizing):
            cur = best.get((vi, replica))
            if cur is None or (cost, gid) < cur[:2]:
                best[(vi, replica)] = (cost, gid, copies, plan.variants[vi].option.label)
        done += stop - start
        if progress is not None:
            progress(done, plan.total)
    ranked = sorted(best.values())
    chosen = ranked[: sizing.keep]
    shown = {c[3] for c in chosen}
    for c in ranked[sizing.keep :]:  # each option's best too, where it is not among them
        if c[3] not in shown:
            chosen.append(c)
            shown.add(c[3])
    found = points(plan, [gid for _, gid, _, _ in chosen])
    out = []
    for (cost, gid, copies, label), p in zip(chosen, found, strict=True):
        out.append({"option": label, **p, "copies": copies,
                    "gpus_total": copies * p["config"]["gpus"],
                    "cost": cost, "serves_per_s": copies * p["request_rate_per_s"],
                    "bound": binding(plan, gid, None)})  # fmt: skip
    return Recommendation(plan, sizing, tuple(out), plan.total)


def document(rec: Recommendation) -> dict[str, Any]:
    """The ``--json`` document: the request, then the candidates, cheapest first."""
    plan = rec.plan
    return {
        "model": plan.model,
        "rate_per_s": rec.sizing.rate,
        "minimize": rec.sizing.minimize,
        "unit": COSTS[rec.sizing.minimize][0],
        "filters": [c.text for c in plan.spec.where],
        "evaluated": rec.evaluated,
        "candidates": list(rec.candidates),
    }


def _num(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


def _ms(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds * 1e3:.4g} ms"


def text(rec: Recommendation, isl: int, osl: int) -> str:
    """The answer as a reader wants it: the request, then each candidate with its copies,
    its service level, what bounds it and its command."""
    plan, sizing = rec.plan, rec.sizing
    label = COSTS[sizing.minimize][0]
    filters = ", ".join(c.text for c in plan.spec.where) or "no SLA filter"
    lines = [f"{plan.model}: {sizing.rate:g} requests/s of {isl}/{osl} tokens, {filters}; "
             f"least {label} ({rec.evaluated:,} configurations searched)"]  # fmt: skip
    if not rec.candidates:
        lines.append("  no configuration passes every constraint and filter: relax an SLA, or "
                     "widen --gpus, --batch or --hardware")  # fmt: skip
        return "\n".join(lines)
    degrees = layout_degrees(plan)
    for rank, c in enumerate(rec.candidates, 1):
        cost = f"{c['cost']:.4g} {label}" if sizing.minimize != "gpus" else ""
        if c.get("mode") == "disaggregated":
            lines += _disaggregated(rank, c, cost, degrees)
            continue
        cfg = c["config"]
        lines.append(f"  {rank}. {c['option']}: {c['copies']} × ({config_text(cfg, degrees)}) = "
                     f"{c['gpus_total']} GPUs{', ' + cost if cost else ''}; serves "
                     f"{c['serves_per_s']:.4g} requests/s ({c['request_rate_per_s']:.4g} per "
                     "copy)")  # fmt: skip
        lines.append(f"     TTFT {_ms(c['ttft_s'])} median, {_ms(c['ttft_p90_s'])} p90; TPOT "
                     f"{_ms(c['tpot_s'])}; {_num(c['tokens_per_s_per_user'])} tokens/s per "
                     "user")  # fmt: skip
        lines.append(f"     bound by {c['bound']}")
        lines.append(f"     {c['command']}")
    return "\n".join(lines)


def _disaggregated(rank: int, c: Mapping[str, Any], cost: str, degrees: Any) -> list[str]:
    """A disaggregated candidate (`stepwall.apps.disagg.size`): its instances, its service
    level at the rate, and the two sides' commands."""
    pre, dec = c["prefill"]["config"], c["decode"]["config"]
    return [
        f"  {rank}. {c['option']}: P/D {c['prefill_instances']} × prefill("
        f"{config_text(pre, degrees)}) + {c['decode_instances']} × decode("
        f"{config_text(dec, degrees)}) = {c['gpus_total']} GPUs{', ' + cost if cost else ''}; "
        f"serves {c['serves_per_s']:.4g} requests/s (prefill at {c['prefill_utilisation']:.0%})",
        f"     TTFT {_ms(c['ttft_s'])} median, {_ms(c['ttft_p90_s'])} p90 (KV transfer "
        f"{_ms(c['kv_transfer_s'])}); TPOT {_ms(c['tpot_s'])} or less; "
        f"{_num(c['tokens_per_s_per_user'])} tokens/s per user or more",
        f"     prefill: {c['prefill']['command']}",
        f"     decode:  {c['decode']['command']}",
    ]
