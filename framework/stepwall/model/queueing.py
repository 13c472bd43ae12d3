"""Time to first token and request latency under load (docs/physics.md, "Serving metrics and
queueing").

A replica's prompts queue first-come-first-served for its prefill capacity: each holds it
for an occupancy s, reaches its first token a latency L after its prefill starts, then
decodes for OSL − 1 tokens. Benchmarks run a closed loop at a concurrency C (a finished
request is replaced at once) or an open one at a Poisson request rate; the wait is that of
the closed loop (`stepwall.core.laws.closed_loop_wait`) or of M/D/1
(`stepwall.core.laws.mg1_wait`), its percentiles `stepwall.core.laws.wait_quantile`.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import sympy as sp

from stepwall.core.laws import closed_loop_utilisation, closed_loop_wait, mg1_wait, wait_quantile
from stepwall.core.terms import Constraint, Engine, Layout, Step
from stepwall.model.constraints import COMPOSER

__all__ = ["QUANTILES", "Service", "UnderLoad", "prefill_service", "serving_under_load"]

QUANTILES = (sp.Rational(1, 2), sp.Rational(9, 10), sp.Rational(99, 100))


@attrs.frozen
class Service:
    """How a replica serves one request: ``latency`` from the start of its prefill to its
    first token, ``occupancy`` of the replica's prefill capacity it holds (0: prefilled
    elsewhere, no queue here), ``decode`` the rest of the request after its first token, and
    ``slotted``: a prompt that arrives mid-iteration joins at the next one. ``poll``: the
    window W a prompt may wait beyond that for the scheduler to poll for new requests (0 where
    it polls every iteration). ``ahead``: the time a·t a polled prompt waits for the
    iterations the scheduler has already launched (a = ``Engine.schedules_ahead``)."""

    latency: sp.Expr
    occupancy: sp.Expr
    decode: sp.Expr
    slotted: bool
    poll: sp.Expr = sp.S.Zero
    ahead: sp.Expr = sp.S.Zero


def prefill_service(
    step: Step, ttft: Step, t: sp.Expr, t_ttft: sp.Expr, engine: Engine, layout: Layout
) -> Service:
    """The prefill service of the scenario's ``step`` (time ``t``; ``ttft``, ``t_ttft``: one
    prompt prefilled alone). A prefill pool: a batch of C prompts per step, L = t, s = t/C.
    Aggregated serving (chunked prefill): a prompt of ISL tokens takes ⌈ISL/chunk⌉ iterations
    of the serving step, and no less than its prefill alone (the serving step spreads the
    prompts' work evenly over iterations; the ones that carry a prompt are heavier),
    L = max(⌈ISL/chunk⌉·t, t_ttft); it holds ISL/(chunk·ranks) of an iteration's prefill
    budget (chunk tokens on each attention rank) and no less than its own prefill's time on
    its ranks (one, or the cp of a context-parallel split), s = max(ISL·t/(chunk·ranks),
    cp·t_ttft/ranks) (the serving step is costed at the
    prompts arriving on average, not at a full chunk, so t alone would price a prompt's
    prefill at far less than the work it is). A decode
    pool: its prompts are prefilled elsewhere, L = the ttft step (with the KV transfer),
    s = 0. Decode after the first token: (OSL − 1)/τ steps. A prompt held for the attention
    ranks' balance (``Step.admission_wait`` iterations) reaches its prefill that much later,
    L += wait·t, without holding the prefill capacity meanwhile. A scheduler that polls for
    new requests every N decode iterations (``Engine.recv_interval``) lets a prompt wait up
    to W = (N − 1)·t more for the next poll; one that launches a iterations ahead of the GPU
    (``Engine.schedules_ahead``) starts a polled prompt a·t later."""
    decode = (step.completion - 1) * t / step.produced
    ahead = engine.schedules_ahead * t
    if step.name == "prefill":
        return Service(t, t / step.users, sp.S.Zero, True, ahead=ahead)
    if step.prefill_tokens == 0:
        return Service(t_ttft, sp.S.Zero, decode, False)
    isl, chunk = ttft.tokens_per_user, engine.prefill_chunk
    held = step.admission_wait * t  # held for the attention ranks' balance first
    latency = held + sp.Max(sp.ceiling(isl / chunk) * t, t_ttft, evaluate=False)
    occupancy = sp.Max(isl * t / (chunk * layout.ep), t_ttft * layout.cp / layout.ep,
                       evaluate=False)  # fmt: skip
    return Service(latency, occupancy, decode, True, (engine.recv_interval - 1) * t, ahead)


@attrs.frozen
class UnderLoad:
    """Time to first token at each of `QUANTILES`, the median end-to-end latency, completed
    requests per second per replica, and the constraints an open loop needs."""

    ttft: Mapping[sp.Rational, sp.Expr]
    e2e: sp.Expr
    request_rate: sp.Expr
    constraints: tuple[Constraint, ...]


def serving_under_load(step: Step, service: Service, t: sp.Expr) -> UnderLoad:
    """TTFT = the wait for the prefill capacity + L + the wait for the iteration a prompt
    joins (a slotted server: half an iteration, t/2, for a Poisson arrival; a whole one, t,
    in a closed loop, whose request reaches the scheduler just after the poll that follows
    its predecessor's last iteration, the client's round trip being longer than the
    scheduler's turn) + a·t for the iterations already launched (`Service.ahead`);
    end-to-end = TTFT + the decode.
    With a poll window W (`Service.poll`) a prompt waits U(0, W) for the poll: TTFT_p gains
    p·W (quantiles added: exact where the other parts are degenerate, an upper bound
    otherwise). A poll finds λ·W prompts, each queued behind λ·W/2 of them on average (+ρ·W/2,
    ρ = λ·s), but the scheduler polls again after each iteration that prefills, so a share ρ
    of the arrivals waits for no poll (−ρ·W/2): to first order the two cancel."""
    s, lat, poll = service.occupancy, service.latency, service.poll
    rate = step.arrival_rate
    # the wait for the iteration a prompt joins, and for those the scheduler launched already
    slot = ((t if rate is None else t / 2) + service.ahead) if service.slotted else sp.S.Zero
    constraints: tuple[Constraint, ...] = ()
    if s == 0:  # no queue at this pool
        ttft = {p: lat for p in QUANTILES}
        done = step.users / (lat + service.decode) if rate is None else rate
        return UnderLoad(ttft, ttft[QUANTILES[0]] + service.decode, done, constraints)
    if rate is None:  # closed loop at C
        cycle = slot + lat + service.decode + poll / 2
        rho = closed_loop_utilisation(step.users, cycle, s)
        wait = closed_loop_wait(step.users, cycle, s, rho)
        backlog = sp.Max(0, step.users * s - cycle, evaluate=False)
        done = step.users / (cycle + wait)
    else:
        rho = rate * s
        wait, backlog, done = mg1_wait(rho, s), sp.S.Zero, rate
        constraints = _open_loop(step, service, rate, slot)
    ttft = {p: slot + lat + p * poll + wait_quantile(wait, backlog, rho, p) for p in QUANTILES}
    return UnderLoad(ttft, ttft[QUANTILES[0]] + service.decode, done, constraints)


def _open_loop(
    step: Step, service: Service, rate: sp.Expr, slot: sp.Expr
) -> tuple[Constraint, ...]:
    """Poisson arrivals need a stable prefill queue (ρ = λ·s < 1) and, by Little's law, no
    more requests waiting for their iteration (``slot``) or a poll, in prefill and in decode
    at once than the C the step is costed for."""
    keys = ("workload.request_rate", "workload.concurrency")
    return (
        Constraint("prefill_queue_stable", rate * service.occupancy < 1,
                   "requests must arrive slower than the replica prefills them", keys,
                   COMPOSER, ("prefill utilisation", "")),
        Constraint("arrivals_fit_concurrency",
                   rate * (slot + service.latency + service.poll / 2 + service.decode)
                   <= step.users,
                   "the requests in flight (arrival rate × the time from arrival to last "
                   "token) must fit the concurrency", keys, COMPOSER,
                   ("requests in flight", "")),
    )  # fmt: skip
