"""Decoding laws: verify width, accepted tokens, and a held-out check against a measurement."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from stepwall.core.laws import chain_accepted, tree_accepted
from stepwall.core.symbols import parameter
from stepwall.core.units import DIMENSIONLESS
from stepwall.model.compose import build_model


def test_mtp_chain_matches_measured_mtp1_held_out() -> None:
    """V3's reported 85-90% second-token acceptance, through the chain law, against the
    measured 1.92 accepted tokens per step of R1 MTP1 on 8xB200 (TensorRT-LLM blog 1)."""
    m = build_model("dsv3-b200-tp8-mtp")
    assert float(m.substituted(m.decoding.verify_tokens)) == 2
    for a in (0.85, 0.90):
        tau = float(m.substituted(m.decoding.accepted_tokens.subs(
            m.scenario.params.decoding.acceptance, a)))  # fmt: skip
        assert tau == pytest.approx(1.92, rel=0.04)


def test_given_tau_overrides_the_acceptance_model() -> None:
    m = build_model("k26-b300-tp8-ddtree")
    assert m.decoding.accepted_tokens == m.scenario.params.decoding.accepted_tokens


def test_tree_with_one_candidate_per_level_is_the_chain() -> None:
    a = parameter("decoding.acceptance", DIMENSIONLESS)
    for depth in (1, 4, 16):
        assert sp.expand(tree_accepted(a, depth, depth) - chain_accepted(a, depth)) == 0


def test_tree_law_is_used_when_tau_is_not_measured() -> None:
    m = build_model("k26-b300-tp8-ddtree")
    d = m.scenario.params.decoding
    assert d.accepted_tokens in m.decoding.accepted_tokens.free_symbols
    assert m.decoding.verify_tokens == d.budget + 1


@given(st.floats(0.05, 0.999), st.integers(1, 256), st.integers(1, 16))
def test_tree_tau_grows_with_budget_and_is_bounded(a: float, budget: int, depth: int) -> None:
    small = float(tree_accepted(a, budget, depth))
    large = float(tree_accepted(a, budget + 1, depth))
    assert 1 <= small <= large <= depth + 1 + 1e-9
    assert small < float("inf")


@given(st.floats(0.0, 0.99), st.integers(0, 10))
def test_chain_tau_is_the_geometric_sum(a: float, n: int) -> None:
    assert float(chain_accepted(a, n)) == pytest.approx(sum(a**i for i in range(n + 1)))
