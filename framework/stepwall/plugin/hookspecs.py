"""The hooks a stepwall plugin may implement, in the order the flow calls them.

Every hook is called with keyword arguments; an implementation may take any subset of them.
A hook that turns one section into something (``stepwall_compute_terms`` for ``hardware``)
is called only on the plugin that owns the scenario's kind of that section (and on plugins
that wrap the hook), so an implementation needs no ``if kind != mine`` guard. Hooks that
collect from many plugins (``stepwall_fixed_terms``, ``stepwall_constraints``) are called on
every plugin whose kinds the scenario uses and on plugins that own no kind. docs/hooks.md
repeats each signature; a test keeps the two in sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Mapping

    import sympy as sp

    from stepwall.core.fields import KindSpec
    from stepwall.core.primitives import Primitive
    from stepwall.core.scenario import Scenario
    from stepwall.core.terms import (
        Collective,
        Constraint,
        Decoding,
        Engine,
        Layout,
        Op,
        OpKind,
        Step,
        Term,
        Workload,
    )
    from stepwall.plugin.entries import Analysis, BlockKind, Command, Format, Layouts, Metric

ENTRY_POINT_GROUP = "stepwall"  # installed plugins declare [project.entry-points.stepwall]
DISABLE_ENV = "STEPWALL_DISABLE_PLUGIN_AUTOLOAD"  # set: installed plugins are not loaded
DISABLED_ENV = "STEPWALL_DISABLE_PLUGINS"  # comma-separated plugin names not to register

hookspec = pluggy.HookspecMarker("stepwall")
hookimpl = pluggy.HookimplMarker("stepwall")


@hookspec
def stepwall_spec_kinds() -> list[KindSpec]:
    """Declare the spec sections and kinds this plugin owns, with their fields.

    Called once when the registry is built. Return a list of `KindSpec` (section such as
    ``"hardware"``, kind such as ``"gpu"``, an attrs class whose fields are declared with
    `stepwall.core.fields.quantity`, `choice` or `flag`). Two plugins claiming the same
    (section, kind) is an error naming both. Not firstresult: every plugin's list is used.
    """


@hookspec(firstresult=True)
def stepwall_decoding(scenario: Scenario) -> Decoding | None:
    """Decide the decoding scheme: verify tokens per user M, accepted tokens τ, and the
    drafting work per step. Called on the owner of the scenario's ``decoding`` kind."""


@hookspec(firstresult=True)
def stepwall_engine(scenario: Scenario) -> Engine | None:
    """Describe the serving engine: kernels it adds per layer, its factor on kernel floors,
    launch overhead and overlap policies (an `Engine`). Called on the owner of the scenario's
    ``engine`` kind."""


@hookspec(firstresult=True)
def stepwall_partition(scenario: Scenario, decoding: Decoding) -> Layout | None:
    """Lay a replica out over GPUs: TP and EP degrees, DP replicas, users per attention rank.
    Called on the owner of the scenario's ``parallel`` kind."""


@hookspec(firstresult=True)
def stepwall_decoding_under_load(
    scenario: Scenario, decoding: Decoding, layout: Layout, engine: Engine
) -> Decoding | None:
    """The decoding the engine runs at the layout's batch, where it limits speculation under
    load (`Engine.draft_limit_batch`); None: ``decoding`` unchanged. Called on the owner of
    the scenario's ``decoding`` kind, after the layout."""


@hookspec(firstresult=True)
def stepwall_steps(
    scenario: Scenario, decoding: Decoding, layout: Layout, engine: Engine
) -> list[Step] | None:
    """The forward passes to cost (`Step`s): the scenario's own step first (a decode
    iteration, or a batch of prompts), then ``ttft``, one prompt prefilled alone. Called on
    the owner of the scenario's ``workload`` kind."""


@hookspec(firstresult=True)
def stepwall_model_work(
    scenario: Scenario, decoding: Decoding, layout: Layout, step: Step, engine: Engine
) -> Workload | None:
    """State the model's per-GPU work for one ``step`` under ``layout``: the `Op`s each GPU
    runs (bytes, FLOPs, kernels, math precision), the `Collective`s the layout needs, weight
    and KV-cache bytes per GPU, and the layer count. Called once per step on the owner of
    the scenario's ``model`` kind."""


@hookspec(firstresult=True)
def stepwall_compute_terms(
    scenario: Scenario, ops: tuple[Op, ...], engine: Engine, op_kinds: Mapping[str, OpKind]
) -> list[Term] | None:
    """Turn per-GPU work into time (a roofline per op at its precision's roof, plus kernel
    floors scaled by the engine), each op priced as its kind's declaration in ``op_kinds``
    (the built-in kinds and plugins') says. Called on the owner of the scenario's
    ``hardware`` kind."""


