"""The hooks a stepwall plugin may implement, in the order the flow calls them.

Every hook is called with keyword arguments. "firstresult" hooks stop at the first plugin
that returns something other than None: such a plugin checks ``scenario.kinds[...]`` and
returns None for kinds it does not own. docs/hooks.md repeats each signature; a test keeps
the two in sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import sympy as sp

    from stepwall.spec import KindSpec, Scenario
    from stepwall.terms import Collective, Constraint, Decoding, Layout, Op, Term, Workload

hookspec = pluggy.HookspecMarker("stepwall")
hookimpl = pluggy.HookimplMarker("stepwall")


@hookspec
def stepwall_spec_kinds() -> list[KindSpec]:
    """Declare the spec sections and kinds this plugin owns, with their fields.

    Called once when the plugin manager is built. Return a list of `KindSpec`
    (section such as ``"hardware"``, kind such as ``"gpu"``, an attrs class whose fields are
    declared with `stepwall.spec.quantity`, `choice` or `flag`). Two plugins claiming the same
    (section, kind) is an error naming both. Not firstresult: every plugin's list is used.
    """


@hookspec(firstresult=True)
def stepwall_decoding(scenario: Scenario) -> Decoding | None:
    """Decide the decoding scheme: verify tokens per user M, accepted tokens τ, and its terms.

    ``scenario`` is the validated Scenario. Return a `Decoding` for the ``decoding.kind`` this
    plugin owns, else None. firstresult.
    """


@hookspec(firstresult=True)
def stepwall_partition(scenario: Scenario, decoding: Decoding) -> Layout | None:
    """Lay a replica out over GPUs: TP and EP degrees, DP replicas, users per attention rank.

    Validate degrees against the cluster and the model (raise `SpecError`). Return a `Layout`
    for the ``parallel.kind`` this plugin owns, else None. firstresult.
    """


@hookspec(firstresult=True)
def stepwall_model_work(scenario: Scenario, decoding: Decoding, layout: Layout) -> Workload | None:
    """State the model's per-GPU work for one step under ``layout``.

    Return a `Workload`: the `Op`s each GPU runs (bytes and FLOPs), the `Collective`s the
    layout needs, weight and KV-cache bytes per GPU, and the layer count. For the
    ``model.kind`` this plugin owns, else None. firstresult.
    """


@hookspec(firstresult=True)
def stepwall_compute_terms(scenario: Scenario, ops: tuple[Op, ...]) -> list[Term] | None:
    """Turn per-GPU work into time on the ``hardware.kind`` this plugin owns (else None).

    Typically a roofline per op plus kernel-launch cost. firstresult.
    """


@hookspec(firstresult=True)
def stepwall_collective_terms(
    scenario: Scenario, collectives: tuple[Collective, ...]
) -> list[Term] | None:
    """Turn collectives into time on the cluster's networks (``cluster.scale_up.kind`` and
    ``cluster.scale_out.kind``); collectives whose group spans domains go hierarchical.
    Return None if this plugin does not own the scale-up kind. firstresult.
    """


@hookspec(firstresult=True)
def stepwall_device_memory(scenario: Scenario, workload: Workload) -> sp.Expr | None:
    """Bytes resident in device memory per GPU, when a plugin keeps some of the workload's
    weights elsewhere (host memory, another tier). Default when every plugin returns None:
    ``workload.weight_bytes_per_gpu + workload.kv_bytes_per_gpu``. firstresult.
    """


@hookspec
def stepwall_fixed_terms(scenario: Scenario, workload: Workload, decoding: Decoding) -> list[Term]:
    """Contribute fixed or calibrated terms (per step, per layer). Not firstresult: every
    plugin's terms are added to the step.
    """


@hookspec
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """State the relations this plugin's laws assume, as `Constraint`s (e.g.
    ``n_dense_layers <= n_layers``, ``1 <= tau <= M``, heads divisible by ``tp``).

    Called after the terms are made. A configuration that violates one never produces a
    number: ``eval`` refuses it naming the first key, ``sweep`` marks the row infeasible,
    ``derive`` searches only where all hold. The composer adds its own: resident memory fits
    and every term is ≥ 0. Not firstresult: every plugin's list is used; return [] for
    sections you do not own.
    """
