"""Speculative decoding at batch: τ(n) of a chain with per-position acceptance against a Monte
Carlo of the chain, the engine's draft limit under load, the draft passes' work at batch, and
a search over draft counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sympy as sp

from stepwall.apps.search import plan_search
from stepwall.core.errors import PluginError, SpecError
from stepwall.core.laws import chain_accepted
from stepwall.core.symbols import parameter
from stepwall.core.units import DIMENSIONLESS
from stepwall.model.compose import build_model

MTP = "dsv3-b200-tp8-mtp"
INLINE = "model=deepseek-v3-fp8,hardware=b200,cluster=hgx-b200-ib,engine=trtllm"
# one MTP draft module priced on the GPU, a fixed first-draft acceptance and decay
CHAIN = ["decoding.acceptance=0.8", "decoding.acceptance_decay=0.7"]


def simulated_tau(a: float, d: float, n: int, steps: int, seed: int) -> tuple[float, float]:
    """Mean tokens per step of a simulated chain, and its standard error: the target's own
    token, then drafts i = 1..n checked in order, each accepted with probability a·d^(i−1),
    the first rejection ending the step."""
    rng = np.random.default_rng(seed)
    accept = rng.random((steps, n)) < a * d ** np.arange(n)
    run = np.cumprod(accept, axis=1).sum(axis=1)  # drafts accepted before the first miss
    tokens = 1 + run
    return float(tokens.mean()), float(tokens.std() / np.sqrt(steps))


@pytest.mark.parametrize(
    ("a", "d", "n"), [(0.9, 1.0, 3), (0.875, 0.75, 3), (0.6, 0.5, 2), (0.95, 0.9, 5), (0.7, 0.8, 1)]
)
def test_chain_tau_matches_a_simulated_chain(a: float, d: float, n: int) -> None:
    mean, err = simulated_tau(a, d, n, 200_000, seed=22 + n)
    assert float(chain_accepted(a, n, d)) == pytest.approx(mean, abs=5 * err + 1e-9)


def test_decay_lowers_later_drafts_only() -> None:
    """The first draft's acceptance is a itself whatever the decay: τ(1) = 1 + a."""
    assert float(chain_accepted(0.8, 1, 0.3)) == pytest.approx(1.8)
    assert float(chain_accepted(0.8, 3, 0.3)) < float(chain_accepted(0.8, 3, 1.0))


def test_a_symbolic_draft_count_with_a_decay_is_refused() -> None:
    a = parameter("decoding.acceptance", DIMENSIONLESS)
    n = parameter("decoding.drafts", DIMENSIONLESS)
    with pytest.raises(PluginError, match="whole-number draft count"):
        chain_accepted(a, n, sp.Rational(1, 2))


def _at(model: Any, users: float) -> dict[str, Any]:
    return model.evaluate({"workload.concurrency": users})


def _tau_m(model: Any, ev: dict[str, Any]) -> tuple[float, float]:
    """(τ, M) of an evaluated step: tokens each user gets per step, and the verify width of
    the model's decoding at those users."""
    users = float(ev["tokens_per_s"]) / float(ev["tokens_per_s_per_user"])
    tau = float(ev["tokens_per_s_per_user"]) * float(ev["step_time_s"])
    verify = float(model.substituted(model.decoding.verify_tokens.subs(
        model.parameter("workload.concurrency"), users)))  # fmt: skip
    return tau, verify


@pytest.mark.parametrize("limit", [0, 1])
def test_engine_limits_drafts_above_its_batch(limit: int) -> None:
    """At most 4 users per rank the step verifies 3 drafts at τ(3); above it, min(3, limit)
    at that count's own τ, both from the chain's definition (the simulated chain)."""
    sets = [*CHAIN, "decoding.drafts=3", "engine.draft_limit_batch=4",
            f"engine.draft_limit={limit}"]  # fmt: skip
    m = build_model(MTP, sets)
    for users, drafts in ((1, 3), (4, 3), (5, limit), (64, limit)):
        ev = _at(m, users)
        tau, verify = _tau_m(m, ev)
        mean, err = simulated_tau(0.8, 0.7, drafts, 100_000, seed=users) if drafts else (1, 0)
        assert verify == 1 + drafts
        assert tau == pytest.approx(mean, abs=5 * err + 1e-9)
        draft_bytes = float(ev["ops"]["draft.experts"]["bytes"])
        assert (draft_bytes == 0) == (drafts == 0)


def test_draft_work_scales_with_the_drafts_the_engine_keeps() -> None:
    """The draft module runs once per verified draft: its bytes above the limit are the
    limit's share of those below it (same users)."""
    m = build_model(MTP, [*CHAIN, "decoding.drafts=3", "engine.draft_limit_batch=4",
                          "engine.draft_limit=1"])  # fmt: skip
    free = build_model(MTP, [*CHAIN, "decoding.drafts=3"])
    limited, full = _at(m, 8), _at(free, 8)
    for op in ("draft.attention", "draft.lm_head", "draft.experts"):
        assert float(limited["ops"][op]["bytes"]) == pytest.approx(
            float(full["ops"][op]["bytes"]) / 3
        )


