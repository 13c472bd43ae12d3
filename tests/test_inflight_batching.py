"""In-flight batching as a steady state: the busiest attention rank's expected prefill per
iteration (`busiest_rank_prefill`) against a simulation of arrivals, placement and chunking,
its limits, and the serving step built on it."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from stepwall.core.laws import balance_window, busiest_rank_prefill, prefill_iteration_share
from stepwall.model.compose import StepModel, build_model

SERVING = "dsr1-fp4-b200-adp-ep8"  # 3,072 requests on 8 attention ranks, 1K/2K, chunk 1,536
MTP = ["decoding.kind=mtp", "decoding.drafts=1", "decoding.acceptance=0.875",
       "decoding.draft_layers=1"]  # fmt: skip


def law(arrivals: float, prompt: int, chunk: int, ranks: int, sync: bool = False,
        interleaved: bool = False) -> tuple[float, float]:  # fmt: skip
    tokens, passes = busiest_rank_prefill(sp.Float(arrivals), sp.Integer(prompt),
                                          sp.Integer(chunk), sp.Integer(ranks), sync,
                                          interleaved)  # fmt: skip
    return float(tokens), float(passes)


def _deal(
    rng: np.random.Generator, arrivals: float, ranks: int, pointer: int
) -> tuple[np.ndarray, int]:
    """This iteration's Poisson(λ) prompts dealt round-robin from ``pointer``: per rank."""
    new = int(rng.poisson(arrivals))
    to = (pointer + np.arange(new)) % ranks
    return np.bincount(to, minlength=ranks), (pointer + new) % ranks


def simulate_mixed(arrivals: float, prompt: int, chunk: int, ranks: int, sync: bool = False,
                   iterations: int = 8000, seed: int = 0) -> float:  # fmt: skip
    """Mean tokens the busiest rank prefills per iteration (`busiest_per_iteration`)."""
    return float(np.mean(busiest_per_iteration(arrivals, prompt, chunk, ranks, sync,
                                               iterations, seed)))  # fmt: skip


