"""Op kinds are a declared registry (issue 21): each `OpKind` says what the work is, the
built-in ones in `stepwall.core.terms.OP_KINDS`, and kind gpu's pricing table
(`stepwall.core.roofline.GPU_PRICING`) which hardware fields price it; a plugin adds one
(``stepwall_op_kinds``) with its pricing and an op of that kind is priced as its declaration
says; an undeclared kind or a built-in's name is refused."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from stepwall.core.errors import PluginError, StepwallError
from stepwall.core.roofline import GPU_PRICING, GpuPricing
from stepwall.core.terms import OP_KINDS, Op, OpKind, Workload
from stepwall.plugin.hookspecs import hookimpl
from stepwall.spec.validation import load_scenario
from stepwall.testing import evaluate, registry

SCENARIO = "k26-b300-tp8-ddtree"
FLOORS = ["engine.floor_factor=1"]


def _floor(field: str) -> float:
    """The scenario's GPU's floor ``field`` in seconds, as its spec states it."""
    sc = load_scenario(SCENARIO, registry().kinds)
    return float(sc.values[sc.parameter(f"hardware.{field}")])


class ExtraOps:
    """Declares ``kinds`` and adds to the model's work one op of each of ``ops``' kinds: 3
    kernels, a thousandth of device memory in bytes, no FLOPs."""

    def __init__(self, kinds: list[OpKind], ops: tuple[str, ...]) -> None:
        self.kinds, self.ops = kinds, ops

    @hookimpl
    def stepwall_op_kinds(self) -> list[OpKind]:
        return self.kinds

    @hookimpl(wrapper=True)
    def stepwall_model_work(self, scenario: Any) -> Any:
        work: Workload = yield
        size = scenario.params.hardware.memory_capacity / 1000
        extra = [Op(f"extra_{k}", size, 0, "extra", "an extra op", "base", kernels=3, kind=k)
                 for k in self.ops]  # fmt: skip
        return attrs.evolve(work, ops=(*work.ops, *extra))


def _terms(doc: dict[str, Any]) -> dict[str, float]:
    return {t["name"]: t["seconds"] for t in doc["terms"]}


def test_the_builtin_kinds_are_declared_once() -> None:
    assert list(OP_KINDS) == [
        "gemm",
        "grouped_gemm",
        "attention",
        "gqa_attention",
        "elementwise",
        "recurrence",
        "chunked_recurrence",
        "chunked_scan",
    ]
    assert all(k.name == n and k.meaning for n, k in OP_KINDS.items())
    assert registry().op_kinds == OP_KINDS
    assert list(GPU_PRICING) == list(OP_KINDS)  # kind gpu prices each built-in kind
    assert GPU_PRICING["attention"] == GpuPricing("attention_efficiency", "attention_floor")


def test_a_plugin_op_kind_is_priced_as_declared() -> None:
    kinds = [OpKind("conv", "a depthwise convolution",
                    pricing={"gpu": GpuPricing(floor="kernel_floor")}),
             OpKind("scan", "a selective scan",
                    pricing={"gpu": GpuPricing(floor="attention_floor")})]  # fmt: skip
    plugin = ExtraOps(kinds, ("conv", "scan", "elementwise"))
    assert set(registry(plugin).op_kinds) == {*OP_KINDS, "conv", "scan"}
    terms = _terms(evaluate(SCENARIO, [plugin], FLOORS))
    # 3 kernels × the b300's floors (specs/hardware/b300.toml) × the engine's factor 1
    assert terms["extra_conv.floor"] == pytest.approx(3 * _floor("kernel_floor"))
    assert terms["extra_scan.floor"] == pytest.approx(3 * _floor("attention_floor"))
    # streamed at hbm_efficiency like the built-in elementwise kind, which has the same floor
    assert terms["extra_conv"] > 0
    assert terms["extra_conv"] == pytest.approx(terms["extra_elementwise"])
    assert terms["extra_conv.floor"] == pytest.approx(terms["extra_elementwise.floor"])


def test_an_undeclared_op_kind_is_refused_naming_the_op() -> None:
    with pytest.raises(StepwallError) as caught:
        evaluate(SCENARIO, [ExtraOps([], ("conv",))])
    message = str(caught.value)
    assert (
        "op kind 'conv' is not one of gemm, grouped_gemm, attention, gqa_attention, elementwise"
    ) in message
    assert "extra_conv" in message


def test_a_builtin_kinds_name_is_refused() -> None:
    plugin = ExtraOps([OpKind("gemm", "again")], ())
    with pytest.raises(PluginError, match="op kind 'gemm' is a built-in op kind"):
        evaluate(SCENARIO, [plugin])


def test_a_ramp_must_be_one_of_the_known() -> None:
    with pytest.raises(ValueError, match="'ramp' must be in"):
        OpKind("conv", "a convolution", ramp="heads")


def test_a_plugin_kind_kind_gpu_has_no_pricing_for_is_priced_as_a_gemm() -> None:
    plugin = ExtraOps([OpKind("conv", "a depthwise convolution")], ("conv", "gemm"))
    terms = _terms(evaluate(SCENARIO, [plugin], FLOORS))
    assert terms["extra_conv"] > 0
    assert terms["extra_conv"] == pytest.approx(terms["extra_gemm"])
    assert terms["extra_conv.floor"] == pytest.approx(terms["extra_gemm.floor"])
    small = 3 * _floor("kernel_floor")  # not the small-kernel floor
    assert terms["extra_conv.floor"] != pytest.approx(small)


def test_a_pricing_that_is_not_kind_gpus_is_refused_naming_the_kind() -> None:
    plugin = ExtraOps([OpKind("conv", "a convolution", pricing={"gpu": "kernel_floor"})],
                      ("conv",))  # fmt: skip
    with pytest.raises(PluginError, match="op kind 'conv' is priced on kind gpu by a GpuPricing"):
        evaluate(SCENARIO, [plugin])
