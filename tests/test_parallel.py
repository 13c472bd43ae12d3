"""`stepwall.numeric.parallel.Jobs`: results in order whoever computed them, errors raised by the
caller, the same values with and without the helper process."""

from __future__ import annotations

import os
import time

import pytest
import sympy as sp

from stepwall.numeric.parallel import Jobs


def _jobs(n: int) -> list:
    def job(k: int):
        def run():
            time.sleep(0.01 * (k % 3))  # uneven, so the two processes interleave
            return {"k": k, "square": k * k, "pid": os.getpid()}

        return run

    return [job(k) for k in range(n)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_helper_takes_jobs_from_the_back_and_results_come_in_order() -> None:
    with Jobs(_jobs(12), helper=True) as work:
        got = [work.result(k) for k in range(12)]
    assert [g["square"] for g in got] == [k * k for k in range(12)]
    helper = {g["pid"] for g in got} - {os.getpid()}
    assert len(helper) == 1, "one helper process computed some of the jobs"
    ran_there = [g["k"] for g in got if g["pid"] != os.getpid()]
    assert ran_there == list(range(min(ran_there), 12)), "the helper's jobs are the last ones"


@pytest.mark.parametrize("helper", [True, False])
def test_an_error_is_raised_by_the_caller(helper: bool) -> None:
    def bad() -> None:
        raise ValueError("no such key")

    with Jobs([lambda: 1, bad, lambda: 3], helper=helper) as work:
        assert work.result(0) == 1
        with pytest.raises(ValueError, match="no such key"):
            work.result(1)
        assert work.result(2) == 3


@pytest.mark.parametrize("helper", [True, False])
def test_a_result_that_does_not_pickle_is_computed_by_the_caller(helper: bool) -> None:
    jobs = [lambda: 0, lambda: lambda: "made here"]
    with Jobs(jobs, helper=helper) as work:
        assert work.result(0) == 0
        assert work.result(1)() == "made here"


def test_results_pass_through_pickle_either_way() -> None:
    """What the caller gets does not depend on where the job ran: a sympy result is the
    unpickled one in both cases (equal, and printed the same)."""
    x = sp.Symbol("x", positive=True)
    e = sp.Max(x, 2 * x + 1, evaluate=False) / 3
    outs = []
    for helper in (True, False):
        with Jobs([lambda: [e, 1.5], lambda: e], helper=helper) as work:
            outs.append((work.result(0), work.result(1)))
    (a0, a1), (b0, b1) = outs
    assert a0 == b0 and a1 == b1 and str(a1) == str(b1)


def test_no_fork_environment_keeps_jobs_here(monkeypatch) -> None:
    monkeypatch.setenv("STEPWALL_NO_FORK", "1")
    with Jobs(_jobs(4)) as work:
        assert work.pid == 0
        assert {work.result(k)["pid"] for k in range(4)} == {os.getpid()}
