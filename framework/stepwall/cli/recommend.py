"""``stepwall recommend``: the cheapest deployment that serves a request rate within an SLA
(the work is `stepwall.apps.recommend`, over `stepwall.apps.search`'s space; this module is
its command line)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.apps import disagg
from stepwall.apps import launch as launch_app
from stepwall.apps import recommend as sizing_app
from stepwall.apps.search import (
    DEFAULT_BATCH,
    Plan,
    SearchOptions,
    Spec,
    check_metric,
    metric_table,
    names,
    parse_condition,
    parse_counts,
    parse_only,
    plan_search,
    progress_bar,
    search_spec,
    sla_conditions,
)
from stepwall.cli.search import add_disagg, add_hardware, add_sets, prefill_flag_given
from stepwall.core.errors import SpecError
from stepwall.core.progress import quiet_argument
from stepwall.core.terminal import visible, warn
from stepwall.io.formats import write_json

# where the search checks recommend shares say an error comes from
SEARCH_ORIGINS = ("search", "search --disagg")

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

DESCRIPTION = """\
The cheapest deployment that serves --rate requests per second of ISL/OSL tokens within an
SLA, on one or more hardware options, with runners-up (one per layout), what bounds each,
and the `stepwall eval` command that reproduces one copy of it.

Each candidate is a point of `stepwall search`'s space (every tp × ep × dp = N layout of
--gpus, every batch of --batch, each --decoding kind and --engine) that passes every
constraint of the model and every SLA filter, priced as benchmark clients run it: a closed
loop at its concurrency C completing q requests/s. Serving R takes k = ⌈R/q⌉ copies, k·N
GPUs, each copy then carrying R/k ≤ q (no more load than its SLA was checked at). --minimize
picks the cost: GPUs, USD per hour (the cluster's price per GPU-hour) or MW (board power ×
PUE); a spec that states no price or power is refused, naming the key.

With --disagg, disaggregated deployments compete too: for each decode configuration, y =
⌈R/λ⌉ decode instances (λ: the requests/s one completes at its concurrency) and, for each
prefill GPU count, the least x prefill instances that keep the prefill queue stable at R and
meet --ttft (Poisson arrivals, its percentiles, plus the KV transfer), at least cost.
"""

EPILOG = """\
examples:
  stepwall recommend deepseek-v3-fp8 --rate 50 --isl 2048 --osl 1024 --hardware h200 \\
      --cluster hgx-h200-ib --ttft "p90<=2s" --tpot "<=30ms"
  stepwall recommend deepseek-r1-fp4 --rate 200 --hardware b200,gb200 \\
      --cluster hgx-b200-ib,gb200-nvl72 --gpus 8,16,32,72 --engine trtllm \\
      --ttft "p90<=2s" --where "tokens_per_s_per_user>=30" --minimize usd --json

