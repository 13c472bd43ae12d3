"""Memory accounting that admits what production runs, and repair hints that are themselves
feasible."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from stepwall.core.errors import SpecError
from stepwall.core.laws import paged_tokens
from stepwall.core.units import parse_quantity
from stepwall.model.compose import build_model

SPECS = Path(__file__).resolve().parents[1] / "specs"
HINT = re.compile(r"; ([a-z_.]+) = (\d+) satisfies every constraint\)")


def _refusal(scenario: str, sets: list[str]) -> str:
    with pytest.raises(SpecError) as e:
        build_model(scenario, sets).check()
    return str(e.value)


def test_deepseek_production_decode_fits() -> None:
    """DeepSeek's decode unit (H800, EP-144, 128 users per GPU) at its published average KV
    length of 4,989 tokens (open-infra-index day 6) runs in production, so it must fit: the
    SGLang profile's --mem-fraction-static is a share of the memory the device reports
    (nvidia-smi / torch.cuda.mem_get_info total), not of a rounded-down figure."""
    m = build_model("dsv3-h800-ep144", ["workload.context=4989"])
    m.check()  # raises where a constraint does not hold
    ev = m.evaluate()
    gpu = tomllib.loads((SPECS / "hardware" / "h800.toml").read_text())
    engine = tomllib.loads((SPECS / "engines" / "sglang.toml").read_text())
    total, _ = parse_quantity(gpu["memory_capacity"])
    assert total == 81559 * 2**20  # MiB as nvidia-smi prints them, not 10^6 bytes
    assert float(ev["memory_capacity_per_gpu"]) == pytest.approx(total * engine["memory_fraction"])
    assert float(ev["memory_bytes_per_gpu"]) <= float(ev["memory_capacity_per_gpu"])


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [
        ("dsv3-h800-ep144", ["parallel.ep=150"]),  # the hint: 150 GPUs of 144
        ("dsv3-h800-ep144", ["workload.context=9000"]),  # KV cache overflows
        ("dsv3-h800-ep144", ["workload.concurrency=40000"]),
        ("dsv3-h200-tp8", ["parallel.tp=1"]),
    ],
)
def test_a_repair_hint_satisfies_every_constraint(scenario: str, sets: list[str]) -> None:
    """The value a hint names, applied, gives a configuration with no violation at all;
    a fix for one constraint that breaks another is not offered."""
    text = _refusal(scenario, sets)
    assert "would satisfy this" not in text
    found = HINT.search(text)
    assert found, text
    key, value = found.groups()
    fixed = [s for s in sets if not s.startswith(f"{key}=")] + [f"{key}={value}"]
    build_model(scenario, fixed).check()


@pytest.mark.parametrize("typed", ["2000", "1e6", "1e20", "1e30"])
def test_a_workload_hint_is_the_largest_size_that_fits(typed: str) -> None:
    """However large the size typed (past int64 too), the hint for an overflowing workload
    size is the largest whole value that fits: it passes every constraint and one more user
    does not. Memory grows with users, so the largest is one point, found by stepping the
    users down one at a time from the first refusal (written here, not the hint's search)."""
    text = _refusal("dsv3-h200-tp8", [f"workload.concurrency={typed}"])
    found = HINT.search(text)
    assert found, text
    key, value = found.groups()
    assert key == "workload.concurrency"
    build_model("dsv3-h200-tp8", [f"{key}={value}"]).check()
    _refusal("dsv3-h200-tp8", [f"{key}={int(value) + 1}"])
    m = build_model("dsv3-h200-tp8")
    users = m.parameter("workload.concurrency")
    sizes = np.arange(1.0, 1024.0)
    fits = np.asarray(m.evaluate({users: sizes})["feasible"], dtype=bool)
    assert int(sizes[fits].max()) == int(value)


def test_a_rate_hint_is_a_rate_that_fits() -> None:
    """A request rate is not a count: its hint is a quantity in its own unit, the largest
    at three significant digits that holds every constraint; the next one up at that
    precision does not."""
    sets = ["workload.arrival=poisson", 'workload.request_rate="1000 1/s"']
    text = _refusal("dsr1-fp8-h200-dep8-trt-serving", sets)
    found = re.search(r'workload\.request_rate = "([\d.]+) 1/s" satisfies every constraint', text)
    assert found, text
    rate = float(found.group(1))
    fixed = [*sets[:1], f'workload.request_rate="{rate} 1/s"']
    build_model("dsr1-fp8-h200-dep8-trt-serving", fixed).check()
    step = 10.0 ** (math.floor(math.log10(rate)) - 2)
    above = f'workload.request_rate="{rate + step:.6g} 1/s"'
    _refusal("dsr1-fp8-h200-dep8-trt-serving", [*sets[:1], above])


def test_no_hint_where_no_single_value_fits() -> None:
    """EP-150 on 144 GPUs at 9,000 tokens of context: no EP degree fits both the cluster and
    memory, so no hint is given rather than one that breaks another constraint."""
    text = _refusal("dsv3-h800-ep144", ["parallel.ep=150", "workload.context=9000"])
    assert "satisf" not in text


def test_paged_tokens_match_block_rounding() -> None:
    """Sequences of lengths spread over many blocks hold ⌈L/b⌉·b slots each: on average
    the law's L + (b − 1)/2."""
    rng = np.random.default_rng(11)
    lengths = rng.integers(1000, 5000, 200_000)
    for block in (1, 16, 32, 64):
        held = np.ceil(lengths / block) * block
        law = float(paged_tokens(sp.Float(lengths.mean()), sp.Integer(block)))
        assert abs(held.mean() - law) <= 4 * held.std() / np.sqrt(held.size) + 1e-9


def test_trtllm_fraction_is_of_the_memory_the_weights_leave_free() -> None:
    """TensorRT-LLM's KV cache takes free_gpu_memory_fraction of what the weights leave; the
    weights themselves are not scaled by it, as SGLang's and vLLM's totals are."""
    ev = build_model("dsv3-h200-tp8", []).evaluate()
    gpu = tomllib.loads((SPECS / "hardware" / "h200.toml").read_text())
    engine = tomllib.loads((SPECS / "engines" / "trtllm.toml").read_text())
    total, _ = parse_quantity(gpu["memory_capacity"])
    weights, f = float(ev["weight_bytes_per_gpu"]), engine["memory_fraction"]
    assert engine["memory_of_free"] is True
    kv_room = float(ev["memory_capacity_per_gpu"]) - weights
    assert kv_room == pytest.approx(f * (total - weights))
    assert kv_room > f * total - weights  # more room than a share of all memory leaves
