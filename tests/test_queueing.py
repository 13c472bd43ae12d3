"""Time to first token under load (`stepwall.model.queueing`) against a discrete-event
simulation of the scheduler it models, and the serving metrics' relations on a built model."""

from __future__ import annotations

import functools
import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import sympy as sp

from stepwall.core.errors import SpecError
from stepwall.core.symbols import parameter
from stepwall.core.terms import Engine, Layout, Step
from stepwall.core.units import DIMENSIONLESS, FREQUENCY, TIME
from stepwall.model.compose import build_model
from stepwall.model.queueing import QUANTILES, UnderLoad, prefill_service, serving_under_load
from stepwall.numeric.printer import FUNCTION, function_source, namespace

SERVING = "specs/scenarios/llama8b-h100-serving.toml"

USERS, ISL, OSL, CHUNK = (parameter(f"q.{n}", DIMENSIONLESS) for n in ("c", "isl", "osl", "k"))
STEP_TIME, RATE = parameter("q.t", TIME), parameter("q.rate", FREQUENCY)


def _load(rate: sp.Expr | None, recv_interval: int = 1, ahead: int = 0) -> UnderLoad:
    """The law for one replica that serves 1-token decode steps of time t and prefills
    prompts of ISL tokens in chunks of at most K per iteration (one rank), polling for new
    requests every ``recv_interval`` decode iterations and launching ``ahead`` iterations
    ahead of the GPU."""
    step = Step("decode", USERS, USERS, sp.S.One, sp.S.Zero, sp.S.One,
                USERS * ISL / OSL, completion=OSL, arrival_rate=rate)  # fmt: skip
    ttft = Step("ttft", sp.S.One, sp.S.One, ISL, sp.S.Zero, ISL)
    layout = Layout(sp.S.One, sp.S.One, sp.S.One, sp.S.One, USERS, USERS)
    engine = Engine(prefill_chunk=CHUNK, recv_interval=recv_interval, schedules_ahead=ahead)
    service = prefill_service(step, ttft, STEP_TIME, STEP_TIME, engine, layout)
    return serving_under_load(step, service, STEP_TIME)


@functools.cache
def _law(rate: sp.Expr | None, recv_interval: int = 1, ahead: int = 0) -> Callable[..., list[Any]]:
    """`_load`'s TTFT quantiles and requests/s as one numpy function."""
    load = _load(rate, recv_interval, ahead)
    args = [USERS, ISL, OSL, CHUNK, STEP_TIME] + ([RATE] if rate is not None else [])
    outputs = [*(load.ttft[p] for p in QUANTILES), load.request_rate]
    source, imports = function_source(args, outputs)  # the model's own printer
    space = namespace("numpy", imports)
    exec(source, space)
    law: Callable[..., list[Any]] = space[FUNCTION]
    return law