--ttft takes [p50|median|p90|p99]<=VALUE (no prefix: the median), --tpot <=VALUE; both are
the serving model's values under load at the candidate's concurrency (docs/physics.md,
"Serving metrics and queueing"). --where takes any METRIC>=VALUE or METRIC<=VALUE.
"""


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall recommend``.

    Stays whole: a flat list of argparse declarations in the order ``--help`` lists them.
    """
    p.description = DESCRIPTION
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("model", metavar="MODEL", help="a model spec: catalog name or .toml path")
    p.add_argument(
        "--rate",
        type=float,
        required=True,
        metavar="R",
        help="requests per second to serve (Poisson or steady, on average); a rate that "
        f"needs more than {sizing_app.MAX_FLEET_GPUS:,} GPUs is refused",
    )
    p.add_argument("--isl", type=int, default=1024, help="prompt tokens per request (1024)")
    p.add_argument("--osl", type=int, default=1024, help="output tokens per request (1024)")
    add_hardware(p)
    p.add_argument(
        "--gpus",
        default="8,16,32,64",
        metavar="N[,N2,…]|LO..HI:STEP",
        help="GPUs of one copy of a deployment (default 8,16,32,64)",
    )
    p.add_argument(
        "--engine",
        default=None,
        metavar="E[,E2,…]",
        help="engine profiles to compare (catalog names; default: the plugin's)",
    )
    p.add_argument(
        "--decoding",
        action="append",
        default=[],
        metavar="KIND",
        help="decoding kinds to consider (default autoregressive)",
    )
    p.add_argument(
        "--batch",
        default=None,
        metavar="B[,…]|LO..HI:BY",
        help="users per attention rank (default 1,2,3,4,6,…,1536,2048)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=N[,…]",
        help="keep only the layouts whose degree KEY is one of these (repeatable), as search",
    )
    add_sets(p)
    p.add_argument(
        "--ttft",
        default="",
        metavar="COND",
        help='time to first token under load, e.g. "p90<=2s" (no prefix: median)',
    )
    p.add_argument(
        "--tpot", default="", metavar="COND", help='time per output token, e.g. "<=30ms"'
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COND",
        help='any other filter, e.g. "tokens_per_s_per_user>=30" (repeatable)',
    )
    p.add_argument(
        "--minimize",
        choices=tuple(sizing_app.COSTS),
        default="gpus",
        help="the cost to minimise: gpus (default), usd (per hour) or mw",
    )
    p.add_argument(
        "--keep",
        type=int,
        default=5,
        metavar="N",
        help="candidates to print, the best first (default 5; one per layout)",
    )
    p.add_argument(
        "--emit",
        choices=launch_app.LAUNCHERS,
        default=None,
        help="also write each candidate's launch command for this engine (the engine its "
        "profile priced, at the profile's release), sizing only the layouts it launches as "
        "priced (docs/search.md)",
    )
    add_disagg(p, sizing=True)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="compile the models afresh instead of loading them from the cache",
    )
    quiet_argument(p)


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Plan the space, size every candidate, print the cheapest."""
    _check_flags(ns)
    try:
        plan = _plan(ns, registry)
        warn(plan.warnings)
        sizing = sizing_app.Sizing(ns.rate, ns.minimize, ns.keep)
        rec = sizing_app.recommend(plan, sizing, progress=progress_bar(ns.quiet))
        if ns.disagg:
            rec = _with_disagg(ns, registry, rec, sizing)
        rec = attrs.evolve(rec, candidates=sizing_app.within_fleet(rec.candidates, ns.rate))
    except SpecError as e:  # search's checks, which recommend shares, named for this command
        if e.where not in SEARCH_ORIGINS:
            raise
        raise SpecError("recommend", e.key, e.problem, e.expected, why=e.why) from None
    if not rec.candidates:
        filters = ", ".join(c.text for c in plan.spec.where) or "the model's constraints"
        near = sizing_app.nearest_to_filters(plan)
        raise SpecError(
            "recommend",
            filters,
            "no configuration searched passes every constraint and filter"
            + (f"; {near}" if near else ""),
            "a looser SLA, or more --gpus, --batch or --hardware",
        )
    launches = _launches(rec.candidates, ns.emit, registry.kinds) if ns.emit else []
    if ns.json:
        doc = sizing_app.document(rec)
        for c, lau in zip(doc["candidates"], launches, strict=False):
            c["launch"] = lau
        write_json(doc, sys.stdout)
        return 0
    out = sizing_app.text(rec, ns.isl, ns.osl).split("\n")
    if launches:
        out.append("")
        for rank, lau in enumerate(launches, 1):
            out += [f"{rank}. " + line if i == 0 else "   " + line
                    for i, line in enumerate(disagg.launch_lines(lau))]  # fmt: skip
    print(visible("\n".join(out), lines=True))
    return 0


def _check_flags(ns: argparse.Namespace) -> None:
    """Refuse flags that would do nothing: a non-positive --keep, prefill flags without
    --disagg."""
    if ns.keep < 1:
        raise SpecError("recommend", "--keep", f"{ns.keep}", "at least 1")
    flag = prefill_flag_given(ns)
    if flag is not None and not ns.disagg:
        raise SpecError("recommend", flag, "applies to disaggregated deployments", "--disagg")


def _with_disagg(ns: argparse.Namespace, registry: Registry,
                 rec: sizing_app.Recommendation,
                 sizing: sizing_app.Sizing) -> sizing_app.Recommendation:  # fmt: skip
    """The aggregated candidates and the disaggregated ones (`disagg.size`), cheapest
    first, the first ``--keep`` of them."""
    opts = SearchOptions(ns.model, ns.hardware, ns.cluster, gpus=ns.gpus, engine=ns.engine,
                         isl=ns.isl, osl=ns.osl, decoding=list(ns.decoding), batch=ns.batch,
                         sets=list(ns.sets), only=list(ns.only), ttft=ns.ttft, tpot=ns.tpot,
                         where=list(ns.where),
                         disagg=True, prefill_gpus=ns.prefill_gpus,
                         prefill_batch=ns.prefill_batch, prefill_hardware=ns.prefill_hardware,
                         prefill_engine=ns.prefill_engine,
                         prefill_cluster=ns.prefill_cluster, prefill_only=list(ns.prefill_only),
                         emit=ns.emit, quiet=ns.quiet, no_cache=ns.no_cache)  # fmt: skip
    _, decode, prefill, request = disagg.plans(opts, registry, search_spec(opts, registry),
                                               aggregated=False)  # fmt: skip
    found = disagg.size(decode, prefill, request, sizing)
    both = sorted([*rec.candidates, *found], key=lambda c: c["cost"])  # stable: aggregated first
    return attrs.evolve(rec, candidates=tuple(both[: sizing.keep]),
                        evaluated=rec.evaluated + decode.total + prefill.total)  # fmt: skip


def _launches(candidates: Sequence[Mapping[str, Any]], emit: str, kinds: Any) -> list[Any]:
    """Each candidate's launch as JSON: both sides' for a disaggregated one."""
    out = []
    for c in candidates:
        if c.get("mode") == "disaggregated":
            out.append(launch_app.for_deployment(c, emit, kinds))
        else:
            out.append(launch_app.json_of(launch_app.for_points([c], emit, kinds, strict=False)[0]))
    refusals = [d["refused"] for x in out for d in _sides(x) if "refused" in d]
    if refusals and not any(all("commands" in d for d in _sides(x)) for x in out):
        raise launch_app.none_launched("recommend", "candidate", emit, refusals[0])
    return out


def _sides(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A launch's documents: both sides of a disaggregated one, else itself."""
    return [doc["prefill"], doc["decode"]] if "instances" in doc else [doc]


def _plan(ns: argparse.Namespace, registry: Registry) -> Plan:
    """The search's space for the request: its SLA filters, serving at ISL/OSL."""
    known = metric_table(registry)
    where = tuple(
        parse_condition(text, flag, metric or None, known)
        for flag, text, metric in sla_conditions(ns.ttft, ns.tpot, ns.where, command="recommend")
    )
    spec = Spec(
        objective=check_metric("tokens_per_s_per_gpu", "--objective", known),
        where=where,
        minimize=frozenset(m.name for m in known.values() if m.minimize),
    )
    return plan_search(
        ns.model,
        names(ns.hardware),
        names(ns.cluster),
        gpus=parse_counts(ns.gpus, "--gpus"),
        engines=names(ns.engine),
        workload="serving",
        isl=ns.isl,
        osl=ns.osl,
        decoding=[k for d in ns.decoding or ["autoregressive"] for k in names(d)],
        sets=ns.sets,
        batch=parse_counts(ns.batch, "--batch") if ns.batch is not None else DEFAULT_BATCH,
        spec=spec,
        registry=registry,
        cache=not ns.no_cache,
        only=[parse_only(o) for o in ns.only],
        emit=ns.emit,
    )
