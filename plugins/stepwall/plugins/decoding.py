"""Decoding kinds: ``autoregressive``, ``ddtree`` (tree speculation), ``mtp`` (a draft chain).

Each decides M, the tokens per user the target model verifies in one forward pass, and τ,
the tokens accepted per step; throughput is C·τ / t. Drafting costs are handed to the engine
(`Decoding.host`), which turns them into terms at its own speed.
"""

from __future__ import annotations

import attrs
import sympy as sp

from stepwall.core.errors import SpecError
from stepwall.core.fields import KindSpec, quantity
from stepwall.core.laws import chain_accepted, tree_accepted, under_load
from stepwall.core.scenario import Scenario
from stepwall.core.terms import Constraint, Decoding, Engine, Layout, Term, Workload
from stepwall.plugin.hookspecs import hookimpl

PLUGIN = "decoding"


@attrs.frozen
class Autoregressive:
    pass


@attrs.frozen
class DDTree:
    budget: int = quantity(
        "dimensionless",
        "draft-tree nodes verified per step (verify M = budget + 1)",
        latex="B",
        integer=True,
    )
    block: int = quantity(
        "dimensionless",
        "drafter block size: deepest tree level",
        latex="D",
        integer=True,
        default=16,
    )
    accepted_tokens: float | None = quantity(
        "dimensionless",
        "measured accepted tokens per step τ (overrides the acceptance model)",
        latex=r"\tau",
        minimum=1.0,
        inclusive=True,
        default=None,
    )
    acceptance: float = quantity(
        "dimensionless",
        "probability the drafter's top-1 token at a depth is accepted",
        latex="a",
        maximum=0.999,
        default=0.6,
    )
    draft_time: float = quantity(
        "time", "drafter forward pass per step", latex="t_{draft}", minimum=0.0, inclusive=True
    )
    node_time: float = quantity(
        "time",
        "tree building and bookkeeping per tree node",
        latex="t_{node}",
        minimum=0.0,
        inclusive=True,
    )


@attrs.frozen
class Mtp:
    drafts: int = quantity(
        "dimensionless",
        "draft tokens in the chain (verify M = 1 + n; at most 64: τ is summed term by term, and "
        "chain drafters run 1-8)",
        latex="n",
        integer=True,
        maximum=64,
    )
    acceptance: float | None = quantity(
        "dimensionless",
        "probability the first draft is accepted (not needed when accepted_tokens is given)",
        latex="a",
        maximum=0.999,
        default=None,
    )
    acceptance_decay: float = quantity(
        "dimensionless",
        "factor on the acceptance per further draft: the i-th draft, given the ones before it "
        "were, is accepted with probability a·d^(i−1) (1: every draft alike)",
        latex="d",
        maximum=1.0,
        default=1.0,
    )
    accepted_tokens: float | None = quantity(
        "dimensionless",
        "measured accepted tokens per step τ at the stated drafts (overrides the chain model "
        "there only)",
        latex=r"\tau",
        minimum=1.0,
        inclusive=True,
        default=None,
    )
    draft_layers: int = quantity(
        "dimensionless",
        "decoder layers of the draft module, costed on the GPU like the target's, once per "
        "draft token (DeepSeek-V3's MTP module: 1)",
        latex="L_{mtp}",
        integer=True,
        minimum=0,
        inclusive=True,
        default=0,
    )
    draft_time: float = quantity(
        "time",
        "host time per draft token beyond the draft layers' GPU work",
        latex="t_{mtp}",
        minimum=0.0,
        inclusive=True,
        default=0.0,
    )


@hookimpl
def stepwall_spec_kinds() -> list[KindSpec]:
    return [
        KindSpec(
            "decoding",
            "autoregressive",
            Autoregressive,
            "one token per user per step",
            default=True,
        ),
        KindSpec("decoding", "ddtree", DDTree, "block-diffusion drafter + tree verification"),
        KindSpec("decoding", "mtp", Mtp, "multi-token-prediction draft chain"),
    ]