def _simulate(
    isl: int,
    chunk: int,
    iterations: int,
    seed: int,
    users: int = 0,
    decode: float = 0.0,
    rate: float = 0.0,
    poll: int = 1,
    lag: float = 0.05,
    ahead: int = 0,
) -> tuple[np.ndarray, float]:
    """The scheduler itself, iteration by iteration (t = 1): prompts queue first come first
    served and each iteration prefills up to ``chunk`` of their tokens; a prompt's first
    token comes at the end of the iteration that prefills its last token. Closed loop
    (``users`` > 0): the request then decodes for a geometric number of iterations of mean
    ``decode`` (requests desynchronise) and is replaced, its successor reaching the
    scheduler ``lag`` after that iteration ends (the client's round trip), so after the poll
    that starts the next one; open loop: Poisson arrivals at ``rate`` per iteration. The
    scheduler sees arrivals only when it polls, as SGLang's receive skipper decides
    (sgl-project/sglang python/sglang/srt/managers/scheduler_recv_skipper.py): before each
    iteration a counter gains the last iteration's weight, 1 for decode alone and ``poll``
    for one that prefilled, and the scheduler polls (and clears it) once it reaches ``poll``.
    A prompt polled before iteration i is prefilled from iteration i + ``ahead`` on (those
    already launched by an overlap scheduler run first). Returns the TTFTs after a warm-up
    tenth, and completed requests per iteration."""
    rng = np.random.default_rng(seed)
    queue: deque[list[float]] = deque()  # [arrival, tokens left, first iteration it may run]
    returns = [float(rng.integers(0, int(decode) + 1)) for _ in range(users)]
    heapq.heapify(returns)
    arrival = rng.exponential(1 / rate) if rate else np.inf
    ttfts: list[float] = []
    counter, weight = poll, 1
    for it in range(iterations):
        counter += weight
        if counter >= poll:
            counter = 0
            while returns and returns[0] <= it:
                queue.append([heapq.heappop(returns), isl, it + ahead])
            while arrival <= it:
                queue.append([arrival, isl, it + ahead])
                arrival += rng.exponential(1 / rate)
        weight = poll if queue and queue[0][2] <= it else 1  # this iteration prefills
        budget = chunk
        while queue and budget > 0 and queue[0][2] <= it:
            take = min(budget, queue[0][1])
            queue[0][1] -= take
            budget -= take
            if queue[0][1] == 0:
                ttfts.append(it + 1 - queue.popleft()[0])
                if users:
                    heapq.heappush(returns, it + lag + rng.geometric(1 / (decode + 1)))
    kept = np.array(ttfts[len(ttfts) // 10 :])
    return kept, len(ttfts) / iterations


# prompts of four chunks (L = 4 iterations, occupancy s = 4) and 120 decode iterations: the
# closed loop saturates past C* = (L + decode + s)/s = 32. The p99 bound is loose: the
# exponential tail is an approximation (the closed loop's queue is truncated at C − 1)
# Each scheduler twice: polling and launching one iteration at a time, and an overlap
# scheduler that launches one ahead (a prompt it polls waits one more iteration)
@pytest.mark.parametrize("ahead", [0, 1])
@pytest.mark.parametrize("users", [8, 24, 40])
def test_closed_loop_ttft_against_simulation(users: int, ahead: int) -> None:
    isl, chunk, osl = 4 * 2048, 2048, 121
    got = _law(None, 1, ahead)(users, isl, osl, chunk, 1.0)
    ttfts, done = _simulate(isl, chunk, 60_000, seed=users, users=users, decode=osl - 1,
                            ahead=ahead)  # fmt: skip
    p50, p90, p99 = np.percentile(ttfts, [50, 90, 99])
    assert got[0] == pytest.approx(p50, rel=0.15)
    assert got[1] == pytest.approx(p90, rel=0.25)
    assert got[2] == pytest.approx(p99, rel=0.5)
    assert got[3] == pytest.approx(done, rel=0.05)  # requests/s: Little's law on the loop


@pytest.mark.parametrize("ahead", [0, 1])
@pytest.mark.parametrize("utilisation", [0.4, 0.7, 0.9])
def test_poisson_ttft_against_simulation(utilisation: float, ahead: int) -> None:
    isl, chunk = 4 * 2048, 2048
    rate = utilisation / (isl / chunk)
    got = _law(RATE, 1, ahead)(64, isl, 1024, chunk, 1.0, rate)
    ttfts, done = _simulate(isl, chunk, 100_000, seed=7, rate=rate, ahead=ahead)
    p50, p90, p99 = np.percentile(ttfts, [50, 90, 99])
    assert got[0] == pytest.approx(p50, rel=0.15)
    assert got[1] == pytest.approx(p90, rel=0.15)
    assert got[2] == pytest.approx(p99, rel=0.25)
    assert got[3] == pytest.approx(done, rel=0.02)


# SGLang's --scheduler-recv-interval N: a prompt waits U(0, (N − 1)·t) for the next poll; the
# prompts a poll finds queue first come first served (one chunk each: s = 1 iteration), and
# each iteration that prefills is followed by a poll. Light to moderate load (ρ = 0.05-0.2)
@pytest.mark.parametrize(("users", "rate"), [(8, 0.0), (24, 0.0), (0, 0.05), (0, 0.2)])
def test_polled_ttft_against_simulation(users: int, rate: float) -> None:
    isl, chunk, osl, poll = 2048, 2048, 121, 16
    args = [isl, osl, chunk, 1.0] + ([rate] if rate else [])
    got = _law(RATE if rate else None, poll)(users or 64, *args)
    ttfts, done = _simulate(isl, chunk, 100_000, seed=users + 3, users=users, decode=osl - 1,
                            rate=rate, poll=poll)  # fmt: skip
    p50, p90 = np.percentile(ttfts, [50, 90])
    every = _law(RATE if rate else None)(users or 64, *args)[0]  # the same, polling always
    assert p50 > 2 * every  # the poll dominates
    assert got[0] == pytest.approx(p50, rel=0.15)
    assert got[1] == pytest.approx(p90, rel=0.2)
    assert got[3] == pytest.approx(done, rel=0.05)


@pytest.mark.parametrize("ahead", [0, 1])
def test_a_light_closed_loop_waits_a_whole_iteration_and_those_launched(ahead: int) -> None:
    """Two users, one-iteration prompts, 120 decode iterations: almost never a queue, so the
    simulated TTFT is its slot: the iteration its request just missed, the ``ahead`` ones
    already launched, then its own (1 + a + 1 iterations less the client's lag)."""
    isl, chunk, osl, lag = 2048, 2048, 121, 0.05
    ttfts, _ = _simulate(isl, chunk, 40_000, seed=11, users=2, decode=osl - 1, lag=lag,
                         ahead=ahead)  # fmt: skip
    assert float(np.median(ttfts)) == pytest.approx(2 + ahead - lag)
    assert _law(None, 1, ahead)(2, isl, osl, chunk, 1.0)[0] == pytest.approx(2 + ahead, rel=0.01)


def test_a_polled_open_loop_counts_the_requests_waiting_for_the_poll_in_flight() -> None:
    """Little's law with a poll window W: λ·(L + W/2 + D) ≤ C. At C = 8, L = 1, D = 120 and
    W = 15 (N = 16), λ = 8/125 fits L + D (7.74 in flight) but not the wait for the poll (8.22)."""
    values = {USERS: 8, ISL: 2048, OSL: 121, CHUNK: 2048, STEP_TIME: 1, RATE: sp.Rational(8, 125)}
    for interval, fits in ((1, True), (16, False)):
        constraints = _load(RATE, interval).constraints
        (little,) = [c for c in constraints if c.name == "arrivals_fit_concurrency"]
        assert bool(little.relation.subs(values)) is fits, interval


def test_closed_loop_saturates_linearly() -> None:
    """Past the knee every added request waits one more occupancy: TTFT grows by s per user."""
    law = _law(None)
    far = np.array([200.0, 300.0])
    p50 = law(far, 4 * 2048, 121, 2048, 1.0)[0]
    assert (p50[1] - p50[0]) / 100 == pytest.approx(4.0, rel=0.01)


def test_serving_metrics_relate_as_the_clients_define_them() -> None:
    m = build_model(SERVING)
    ev = m.evaluate()
    isl, osl = 1000, 1000
    assert ev["output_tokens_per_s_per_gpu"] == ev["tokens_per_s_per_gpu"]
    assert ev["total_tokens_per_s_per_gpu"] == pytest.approx(
        ev["output_tokens_per_s_per_gpu"] * (isl + osl) / osl)  # fmt: skip
    assert ev["pd_total_tokens_per_s_per_gpu"] == pytest.approx(
        ev["pd_tokens_per_s_per_gpu"] * (isl + osl) / osl)  # fmt: skip
    assert ev["tpot_s"] == pytest.approx(1 / ev["tokens_per_s_per_user"])
    assert ev["itl_s"] == ev["step_time_s"]  # no MTP: one token per streamed chunk
    assert ev["e2e_latency_s"] == pytest.approx(ev["ttft_s"] + (osl - 1) * ev["tpot_s"])
    assert ev["ttft_s"] <= ev["ttft_p90_s"] <= ev["ttft_p99_s"]
    # closed loop, Little's law: C requests per replica, each e2e (median ≈ mean here) long
    assert ev["request_rate_per_s"] == pytest.approx(256 / ev["e2e_latency_s"], rel=0.05)


def test_poisson_rate_sets_the_queue() -> None:
    """A prompt holds the replica's prefill at least as long as its prefill alone: the queue's
    p99 grows with the rate, and a rate of two prompts per prefill-alone time (utilisation
    above 1) is infeasible."""
    sets = ["workload.arrival=poisson", "workload.request_rate=5 Hz", "workload.output_tokens=10"]
    model = build_model(SERVING, sets)
    alone = float(model.evaluate()["prefill_s"])
    rates = np.array([0.5, 1.5, 3.0, 2 / alone])
    ev = model.evaluate({"workload.request_rate": rates})
    assert list(ev["request_rate_per_s"]) == list(rates)
    assert np.all(np.diff(ev["ttft_p99_s"][:3]) > 0)
    assert list(ev["constraints"]["prefill_queue_stable"]) == [True, True, True, False]
    assert list(ev["feasible"]) == [True, True, True, False]


def test_poisson_needs_a_rate() -> None:
    with pytest.raises(SpecError, match=r"workload\.request_rate"):
        build_model(SERVING, ["workload.arrival=poisson"])
    with pytest.raises(SpecError, match="applies to arrival"):
        build_model(SERVING, ["workload.request_rate=2 Hz"])


def test_a_prefill_pass_outside_cuda_graphs_takes_at_least_its_host_time() -> None:
    """An engine that prefills eagerly (``engine.prefill_layer_host`` h per decoder layer)
    takes max(GPU time, L·h) for one prompt alone: L·h where the pass is short (a 1K prompt
    of DeepSeek-R1 on 8 H200s at h = 2 ms), the GPU time where it is long (8K). The decode
    step, captured in a CUDA graph, is touched only through the prefill passes interleaved
    with it (`test_interleaved_prefill_passes_take_their_host_time`)."""
    h200 = "specs/scenarios/dsr1-fp8-h200-tp8-sglang-serving.toml"
    h = 2e-3  # s per layer, this test's own

    def run(*sets: str) -> dict[str, Any]:
        return build_model(h200, list(sets)).evaluate()

    m = build_model(h200, [])
    host = m.values[m.parameter("model.n_layers")] * h
    for isl in (1024, 8192):
        eager = run(f"workload.input_tokens={isl}", f"engine.prefill_layer_host={h * 1e3} ms")
        gpu = run(f"workload.input_tokens={isl}", "engine.prefill_layer_host=0 ms")
        assert float(eager["prefill_s"]) == pytest.approx(max(float(gpu["prefill_s"]), host))
        short = isl == 1024  # host-bound at 1K, GPU-bound at 8K
        assert (float(gpu["prefill_s"]) < host) == short
        # the 8K prompts' passes are GPU-bound: the decode step is as without host time
        assert (float(eager["step_time_s"]) == pytest.approx(float(gpu["step_time_s"]))) != short


def test_interleaved_prefill_passes_take_their_host_time() -> None:
    """SGLang prefills in passes of their own between decode iterations, outside CUDA graphs:
    each pass takes max(GPU time, L·h). Once host-bound, the decode step grows by L·h per
    pass per iteration, so its slope in h is passes·L, with passes the interleaved law's
    (1 − e^(−λ))·⌈I/P⌉ for one attention rank and λ = C/OSL prompts per iteration (no MTP);
    where L·h is below the pass's GPU time nothing changes."""
    h200 = "specs/scenarios/dsr1-fp8-h200-tp8-sglang-serving.toml"
    users, isl, osl, chunk = 64, 1024, 1024, 32768  # chunk: the scenario's own
    sets = [f"workload.concurrency={users}", f"workload.input_tokens={isl}",
            f"workload.output_tokens={osl}"]  # fmt: skip
    m = build_model(h200, sets)
    layers = m.values[m.parameter("model.n_layers")]

    def step(h_ms: float) -> float:
        return float(build_model(h200, [*sets, f"engine.prefill_layer_host={h_ms} ms"])
                     .evaluate()["step_time_s"])  # fmt: skip

    passes = (1 - np.exp(-users / osl)) * -(-isl // chunk)
    slope = (step(40.0) - step(20.0)) / 20e-3
    assert slope == pytest.approx(passes * layers, rel=1e-9)
    assert step(1e-6) == pytest.approx(step(0.0), rel=1e-12)
    assert step(20.0) > step(0.0)
