"""One forward pass of the model under a layout, as the concerns (attention, dense, MoE, draft)
add to it: the model's symbols and values, the layout's degrees, the lanes two-batch overlap
puts work on, and the ops and collectives gathered so far."""

from __future__ import annotations

from typing import Any

import attrs
import sympy as sp

from stepwall.core.laws import FLOPS_PER_MAC
from stepwall.core.scenario import Scenario
from stepwall.core.terms import Collective, Engine, Layout, Op, Step
from stepwall.plugins.moe_transformer.spec import PLUGIN


@attrs.define
class Pass:
    """One ``step`` under ``layout``: ``m`` the model's symbols, ``spec`` its values; ``ops``
    and ``collectives`` in the order the workload lists them."""

    scenario: Scenario
    layout: Layout
    step: Step
    engine: Engine
    ops: list[Op] = attrs.field(factory=list)
    collectives: list[Collective] = attrs.field(factory=list)

    @property
    def m(self) -> Any:
        return self.scenario.params.model

    @property
    def spec(self) -> Any:
        return self.scenario.model

    @property
    def has_moe(self) -> bool:
        return bool(self.spec.n_experts > 0)

    @property
    def tbo(self) -> bool:
        return bool(self.engine.two_batch_overlap)

    @property
    def batches(self) -> sp.Expr:
        """Micro-batches, each running every kernel and re-reading the weights: two under
        two-batch overlap, times the pipeline's micro-batches in flight."""
        return (2 if self.tbo else 1) * self.layout.microbatches

    @property
    def lane(self) -> str:
        """Two-batch overlap runs in two stages per MoE layer (SGLang's and DeepSeek's
        schedule): one micro-batch's attention-side work under the other's combine (and
        all-reduces), its experts under the other's dispatch; each stage lasts as long as its
        slower side, so unequal sides leave bubbles. This is the attention side's lane."""
        return "tbo.attention/compute" if self.tbo else ""

    @property
    def experts_lane(self) -> str:
        return "tbo.experts/compute" if self.tbo else ""

    @property
    def prefill(self) -> bool:
        """The whole pass is prompt tokens."""
        return self.step.name != "decode"

    @property
    def context_split(self) -> bool:
        """A prompt prefilled alone, split over the layout's cp attention ranks (prefill context
        parallelism): each rank takes 1/cp of its tokens (`Step.users_per_rank`)."""
        return self.layout.context_parallel and self.step.name == "ttft"

    @property
    def n_moe(self) -> sp.Expr:
        """Layers with an MoE FFN: all but the dense ones and those with no FFN."""
        m = self.m
        if not self.has_moe:
            return sp.Integer(0)
        return m.n_layers - m.n_dense_layers - m.mixer_only_layers

    @property
    def n_dense(self) -> sp.Expr:
        """Layers with a dense FFN (in a dense model, every layer that has an FFN)."""
        m = self.m
        return m.n_dense_layers if self.has_moe else m.n_layers - m.mixer_only_layers

    def gemm(
        self,
        name: str,
        params: sp.Expr,
        bits: sp.Expr,
        rows: sp.Expr,
        group: str,
        why: str,
        kernels: sp.Expr,
        math: str,
        overlap: str | None = None,
        *,
        serial_k: sp.Expr,
    ) -> None:
        """A weight-streaming GEMM over ``params`` weights in ``kernels`` kernels whose
        reduction lengths sum to ``serial_k`` (their k-loops); each micro-batch streams the
        weights and walks the loops again. ``overlap`` defaults to the attention side's lane."""
        lane = self.lane if overlap is None else overlap
        batches = self.batches
        self.ops.append(Op(name, batches * params * bits, params * rows * FLOPS_PER_MAC, PLUGIN,
                           why, group, batches * kernels, lane, "gemm", math,
                           rows / batches, chain=batches * serial_k))  # fmt: skip


def prefill_passes(p: Pass, weights: sp.Expr) -> Op:
    """Prefill passes of their own (an engine that interleaves prefill with decode): each
    reads the GPU's weights again and launches the pass's kernels again; its tokens' work is
    already in the step's ops (a prefill chunk of thousands of tokens reaches every expert)."""
    passes = p.step.prefill_passes
    kernels = sp.Add(*(op.kernels for op in p.ops))
    return Op("prefill.own_passes", passes * weights, sp.Integer(0), PLUGIN,
              "interleaved prefill: its own passes between decode iterations re-read the "
              "weights", "base", passes * kernels)  # fmt: skip