def busiest_per_iteration(arrivals: float, prompt: int, chunk: int, ranks: int,
                          sync: bool = False, iterations: int = 8000,
                          seed: int = 0) -> np.ndarray:  # fmt: skip
    """Tokens the busiest rank prefills in each iteration (after a tenth of them to warm up)
    when each iteration prefills at most ``chunk`` tokens of each rank's backlog: prompts
    dealt round-robin (a pointer kept over iterations) or, synchronised, held until there is
    one for every rank."""
    rng = np.random.default_rng(seed)
    backlog = np.zeros(ranks)
    pointer = waiting = 0
    busiest = []
    for _ in range(iterations):
        if sync:
            waiting += int(rng.poisson(arrivals))
            dealt = waiting // ranks if not backlog.any() else 0
            waiting -= dealt * ranks
            backlog += dealt * prompt
        else:
            counts, pointer = _deal(rng, arrivals, ranks, pointer)
            backlog += counts * prompt
        done = np.minimum(backlog, chunk)
        backlog -= done
        busiest.append(done.max())
    return np.array(busiest[iterations // 10 :])


def simulate_interleaved(arrivals: float, prompt: int, chunk: int, ranks: int,
                         iterations: int = 8000, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Each decode iteration's prompts, dealt round-robin, all prefilled before the next in
    passes of at most ``chunk`` tokens per rank: the busiest rank's tokens, and the passes
    (the busiest rank's chunks, ranks stepping together), per decode iteration."""
    rng = np.random.default_rng(seed)
    pointer, tokens, passes = 0, [], []
    for _ in range(iterations):
        counts, pointer = _deal(rng, arrivals, ranks, pointer)
        work = counts * prompt
        tokens.append(work.max())
        passes.append(np.ceil(work / chunk).max())
    return float(np.mean(tokens)), float(np.mean(passes))


# (prompt, chunk, ranks, load per rank as a share of the chunk): short and long prompts
# against the chunk, one to 72 ranks, light to heavy load
CASES = [
    (1024, 2048, 8, 0.2),
    (1024, 2048, 8, 0.5),
    (1024, 8192, 8, 0.2),
    (1024, 8192, 4, 0.5),
    (128, 8192, 8, 0.05),
    (8192, 2048, 8, 0.2),
    (8192, 8192, 4, 0.2),
    (4096, 2048, 4, 0.5),
    (1024, 2048, 1, 0.5),
    (1024, 2048, 32, 0.1),  # wide EP
    (8192, 2048, 72, 0.2),
    (128, 8192, 72, 0.3),
]


@pytest.mark.parametrize(("prompt", "chunk", "ranks", "load"), CASES)
def test_mixed_busiest_rank_matches_sampling(
    prompt: int, chunk: int, ranks: int, load: float
) -> None:
    arrivals = load * chunk * ranks / prompt
    tokens, passes = law(arrivals, prompt, chunk, ranks)
    assert tokens == pytest.approx(simulate_mixed(arrivals, prompt, chunk, ranks), rel=0.06)
    assert passes == 0  # the chunks ride in decode iterations


def concave_cost(tokens: np.ndarray | float) -> np.ndarray | float:
    """An iteration's time against the prompt tokens it carries, concave as a step's is: a
    fixed part, experts touched that saturate (1 − e^(−x/512)), and compute linear in x."""
    return 1.0 + 2.0 * (1 - np.exp(-np.asarray(tokens) / 512)) + np.asarray(tokens) / 4096


# any arrivals, prompt, chunk, ranks and placement, for the laws' invariants
LOADS = {
    "arrivals": st.floats(1e-3, 50.0),
    "prompt": st.integers(16, 32768),
    "chunk": st.integers(256, 16384),
    "ranks": st.integers(1, 256),
    "sync": st.booleans(),
}

# light loads, where most iterations prefill nothing: a single-rank TP-8 replica at 8 users
# of 8K prompts (one prompt per 128 iterations), and a few attention-DP ones
LIGHT = [(8192, 8192, 1, 0.008), (8192, 8192, 8, 0.01), (1024, 8192, 8, 0.005),
         (2048, 2048, 4, 0.05)]  # fmt: skip


@pytest.mark.parametrize(("prompt", "chunk", "ranks", "load"), CASES + LIGHT)
def test_mixed_iterations_cost_the_sampled_mean(
    prompt: int, chunk: int, ranks: int, load: float
) -> None:
    """The mean iteration, priced as the mixture (1 − f)·T(0) + f·T(B/f) of iterations that
    prefill nothing and iterations that carry the busiest rank's pieces, equals the mean of
    T over sampled iterations, where T(B), every iteration carrying the mean, does not
    wherever most iterations prefill nothing."""
    arrivals = load * chunk * ranks / prompt
    busiest, _ = law(arrivals, prompt, chunk, ranks)
    f = share(busiest, arrivals, prompt, chunk)
    mixture = (1 - f) * concave_cost(0) + f * concave_cost(busiest / f)
    sampled = float(np.mean(concave_cost(busiest_per_iteration(arrivals, prompt, chunk, ranks))))
    assert mixture == pytest.approx(sampled, rel=0.06)
    if f < 0.5:
        assert abs(float(concave_cost(busiest)) - sampled) > 0.1 * sampled


def share(busiest: float, arrivals: float, prompt: int, chunk: int, sync: bool = False) -> float:
    return float(prefill_iteration_share(sp.Float(busiest), sp.Float(arrivals),
                                         sp.Integer(prompt), sp.Integer(chunk), sync))  # fmt: skip


@pytest.mark.parametrize(("prompt", "chunk", "ranks"), [(1024, 2048, 8), (8192, 2048, 8)])
def test_synchronised_iterations_cost_the_sampled_mean(prompt: int, chunk: int, ranks: int) -> None:
    """Held until every rank takes one, the pieces ride together in a share B/g of the
    iterations."""
    arrivals = 0.3 * chunk * ranks / prompt
    busiest, _ = law(arrivals, prompt, chunk, ranks, sync=True)
    f = share(busiest, arrivals, prompt, chunk, sync=True)
    sampled = busiest_per_iteration(arrivals, prompt, chunk, ranks, sync=True, iterations=20_000)
    assert f == pytest.approx(float(np.mean(sampled > 0)), rel=0.05)
    mixture = (1 - f) * concave_cost(0) + f * concave_cost(busiest / f)
    assert mixture == pytest.approx(float(np.mean(concave_cost(sampled))), rel=0.03)


def simulate_balance(arrivals: float, ranks: int, timeout: int, iterations: int = 100_000,
                     seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """TensorRT-LLM's attention-DP balance over full ranks: each rank frees a slot for a new
    prompt as its own requests finish (Poisson, λ/R per iteration); waiting prompts are
    placed together once every rank has one, or once the oldest has waited ``timeout``
    iterations. The prompts placed together and the iterations each waited, on average."""
    rng = np.random.default_rng(seed)
    waiting: list[tuple[int, int]] = []  # (iteration it arrived, its rank)
    waits, placed = [], []
    for it in range(iterations):
        counts = rng.poisson(arrivals / ranks, ranks)
        for r in np.nonzero(counts)[0]:
            waiting += [(it, int(r))] * int(counts[r])
        covered = len({r for _, r in waiting}) == ranks
        if waiting and (covered or it - waiting[0][0] >= timeout):
            waits += [it - a for a, _ in waiting]
            placed.append(len(waiting))
            waiting = []
    return float(np.mean(placed)), float(np.mean(waits))


# (λ per iteration, ranks, timeout): InferenceX's H200 recipe at 64 and 256 users (8K/1K,
# timeout 60), light and heavy loads, wide attention-DP
BALANCE = [(0.0625, 8, 60), (0.47, 8, 60), (0.02, 8, 50), (0.5, 4, 50), (2.0, 8, 50),
           (0.1, 32, 60)]  # fmt: skip


@pytest.mark.parametrize(("arrivals", "ranks", "timeout"), BALANCE)
def test_balance_window_matches_simulation(arrivals: float, ranks: int, timeout: int) -> None:
    """The prompts a balanced window places together and their mean wait, within 10% of
    the simulated scheduler (R ≥ 4: the last of the other ranks' first completions is then
    concentrated near its mean; at R = 2 it is one exponential and the law runs high)."""
    n, wait = (float(x) for x in balance_window(sp.Float(arrivals), sp.Integer(ranks),
                                                sp.Integer(timeout)))  # fmt: skip
    sampled_n, sampled_wait = simulate_balance(arrivals, ranks, timeout)
    assert n == pytest.approx(sampled_n, rel=0.1)
    assert wait == pytest.approx(sampled_wait, rel=0.1)


def test_a_balanced_window_never_outwaits_its_timeout() -> None:
    """Rare prompts wait the timeout, one placed at a time; the mean wait never exceeds it."""
    n, wait = (float(x) for x in balance_window(sp.Float(1e-6), sp.Integer(8), sp.Integer(60)))
    assert n == pytest.approx(1, abs=1e-3) and wait == pytest.approx(60, rel=1e-3)
    for lam in (0.01, 0.1, 1.0, 10.0):
        assert 0 < float(balance_window(sp.Float(lam), sp.Integer(8), sp.Integer(60))[1]) <= 60


def test_a_balanced_serving_step_holds_prompts() -> None:
    """Synchronised with a timeout, prompts reach their prefill later (TTFT grows by the
    balance wait) and the ranks prefill together (the step is cheaper than round-robin's)."""
    rr = serving("workload.output_tokens=65536")
    sync = serving("workload.output_tokens=65536", "engine.prefill_placement=synchronised",
                   "engine.balance_timeout=60")  # fmt: skip
    a, b = rr.evaluate(), sync.evaluate()
    assert float(b["step_time_s"]) < float(a["step_time_s"])
    wait = float(sync.substituted(sync.steps[0].admission_wait))
    assert 0 < wait <= 60
    assert float(b["ttft_s"]) > float(a["ttft_s"])


@given(**LOADS)
def test_prefill_share_is_a_share(
    arrivals: float, prompt: int, chunk: int, ranks: int, sync: bool
) -> None:
    """0 < f ≤ 1, and an iteration that carries prompt tokens carries at most a chunk."""
    busiest, _ = law(arrivals, prompt, chunk, ranks, sync)
    f = share(busiest, arrivals, prompt, chunk, sync)
    assert 0 < f <= 1
    assert busiest / f <= chunk * (1 + 1e-9)


@pytest.mark.parametrize(("prompt", "chunk", "ranks", "load"), CASES)
def test_interleaved_busiest_rank_matches_sampling(
    prompt: int, chunk: int, ranks: int, load: float
) -> None:
    arrivals = load * chunk * ranks / prompt
    tokens, passes = law(arrivals, prompt, chunk, ranks, interleaved=True)
    sampled, sampled_passes = simulate_interleaved(arrivals, prompt, chunk, ranks)
    assert tokens == pytest.approx(sampled, rel=0.06)
    assert passes == pytest.approx(sampled_passes, rel=0.15)


def interleaved_per_iteration(arrivals: float, prompt: int, ranks: int,
                              iterations: int = 2_000_000) -> np.ndarray:  # fmt: skip
    """The busiest rank's prompt tokens in the passes that follow each decode iteration:
    k ~ Poisson(λ) prompts dealt round-robin put ⌈k/R⌉ of them on the busiest rank."""
    k = np.random.default_rng(0).poisson(arrivals, iterations)
    return prompt * np.ceil(k / ranks)


# (prompt, chunk, ranks, arrivals per iteration): light loads, where most decode iterations
# are followed by no pass, up to one prompt in two iterations
INTERLEAVED_LIGHT = [(8192, 8192, 1, 4 / 1024), (1024, 8192, 8, 64 / 1024),
                     (8192, 32768, 8, 16 / 1024), (1024, 2048, 4, 0.5)]  # fmt: skip


@pytest.mark.parametrize(("prompt", "chunk", "ranks", "arrivals"), INTERLEAVED_LIGHT)
def test_interleaved_passes_cost_the_sampled_mean(
    prompt: int, chunk: int, ranks: int, arrivals: float
) -> None:
    """An interleaving engine's own passes follow a share f = min(1, passes) of the decode
    iterations and carry B/f prompt tokens each, so their mean cost is f·g(B/f) for a
    concave g of a pass's tokens: the sampled mean, where g(B) in every iteration, a sliver
    of a prompt after each, is off by far more."""
    tokens, passes = law(arrivals, prompt, chunk, ranks, interleaved=True)
    f = min(1.0, passes)
    g = lambda x: concave_cost(x) - concave_cost(0)  # noqa: E731 - a pass's own cost
    mixture = f * g(tokens / f)
    sampled = float(np.mean(g(interleaved_per_iteration(arrivals, prompt, ranks))))
    assert mixture == pytest.approx(sampled, rel=0.06)
    assert abs(float(g(tokens)) - sampled) > 0.3 * sampled


def test_a_rare_interleaved_prompt_costs_its_pass_once() -> None:
    """DeepSeek-R1 FP8 on an H200 node with SGLang (TP-8, prefill in passes of its own) at 4
    users of 8K prompts and 1K answers: a prompt arrives every OSL/C = 256 decode
    iterations, and the mean iteration pays its pass once over them, the prefill alone's
    time × C/OSL more than an iteration that decodes only (not 32 prompt tokens in every
    iteration, which would touch most of the experts each time)."""
    users, isl, osl, chunk = 4, 8192, 1024, 8192
    base = ["hardware=h200", "cluster=hgx-h200-ib", "engine=sglang",
            f"workload.concurrency={users}", f"workload.input_tokens={isl}",
            f"workload.output_tokens={osl}", f"engine.prefill_chunk={chunk}"]  # fmt: skip
    arrivals = users / osl  # prompts per decode iteration
    m = build_model("dsr1-fp8-mi300x-tp8-serving", base)
    share = max(1 - math.exp(-arrivals), arrivals * isl / chunk)  # passes per iteration
    assert _value(m, m.steps[0].prefill_share) == pytest.approx(share)
    # the same users decoding at the serving step's mean context, ISL + OSL/2, no prompts
    decode_only = build_model("dsr1-fp8-mi300x-tp8-serving",
                              [*base, "workload.kind=decode",
                               f"workload.context={isl + osl // 2}"])  # fmt: skip
    t, t0 = (float(x.evaluate()["step_time_s"]) for x in (m, decode_only))
    alone = float(m.evaluate()["prefill_s"])  # the 8K prompt's pass
    assert t - t0 == pytest.approx(alone * arrivals, rel=0.1)


@pytest.mark.parametrize(("prompt", "chunk", "ranks"), [(1024, 2048, 8), (8192, 2048, 8)])
def test_synchronised_ranks_prefill_the_mean(prompt: int, chunk: int, ranks: int) -> None:
    """Held until every rank takes one (TensorRT-LLM's attention-DP balance), the busiest
    rank prefills the mean, λ·I/R, below round-robin's busiest."""
    arrivals = 0.3 * chunk * ranks / prompt
    tokens, _ = law(arrivals, prompt, chunk, ranks, sync=True)
    sampled = simulate_mixed(arrivals, prompt, chunk, ranks, sync=True, iterations=20_000)
    assert tokens == pytest.approx(sampled, rel=0.03)
    assert tokens < law(arrivals, prompt, chunk, ranks)[0]


def test_one_rank_prefills_every_prompt_token() -> None:
    for arrivals, prompt in ((0.1, 1024), (1.5, 1024), (0.2, 8192)):
        for interleaved in (False, True):
            tokens, _ = law(arrivals, prompt, 2048, 1, interleaved=interleaved)
            assert tokens == pytest.approx(arrivals * prompt)


def test_few_arrivals_cost_a_whole_prompt_each() -> None:
    """Rare prompts land alone on one rank: the busiest rank takes ≈ I per arrival, in
    ⌈I/P⌉ passes of its own when interleaved."""
    for ranks in (4, 8, 64):
        assert law(1e-4, 1024, 8192, ranks)[0] / 1e-4 == pytest.approx(1024, rel=1e-3)
        tokens, passes = law(1e-4, 8192, 2048, ranks, interleaved=True)
        assert (tokens / 1e-4, passes / 1e-4) == pytest.approx((8192, 4), rel=1e-3)


@given(**LOADS, interleaved=st.booleans())
def test_between_the_mean_and_all(
    arrivals: float, prompt: int, chunk: int, ranks: int, sync: bool, interleaved: bool
) -> None:
    """The busiest rank takes at least the mean and at most every token (mixed: at most a
    chunk, in no pass of its own); more arrivals never lower it."""
    tokens, passes = law(arrivals, prompt, chunk, ranks, sync, interleaved)
    mean, cap = arrivals * prompt / ranks, (math.inf if interleaved else chunk)
    assert min(mean, cap) * (1 - 1e-9) <= tokens <= min(arrivals * prompt, cap) * (1 + 1e-9)
    assert (passes > 0) == interleaved
    more = law(arrivals * 1.5, prompt, chunk, ranks, sync, interleaved)
    assert more[0] >= tokens * (1 - 1e-9) and more[1] >= passes * (1 - 1e-9)


@functools.cache
def serving(*sets: str) -> StepModel:
    """The serving scenario with ``sets``, built once per module."""
    return build_model(SERVING, list(sets))


def _value(model: StepModel, expr: sp.Expr) -> float:
    return float(model.substituted(expr))


def test_serving_step_no_longer_pays_a_full_chunk() -> None:
    """At 3,072 requests on 8 ranks (1K/2K), 1.5 prompts finish per iteration: 1,536 prompt
    tokens for the replica's experts, 192 per rank on average; the busiest rank's expected
    share stays well under the 1,536-token chunk."""
    m = serving()
    step = m.steps[0]
    assert _value(m, step.prefill_tokens) == pytest.approx(3072 / 2048 * 1024)
    busiest = _value(m, step.prefill_tokens_rank)
    assert 192 < busiest < 0.6 * 1536
    full = serving("engine.prefill_placement=synchronised")
    assert float(full.evaluate()["step_time_s"]) < float(m.evaluate()["step_time_s"])


def test_decode_tokens_come_first_in_a_mixed_budget() -> None:
    """At OSL = 384, 8 prompts finish per iteration, about 1.4 on the busiest rank: more
    than the 1,536 − 384 = 1,152 tokens the budget leaves after the rank's decode tokens."""
    m = serving("workload.output_tokens=384")
    assert _value(m, m.steps[0].prefill_tokens_rank) == pytest.approx(1536 - 3072 / 8)


def test_interleaved_prefill_stalls_decode() -> None:
    """An engine that prefills in passes of its own makes decode users wait for them."""
    mixed = serving()
    interleaved = serving("engine.prefill_schedule=interleaved")
    own = [o for o in interleaved.workload.ops if o.name == "prefill.own_passes"]
    assert len(own) == 1 and not any(o.name == "prefill.own_passes" for o in mixed.workload.ops)
    tpot = {k: 1 / float(v.evaluate()["tokens_per_s_per_user"])
            for k, v in (("mixed", mixed), ("interleaved", interleaved))}  # fmt: skip
    assert tpot["interleaved"] > tpot["mixed"] * 1.02


def test_mtp_steps_bring_more_prompts_and_drafts_do_not_prefill() -> None:
    """τ tokens per user per iteration finish requests τ times as fast."""
    m = serving(*MTP)
    tau = 1 + 0.875  # one draft accepted with probability a
    assert _value(m, m.steps[0].prefill_tokens) == pytest.approx(3072 * tau / 2048 * 1024)
    # each draft pass runs the users of a rank, one token each (its grouped GEMMs: their
    # tokens per expert), never a prompt's
    drafts = [o for o in m.workload.ops if o.name.startswith("draft.") and o.rows != 0
              and o.kind != "grouped_gemm"]  # fmt: skip
    assert drafts and all(_value(m, o.rows) == 3072 / 8 for o in drafts)


def _violated(sets: list[str]) -> set[str]:
    return {v.constraint.name for v in serving(*sets).violations()}


def test_a_rank_that_cannot_keep_up_is_refused() -> None:
    """384 decode tokens per rank and 3,072 requests of 1,024 prompt tokens finishing every
    OSL/τ iterations, through TensorRT-LLM's 1,536-token budget per iteration: OSL = 256
    leaves 384 + 1,536 tokens per rank, OSL = 384 exactly 384 + 1,024 + 128 spare."""
    assert "prefill_keeps_up" not in _violated([])
    assert "prefill_keeps_up" in _violated(["workload.output_tokens=256"])
    assert "prefill_keeps_up" not in _violated(["workload.output_tokens=384"])
    # OSL = 768: 384 + 512 tokens per rank; with MTP 768 verify tokens + 1.875 × 512 > 1,536
    assert "prefill_keeps_up" not in _violated(["workload.output_tokens=768"])
    assert "prefill_keeps_up" in _violated(["workload.output_tokens=768", *MTP])
    interleaved = ["workload.output_tokens=256", "engine.prefill_schedule=interleaved"]
    assert "prefill_keeps_up" not in _violated(interleaved)  # it runs passes of its own


def test_a_rare_prompt_costs_its_prefill_once() -> None:
    """Kimi K2.6 INT4 on one TP-8 H200 replica at 8 users of 8K prompts and 1K answers: a
    prompt arrives every 128 iterations, in a budget of 8,192 − 8 decode tokens (f = its 64
    prompt tokens per iteration over that budget, above 1 − e^(−64/8184)), and the mean
    iteration pays its 8K-token pass once over them, the prefill alone's time ÷ 128 more
    than an iteration that decodes only, where one iteration pricing 64 prompt tokens would
    touch most of the 384 experts every time."""
    base = ["workload.concurrency=8"]
    m = build_model("k25-int4-h200-tp8-vllm", base)
    assert _value(m, m.steps[0].prefill_share) == pytest.approx(8 / 1024 * 8192 / 8184, rel=1e-6)
    decode_only = build_model("k25-int4-h200-tp8-vllm", [*base, "workload.input_tokens=1"])
    t, t0 = (float(x.evaluate()["step_time_s"]) for x in (m, decode_only))
    chunk = float(m.evaluate()["prefill_s"])  # the 8K prompt's pass, alone
    assert t - t0 == pytest.approx(chunk / 128, rel=0.35)