def test_no_limit_is_every_engine_default() -> None:
    m = build_model(MTP, [*CHAIN, "decoding.drafts=3"])
    assert not any(isinstance(e, sp.Piecewise) for e in sp.preorder_traversal(
        m.decoding.accepted_tokens))  # fmt: skip
    tau, verify = _tau_m(m, _at(m, 512))
    mean, err = simulated_tau(0.8, 0.7, 3, 100_000, seed=512)
    assert verify == 4 and tau == pytest.approx(mean, abs=5 * err)


def test_measured_tau_holds_only_at_its_draft_count() -> None:
    """A measured τ with no acceptance: speculation off above the limit gives τ = 1 there;
    a limit to another nonzero count has no τ to use and is refused."""
    base = ["decoding.drafts=3", "decoding.accepted_tokens=2.8", "engine.draft_limit_batch=8"]
    m = build_model("dsr1-fp4-b200-tp8-minlat", ['decoding.kind="mtp"', *base,
                                                  "engine.draft_limit=0"])  # fmt: skip
    assert _tau_m(m, _at(m, 8))[0] == pytest.approx(2.8)
    assert _tau_m(m, _at(m, 9)) == (pytest.approx(1.0), 1.0)
    with pytest.raises(SpecError, match="measured at 3 drafts"):
        build_model("dsr1-fp4-b200-tp8-minlat", ['decoding.kind="mtp"', *base,
                                                 "engine.draft_limit=1"])  # fmt: skip


@pytest.mark.parametrize("ep", [1, 8])
def test_a_draft_pass_hits_the_experts_a_target_layer_does(ep: int) -> None:
    """One draft pass routes the replica's C users, one token each, through one MoE layer:
    the same expert bytes and FLOPs per GPU as one of the target's MoE layers in an
    autoregressive step of the same users and layout."""
    lay = [f"parallel.tp={8 // ep}", f"parallel.ep={ep}", "workload.concurrency=256",
           "workload.context=8192"]  # fmt: skip
    draft = build_model(INLINE, [*lay, 'decoding.kind="mtp"', "decoding.drafts=1",
                                 "decoding.acceptance=0.8", "decoding.draft_layers=1"])  # fmt: skip
    plain = build_model(INLINE, lay)
    d_ev, p_ev = draft.evaluate(), plain.evaluate()
    n_moe = draft.scenario.value("model.n_layers") - draft.scenario.value("model.n_dense_layers")
    for field in ("bytes", "flops"):
        per_layer = float(p_ev["ops"]["moe.routed_experts"][field]) / n_moe
        assert float(d_ev["ops"]["draft.experts"][field]) == pytest.approx(per_layer, rel=1e-9)


def _plan(**kw: Any) -> Any:
    return plan_search("deepseek-v3-fp8", ["b200"], ["hgx-b200-ib"], gpus=[8], batch=[1, 64],
                       engines=["trtllm"], decoding=("mtp",), **kw)  # fmt: skip


def test_search_tries_one_to_three_drafts_each_at_its_own_tau() -> None:
    plan = _plan(sets=["decoding.acceptance=0.8", "decoding.acceptance_decay=0.7",
                       "decoding.draft_layers=1"])  # fmt: skip
    assert sorted(v.pinned["decoding.drafts"] for v in plan.variants) == [1, 2, 3]
    for v in plan.variants:
        n = int(v.pinned["decoding.drafts"])
        ev = v.numeric.evaluate(dict(v.values))
        tau = float(ev["tokens_per_s_per_user"]) * float(ev["step_time_s"])
        mean, err = simulated_tau(0.8, 0.7, n, 100_000, seed=n)
        assert tau == pytest.approx(mean, abs=5 * err + 1e-9)


def test_search_keeps_the_drafts_it_is_given() -> None:
    plan = _plan(sets=["decoding.acceptance=0.8", "decoding.drafts=2"])
    assert [v.pinned for v in plan.variants] == [{}]
    plan = _plan(sets=["decoding.acceptance=0.8"], vary=[("decoding.drafts", [1, 4])])
    assert sorted(v.pinned["decoding.drafts"] for v in plan.variants) == [1, 4]


def test_search_refuses_a_measured_tau_over_varied_drafts() -> None:
    with pytest.raises(SpecError, match="measured τ at one draft count"):
        _plan(sets=["decoding.accepted_tokens=2.5"], vary=[("decoding.drafts", [1, 2])])


def test_other_drafts_than_a_measured_tau_was_stated_at_are_refused(tmp_path: Any) -> None:
    spec = tmp_path / "measured.toml"
    spec.write_text('name = "measured"\nfrom = "dsr1-fp4-b200-tp8-minlat"\n[decoding]\n'
                    'kind = "mtp"\ndrafts = 1\naccepted_tokens = 1.92\n')  # fmt: skip
    assert _tau_m(build_model(spec), build_model(spec).evaluate()) == (pytest.approx(1.92), 2.0)
    with pytest.raises(SpecError, match="was measured at the drafts stated there"):
        build_model(spec, ["decoding.drafts=3"])
