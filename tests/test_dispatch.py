"""Expert dispatch as the engines' kernels send it: the distinct-ranks, reach and
distinct-nodes laws against a Monte Carlo of top-k routing, and per-expert against per-rank
bytes in a built model."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from stepwall import testing
from stepwall.core.laws import destination_nodes, destination_ranks, rank_reach
from stepwall.core.symbols import parameter
from stepwall.core.units import DIMENSIONLESS

E, K, TOKENS = 256, 8, 20_000


def _top_k(rng: np.random.Generator, tokens: int, pool: int, k: int) -> np.ndarray:
    """k of ``pool`` items per token, uniformly without replacement."""
    return np.argsort(rng.random((tokens, pool)), axis=1)[:, :k]


def _distinct(owners: np.ndarray) -> np.ndarray:
    """Distinct values per row."""
    s = np.sort(owners, axis=1)
    return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)


def _within(sample: np.ndarray, law: float) -> None:
    """The law lies within 4 standard errors of the sample mean."""
    assert abs(sample.mean() - law) <= 4 * sample.std() / np.sqrt(sample.size) + 1e-12


def _n(v: float) -> sp.Expr:
    return sp.Integer(int(v))


@pytest.mark.parametrize("ranks", [4, 8, 16, 32, 64])
def test_distinct_ranks_match_sampled_routing(ranks: int) -> None:
    rng = np.random.default_rng(ranks)
    picks = _top_k(rng, TOKENS, E, K)
    owner = picks // (E // ranks)
    _within(_distinct(owner), float(destination_ranks(_n(E), K, _n(ranks))))


@pytest.mark.parametrize("ranks", [2, 8, 32])
def test_local_copy_is_off_the_wire(ranks: int) -> None:
    """The sender's own rank (uniform over the ranks) receives nothing over the wire: the
    remote destinations are (R − 1)·reach at T = 1, i.e. (R − 1)/R of the distinct ranks."""
    rng = np.random.default_rng(100 + ranks)
    owner = _top_k(rng, TOKENS, E, K) // (E // ranks)
    sender = rng.integers(0, ranks, TOKENS)
    remote = np.array([len(set(row) - {s}) for row, s in zip(owner, sender, strict=True)])
    law = (ranks - 1) * float(rank_reach(_n(E), K, _n(ranks), sp.Integer(1)))
    _within(remote, law)
    distinct = float(destination_ranks(_n(E), K, _n(ranks)))
    assert law == pytest.approx((ranks - 1) / ranks * distinct)


@pytest.mark.parametrize(("ranks", "tokens"), [(16, 1), (16, 4), (64, 16)])
def test_reach_is_the_share_of_peers_messaged(ranks: int, tokens: int) -> None:
    """A sender's T tokens message a share of its R − 1 peers (experts as whole ranks)."""
    rng = np.random.default_rng(ranks * tokens)
    per_rank = E / ranks
    shares = []
    for _ in range(2000):
        owner = np.floor(_top_k(rng, tokens, E, K) / per_rank).astype(int)
        hit = set(owner.ravel()) - {0}  # the sender is rank 0
        shares.append(len(hit) / (ranks - 1))
    _within(np.array(shares), float(rank_reach(_n(E), K, _n(ranks), _n(tokens))))


@pytest.mark.parametrize("nodes", [1, 2, 4, 8, 16, 32])
def test_group_limited_nodes_match_sampled_routing(nodes: int) -> None:
    """DeepSeek-V3 routing: 4 of 8 groups, then the top 8 of those groups' 128 experts."""
    groups, chosen = 8, 4
    rng = np.random.default_rng(nodes)
    size = E // groups
    picked_groups = _top_k(rng, TOKENS, groups, chosen)
    slot = _top_k(rng, TOKENS, chosen * size, K)  # among the chosen groups' experts
    expert = picked_groups[np.arange(TOKENS)[:, None], slot // size] * size + slot % size
    owner = expert // (E // nodes)
    law = float(destination_nodes(_n(E), K, _n(nodes), _n(groups), chosen))
    _within(_distinct(owner), law)
    assert law <= min(nodes, chosen * max(1, nodes // groups)) + 1e-12


@pytest.mark.parametrize("nodes", [2, 8, 18])
def test_one_group_is_unrestricted_routing(nodes: int) -> None:
    rng = np.random.default_rng(7 * nodes)
    owner = np.floor(_top_k(rng, TOKENS, E, K) / (E / nodes)).astype(int)
    _within(_distinct(owner), float(destination_nodes(_n(E), K, _n(nodes), sp.Integer(1), 1)))


def test_laws_take_symbolic_ranks_and_vectorise() -> None:
    ep = parameter("parallel.ep", DIMENSIONLESS)
    f = sp.lambdify([ep], destination_ranks(_n(E), K, ep), "numpy")
    ranks = np.array([4.0, 8.0, 16.0])
    rng = np.random.default_rng(3)
    picks = _top_k(rng, TOKENS, E, K)
    got = f(ranks)
    for r, v in zip(ranks, got, strict=True):
        _within(_distinct(picks // int(E // r)), float(v))


def _dispatch_seconds(dispatcher: str) -> float:
    """comm.ep_dispatch of the MI355X EP-8 decode point with the all-to-all's latencies off:
    its bytes over the link bandwidth."""
    sets = [f"engine.dispatcher={dispatcher}", "cluster.scale_up.a2a_latency=0 us",
            "cluster.scale_up.a2a_peer_latency=0 us"]  # fmt: skip
    terms = testing.evaluate("dsv3-mi355x-ep8", sets=sets)["terms"]
    return float(next(t["seconds"] for t in terms if t["name"] == "comm.ep_dispatch"))


def test_per_rank_sends_distinct_ranks_not_k_copies() -> None:
    """At EP-8 a per-rank dispatcher sends the sampled distinct ranks (≈ 5.3) where a
    per-expert one sends k = 8 copies; the wire share (N − 1)/N is the same for both."""
    rng = np.random.default_rng(8)
    distinct = _distinct(_top_k(rng, TOKENS, E, K) // (E // 8))
    ratio = _dispatch_seconds("per_rank") / _dispatch_seconds("per_expert")
    _within(distinct / K, ratio)
