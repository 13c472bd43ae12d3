"""``stepwall search``: the Pareto frontier of serving layouts on one or more hardware options
(the work is `stepwall.apps.search`; this module is its command line)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import attrs

from stepwall.apps import disagg, switch
from stepwall.apps.launch import LAUNCHERS
from stepwall.apps.search import CHUNK, Result, SearchOptions, run_cli
from stepwall.core.errors import SpecError
from stepwall.core.progress import quiet_argument

# what only a disaggregated search reads (SearchOptions' fields)
PREFILL_FLAGS = frozenset(("prefill_gpus", "prefill_batch", "prefill_hardware", "prefill_engine",
                           "prefill_cluster", "prefill_only", "max_gpus"))  # fmt: skip


def prefill_flag_given(ns: argparse.Namespace) -> str | None:
    """The first flag only a disaggregated search reads that ``ns`` gives (``--prefill-gpus``),
    or None: search and recommend refuse it without --disagg."""
    given = sorted(k for k in PREFILL_FLAGS if getattr(ns, k, None) not in (None, []))
    return "--" + given[0].replace("_", "-") if given else None


if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

DESCRIPTION = """\
Search a model's serving configurations on one or more hardware options and print the Pareto
frontier of tokens/s per GPU against tokens/s per user, the best configuration at each
interactivity target and what binds it.

The space, per hardware option (a GPU spec with its cluster, and each --engine profile) and
decoding kind:
  layouts   every tp × ep × dp = N for each N of --gpus (tp within one scale-up domain;
            ep spreads experts and runs attention data-parallel across it; dp replicas)
  batch     users per attention rank (--batch); a replica serves C = batch × ep users
  --vary    any other numeric spec key (e.g. hardware.hbm_bandwidth=7TB/s,8TB/s);
            parallel.pp=1,2,4 adds pipeline stages (tp × ep × dp × pp = N, one micro-batch
            per stage unless parallel.microbatches is set), parallel.cp=1,8 splits a prompt
            prefilled alone over cp attention ranks (prefill context parallelism, cp ≤ ep)
Each hardware × decoding kind compiles the model once and evaluates the space through it,
vectorized, in chunks (bounded memory); --dask spreads the chunks over processes or a
cluster with identical results. Every point reported satisfies every constraint of the
model (memory, divisibility, cluster size) and every --where/--ttft filter, and comes with
the `stepwall eval` command that reproduces it.

--disagg adds disaggregated deployments to the same frontier: prefill pools (--prefill-gpus,
--prefill-batch, optionally --prefill-hardware) and decode pools searched apart, paired into
x prefill + y decode instances within --max-gpus so that the prefill queue keeps up and meets
--ttft (a percentile: "p90<=2s"), each point marked aggregated or disaggregated.

Energy and cost metrics (joules_per_token, tokens_per_s_per_mw, usd_per_million_tokens)
come from hardware.board_power and the cluster's pue and price_per_gpu_hour; where a spec
does not state them they are unknown (null), never guessed."""

EPILOG_SEARCH = """\
examples:
  stepwall search deepseek-v3-fp8 --hardware h200 --cluster hgx-h200-ib --gpus 8,16
  stepwall search deepseek-r1-fp4 --hardware b200,gb200 --cluster hgx-b200-ib,gb200-nvl72 \\
      --gpus 8..72:8 --engine trtllm --at "tokens_per_s_per_user>=50" --ttft "<=2s"
  stepwall search deepseek-v3-fp8 --hardware h100,h200 --cluster hgx-h100-ib,hgx-h200-ib \\
      --objective usd_per_million_tokens --at "tokens_per_s_per_user>=20" --json
  stepwall search deepseek-v3-fp8 --hardware h200 --cluster hgx-h200-ib --gpus 8 \\
      --engine trtllm,vllm,sglang --at "tokens_per_s_per_user>=20"
  stepwall search deepseek-v3-fp8 --hardware h200 --cluster hgx-h200-ib --gpus 8..72:8 \\
      --batch 1..4096 --dask --workers 2 -o frontier.csv --plot frontier.svg
  stepwall search deepseek-r1-fp4 --hardware gb200 --cluster gb200-nvl72 --gpus 8,16,32 \\
      --disagg --prefill-gpus 4,8 --max-gpus 72 --ttft "p90<=1s" --at "tokens_per_s_per_user>=50"

