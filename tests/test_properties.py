"""Laws every model must obey, checked with hypothesis over the parameters (DESIGN.md,
"Testing"): more bandwidth is never slower, more overhead never faster, TP=1 has no
all-reduce, and every term is a time. Each model is built once per module."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepwall.core import symbols
from stepwall.core.units import FREQUENCY, INFORMATION, TIME
from stepwall.model.compose import build_model

SCENARIOS = ("k26-b300-tp8-ddtree", "k26-b300-tp1-moe")


@pytest.fixture(scope="module")
def models():
    return {name: build_model(name) for name in SCENARIOS}


@pytest.fixture(scope="module")
def tp8(models):
    return models["k26-b300-tp8-ddtree"]


@pytest.fixture(scope="module")
def tp1(models):
    return models["k26-b300-tp1-moe"]


def t_of(model, overrides: dict) -> float:
    return float(model.evaluate(overrides)["step_time_s"])


bandwidths = st.floats(min_value=1e11, max_value=1e14)  # 0.1 to 100 TB/s
times = st.floats(min_value=0.0, max_value=0.1)  # 0 to 100 ms
users = st.integers(min_value=1, max_value=256)
settings_ = settings(max_examples=60, deadline=None)


@settings_
@given(bandwidths, bandwidths, users)
def test_more_hbm_bandwidth_is_never_slower(models, b1, b2, c) -> None:
    lo, hi = sorted((b1, b2))
    for model in models.values():
        base = {"workload.concurrency": c}
        slow = t_of(model, {**base, "hardware.hbm_bandwidth": lo})
        fast = t_of(model, {**base, "hardware.hbm_bandwidth": hi})
        assert fast <= slow * (1 + 1e-12)


@settings_
@given(bandwidths, bandwidths)
def test_more_interconnect_bandwidth_is_never_slower(tp8, b1, b2) -> None:
    lo, hi = sorted((b1, b2))
    key = "cluster.scale_up.bus_bandwidth"
    assert t_of(tp8, {key: hi}) <= t_of(tp8, {key: lo}) * (1 + 1e-12)


@settings_
@given(times, times, bandwidths)
def test_more_fixed_overhead_is_never_faster(models, o1, o2, b) -> None:
    lo, hi = sorted((o1, o2))
    for model in models.values():
        base = {"hardware.hbm_bandwidth": b}
        cheap = t_of(model, {**base, "engine.per_step": lo})
        dear = t_of(model, {**base, "engine.per_step": hi})
        assert dear >= cheap * (1 - 1e-12)
        # and by exactly the added overhead (times the engine factor, 1 in these scenarios)
        native = float(model.values[model.parameter("engine.native")])
        assert dear - cheap == pytest.approx((hi - lo) * native, rel=1e-9, abs=1e-15)


@settings_
@given(bandwidths, users, st.floats(min_value=1.0, max_value=131072.0))
def test_tp1_has_no_allreduce_time(models, b, c, context) -> None:
    overrides = {
        "hardware.hbm_bandwidth": b,
        "workload.concurrency": c,
        "workload.context": context,
        "parallel.tp": 1,
    }
    for model in models.values():
        out = model.evaluate(overrides)
        assert float(out["terms"]["comm.tp_allreduce"]) == 0.0


def test_tp1_scenario_is_one_device(tp1) -> None:
    out = tp1.evaluate()
    assert float(out["terms"]["comm.tp_allreduce"]) == 0.0
    assert round(float(out["gpus"])) == 1
    assert float(out["tokens_per_s_per_gpu"]) == pytest.approx(float(out["tokens_per_s"]))


def test_vectorized_sweep_is_monotone(tp8) -> None:
    bw = np.geomspace(1e11, 1e14, 64)
    t = np.asarray(tp8.evaluate({"hardware.hbm_bandwidth": bw})["step_time_s"])
    assert t.shape == bw.shape
    assert np.all(np.diff(t) <= 1e-15)


def test_every_term_has_dimension_time(models) -> None:
    for model in models.values():
        assert model.terms
        for term in model.terms:
            assert symbols.dim(term.expr) == TIME, term.name
        assert symbols.dim(model.step_time) == TIME
        assert symbols.dim(model.metrics["tokens_per_s_per_user"]) == FREQUENCY
        assert symbols.dim(model.metrics["tokens_per_s"]) == FREQUENCY
        assert symbols.dim(model.metrics["memory_bytes_per_gpu"]) == INFORMATION
        assert symbols.dim(model.metrics["memory_capacity_per_gpu"]) == INFORMATION


def test_every_term_is_non_negative(models) -> None:
    for model in models.values():
        for name, seconds in model.evaluate()["terms"].items():
            assert float(seconds) >= 0.0, name
