"""The flow's data: work, collectives, terms. Each is frozen and checked where it is made.

A `Term` is one additive piece of the step time with its provenance (plugin, reason). Its
expression must have the dimension of time; that is checked when the term is created, so a
plugin that adds bytes to seconds fails naming itself and the term.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import sympy as sp

from stepwall import symbols
from stepwall.errors import DimensionError
from stepwall.laws import launch_time
from stepwall.units import DIMENSIONLESS, INFORMATION, OPERATION, TIME, Dim

_NOT_FINITE = (sp.nan, sp.zoo, sp.oo, -sp.oo)


def _check(expr: sp.Basic, want: Dim, *, what: str, name: str, plugin: str) -> sp.Expr:
    if not isinstance(expr, sp.Basic | int | float):
        raise DimensionError(
            f"{what} must be a sympy expression, not {type(expr).__name__}",
            term=name,
            plugin=plugin,
        )
    expr = sp.sympify(expr)
    if expr.has(*_NOT_FINITE):
        raise DimensionError(f"{what} is not finite: {expr}", term=name, plugin=plugin)
    if expr.is_Number and expr.is_zero:  # an exact zero has every dimension ("no time")
        return expr
    try:
        got = symbols.dim(expr)
    except DimensionError as e:
        raise e.located(term=name, plugin=plugin) from None
    if got != want:
        raise DimensionError(
            f"{what} must have dimension {want}",
            left=str(got),
            right=str(want),
            term=name,
            plugin=plugin,
        )
    return expr


@attrs.frozen
class Term:
    """One piece of the step time: ``expr`` seconds, contributed by ``plugin`` because ``why``.

    ``group`` names the part of the step it belongs to (moe, attention, comm, base, spec);
    terms sharing a non-empty ``overlap`` tag run concurrently: the step takes the Max over
    their groups' sums instead of the sum.
    """

    name: str
    expr: sp.Expr
    plugin: str
    why: str
    group: str = "base"
    overlap: str = ""

    def __attrs_post_init__(self) -> None:
        checked = _check(self.expr, TIME, what="a term", name=self.name, plugin=self.plugin)
        object.__setattr__(self, "expr", checked)


@attrs.frozen
class Op:
    """Per-GPU work of one step: bytes moved from memory and FLOPs, for ``kernels`` launches.

    The hardware plugin turns an Op into a Term (roofline: the slower of memory and compute).
    """

    name: str
    bytes: sp.Expr
    flops: sp.Expr
    plugin: str
    why: str
    group: str
    kernels: sp.Expr = attrs.field(factory=lambda: sp.Integer(0))
    overlap: str = ""

    def __attrs_post_init__(self) -> None:
        for attr, want in (
            ("bytes", INFORMATION),
            ("flops", OPERATION),
            ("kernels", DIMENSIONLESS),
        ):
            checked = _check(
                getattr(self, attr), want, what=f"op {attr}", name=self.name, plugin=self.plugin
            )
            object.__setattr__(self, attr, checked)


@attrs.frozen
class Collective:
    """A collective a parallel layout needs each step.

    ``op`` is all_reduce or all_to_all; ``group`` GPUs take part; ``size`` is the bytes each
    GPU contributes per call; ``count`` calls per step.
    """

    name: str
    op: str
    group: sp.Expr
    size: sp.Expr
    count: sp.Expr
    plugin: str
    why: str
    overlap: str = ""

    def __attrs_post_init__(self) -> None:
        if self.op not in ("all_reduce", "all_to_all"):
            raise ValueError(f"collective {self.name}: unknown op {self.op!r}")
        for attr, want in (
            ("group", DIMENSIONLESS),
            ("size", INFORMATION),
            ("count", DIMENSIONLESS),
        ):
            checked = _check(
                getattr(self, attr),
                want,
                what=f"collective {attr}",
                name=self.name,
                plugin=self.plugin,
            )
            object.__setattr__(self, attr, checked)


@attrs.frozen
class Constraint:
    """A relation a plugin's laws assume, e.g. ``n_dense_layers <= n_layers``.

    ``relation`` is a sympy relation (or And/Or of relations) over parameters; both sides of
    each comparison must have the same dimension (checked here). ``message`` says in words
    why it must hold; ``keys`` are the spec paths a user would change, the first is the one an
    error names. Constraints are evaluated like terms: at a point (eval refuses a violated
    one), vectorized (sweep's feasible mask) and along a key (derive's feasible region).
    """

    name: str
    relation: sp.Basic
    message: str
    keys: tuple[str, ...]
    plugin: str
    labels: tuple[str, str] = ("", "")  # names for the two sides of a long comparison

    def __attrs_post_init__(self) -> None:
        rel = self.relation
        kinds = (sp.core.relational.Relational, sp.logic.boolalg.BooleanFunction,
                 sp.logic.boolalg.BooleanAtom)  # fmt: skip
        if not isinstance(rel, kinds) or isinstance(rel, sp.Symbol):
            raise DimensionError(
                f"constraint relation must be a sympy relation, not {type(rel).__name__}",
                term=self.name,
                plugin=self.plugin,
            )
        try:
            symbols.dim(rel)
        except DimensionError as e:
            raise e.located(term=self.name, plugin=self.plugin) from None
        object.__setattr__(self, "keys", tuple(self.keys))


@attrs.frozen
class Decoding:
    """What a decoding plugin decides: verify tokens per user M, accepted tokens τ, and the
    drafting work per step as times on the reference engine (``host``: drafter forward, tree
    building). The engine's plugin (``overhead``) turns ``host`` into terms, scaled by its
    own factor: dispatch-bound work speeds up with the engine, not the GPU."""

    verify_tokens: sp.Expr
    accepted_tokens: sp.Expr
    host: tuple[Term, ...] = ()


@attrs.frozen
class Layout:
    """How a replica is spread: TP and EP degrees, DP replicas, and users per attention rank."""

    tp: sp.Expr
    ep: sp.Expr
    dp: sp.Expr
    gpus_per_replica: sp.Expr
    users: sp.Expr  # users (concurrency) per replica
    users_per_attention_rank: sp.Expr
    overlap_ep: bool = False
    imbalance: sp.Expr = sp.S.One  # load of the busiest EP rank over the mean
    redundant_experts: sp.Expr = sp.S.Zero  # extra expert replicas held (EPLB)
    uneven: bool = False  # degrees need not divide heads / experts (busiest rank sets time)


@attrs.frozen
class Workload:
    """A model's per-GPU work for one step under a layout, its collectives and its memory.

    ``weight_parts`` splits ``weight_bytes_per_gpu`` by component (``routed_experts``,
    ``attention``, …) for plugins that place some of it elsewhere (host memory)."""

    ops: tuple[Op, ...]
    collectives: tuple[Collective, ...]
    weight_bytes_per_gpu: sp.Expr
    kv_bytes_per_gpu: sp.Expr
    layers: sp.Expr
    weight_parts: Mapping[str, sp.Expr] = attrs.field(factory=dict)


def launch_terms(ops: tuple[Op, ...], latency: sp.Expr, plugin: str) -> list[Term]:
    """The step's kernel launches as one term, (Σ kernels)·t_launch (`laws.launch_time`);
    none when no op launches kernels. For hardware plugins that charge launches per step."""
    kernels = sp.Add(*(op.kernels for op in ops))
    if kernels == 0:
        return []
    return [Term("kernel_launches", launch_time(kernels, latency), plugin,
                 "kernel launches per step × launch latency", "base")]  # fmt: skip