@hookimpl
def stepwall_decoding(scenario: Scenario) -> Decoding:
    kind = scenario.kinds["decoding"]
    if kind == "autoregressive":
        return Decoding(sp.Integer(1), sp.Integer(1))
    d = scenario.params.decoding
    given = scenario.decoding.accepted_tokens is not None
    if kind == "ddtree":
        tau = (
            d.accepted_tokens
            if given
            else tree_accepted(d.acceptance, d.budget, scenario.decoding.block)
        )
        draft = Term("spec.draft", d.draft_time, PLUGIN, "drafter forward per step", "spec")
        tree = Term("spec.tree", d.budget * d.node_time, PLUGIN, "tree building per node × budget",
                    "spec")  # fmt: skip
        return Decoding(d.budget + 1, tau, (draft, tree))
    if not given and scenario.decoding.acceptance is None:
        raise SpecError(scenario.file_of("decoding.acceptance"), "decoding.acceptance",
                        "missing: the chain needs an acceptance or a measured accepted_tokens",
                        "decoding.acceptance = 0.8 or decoding.accepted_tokens = 2.5")  # fmt: skip
    n = int(scenario.decoding.drafts)  # the sum's length: each draft count compiled on its own
    if given and scenario.file_of("decoding.drafts") == "--set" != scenario.file_of(
        "decoding.accepted_tokens"
    ):
        raise SpecError("--set", "decoding.drafts", f"{n} drafts, but decoding.accepted_tokens "
                        f"in {scenario.file_of('decoding.accepted_tokens')} was measured at the "
                        "drafts stated there", "--set decoding.accepted_tokens measured at "
                        "these drafts, or decoding.acceptance for the chain law")  # fmt: skip
    return _chain(scenario, d.drafts, d.accepted_tokens if given else _chain_tau(scenario, n))


def _chain_tau(scenario: Scenario, n: int) -> sp.Expr:
    """τ(n) of the chain law at the spec's acceptance and decay."""
    d = scenario.params.decoding
    return chain_accepted(d.acceptance, n, d.acceptance_decay)


def _chain(scenario: Scenario, n: sp.Expr | int, tau: sp.Expr) -> Decoding:
    """An MTP step of n drafts per user accepting τ: verify M = 1 + n, n draft passes."""
    d, n = scenario.params.decoding, sp.sympify(n)
    draft = Term("spec.draft", n * d.draft_time, PLUGIN, "host time per draft token", "spec")
    passes = n if scenario.decoding.draft_layers > 0 else sp.S.Zero
    return Decoding(1 + n, tau, (draft,), passes, d.draft_layers)


@hookimpl
def stepwall_decoding_under_load(
    scenario: Scenario, decoding: Decoding, layout: Layout, engine: Engine
) -> Decoding | None:
    """An MTP chain where the engine limits drafts under load: above ``draft_limit_batch``
    users per attention rank it verifies min(n, ``draft_limit``) drafts, at that count's own
    τ (`stepwall.core.laws.under_load` on the drafts and on τ; M, the draft passes and
    their host time follow the drafts). A measured ``accepted_tokens`` holds only at the n
    it was measured at."""
    if scenario.kinds["decoding"] != "mtp" or engine.draft_limit_batch is None:
        return None
    n = int(scenario.decoding.drafts)
    m = min(n, engine.draft_limit)
    if m == n:
        return None
    if scenario.decoding.acceptance is not None:
        tau = _chain_tau(scenario, m)
    elif m == 0:
        tau = sp.S.One
    else:
        raise SpecError(scenario.file_of("decoding.accepted_tokens"), "decoding.accepted_tokens",
                        f"is measured at {n} drafts, but above engine.draft_limit_batch the "
                        f"engine verifies {m}", "a decoding.acceptance for the chain law at "
                        f"{m} drafts")  # fmt: skip
    b, limit = layout.users_per_attention_rank, engine.draft_limit_batch
    drafts = under_load(scenario.params.decoding.drafts, sp.Integer(m), b, limit)
    return _chain(scenario, drafts, under_load(decoding.accepted_tokens, tau, b, limit))


@hookimpl
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """1 ≤ τ ≤ M: a step accepts at least the target's own token and at most what it verified."""
    kind = scenario.kinds["decoding"]
    if kind == "autoregressive":
        return []
    width = "decoding.budget" if kind == "ddtree" else "decoding.drafts"
    given = scenario.decoding.accepted_tokens is not None
    tau = "decoding.accepted_tokens" if given else "decoding.acceptance"
    out = [
        Constraint(
            "accepted_within_verified",
            sp.And(
                decoding.accepted_tokens >= 1, decoding.accepted_tokens <= decoding.verify_tokens
            ),
            "a step accepts at least one token and at most the M tokens it verifies",
            (tau, width),
            PLUGIN,
        )
    ]
    if kind == "ddtree":  # a path through a tree of depth D accepts D drafts and one more
        out.append(
            Constraint(
                "accepted_within_depth",
                decoding.accepted_tokens <= scenario.decoding.block + 1,
                "a step accepts at most the tree's depth in drafts plus the target's own token",
                (tau, "decoding.block"),
                PLUGIN,
            )
        )
    return out
