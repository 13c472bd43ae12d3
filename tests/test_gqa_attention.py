"""Grouped-query attention's own kernel family (issue 22, item 8: per-kernel-family curves):
TensorRT-LLM's generation kernels (XQA on Hopper) are fitted to their own table
(`gqa_decode`), not to the MLA kernels' (`mla_decode`). Checked on its own terms: a GQA
layer's attention over its cache takes the family's values where the GPU states them and the
attention ones where it does not; MLA layers never read them; the primitive is the model's op
for one layer."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stepwall.apps.calibrate import build_problem, load_entry, read_data
from stepwall.core.units import parse_quantity
from stepwall.model.compose import build_model
from stepwall.plugin import registry

ROOT = Path(__file__).parents[1]


def _spec(gpu: str) -> dict[str, Any]:
    """The hardware spec's committed values (the fitted ones the model reads)."""
    spec: dict[str, Any] = tomllib.loads((ROOT / f"specs/hardware/{gpu}.toml").read_text())
    return spec


def _si(text: str) -> float:
    """A spec quantity in SI units (its unit through the framework's own parser)."""
    return parse_quantity(text)[0]


DECODE = ['workload.kind="decode"', "workload.context=2048", "workload.concurrency=64"]
H200 = "hardware=h200,cluster=hgx-h200-ib,engine=trtllm"


def _terms(model: str, *sets: str, at: str = H200) -> dict[str, float]:
    ev = build_model(f"model={model},{at}", [*DECODE, *sets]).evaluate()
    terms: dict[str, float] = ev["terms"]
    return terms


def _ops(model: str, *sets: str) -> dict[str, Any]:
    ops: dict[str, Any] = build_model(f"model={model},{H200}", [*DECODE, *sets]).evaluate()["ops"]
    return ops


def test_gqa_layers_take_their_family_floor() -> None:
    """Llama-3.1-8B (GQA, FP8 cache): its attention floor is 32 layers x the fp8 roof's
    gqa_attention_floor; restating the MLA kernels' attention_floor leaves it alone."""
    base = _terms("llama-3.1-8b-fp8")
    floor = _si(_spec("h200")["fp8"]["gqa_attention_floor"])
    assert base["attention.core.floor"] == pytest.approx(32 * floor, rel=1e-9)
    moved = _terms("llama-3.1-8b-fp8", "hardware.fp8.gqa_attention_floor=20us")
    assert moved["attention.core.floor"] == pytest.approx(32 * 20e-6, rel=1e-9)
    mla = _terms("llama-3.1-8b-fp8", "hardware.fp8.attention_floor=50us")
    assert mla["attention.core.floor"] == base["attention.core.floor"]


def test_gqa_streaming_is_the_family_bandwidth() -> None:
    """At a batch whose cache read binds, the attention term is the KV bytes at
    gqa_attention_bandwidth_efficiency of HBM: halving the efficiency doubles the term."""
    base = _terms("llama-3.1-8b-fp8", "workload.concurrency=256")
    h200 = _spec("h200")
    eff = h200["fp8"]["gqa_attention_bandwidth_efficiency"]
    half = _terms("llama-3.1-8b-fp8", "workload.concurrency=256",
                  f"hardware.fp8.gqa_attention_bandwidth_efficiency={eff / 2}")  # fmt: skip
    assert half["attention.core"] == pytest.approx(2 * base["attention.core"], rel=1e-9)
    kv = _ops("llama-3.1-8b-fp8", "workload.concurrency=256")["attention.core"]["bytes"]
    bandwidth = _si(h200["hbm_bandwidth"])
    assert base["attention.core"] == pytest.approx(kv / (eff * bandwidth), rel=1e-9)


def test_mla_layers_do_not_read_the_gqa_family() -> None:
    at = "hardware.fp8.gqa_attention_floor=200us"
    base = _terms("deepseek-v3-fp8", "parallel.tp=8")
    assert _terms("deepseek-v3-fp8", "parallel.tp=8", at) == base


def test_a_gpu_without_the_family_prices_gqa_as_attention() -> None:
    """MI300X states no GQA values: a GQA layer's terms equal those of the same op priced
    as the attention kind, so its floor is the GPU's attention_floor."""
    terms = _terms("llama-3.1-8b-fp8", at="hardware=mi300x,cluster=mi300x-8,engine=trtllm")
    floor = _si(_spec("mi300x")["attention_floor"])
    assert terms["attention.core.floor"] == pytest.approx(32 * floor, rel=1e-9)


def test_the_primitive_is_the_models_op(tmp_path: Path) -> None:
    """A `gqa_decode` row priced by calibrate's law equals the model's attention over its cache
    for one layer of Llama-3.1-8B (32 query and 8 KV heads of 128, FP8 cache) at the same
    batch and cache length (decode at context 2048 reads 2049 tokens a query)."""
    table = tmp_path / "one.csv"
    table.write_text("primitive,batch,kv_len,heads,kv_heads,head_dim,kv_bits [bit],precision,"
                     "time [us],source\ngqa_decode,64,2049,32,8,128,8,fp8,100,test\n")  # fmt: skip
    reg = registry.build(autoload=False)
    entry = load_entry(ROOT / "specs/hardware/h200.toml", reg.kinds)
    prob = build_problem(entry, [read_data(table, reg.primitives, "hardware")], reg.primitives)
    (law,) = prob.model(prob.values)
    terms = _terms("llama-3.1-8b-fp8")
    model = (terms["attention.core"] + terms["attention.core.floor"]) / 32
    assert law == pytest.approx(model, rel=1e-3)


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200", "b300", "gb200", "gb300"])
def test_shipped_tables(gpu: str) -> None:
    """Each GPU's table: 120 generation-attention kernels of aiconfigurator's TensorRT-LLM
    1.3.0rc20 collection (six head splits x two cache precisions x 4 batches x 3 lengths), each
    citing its file."""
    with (ROOT / f"specs/calibration/{gpu}-gqa.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 120 and {r["precision"] for r in rows} == {"bf16", "fp8"}
    assert {(r["heads"], r["kv_heads"], r["head_dim"]) for r in rows} == {
        ("32", "8", "128"), ("64", "8", "128"), ("8", "1", "128"), ("8", "1", "64"),
        ("16", "2", "64"), ("4", "1", "256")}  # fmt: skip
    assert all("trtllm/1.3.0rc20/generation_attention_perf.parquet" in r["source"] for r in rows)