--gpus, --batch and --vary take lists (8,16,72) or ranges as in `stepwall sweep`:
8..72:8 (step), 1..4096:x2 (factor), 1..4096:40log (points).
--at and --where take METRIC>=VALUE or METRIC<=VALUE with units (ttft_s<=500ms).
A space beyond the limits (points, values on one axis, GPUs) is refused up front, in one
line that gives the limit; progress goes to stderr, never stdout (--quiet: none).
-o FILE writes by suffix: .json (the document), .csv/.md/.parquet (the frontier), .svg (the
chart). The JSON document's "frontier" lists points with every metric by name, "config" and
"command"; "targets" gives the best point per option at each --at target, its "binding"
constraint and the "ranking" of the options; a target no configuration meets names the
"nearest" one (its value of the target's metric, and the gap).
"""


def add_hardware(p: argparse.ArgumentParser) -> None:
    """``--hardware`` and ``--cluster``, as ``search`` and ``recommend`` take them."""
    p.add_argument(
        "--hardware",
        required=True,
        metavar="H[,H2,…]",
        help="GPU specs to compare, comma-separated (catalog names or paths)",
    )
    p.add_argument(
        "--cluster",
        required=True,
        metavar="C[,C2,…]",
        help="the cluster of each hardware, in the same order (or one for all)",
    )


def add_sets(p: argparse.ArgumentParser) -> None:
    """``--set``, as ``search`` and ``recommend`` take it."""
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec value in every variant (repeatable)",
    )


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall search``.

    Stays whole: a flat list of argparse declarations, one ``add_argument`` per option in the
    order ``--help`` lists them and no branches; splitting it would only scatter them.
    """
    p.description = DESCRIPTION
    p.epilog = EPILOG_SEARCH
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("model", metavar="MODEL", help="a model spec: catalog name or .toml path")
    add_hardware(p)
    p.add_argument(
        "--gpus",
        default=None,
        metavar="N[,N2,…]|LO..HI:STEP",
        help="deployment sizes in GPUs (default: the cluster's size); the cluster "
        "grows to N GPUs (cluster.nodes) where it has fewer",
    )
    p.add_argument(
        "--engine",
        default=None,
        metavar="E[,E2,…]",
        help="engine profiles to compare, comma-separated (catalog names or paths, e.g. "
        "trtllm,vllm,sglang; default: the plugin's): each hardware × engine is one option",
    )
    p.add_argument(
        "--workload",
        default="serving",
        choices=("serving", "decode"),
        help="serving: aggregated, in-flight batching (default); decode: a decode "
        "pool at context ISL + OSL/2",
    )
    p.add_argument("--isl", type=int, default=1024, help="prompt tokens per request (1024)")
    p.add_argument("--osl", type=int, default=1024, help="output tokens per request (1024)")
    p.add_argument(
        "--decoding",
        action="append",
        default=[],
        metavar="KIND",
        help="decoding kinds to search (repeatable or comma-separated; default "
        "autoregressive); their settings come from --set/--vary decoding.KEY",
    )
    p.add_argument(
        "--batch",
        default=None,
        metavar="B[,…]|LO..HI:BY",
        help="users per attention rank (default 1,2,3,4,6,…,1536,2048)",
    )
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=VALUES",
        help="another numeric axis, as in stepwall sweep (repeatable)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=N[,…]",
        help="keep only the layouts whose degree KEY is one of these (repeatable), e.g. "
        "--only parallel.tp=8 --only parallel.ep=1 for a benchmark that ran TP8 alone",
    )
    add_sets(p)
    p.add_argument(
        "--x",
        default="tokens_per_s_per_user",
        metavar="METRIC",
        help="the frontier's x axis (default tokens_per_s_per_user)",
    )
    p.add_argument(
        "--y",
        default="tokens_per_s_per_gpu",
        metavar="METRIC",
        help="the frontier's y axis (default tokens_per_s_per_gpu)",
    )
    p.add_argument(
        "--objective",
        default="tokens_per_s_per_gpu",
        metavar="METRIC",
        help="what the best configuration at a target maximises (minimises for "
        "times, joules and USD; default tokens_per_s_per_gpu)",
    )
    p.add_argument(
        "--at",
        action="append",
        default=[],
        metavar="COND",
        help='an interactivity target, e.g. "tokens_per_s_per_user>=50" (repeatable)',
    )
    p.add_argument(
        "--ttft",
        default="",
        metavar="COND",
        help='the time to first token under load, median or a percentile: "<=2s" (= --where '
        'ttft_s<=2s), "p90<=2s", "p99<=5s"',
    )
    p.add_argument(
        "--tpot",
        default="",
        metavar="COND",
        help='the time per output token, e.g. "<=30ms" (= --where tpot_s<=30ms)',
    )
    p.add_argument(
        "--itl",
        default="",
        metavar="COND",
        help='the inter-token latency (one decode step), e.g. "<=40ms"',
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COND",
        help="a filter every reported point passes, e.g. e2e_latency_s<=60s",
    )
    p.add_argument(
        "--format",
        choices=("text", "json", "csv", "markdown"),
        default=None,
        help="stdout format (default text)",
    )
    p.add_argument(
        "--json",
        action="store_const",
        const="json",
        dest="format",
        help="the same as --format json: one JSON document",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (.json .csv .md .parquet .svg)"
    )
    p.add_argument("--plot", metavar="FILE.svg", help="also write the frontiers' chart")
    p.add_argument(
        "--spread",
        type=float,
        default=0.1,
        metavar="F",
        help="with --at: rank the options again with every hardware efficiency ×(1−F) and "
        "×(1+F) (a spec range's ends where it gives one; default 0.1; 0 skips it)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=CHUNK,
        metavar="N",
        help=f"points per vectorized call (default {CHUNK:,}; memory grows with it)",
    )
    p.add_argument(
        "--dask",
        action="store_true",
        help="evaluate chunks on dask.distributed (a LocalCluster of processes unless --scheduler)",
    )
    p.add_argument(
        "--scheduler",
        default="",
        metavar="ADDRESS",
        help="a running dask scheduler, e.g. tcp://10.0.0.1:8786 (implies --dask)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="LocalCluster worker processes, at least 1 (default: the CPUs)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="compile the models afresh instead of loading them from the cache",
    )
    p.add_argument(
        "--emit",
        choices=LAUNCHERS,
        default=None,
        help="with --at: also write each target's best point's launch command for this engine "
        "(the engine its profile priced, at the profile's release), searching only the layouts "
        "it launches as priced (vLLM, TensorRT-LLM: tp = 1 or ep = 1; docs/search.md)",
    )
    p.add_argument(
        "--switch-points",
        action="store_true",
        help="also derive where the best layout along each frontier changes: the crossing of "
        "the two layouts' curves, from their expressions, with its sensitivities (with "
        "--disagg, aggregated and P/D deployments alike: docs/search.md)",
    )
    add_disagg(p)
    quiet_argument(p)


