"""Disaggregated prefill/decode search (``stepwall search --disagg``): prefill pools and
decode pools searched apart and combined into xPyD deployments, on one frontier with the
aggregated ones.

Three searches share the request (`stepwall.apps.search.plan_search`): the aggregated
serving space, a **decode** space (``workload.kind = "decode"`` at context ISL + OSL/2 with
the prompt's KV cache arriving over the scale-out network, ``kv_transfer``) and a
**prefill** space (``workload.kind = "prefill"``: C prompts per replica per step, its own
GPU counts, batch, layouts and optionally its own hardware). A decode instance of N_d GPUs
at its concurrency completes λ_d = (output tokens/s)/OSL requests per second; a prefill
instance of N_p GPUs in dp replicas, each prefilling C prompts per step of time t_p, serves
μ = dp·C/t_p. A deployment of x prefill and y decode instances carries Λ = y·λ_d requests
per second (the decode pools' demand: the prefill side must keep up, ρ = Λ/(x·μ) < 1) and
gives Λ·OSL/(x·N_p + y·N_d) output tokens/s per GPU. Each request's time to first token is
the prefill queue's (`stepwall.model.queueing.serving_under_load`: Poisson arrivals at
Λ/(x·dp) per replica, M/D/1 wait of occupancy t_p/C, its percentiles, half a step for an
arrival between steps, the step itself) plus the KV transfer (the decode pool's
``comm.kv_transfer`` term). For each decode point and each prefill point of its option the
search takes every y with x·N_p + y·N_d ≤ ``--max-gpus`` and the least x that keeps the
queue stable and meets every ``--ttft`` percentile (the TTFT rises with ρ, so that is
x = ⌈Λ/(μ·ρ*)⌉ with ρ* the largest utilisation that meets them, found by bisection), and
keeps the pairing with the most tokens/s per GPU (ties: fewer GPUs, then smaller y). ρ*
depends on a decode point only through its KV transfer time (a few values), and of the
prefill points of one GPU count only the one with the most μ·ρ* can need the fewest
instances at any load (`fastest`), so each decode point is paired with one prefill point
per GPU count: the answer is exact over the space. The KV transfer is counted in latency,
not as a bandwidth limit on the pool.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import sympy as sp

from stepwall.apps import launch, switch
from stepwall.apps.recommend import Sizing, per_gpu_cost, replica_of
from stepwall.apps.report.plots import _figure
from stepwall.apps.search import (
    Condition,
    Plan,
    Result,
    SearchOptions,
    Spec,
    close_client,
    config_text,
    dask_client,
    evaluate_block,
    frontier_chart,
    gather_in_order,
    layout_degrees,
    model_of,
    names,
    nearest_of,
    nearest_text,
    pareto,
    parse_counts,
    parse_only,
    plan_of,
    points,
    progress_bar,
    run_search,
    search_spec,
    switch_lines,
    tasks,
    toward,
)
from stepwall.core.errors import SpecError
from stepwall.core.symbols import Parameter
from stepwall.core.terminal import visible, warn
from stepwall.core.terms import Step
from stepwall.core.units import DIMENSIONLESS, FREQUENCY, TIME
from stepwall.io import output
from stepwall.io.formats import write_json
from stepwall.model.metrics import BUILTIN_METRICS
from stepwall.model.queueing import QUANTILES, Service, serving_under_load

# the TTFT metrics a deployment reports, by their quantile in `QUANTILES`
TTFT_METRICS = {"ttft_s": QUANTILES[0], "ttft_p90_s": QUANTILES[1], "ttft_p99_s": QUANTILES[2]}
Y_METRICS = ("tokens_per_s_per_gpu", "total_tokens_per_s_per_gpu")  # what a P/D point has

BISECTIONS = 48  # halvings of the utilisation interval: ρ* to 2⁻⁴⁸
DECODE_NEEDS = ("tokens_per_s", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "gpus")
PREFILL_NEEDS = ("step_time_s", "gpus")
LABELS = {m.name: m.label for m in BUILTIN_METRICS}
PREFILL_BATCH = (1, 2, 4, 8, 16)  # prompts per attention rank per prefill step (--prefill-batch)


@attrs.frozen
class Request:
    """What the combination needs beyond the three plans: tokens per request, the GPU bound
    of a deployment per option (``max_gpus``: None, the decode cluster's GPUs), the TTFT
    limits as (metric, seconds), and each decode option's prefill option (by index)."""

    isl: int
    osl: int
    max_gpus: int | None
    ttft: tuple[tuple[str, float], ...]
    prefill_of: tuple[int, ...]


@attrs.frozen
class Pool:
    """A pool's points that pass every constraint and filter: global ids, option index,
    and the metrics (arrays) the combination reads."""

    gid: np.ndarray
    option: np.ndarray
    got: Mapping[str, np.ndarray]


def ttft_law() -> Callable[..., tuple[np.ndarray, ...]]:
    """The prefill queue's TTFT percentiles (`QUANTILES`) as one vectorized function of
    (requests/s at a replica, step time t_p, prompts per step C), built once from
    `serving_under_load`, the law every prefill pool of ``stepwall eval`` uses."""
    rate = Parameter("pool.request_rate", FREQUENCY)
    t = Parameter("pool.step_time", TIME)
    c = Parameter("pool.prompts", DIMENSIONLESS)
    one = sp.S.One
    step = Step("prefill", c, c, one, sp.S.Zero, one, completion=one, arrival_rate=rate)
    load = serving_under_load(step, Service(t, t / c, sp.S.Zero, True), t)
    fn = sp.lambdify((rate, t, c), [load.ttft[q] for q in QUANTILES], modules="numpy")

    def law(r: np.ndarray, tp: np.ndarray, cp: np.ndarray) -> tuple[np.ndarray, ...]:
        r, tp, cp = np.broadcast_arrays(r, tp, cp)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return tuple(np.broadcast_to(np.asarray(v, dtype=float), r.shape)
                         for v in fn(r, tp, cp))  # fmt: skip

    return law


def pool_chunk(payload: Mapping[str, Any], start: int, stop: int, want: Sequence[str],
               names: Sequence[str], where: Sequence[Condition]
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    """The points [start, stop) of one variant that pass its constraints and ``where`` with
    finite ``names``: their indices and those metrics. A pure function of its arguments (run
    in a worker process by ``--dask``)."""
    got, ok = evaluate_block(model_of(payload), payload, start, stop, want)
    for c in where:
        ok &= c.holds(got[c.metric])
    for m in names:
        ok &= np.isfinite(got[m])
    return np.arange(start, stop, dtype=np.int64)[ok], {m: got[m][ok] for m in names}


def pool_points(
    plan: Plan,
    names: Sequence[str],
    progress: Callable[[int], None] | None = None,
    client: Any = None,
) -> Pool:
    """Every point of ``plan`` that passes its constraints and ``plan.spec.where``, with
    the metrics (or term times) ``names``, the searched keys' values (``users``, ``dp``)
    and its option's index; the chunks evaluated here, or on a dask ``client`` and taken in
    chunk order."""
    want = tuple(dict.fromkeys((*names, *(c.metric for c in plan.spec.where))))
    index = {o.label: i for i, o in enumerate(plan.options)}
    payloads = [v.payload() for v in plan.variants]
    jobs = list(tasks(plan))
    args = [(vi, (s, e, want, tuple(names), plan.spec.where)) for vi, s, e in jobs]
    found = gather_in_order(pool_chunk, payloads, args, client,
                            lambda i: progress and progress(jobs[i][2] - jobs[i][1]))  # fmt: skip
    parts: list[dict[str, np.ndarray]] = []
    offsets = plan.offsets
    for (vi, _, _), (idx, metrics) in zip(jobs, found, strict=True):
        v = plan.variants[vi]
        cols = v.columns(idx)
        dp = next((cols[k] for k in v.layouts.degrees if k.endswith(".dp")), np.ones(idx.size))
        rows = np.unravel_index(idx, v.shape)[0]
        parts.append({"gid": idx + offsets[vi], "option": np.full(idx.size, index[v.option.label]),
                      "variant": np.full(idx.size, vi), "row": rows,
                      "users": np.asarray(cols[v.provides["users"]], dtype=float),
                      "dp": np.asarray(dp, dtype=float), **metrics})  # fmt: skip
    keys = ("gid", "option", "variant", "row", "users", "dp", *names)
    if not parts:
        empty = {k: np.zeros(0) for k in keys}
        return Pool(empty["gid"].astype(np.int64), empty["option"].astype(np.int64), empty)
    cat = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    return Pool(cat["gid"].astype(np.int64), cat["option"].astype(np.int64), cat)


def prefill_frontier(pool: Pool) -> np.ndarray:
    """Indices of the prefill points worth pairing: per option and GPU count, those no other
    point beats on both the rate μ (higher) and the step time (shorter)."""
    mu = pool.got["dp"] * pool.got["users"] / pool.got["step_time_s"]
    keep = []
    for key in sorted(set(zip(pool.option.tolist(), pool.got["gpus"].tolist(), strict=True))):
        sel = np.flatnonzero((pool.option == key[0]) & (pool.got["gpus"] == key[1]))
        front = pareto(mu[sel], -pool.got["step_time_s"][sel], pool.gid[sel])
        keep.append(sel[front])
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=np.intp)


def fastest(pre: Pool, psel: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Indices into ``psel``: per GPU count, the prefill point that serves the most requests
    within the TTFT limits, μ·ρ* (ties: the earlier point). Instances of one GPU count differ
    only in that rate, and x = ⌈Λ/(μ·ρ*)⌉ falls as it rises, so no other point of that count
    needs fewer instances at any load."""
    mu = (pre.got["dp"] * pre.got["users"] / pre.got["step_time_s"])[psel]
    rate = np.where(np.isfinite(rho), mu * rho, -np.inf)
    gpus, gid = pre.got["gpus"][psel], pre.gid[psel]
    keep = []
    for n in np.unique(gpus):
        at = np.flatnonzero((gpus == n) & np.isfinite(rate))
        if at.size:
            top = at[rate[at] == rate[at].max()]
            keep.append(int(top[np.argmin(gid[top])]))
    return np.array(sorted(keep), dtype=np.intp)


def utilisation_limit(
    law: Callable[..., tuple[np.ndarray, ...]],
    t_p: np.ndarray,
    c_p: np.ndarray,
    t_kv: np.ndarray,
    limits: Sequence[tuple[str, float]],
) -> np.ndarray:
    """ρ*: the largest prefill utilisation at which every TTFT limit holds (TTFT = the
    queue's percentile + the KV transfer), by bisection on [0, 1) (the TTFT rises with ρ);
    NaN where none holds even on an idle queue; just below 1 (stable) with no limit."""
    shape = np.broadcast_shapes(t_p.shape, c_p.shape, t_kv.shape)
    lo, hi = np.zeros(shape), np.ones(shape)
    if not limits:
        return np.nextafter(hi, 0.0)

    def holds(rho: np.ndarray) -> np.ndarray:
        per = law(rho * c_p / t_p, t_p, c_p)
        ok = np.ones(shape, dtype=bool)
        for metric, seconds in limits:
            ok &= per[list(TTFT_METRICS).index(metric)] + t_kv <= seconds
        return ok

    idle = holds(np.full(shape, 1e-12))
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        ok = holds(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.where(idle, np.maximum(lo, 1e-12), np.nan)


@attrs.frozen
class Pairing:
    """The best deployment of each decode point (index into the decode pool): prefill point
    ``pre`` (index into the prefill pool), x = ``prefill`` and y = ``decode`` instances,
    ``gpus`` in all and output tokens/s per GPU ``per_gpu`` (-inf where none fits)."""

    pre: np.ndarray
    prefill: np.ndarray
    decode: np.ndarray
    gpus: np.ndarray
    per_gpu: np.ndarray

    @classmethod
    def none(cls, n: int) -> Pairing:
        """``n`` decode points with no deployment yet."""
        return cls(
            np.zeros(n, np.intp), np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, -np.inf)
        )  # fmt: skip (arrays of their own: filled in place)


def matches(
    dec: Pool, pre: Pool, request: Request, law: Any
) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per decode option and KV transfer time (ρ* depends on a decode point only through it:
    a few values), (option, its decode points, the prefill points worth pairing with them:
    `fastest` of `prefill_frontier`, one per GPU count, and their ρ*)."""
    pfront = prefill_frontier(pre)
    for o in range(len(request.prefill_of)):
        dsel = np.flatnonzero(dec.option == o)
        psel = pfront[pre.option[pfront] == request.prefill_of[o]]
        if len(dsel) == 0 or len(psel) == 0:
            continue
        kv, cls = np.unique(dec.got["kv_transfer_s"][dsel], return_inverse=True)
        rho = utilisation_limit(law, pre.got["step_time_s"][psel][:, None],
                                pre.got["users"][psel][:, None], kv[None, :],
                                request.ttft)  # fmt: skip
        for k in range(len(kv)):
            at = fastest(pre, psel, rho[:, k])
            if at.size:
                yield o, dsel[cls.ravel() == k], psel[at], rho[at, k]


def pair(dec: Pool, pre: Pool, dsel: np.ndarray, psel: np.ndarray, max_gpus: int,
         osl: int, rho_star: np.ndarray) -> Pairing:  # fmt: skip
    """For decode points ``dsel`` and prefill points ``psel`` (one option pair; ``rho_star``
    of shape (len(psel), len(dsel))): each decode point's best xPyD over every y and prefill
    point (see the module doc)."""
    lam = dec.got["tokens_per_s"][dsel] / osl
    n_d = dec.got["gpus"][dsel]
    mu = (pre.got["dp"] * pre.got["users"] / pre.got["step_time_s"])[psel][:, None]
    n_p = pre.got["gpus"][psel][:, None]
    n = len(dsel)
    best = Pairing.none(n)
    if len(psel) == 0 or n == 0:
        return best
    y_max = int((max_gpus - n_p.min()) // n_d.min()) if max_gpus > n_p.min() else 0
    for y in range(1, y_max + 1):
        load = y * lam[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.ceil(load / (mu * rho_star))
        gpus = x * n_p + y * n_d[None, :]
        ok = np.isfinite(x) & (gpus <= max_gpus)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(ok, load * osl / gpus, -np.inf)
        j = np.argmax(value, axis=0)  # ties: the earlier prefill point
        cols = np.arange(n)
        v, g = value[j, cols], gpus[j, cols]
        better = (v > best.per_gpu) | ((v == best.per_gpu) & (g < best.gpus) & np.isfinite(v))
        best = Pairing(np.where(better, psel[j], best.pre),
                       np.where(better, x[j, cols], best.prefill),
                       np.where(better, y, best.decode), np.where(better, g, best.gpus),
                       np.where(better, v, best.per_gpu))  # fmt: skip
    return best


def size(
    decode: Plan,
    prefill: Plan,
    request: Request,
    sizing: Sizing,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Disaggregated candidates for serving ``sizing.rate`` = R requests/s, cheapest first,
    one per decode replica layout: for each decode point, y = ⌈R/λ_d⌉ instances (each then
    carries R/y ≤ λ_d, no more load than its TPOT was checked at) and, for each prefill GPU
    count, x = the least instances that keep the queue stable at R and meet the TTFT limits
    (⌈R/(μ·ρ*)⌉, the prefill point with the most μ·ρ*: `fastest`), the pairing of least
    cost x·N_p·c_p + y·N_d·c_d (c: each side's cost per GPU, `recommend.per_gpu_cost`)."""
    rate = sizing.rate
    dec = pool_points(decode, (*DECODE_NEEDS, "kv_transfer_s"), progress)
    pre = pool_points(prefill, PREFILL_NEEDS, progress)
    best = Pairing.none(len(dec.gid))  # per_gpu holds −cost: larger is better, as for pairing
    mu_all = pre.got["dp"] * pre.got["users"] / pre.got["step_time_s"]
    law = ttft_law()
    for _, sub, keep, rho in matches(dec, pre, request, law):
        c_d = per_gpu_cost(decode.variants[int(dec.got["variant"][sub[0]])], sizing.minimize)
        c_p = per_gpu_cost(prefill.variants[int(pre.got["variant"][keep[0]])], sizing.minimize)
        y = np.ceil(rate * request.osl / dec.got["tokens_per_s"][sub])
        x = np.ceil(rate / (mu_all[keep] * rho)) if request.ttft else np.floor(
            rate / mu_all[keep]) + 1  # fmt: skip
        cost = (x * pre.got["gpus"][keep] * c_p)[:, None] + (y * dec.got["gpus"][sub] * c_d)
        j = np.argmin(cost, axis=0)  # ties: the earlier prefill point
        best.pre[sub], best.prefill[sub], best.decode[sub] = keep[j], x[j], y
        best.gpus[sub] = x[j] * pre.got["gpus"][keep][j] + y * dec.got["gpus"][sub]
        best.per_gpu[sub] = -cost[j, np.arange(len(sub))]
    placed = np.flatnonzero(np.isfinite(best.per_gpu))
    order = placed[np.lexsort((dec.gid[placed], -best.per_gpu[placed]))]
    chosen, seen = [], set()
    replicas = {vi: replica_of(v) for vi, v in enumerate(decode.variants)}
    for j in order:  # the cheapest of each decode replica layout, cheapest first
        vi = int(dec.got["variant"][j])
        key = (vi, replicas[vi][int(dec.got["row"][j])])
        if key not in seen:
            seen.add(key)
            chosen.append(int(j))
        if len(chosen) == sizing.keep:
            break
    found = _deployments(decode, prefill, dec, pre, best, chosen, request, law, rate)
    for j, c in zip(chosen, found, strict=True):
        c.update({"cost": float(-best.per_gpu[j]), "gpus_total": c["gpus"],
                  "serves_per_s": rate})  # fmt: skip
    return found


@attrs.frozen
class DisaggResult:
    """The aggregated search's result (None: not searched), the two pools' plans, the whole
    request's `Spec`, and the merged frontier and targets (plain data, as the JSON document
    gives them)."""

    aggregated: Result | None
    spec: Spec
    decode: Plan
    prefill: Plan
    request: Request
    frontier: tuple[dict[str, Any], ...]
    best: tuple[dict[str, Any], ...]
    evaluated: Mapping[str, int]
    switches: tuple[dict[str, Any], ...] | None = None  # --switch-points (None: not asked)


def deployment_gpus(decode: Plan, prefill: Plan, request: Request, option: int) -> int:
    """The GPU bound of a deployment on ``option``: ``--max-gpus``, else the decode option's
    cluster (its nodes × GPUs per node as the spec states them), or a decode and a prefill
    instance of the largest sizes searched where that is more."""
    if request.max_gpus is not None:
        return request.max_gpus
    v = next(v for v in decode.variants if v.option == decode.options[option])
    nodes, per_node = (v.values[v.provides[r]] for r in ("nodes", "gpus_per_node"))
    sides = ((decode, decode.options[option]),
             (prefill, prefill.options[request.prefill_of[option]]))  # fmt: skip
    largest = [max((int(np.max(w.layouts.gpus)) for w in plan.variants
                    if w.option == opt and len(w.layouts.gpus)), default=0)
               for plan, opt in sides]  # fmt: skip
    return max(int(nodes * per_node), sum(largest))


def combine(
    aggregated: Result | None,
    decode: Plan,
    prefill: Plan,
    request: Request,
    progress: Callable[[int], None] | None = None,
    spec: Spec | None = None,
    client: Any = None,
) -> DisaggResult:
    """The pools' points (evaluated here or on a dask ``client``) paired into deployments
    (`pair`), then one frontier per option of aggregated and disaggregated points and the
    best of either at each target."""
    spec = decode.spec
    target_metrics = tuple(t.metric for t in spec.targets)
    needs = (*DECODE_NEEDS, spec.x, *target_metrics, "kv_transfer_s")
    dec = pool_points(decode, tuple(dict.fromkeys(needs)), progress, client)
    pre = pool_points(prefill, PREFILL_NEEDS, progress, client)
    law = ttft_law()
    best = Pairing.none(len(dec.gid))
    for o, sub, keep, rho in matches(dec, pre, request, law):
        bound = deployment_gpus(decode, prefill, request, o)
        got = pair(dec, pre, sub, keep, bound, request.osl, rho[:, None])
        for f in attrs.fields(Pairing):
            getattr(best, f.name)[sub] = getattr(got, f.name)
    placed = np.isfinite(best.per_gpu)
    frontier = _frontier(aggregated, decode, prefill, dec, pre, best, placed, request, law)
    targets = _targets(aggregated, decode, prefill, dec, pre, best, placed, request, law)
    whole = spec or (aggregated.plan.spec if aggregated is not None else decode.spec)
    return DisaggResult(aggregated, whole, decode, prefill, request, tuple(frontier),
                        tuple(targets), {"aggregated": aggregated.evaluated if aggregated else 0,
                                         "decode": decode.total,
                         "prefill": prefill.total})  # fmt: skip


def _served(request: Request) -> float:
    """Tokens in and out per output token, as benchmark clients count them."""
    return (request.isl + request.osl) / request.osl


def _deployments(
    decode: Plan,
    prefill: Plan,
    dec: Pool,
    pre: Pool,
    best: Pairing,
    js: Sequence[int],
    request: Request,
    law: Any,
    rate: float | None = None,
) -> list[dict[str, Any]]:
    """The disaggregated points for decode indices ``js``: the deployment, its service level
    and the two pools' configurations and commands (the prefill's at its arrival rate), at
    the decode instances' full demand, or at ``rate`` requests/s."""
    if not js:
        return []
    dpts = points(decode, [int(dec.gid[j]) for j in js])
    ppts = points(prefill, [int(pre.gid[best.pre[j]]) for j in js])
    out = []
    for j, d, p in zip(js, dpts, ppts, strict=True):
        i, x, y = int(best.pre[j]), int(best.prefill[j]), int(best.decode[j])
        load = rate if rate is not None else y * float(dec.got["tokens_per_s"][j]) / request.osl
        per_replica = load / (x * float(pre.got["dp"][i]))
        t_p, c_p = float(pre.got["step_time_s"][i]), float(pre.got["users"][i])
        t_kv = float(dec.got["kv_transfer_s"][j])
        ttft = [float(v) + t_kv for v in law(np.array(per_replica), np.array(t_p), np.array(c_p))]
        each = load / x  # at one prefill instance, all its replicas
        extra = ["--set", "workload.arrival=poisson", "--set",
                 f"workload.request_rate={each:.10g} Hz"]  # fmt: skip
        per_gpu = load * request.osl / float(best.gpus[j])
        out.append({
            "option": decode.options[int(dec.option[j])].label,
            "mode": "disaggregated",
            "tokens_per_s_per_user": d["tokens_per_s_per_user"],
            "tokens_per_s_per_gpu": per_gpu,
            "total_tokens_per_s_per_gpu": per_gpu * _served(request),
            "tpot_s": d["tpot_s"],
            "itl_s": d["itl_s"],
            **dict(zip(TTFT_METRICS, ttft, strict=True)),
            "kv_transfer_s": t_kv,
            "request_rate_per_s": load,
            "gpus": int(best.gpus[j]),
            "prefill_instances": x,
            "decode_instances": y,
            "prefill_gpus": x * p["config"]["gpus"],
            "decode_gpus": y * d["config"]["gpus"],
            "prefill_utilisation": per_replica * t_p / c_p,
            "prefill": {"id": p["id"], "config": p["config"],
                        "command": p["command"] + " " + shlex.join(extra),
                        "step_time_s": t_p, "request_rate_per_s": each},
            "decode": {"id": d["id"], "config": d["config"], "command": d["command"],
                       "tokens_per_s_per_gpu": d["tokens_per_s_per_gpu"]},
        })  # fmt: skip
    return out


def _aggregated(p: Mapping[str, Any]) -> dict[str, Any]:
    return {**p, "mode": "aggregated"}


def _frontier(aggregated: Result | None, decode: Plan, prefill: Plan, dec: Pool, pre: Pool,
              best: Pairing, placed: np.ndarray, request: Request,
              law: Any) -> list[dict[str, Any]]:  # fmt: skip
    """Per option, the Pareto frontier of the aggregated frontier's points and the
    disaggregated deployments (tokens/s per user against the y metric), x descending."""
    spec = decode.spec
    y_metric = spec.y
    out: list[dict[str, Any]] = []
    for o, opt in enumerate(decode.options):
        js = np.flatnonzero(placed & (dec.option == o))
        xs = dec.got[spec.x][js] * spec.sign(spec.x)
        ys = best.per_gpu[js] * (_served(request) if y_metric != "tokens_per_s_per_gpu" else 1.0)
        dis = _deployments(decode, prefill, dec, pre, best,
                           js[pareto(xs, ys, dec.gid[js])].tolist(), request, law)  # fmt: skip
        front = aggregated.frontier if aggregated is not None else ()
        agg = [_aggregated(p) for p in front if p["option"] == opt.label]
        both = [*agg, *dis]
        if not both:
            continue
        bx = np.array([spec.sign(spec.x) * float(p[spec.x]) for p in both])
        by = np.array([float(p[y_metric]) for p in both])
        keep = pareto(bx, by, np.arange(len(both)))
        out += [both[k] for k in keep]
    return out


def _targets(aggregated: Result | None, decode: Plan, prefill: Plan, dec: Pool, pre: Pool,
             best: Pairing, placed: np.ndarray, request: Request,
             law: Any) -> list[dict[str, Any]]:  # fmt: skip
    """At each target, per option, the better of the aggregated best and the best
    deployment whose decode point meets the target."""
    spec = decode.spec
    factor = _served(request) if spec.objective != "tokens_per_s_per_gpu" else 1.0
    out = []
    bests = aggregated.best if aggregated is not None else [{"options": []}] * len(spec.targets)
    for t, agg in zip(spec.targets, bests, strict=True):
        entry: dict[str, Any] = {"target": t.text, "objective": spec.objective, "options": []}
        by_label = {o["option"]: o for o in agg["options"]}
        for o, opt in enumerate(decode.options):
            js = np.flatnonzero(placed & (dec.option == o) & t.holds(dec.got[t.metric]))
            dis = None
            if js.size:
                value = best.per_gpu[js] * factor
                tied = js[value == value.max()]
                j = int(tied[np.argmin(dec.gid[tied])])  # ties: the earlier point
                dis = _deployments(decode, prefill, dec, pre, best, [j], request, law)[0]
            a = by_label.get(opt.label, {}).get("point")
            pick = _better(a, dis, spec.objective)
            entry["options"].append(
                {
                    "option": opt.label,
                    "point": pick,
                    "value": None if pick is None else pick[spec.objective],
                    "nearest": None if pick is not None else _nearest(
                        t, dec.got[t.metric][placed & (dec.option == o)],
                        by_label.get(opt.label, {}).get("nearest")),
                }
            )  # fmt: skip
        out.append(entry)
    return out


def _nearest(t: Condition, decode: np.ndarray, aggregated: dict[str, Any] | None
             ) -> dict[str, Any] | None:  # fmt: skip
    """At a target no deployment meets, the value of its metric nearest to it over the
    placed decode points (``decode``) and the aggregated search's nearest; None: neither."""
    signed = toward(t) * decode[np.isfinite(decode)]
    values = [float(toward(t) * signed.max())] if signed.size else []
    if aggregated is not None:
        values.append(float(aggregated["value"]))
    if not values:
        return None
    value = max(values, key=lambda v: toward(t) * v)
    return nearest_of(t, value)


def _better(
    agg: Mapping[str, Any] | None, dis: Mapping[str, Any] | None, objective: str
) -> dict[str, Any] | None:
    """The aggregated or the disaggregated point, whichever has more of ``objective``
    (the aggregated one on a tie: fewer moving parts)."""
    if dis is None:
        return None if agg is None else _aggregated(agg)
    if agg is None or agg.get(objective) is None or float(dis[objective]) > float(agg[objective]):
        return dict(dis)
    return _aggregated(agg)


def check_request(spec: Any, ttft: Sequence[Condition], max_gpus: int | None) -> None:
    """What a disaggregated search can answer: output or total tokens/s per GPU against
    tokens/s per user, TTFT limits of the deployment as upper bounds."""
    for flag, metric in (("--y", spec.y), ("--objective", spec.objective)):
        if metric not in Y_METRICS:
            raise SpecError("search --disagg", flag, f"{metric} is not priced for a P/D "
                            "deployment", " or ".join(Y_METRICS))  # fmt: skip
    if spec.x != "tokens_per_s_per_user":
        raise SpecError("search --disagg", "--x", f"{spec.x}", "tokens_per_s_per_user")
    for c in ttft:
        if c.op != "<=":
            raise SpecError("search --disagg", "--ttft", f"{c.text} bounds TTFT from below",
                            "an upper bound, e.g. p90<=2s")  # fmt: skip
    if max_gpus is not None and max_gpus < 2:
        raise SpecError("search --disagg", "--max-gpus", f"{max_gpus}",
                        "at least 2 (a prefill and a decode GPU)")  # fmt: skip


# ---------------------------------------------------------------- command line


def _limits(spec: Spec) -> tuple[tuple[Condition, ...], tuple[tuple[str, float], ...]]:
    """The search's filters split: those on the deployment's TTFT (applied to the pairing,
    as (metric, seconds)) and the rest (applied to each pool's points)."""
    ttft = tuple(c for c in spec.where if c.metric in TTFT_METRICS)
    return ttft, tuple((c.metric, float(c.value)) for c in ttft)


def plans(
    ns: SearchOptions, registry: Any, spec: Spec, aggregated: bool = True
) -> tuple[Plan | None, Plan, Plan, Request]:
    """The aggregated (None unless ``aggregated``), decode and prefill plans of a
    ``--disagg`` request, and what their combination needs (`Request`)."""
    ttft, limits = _limits(spec)
    check_request(spec, ttft, ns.max_gpus)
    if ns.gpus is None:
        raise SpecError("search --disagg", "--gpus", "missing", "the decode instances' GPU "
                        "counts, e.g. 8,16 (--prefill-gpus: the prefill ones; default the "
                        "same)")  # fmt: skip
    rest = attrs.evolve(spec, where=tuple(c for c in spec.where if c not in ttft))
    bad = [v for v in ns.vary if not v.strip().startswith("decoding.")]
    if bad:
        raise SpecError("search --disagg", "--vary", f"{bad[0].partition('=')[0].strip()} "
                        "would pair pools at different values", "decoding.KEY=… only (the "
                        "decode pool's), or --set for both pools")  # fmt: skip
    agg = _aggregated_plan(ns, registry, spec) if aggregated else None
    decode = plan_of(ns, registry, rest, workload="decode",
                     sets=[*ns.sets, "workload.kv_transfer=true"])  # fmt: skip
    hardware = names(ns.prefill_hardware) or names(ns.hardware)
    clusters = names(ns.prefill_cluster) or (names(ns.cluster) if not ns.prefill_hardware else [])
    if not clusters:
        raise SpecError("search --disagg", "--prefill-cluster", "missing",
                        "the prefill hardware's cluster, e.g. hgx-h100-ib")  # fmt: skip
    engines = names(ns.prefill_engine) or names(ns.engine)
    try:
        prefill = _prefill_plan(ns, registry, spec, hardware, clusters, engines)
    except SpecError as e:  # the search names the flags of one pool: here, the prefill one's
        if e.key in PREFILL_FLAG_OF:  # a check of search's: "search:--only: …"
            raise SpecError("search --disagg", PREFILL_FLAG_OF[e.key], e.problem, e.expected,
                            why=e.why) from None  # fmt: skip
        if e.where in PREFILL_FLAG_OF:  # a catalog lookup: "--hardware:NAME: …"
            raise SpecError(PREFILL_FLAG_OF[e.where], e.key, e.problem, e.expected,
                            why=e.why) from None  # fmt: skip
        raise
    _check_bound(ns.max_gpus, decode)
    return agg, decode, prefill, Request(ns.isl, ns.osl, ns.max_gpus, limits,
                                                _prefill_of(decode, prefill))  # fmt: skip


# a search flag as the prefill pool's search reads it, and the flag that gave it
PREFILL_FLAG_OF = {"--only": "--prefill-only", "--gpus": "--prefill-gpus",
                   "--batch": "--prefill-batch", "--hardware": "--prefill-hardware",
                   "--cluster": "--prefill-cluster", "--engine": "--prefill-engine"}  # fmt: skip


def _prefill_plan(ns: SearchOptions, registry: Any, spec: Spec, hardware: list[str],
                  clusters: list[str], engines: list[str]) -> Plan:  # fmt: skip
    """The prefill pools' search: prompts alone, no targets or filters (their TTFT is the
    combination's), the prefill flags where given, else the decode pool's."""
    gpus = ns.prefill_gpus if ns.prefill_gpus is not None else ns.gpus
    return plan_of(
        ns, registry, attrs.evolve(spec, targets=(), where=()), workload="prefill",
        hardware=hardware, clusters=clusters, engines=engines, decoding=["autoregressive"],
        vary=[],
        sets=[s for s in ns.sets if not s.strip().startswith("decoding.")],
        gpus=parse_counts(gpus, "--prefill-gpus") if gpus is not None else (),
        batch=(parse_counts(ns.prefill_batch, "--prefill-batch") if ns.prefill_batch is not None
               else PREFILL_BATCH),
        only=[parse_only(o) for o in ns.prefill_only],
    )  # fmt: skip


def _smallest(plan: Plan) -> int | None:
    """The fewest GPUs of an instance ``plan`` lays out (None: it lays out none)."""
    sizes = [int(np.min(v.layouts.gpus)) for v in plan.variants if len(v.layouts.gpus)]
    return min(sizes, default=None)


def _check_bound(max_gpus: int | None, decode: Plan) -> None:
    """Refuse a ``--max-gpus`` no deployment fits in: fewer GPUs than the smallest instance
    ``--gpus`` lays out (an aggregated one is laid out as a decode one, and a P/D deployment
    needs a decode instance and more)."""
    smallest = _smallest(decode)
    if max_gpus is not None and smallest is not None and max_gpus < smallest:
        raise SpecError("search --disagg", "--max-gpus", f"{max_gpus}: no deployment fits",
                        f"at least {smallest}, the smallest instance --gpus lays out")  # fmt: skip


def _aggregated_plan(ns: SearchOptions, registry: Any, spec: Spec) -> Plan | None:
    """The aggregated search of a ``--disagg`` request: its instances within ``--max-gpus``
    (an aggregated deployment is one instance, so the bound is on its GPUs too); None where
    no ``--gpus`` count is within it."""
    if ns.max_gpus is None or ns.gpus is None:
        return plan_of(ns, registry, spec)
    counts = tuple(g for g in parse_counts(ns.gpus, "--gpus") if g <= ns.max_gpus)
    return plan_of(ns, registry, spec, gpus=counts) if counts else None


def _prefill_of(decode: Plan, prefill: Plan) -> tuple[int, ...]:
    """Each decode option's prefill option: on the prefill hardware in the same place of its
    list (or the only one), with the engine in the same place of the prefill engines (or the
    only one). Options run hardware-major, then engine (`search._options`)."""
    engines, prefill_engines = max(1, len(decode.engines)), max(1, len(prefill.engines))
    hardware = len(decode.options) // engines
    prefill_hardware = len(prefill.options) // prefill_engines
    if prefill_hardware not in (1, hardware):
        raise SpecError("search --disagg", "--prefill-hardware", f"{prefill_hardware} for "
                        f"{hardware} --hardware", "one, or one per --hardware in the same "
                        "order")  # fmt: skip
    if prefill_engines not in (1, engines):
        raise SpecError("search --disagg", "--prefill-engine", f"{prefill_engines} for "
                        f"{engines} --engine", "one, or one per --engine in the same "
                        "order")  # fmt: skip
    out = []
    for i in range(len(decode.options)):
        h, e = divmod(i, engines)
        out.append((h if prefill_hardware > 1 else 0) * prefill_engines
                   + (e if prefill_engines > 1 else 0))  # fmt: skip
    return tuple(out)


def with_launches(result: DisaggResult, emit: str, kinds: Any) -> DisaggResult:
    """Each target's best deployment per option with its launch for ``emit``, under
    ``launch``: both sides' and their counts for a disaggregated one
    (`launch.for_deployment`), the command's for an aggregated one (or why it has none)."""
    best, refusals, launched = [], [], False
    for t in result.best:
        options = []
        for o in t["options"]:
            p = o["point"]
            if p is not None:
                if p["mode"] == "disaggregated":
                    lau = launch.for_deployment(p, emit, kinds)
                    docs = [lau["prefill"], lau["decode"]]
                else:
                    lau = launch.json_of(launch.for_points([p], emit, kinds, strict=False)[0])
                    docs = [lau]
                refusals += [d["refused"] for d in docs if "refused" in d]
                launched = launched or all("refused" not in d for d in docs)
                p = {**p, "launch": lau}
            options.append({**o, "point": p})
        best.append({**t, "options": options})
    if refusals and not launched:  # no deployment can be launched: say why
        raise launch.none_launched("search --disagg", "best deployment", emit, refusals[0])
    return attrs.evolve(result, best=tuple(best))


def launch_lines(lau: Mapping[str, Any] | None) -> list[str]:
    """A deployment's launch (`with_launches`) as lines for a terminal."""
    if lau is None:
        return []
    if "instances" not in lau:
        return launch.lines_of(lau)
    out = []
    for side in ("prefill", "decode"):
        out += [f"{side} {line}" if i == 0 else line
                for i, line in enumerate(launch.lines_of(lau[side]))]  # fmt: skip
    return [*out, f"router: {lau['router']}"]


def document(result: DisaggResult) -> dict[str, Any]:
    """The ``--json`` document: the request, then one frontier of aggregated and
    disaggregated points (each with its ``mode``) and the best of either at each target."""
    spec, req = result.decode.spec, result.request
    return {
        "model": result.decode.model,
        "isl": req.isl,
        "osl": req.osl,
        "x": spec.x,
        "y": spec.y,
        "objective": spec.objective,
        "filters": [c.text for c in result.spec.where],
        "max_gpus": {
            o.label: deployment_gpus(result.decode, result.prefill, req, i)
            for i, o in enumerate(result.decode.options)
        },
        "evaluated": dict(result.evaluated),
        "frontier": list(result.frontier),
        "targets": list(result.best),
        **({"switch_points": list(result.switches)} if result.switches is not None else {}),
        "warnings": list(dict.fromkeys(_warnings(result))),
    }


def _warnings(result: DisaggResult) -> tuple[str, ...]:
    agg = result.aggregated.plan.warnings if result.aggregated is not None else ()
    return (*agg, *result.decode.warnings, *result.prefill.warnings)


def deployment_text(p: Mapping[str, Any], degrees: Sequence[str]) -> str:
    """A point's deployment in one line: ``3 × prefill(tp4 C=8) + 1 × decode(ep32 C=2048)``
    for a P/D one, the replica layout for an aggregated one."""
    if p["mode"] == "aggregated":
        return f"aggregated {config_text(p['config'], degrees)}"
    pre, dec = p["prefill"]["config"], p["decode"]["config"]
    return (f"{p['prefill_instances']} × prefill({config_text(pre, degrees)}) + "
            f"{p['decode_instances']} × decode({config_text(dec, degrees)})")  # fmt: skip


def _ms(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds * 1e3:.4g} ms"


def text(result: DisaggResult) -> str:
    """The human summary: what was searched, each option's frontier with its mode, then
    the best deployment at each target with its commands."""
    spec, req = result.decode.spec, result.request
    degrees = tuple(dict.fromkeys((*layout_degrees(result.decode),
                                   *layout_degrees(result.prefill))))  # fmt: skip
    ev = result.evaluated
    filters = ", ".join(c.text for c in result.spec.where) or "no filter"
    lines = [f"{result.decode.model}: {req.isl}/{req.osl} tokens, aggregated and disaggregated "
             f"prefill/decode; {ev['aggregated']:,} aggregated, {ev['decode']:,} decode and "
             f"{ev['prefill']:,} prefill configurations; {filters}"]  # fmt: skip
    y = spec.y
    for o in result.decode.options:
        mine = [p for p in result.frontier if p["option"] == o.label]
        lines.append(f"{o.label}: frontier ({len(mine)} points), {_label(spec.x)} → {_label(y)}")
        for p in mine:
            lines.append(
                f"  {_num(p[spec.x]):>8} → {_num(p[y]):>8}  {int(p['gpus']):>4} GPUs  "
                f"TTFT p90 {_ms(p['ttft_p90_s'])}  {deployment_text(p, degrees)}"
            )
    for t in result.best:
        lines.append(f"best {t['objective']} at {t['target']}:")
        for o in t["options"]:
            p = o["point"]
            if p is None:
                near = o.get("nearest")
                gives = f" (the nearest gives {nearest_text(near)})" if near else ""
                lines.append(f"  {o['option']}: no deployment meets it{gives}")
                continue
            lines.append(f"  {o['option']}: {_num(o['value'])} {_label(t['objective'])}, "
                         f"{_num(p['tokens_per_s_per_user'])} tokens/s per user, TTFT "
                         f"{_ms(p['ttft_s'])} median, {_ms(p['ttft_p90_s'])} p90; "
                         f"{int(p['gpus'])} GPUs: {deployment_text(p, degrees)}")  # fmt: skip
            if p["mode"] == "disaggregated":
                lines.append(f"     prefill: {p['prefill']['command']}")
                lines.append(f"     decode:  {p['decode']['command']}")
            else:
                lines.append(f"     {p['command']}")
            lines += [f"     {line}" for line in launch_lines(p.get("launch"))]
    if result.switches is not None:
        lines += switch_lines(result.switches, degrees, side_text, "deployment")
    return "\n".join(lines)


def side_text(side: Mapping[str, Any], degrees: Sequence[str]) -> str:
    """A switch's side (`stepwall.apps.switch.side`) in one line."""
    if side.get("mode") != "disaggregated":
        return f"aggregated {config_text(side, degrees)}"
    pre, dec = (config_text(side[k], degrees) for k in ("prefill", "decode"))
    return (
        f"{side['prefill_instances']} × prefill({pre}) + {side['decode_instances']} × decode({dec})"
    )


def plot(result: DisaggResult, title: str = "") -> bytes:
    """Per option, the frontier of aggregated and disaggregated deployments as one line, its
    aggregated points as circles and its P/D points as triangles, with the aggregated search's
    own frontier dashed beneath it (where P/D lifts the frontier, the two part) and a dashed
    line at each target on the x axis (deterministic SVG)."""
    spec = result.decode.spec
    fig, ax = _figure(7.0, 4.4)
    agg_front = result.aggregated.frontier if result.aggregated is not None else ()
    for i, o in enumerate(result.decode.options):
        color = f"C{i % 10}"
        alone = sorted((p for p in agg_front if p["option"] == o.label), key=lambda p: p[spec.x])
        if alone:
            ax.plot([p[spec.x] for p in alone], [p[spec.y] for p in alone], color=color,
                    linestyle="--", linewidth=0.8, alpha=0.7,
                    label=f"{o.label}: aggregated alone")  # fmt: skip
        mine = sorted((p for p in result.frontier if p["option"] == o.label),
                      key=lambda p: p[spec.x])  # fmt: skip
        if not mine:
            continue
        ax.plot([p[spec.x] for p in mine], [p[spec.y] for p in mine], color=color,
                linewidth=1.2, label=f"{o.label}: best of either")  # fmt: skip
        for mode, marker in (("aggregated", "o"), ("disaggregated", "^")):
            pts = [p for p in mine if p["mode"] == mode]
            if pts:
                ax.scatter([p[spec.x] for p in pts], [p[spec.y] for p in pts], color=color,
                           marker=marker, s=18, zorder=3)  # fmt: skip
    ax.scatter([], [], color="#444444", marker="o", s=18, label="aggregated point")
    ax.scatter([], [], color="#444444", marker="^", s=18, label="P/D point")
    name = title or f"{result.decode.model}: aggregated and P/D frontier"
    return frontier_chart(fig, ax, spec, spec.targets, name, legend=7)


def _num(v: Any) -> str:
    return "none" if v is None else f"{float(v):.4g}"


def _label(metric: str) -> str:
    return LABELS.get(metric, metric)


def check_options(ns: SearchOptions) -> None:
    """Refuse what a disaggregated search does not take (yet), before any work."""
    if ns.emit and not ns.at:
        raise SpecError("search --disagg", "--emit", "has no deployment to launch without a "
                        "target", '--at, e.g. --at "tokens_per_s_per_user>=50"')  # fmt: skip
    if ns.format not in (None, "text", "json"):
        raise SpecError("search --disagg", "--format", f"{ns.format}", "text or json")
    if ns.workload != "serving":  # the aggregated side would price decode alone
        raise SpecError("search --disagg", "--workload", f"{ns.workload}: the deployments are "
                        "priced whole (prefill and decode)", "no --workload (each pool takes "
                        "its own; the aggregated side serves)")  # fmt: skip


def _search(ns: SearchOptions, spec: Spec, aggregated: Plan | None, decode: Plan,
            prefill: Plan, request: Request) -> DisaggResult:  # fmt: skip
    """The aggregated search and both pools (here, or on dask with ``--dask`` /
    ``--scheduler``) combined, with one progress bar over the three spaces."""
    bar = progress_bar(ns.quiet)
    total = sum(p.total for p in (aggregated, decode, prefill) if p is not None)
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        bar(done[0], total)

    client = dask_client(ns.scheduler, ns.workers or 0) if ns.dask or ns.scheduler else None
    try:
        agg = None
        if aggregated is not None:  # none where --max-gpus leaves it no instance
            agg = run_search(aggregated, chunk=ns.chunk, client=client,
                             progress=lambda d, _t: bar(d, total))  # fmt: skip
            done[0] = aggregated.total
        return combine(agg, decode, prefill, request, tick, spec, client)
    finally:
        if client is not None:
            close_client(client)


def run_cli(ns: SearchOptions, registry: Any) -> int:
    """``stepwall search --disagg``: the three searches, their combination, with
    ``--switch-points`` the frontier's switch points (`stepwall.apps.switch`), the output."""
    check_options(ns)
    target = plot_target = None
    if ns.output is not None:
        target = output.file_target(ns.output, suffixes=(".json",), streams=False)
    if ns.plot is not None:
        plot_target = output.file_target(ns.plot, "--plot", (".svg",))
        if target is not None and Path(str(target)).resolve() == Path(str(plot_target)).resolve():
            raise SpecError("--plot", str(ns.plot), "is the -o file too", "another file")
    spec = search_spec(ns, registry)
    aggregated, decode, prefill, request = plans(ns, registry, spec)
    searched = [p for p in (aggregated, decode, prefill) if p is not None]
    warn(tuple(w for p in searched for w in p.warnings))
    result = _search(ns, spec, aggregated, decode, prefill, request)
    if not result.frontier:
        raise SpecError("search --disagg", ", ".join(c.text for c in spec.where) or "the space",
                        "no aggregated or disaggregated deployment passes every constraint "
                        "and filter", "a looser SLA, more --gpus or --max-gpus")  # fmt: skip
    if ns.emit:
        result = with_launches(result, ns.emit, registry.kinds)
    if ns.switch_points:
        labels = [o.label for o in decode.options]
        found = switch.along_frontier(result.frontier, labels, registry)
        result = attrs.evolve(result, switches=tuple(found))
    doc = document(result)
    if plot_target is not None:
        output.write_file(plot_target, plot(result))
        print(visible(f"wrote {plot_target}"), file=sys.stderr)
    if target is not None:
        output.write_file(target, json.dumps(doc, indent=2) + "\n")
        output.announce(target, f"wrote {target} ({len(result.frontier)} frontier points)")
    elif ns.format == "json":
        write_json(doc, sys.stdout)
    else:
        print(visible(text(result), lines=True))
    return 0
