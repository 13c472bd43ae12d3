"""Sections every scenario has: the workload served and the cluster it runs on.

The workload kind decides which forward passes are costed (`Step`s):

- ``decode``: a decode pool at steady state, C users each attending to S tokens of context
  (the decode side of disaggregated serving, or a decode-only benchmark);
- ``serving``: aggregated serving with in-flight batching and chunked prefill, as a steady
  state: C requests in flight per replica, each of ISL prompt and OSL output tokens. A
  request attends on average to ISL + OSL/2 tokens. Each iteration λ = C·τ/OSL requests
  finish (τ tokens per user per iteration, MTP included) and are replaced, so λ·ISL prompt
  tokens per replica arrive per iteration on average; the engine places them on the R = ep
  attention ranks (round-robin, or synchronised) and prefills them in chunks. Ranks step
  together (they meet at the MoE all-to-all), so the step pays the busiest rank's prefill,
  in expectation (`busiest_rank_prefill`); the experts see the replica's mean. A mixed
  engine carries the chunks in decode iterations, in what its per-iteration token budget P
  leaves after the rank's decode tokens, and a rank whose decode and mean arriving prompt
  tokens exceed P cannot keep up (the configuration is infeasible); an interleaved one
  prefills each iteration's arrivals in passes of their own (at most P tokens per rank
  each) before the next decode iteration, which decode users wait for. Draft passes do not
  prefill;
- ``prefill``: a prefill pool, C prompts of ISL tokens per replica per step.

Each kind also costs ``ttft``: one prompt of ISL tokens prefilled alone on a replica (time to
first token, and the prefill rate per GPU that sizes a separate prefill pool).

``serving`` and ``prefill`` say how requests arrive (``arrival``): a closed loop at C, or
Poisson at ``request_rate`` (`stepwall.model.queueing`).
"""

from __future__ import annotations

from typing import Any

import attrs
import sympy as sp

from stepwall.core.errors import SpecError
from stepwall.core.fields import KindSpec, choice, flag, quantity
from stepwall.core.laws import balance_window, busiest_rank_prefill, prefill_iteration_share
from stepwall.core.scenario import Scenario
from stepwall.core.symbols import min_of
from stepwall.core.terms import Constraint, Decoding, Engine, Layout, Step, Workload
from stepwall.plugin.hookspecs import hookimpl


def _tokens(doc: str, latex: str, **kw: Any) -> Any:
    return quantity("dimensionless", doc, latex=latex, minimum=1.0, inclusive=True, **kw)


def _arrival() -> Any:
    return choice(("closed", "poisson"), "how requests arrive: closed (a finished request is "
                  "replaced at once, as benchmarks at a max concurrency run) or poisson (at "
                  "request_rate, open loop)", default="closed")  # fmt: skip


def _request_rate() -> Any:
    doc = 'requests per second arriving at all replicas together (arrival = "poisson"), "4 Hz"'
    return quantity("frequency", doc, latex=r"\lambda", default=None)


def _prefix_hit() -> Any:
    return quantity(
        "dimensionless",
        "share of each prompt's tokens found in the engine's prefix cache (a shared system "
        "prompt, a conversation's earlier turns): they are not prefilled again, but their KV "
        "is attended to and held per request; 0: none",
        latex="h",
        minimum=0.0,
        inclusive=True,
        maximum=0.99,
        default=0.0,
    )


@attrs.frozen
class WorkloadSpec:
    concurrency: int = quantity(
        "dimensionless", "users decoding at once per replica (C)", latex="C", integer=True
    )
    context: float = quantity(
        "dimensionless", "tokens of context each user attends to (S)", latex="S"
    )
    input_tokens: float = _tokens(
        "prompt tokens per request (ISL), for time to first token", "ISL", default=1024
    )
    output_tokens: float = _tokens(
        "output tokens per request (OSL), for sizing a separate prefill pool", "OSL", default=1024
    )
    kv_transfer: bool = flag(
        "prompts are prefilled by a separate pool and their KV cache arrives over the scale-out "
        "network (time to first token includes the transfer)"
    )
    prefix_hit: float = _prefix_hit()


