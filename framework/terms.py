"""The flow's data: work, collectives, terms. Each is frozen and checked where it is made.

A `Term` is one additive piece of the step time with its provenance (plugin, reason). Its
expression must have the dimension of time; that is checked when the term is created, so a
plugin that adds bytes to seconds fails naming itself and the term.
"""

from __future__ import annotations

import attrs
import sympy as sp

from stepwall import symbols
from stepwall.errors import DimensionError
from stepwall.units import DIMENSIONLESS, INFORMATION, OPERATION, TIME, Dim


def _check(expr: sp.Basic, want: Dim, *, what: str, name: str, plugin: str) -> sp.Expr:
    expr = sp.sympify(expr)
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
class Decoding:
    """What a decoding plugin decides: verify tokens per user M, accepted tokens τ, terms."""

    verify_tokens: sp.Expr
    accepted_tokens: sp.Expr
    terms: tuple[Term, ...] = ()


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


@attrs.frozen
class Workload:
    """A model's per-GPU work for one step under a layout, its collectives and its memory."""

    ops: tuple[Op, ...]
    collectives: tuple[Collective, ...]
    weight_bytes_per_gpu: sp.Expr
    kv_bytes_per_gpu: sp.Expr
    layers: sp.Expr