@hookspec(firstresult=True)
def stepwall_collective_terms(
    scenario: Scenario, collectives: tuple[Collective, ...], engine: Engine
) -> list[Term] | None:
    """Turn collectives into time on the cluster's networks (an all-reduce as the engine's own
    law where it states one, `Engine.allreduce`); collectives whose group spans domains go
    hierarchical. Called on the owner of the ``cluster.scale_up`` kind."""


@hookspec(firstresult=True)
def stepwall_device_memory(scenario: Scenario, workload: Workload) -> sp.Expr | None:
    """Bytes resident in device memory per GPU, when some of the workload's weights live
    elsewhere (host memory, another tier). Called on the owner of the ``hardware`` kind;
    when it returns None (or does not implement it): ``workload.weight_bytes_per_gpu +
    workload.kv_bytes_per_gpu``."""


@hookspec
def stepwall_fixed_terms(
    scenario: Scenario, workload: Workload, decoding: Decoding, step: Step, engine: Engine
) -> list[Term]:
    """Contribute fixed or calibrated terms to ``step`` (host time per step and per layer,
    drafting). Not firstresult: every plugin's terms are added to the step."""


@hookspec
def stepwall_constraints(
    scenario: Scenario, decoding: Decoding, layout: Layout, workload: Workload
) -> list[Constraint]:
    """State the relations this plugin's laws assume, as `Constraint`s (e.g.
    ``n_dense_layers <= n_layers``, ``1 <= tau <= M``, heads divisible by ``tp``).

    Called after the terms are made. A configuration that violates one never produces a
    number: ``eval`` refuses it naming the first key, ``sweep`` marks the row infeasible,
    ``derive`` searches only where all hold. The composer adds its own: resident memory fits
    and every term is ≥ 0. Not firstresult: every plugin's list is used.
    """


@hookspec
def stepwall_analyses() -> list[Analysis]:
    """Declare analyses (``stepwall derive SCENARIO NAME``, report blocks ``derivation``):
    each an `stepwall.plugin.entries.Analysis` with its name, options class and function. Called
    once when the registry is built. Not firstresult."""


@hookspec
def stepwall_primitives() -> list[Primitive]:
    """Declare primitives (`stepwall.core.primitives.Primitive`): microbenchmarked operations with
    the law the model prices them by, over the fields of one spec section, so that
    ``stepwall calibrate`` can fit those fields to measurements. Called once when the
    registry is built. Not firstresult."""


@hookspec
def stepwall_report_blocks() -> list[BlockKind]:
    """Declare report block kinds (``[[block]] kind = NAME``): each a
    `stepwall.plugin.entries.BlockKind` with its options class and renderer. Called once when
    the registry is built. Not firstresult."""


@hookspec
def stepwall_metrics() -> list[Metric]:
    """Declare metrics beside the built-in ones (`stepwall.model.metrics`): each a
    `stepwall.plugin.entries.Metric` with its name, dimension, unit, meaning and ``expr``, a
    function of the scenario and the built-in metrics' expressions. Eval, sweep, search,
    the explorer and the reference docs show it. Called once when the registry is built.
    Not firstresult."""


@hookspec
def stepwall_op_kinds() -> list[OpKind]:
    """Declare kinds of per-GPU work beside the built-in ones (`stepwall.core.terms.OP_KINDS`):
    each a `stepwall.core.terms.OpKind` with its name, meaning, compute ramp and how hardware
    kinds price it (kind gpu: a `stepwall.core.roofline.GpuPricing`, the hardware fields of
    its bandwidth efficiency and kernel floor). An `Op`
    of the model's work may then name it as its ``kind``. Called once when the registry is
    built; a built-in kind's name is refused. Not firstresult."""


@hookspec
def stepwall_formats() -> list[Format]:
    """Declare output formats (``--format NAME``, ``-o FILE.SUFFIX``): each a
    `stepwall.plugin.entries.Format` with its suffixes and writers. Called once when the registry is
    built. Not firstresult."""


@hookspec
def stepwall_commands() -> list[Command]:
    """Declare command-line commands (``stepwall NAME``): each a
    `stepwall.plugin.entries.Command` with its arguments' setup and its run. Called once when
    the command line is built; a name that is a built-in command's is refused. Not
    firstresult."""


@hookspec(firstresult=True)
def stepwall_layouts(scenario: Scenario) -> Layouts | None:
    """How a search lays deployments of N GPUs out (``stepwall search``): a `Layouts` naming
    the spec keys each layout sets (the parallel degrees) and listing, for deployment sizes N
    and a scale-up domain of D GPUs, every layout as numpy arrays (the degrees' values, N and
    the attention ranks that users per rank multiply into users per replica). Called on the
    owner of the scenario's ``parallel`` kind; a kind whose owner returns None is not
    searched. The cluster's nodes and the workload's users are set by the search through
    their requirements (``nodes``, ``users``), not by this hook."""