@attrs.frozen
class Serving:
    concurrency: int = quantity(
        "dimensionless", "requests in flight per replica (C)", latex="C", integer=True
    )
    input_tokens: float = _tokens("prompt tokens per request (ISL)", "ISL")
    output_tokens: float = _tokens("output tokens per request (OSL)", "OSL")
    arrival: str = _arrival()
    request_rate: float | None = _request_rate()
    prefix_hit: float = _prefix_hit()


@attrs.frozen
class Prefill:
    concurrency: int = quantity(
        "dimensionless", "prompts prefilled together per replica", latex="C", integer=True
    )
    input_tokens: float = _tokens("prompt tokens per request (ISL)", "ISL")
    output_tokens: float = _tokens(
        "output tokens per request (OSL), for sizing the decode side", "OSL", default=1024
    )
    arrival: str = _arrival()
    request_rate: float | None = _request_rate()
    prefix_hit: float = _prefix_hit()


@attrs.frozen
class ClusterSpec:
    nodes: int = quantity(
        "dimensionless", "nodes (or compute trays) in the cluster", latex="n_{nodes}", integer=True
    )
    gpus_per_node: int = quantity("dimensionless", "GPUs per node", latex="g_{node}", integer=True)
    price_per_gpu_hour: float | None = quantity(
        "price_rate",
        "what one GPU-hour costs (rental, or amortised purchase and operation), e.g. "
        '"2.69 USD/h" (none: cost metrics are unknown)',
        latex="c_{GPU}",
        default=None,
    )
    pue: float | None = quantity(
        "dimensionless",
        "power usage effectiveness: facility power over IT power (none: provisioned-power "
        "metrics are unknown)",
        latex="PUE",
        minimum=1.0,
        inclusive=True,
        default=None,
        plausible=("1", "10"),
    )


USERS = {"users": "concurrency"}  # what each workload kind provides (a search sets it)


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "workload",
            "decode",
            WorkloadSpec,
            "a decode pool: C users at context S",
            True,
            provides=USERS,
        ),
        KindSpec(
            "workload",
            "serving",
            Serving,
            "aggregated serving: in-flight batching with chunked prefill",
            provides=USERS,
        ),
        KindSpec(
            "workload", "prefill", Prefill, "a prefill pool: C prompts per step", provides=USERS
        ),
        KindSpec(
            "cluster",
            "cluster",
            ClusterSpec,
            "nodes × GPUs per node; networks below",
            True,
            provides={
                name: name for name in ("nodes", "gpus_per_node", "pue", "price_per_gpu_hour")
            },
        ),
    ]


def _steps(scenario: Scenario, decoding: Decoding, layout: Layout, engine: Engine) -> list[Step]:
    w, kind = scenario.params.workload, scenario.kinds["workload"]
    isl, osl = w.input_tokens, w.output_tokens
    transfer = isl if kind == "decode" and scenario.workload.kv_transfer else sp.S.Zero
    new, cached = _prompt_split(scenario)
    # a prompt prefilled alone: on one attention rank, or 1/cp of it on each of cp ranks
    ttft = Step("ttft", sp.S.One, 1 / layout.cp, new, cached, isl, kv_transfer=transfer,
                completion=osl)  # fmt: skip
    if kind == "prefill":
        users = layout.users
        return [
            Step(
                "prefill",
                users,
                layout.users_per_attention_rank,
                new,
                cached,
                isl,
                completion=isl,
            ),
            ttft,
        ]
    m, tau = decoding.verify_tokens, decoding.accepted_tokens
    if kind == "decode":
        step = Step("decode", layout.users, layout.users_per_attention_rank, m, w.context, tau,
                    completion=osl)  # fmt: skip
        return [step, ttft]
    arrivals = layout.users * tau / osl  # requests finished, and replaced, per iteration
    interleaved = engine.prefill_schedule == "interleaved"
    # a mixed iteration's token budget holds its decode tokens first (at least one left)
    chunk, decode_tokens = engine.prefill_chunk, layout.users_per_attention_rank * m
    budget = chunk if interleaved else sp.Max(1, chunk - decode_tokens)
    synchronised = engine.prefill_placement == "synchronised"
    together, held = (balance_window(arrivals, layout.ep, engine.balance_timeout)
                      if synchronised else (None, sp.S.Zero))  # fmt: skip
    busiest, passes = busiest_rank_prefill(arrivals, new, budget, layout.ep, synchronised,
                                           interleaved, together)  # fmt: skip
    # a prompt's pieces ride in some iterations, not a sliver of one in every one: mixed in,
    # in the iterations that take a piece; interleaved, in the passes of their own that
    # follow a share min(1, passes) of the decode iterations
    share = (
        min_of(1, passes)
        if interleaved
        else prefill_iteration_share(busiest, arrivals, new, budget, synchronised)
    )
    step = Step("decode", layout.users, layout.users_per_attention_rank, m, isl + osl / 2, tau,
                arrivals * new, busiest, cached + new / 2, completion=osl,
                prefill_passes=passes, prefill_share=share, admission_wait=held,
                prefill_piece=min_of(new, budget))  # fmt: skip
    return [step, ttft]