def add_disagg(p: argparse.ArgumentParser, sizing: bool = False) -> None:
    """The options of a disaggregated search (``--disagg``); ``sizing``: recommend's (sized
    for the rate, no --max-gpus)."""
    g = p.add_argument_group(
        "disaggregated prefill/decode (--disagg; docs/search.md)",
        "prefill and decode pools searched apart and paired into xPyD deployments"
        + ("" if sizing else ", on one frontier with the aggregated ones"),
    )
    g.add_argument(
        "--disagg",
        action="store_true",
        help="also consider disaggregated deployments: x prefill instances feeding y decode "
        "instances, sized so the prefill queue keeps up and meets --ttft"
        + (" at --rate" if sizing else ""),
    )
    g.add_argument(
        "--prefill-gpus",
        default=None,
        metavar="N[,…]|LO..HI:STEP",
        help="GPUs per prefill instance (default: --gpus, which --disagg needs)",
    )
    g.add_argument(
        "--prefill-batch",
        default=None,
        metavar="B[,…]",
        help="prompts per attention rank in one prefill step (default 1,2,4,8,16)",
    )
    g.add_argument(
        "--prefill-hardware",
        default=None,
        metavar="H[,…]",
        help="the prefill pools' GPUs, one or one per --hardware (default: the same)",
    )
    g.add_argument(
        "--prefill-engine",
        default=None,
        metavar="E[,…]",
        help="the prefill pools' engine profile, one or one per --engine (default: --engine)",
    )
    g.add_argument(
        "--prefill-cluster",
        default=None,
        metavar="C[,…]",
        help="the cluster of each --prefill-hardware (default: --cluster)",
    )
    g.add_argument(
        "--prefill-only",
        action="append",
        default=[],
        metavar="KEY=N[,…]",
        help="keep only these prefill layouts, as --only (repeatable), e.g. parallel.tp=4",
    )
    if sizing:
        return
    g.add_argument(
        "--max-gpus",
        type=int,
        default=None,
        metavar="N",
        help="GPUs one deployment may use, prefill and decode together (default: the "
        "cluster's GPUs, or the largest decode and prefill instances together if more)",
    )


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Search with the parsed options."""
    options = SearchOptions(**{f.name: getattr(ns, f.name) for f in attrs.fields(SearchOptions)})
    if options.disagg:
        return disagg.run_cli(options, registry)
    flag = prefill_flag_given(ns)
    if flag is not None:
        raise SpecError("search", flag, "applies to a disaggregated search", "--disagg")
    if not options.switch_points:
        return run_cli(options, registry)

    def switches(result: Result) -> Result:
        return attrs.evolve(result, switches=tuple(switch.switch_points(result, registry)))

    return run_cli(options, registry, switches)