def _prompt_split(scenario: Scenario) -> tuple[sp.Expr, sp.Expr]:
    """A prompt's tokens prefilled and those its prefix cache already holds: (1 − h)·ISL and
    h·ISL at a hit rate h (``workload.prefix_hit``): the prefilled ones attend to the cached
    ones too (their context), which are not computed again (vLLM's and SGLang's prefix
    caching; TensorRT-LLM's KV cache reuse)."""
    w = scenario.params.workload
    if getattr(scenario.workload, "prefix_hit", 0) == 0:
        return w.input_tokens, sp.S.Zero
    return w.input_tokens * (1 - w.prefix_hit), w.input_tokens * w.prefix_hit


@hookimpl
def stepwall_steps(
    scenario: Scenario, decoding: Decoding, layout: Layout, engine: Engine
) -> list[Step]:
    """The scenario's step (its requests' arrivals: `_arrival_rate`), then ``ttft``."""
    step, ttft = _steps(scenario, decoding, layout, engine)
    return [attrs.evolve(step, arrival_rate=_arrival_rate(scenario, layout)), ttft]


def _arrival_rate(scenario: Scenario, layout: Layout) -> sp.Expr | None:
    """Requests per second arriving at each replica under Poisson arrivals, else None."""
    arrival = getattr(scenario.workload, "arrival", "closed")
    rate = getattr(scenario.params.workload, "request_rate", None)
    if arrival == "poisson" and rate is None:
        raise SpecError(scenario.origin, "workload.request_rate",
                        'arrival = "poisson" needs a rate (expected e.g. "4 Hz")')  # fmt: skip
    if arrival == "closed" and rate is not None:
        raise SpecError(scenario.origin, "workload.request_rate",
                        'a rate applies to arrival = "poisson" (expected no request_rate for a '
                        "closed loop at the concurrency)")  # fmt: skip
    return None if rate is None else rate / layout.dp


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """A decoding user's context holds its prompt: S ≥ ISL; in serving with prefill mixed into
    decode iterations, each attention rank puts its decode tokens and the prompt tokens
    arriving on it, on average, through the iteration's budget: (C·M + C·τ·ISL/OSL)/R ≤ P
    (an interleaving engine runs as many prefill passes as it needs). That is the closed
    loop's arrival rate; under Poisson arrivals the queue's own stability constraint
    (`stepwall.model.queueing`) bounds the rate instead."""
    w = scenario.params.workload
    closed = getattr(scenario.workload, "arrival", "closed") == "closed"
    mixed = scenario.kinds["workload"] == "serving" and scenario.engine.prefill_schedule == "mixed"
    if mixed and closed:
        d = decoding
        rank = layout.users_per_attention_rank
        arriving = w.concurrency * d.accepted_tokens * _prompt_split(scenario)[0] / w.output_tokens
        return [
            Constraint(
                "prefill_keeps_up",
                rank * d.verify_tokens + arriving / layout.ep
                <= scenario.params.engine.prefill_chunk,
                "each attention rank must put its decode tokens and the prompt tokens arriving "
                "on it per iteration (C·τ·ISL/OSL over the ranks) through the engine's "
                "per-iteration token budget",
                ("workload.concurrency", "engine.prefill_chunk", "workload.output_tokens"),
                "workload",
                ("decode and arriving prompt tokens per rank", "token budget"),
            )
        ]
    if scenario.kinds["workload"] != "decode":
        return []
    return [
        Constraint(
            "context_holds_prompt",
            w.context >= w.input_tokens,
            "a decoding user's context holds at least its prompt's tokens",
            ("workload.context", "workload.input_tokens"),
            "workload",
        )
    ]
