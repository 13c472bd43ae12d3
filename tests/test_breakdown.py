"""Each validation regime is right for the right reasons: which laws dominate its step.

The expectations are the physics of the regime, checked on `stepwall eval --json`'s term
times and per-op work, against rates read from the spec files here (not through the model):

- batch 1 on TP-8 (DeepSeek-R1 NVFP4 on B200, min-latency recipe): a few MB of weights per
  kernel, so the step is kernel latencies (floors, launches, GEMMs' k-loops), not bytes or
  FLOPs;
- 896 requests per rank with attention-DP + EP-8 on B200 (TensorRT-LLM's max-throughput
  recipe): the routed experts see ~10^4 tokens a step (hundreds of rows per expert) and are
  compute-bound at the FP4 roof — their FLOPs at the calibrated FP4 rate take longer than their
  bytes at the calibrated MoE streaming rate.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stepwall.cli import main

SPECS = Path(__file__).resolve().parents[1] / "specs"
PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def _rate(text: str) -> float:
    """'9000 TFLOP/s' or '7.7 TB/s' in SI units per second (the spec's own quantity string)."""
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([kMGTP]?)(FLOP|B)/s", text.strip())
    assert m, text
    return float(m[1]) * PREFIX[m[2]]


def _eval(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["eval", *argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert doc["feasible"]
    return doc


NO_K_LOOP = [f'hardware.{p}.gemm_k_latency="0 ns"' for p in ("bf16", "fp8", "fp4")]


def _rooflines(doc: dict[str, Any]) -> float:
    """The step's roofline terms: all but floors, the engine's host time and collectives."""
    return sum(
        t["seconds"] for t in doc["terms"]
        if not t["name"].endswith(".floor") and not t["name"].startswith(("engine.", "comm."))
    )  # fmt: skip


def test_batch1_tp8_is_kernel_floors_and_launches(capsys: pytest.CaptureFixture[str]) -> None:
    """Floors and launches are most of the step; the rooflines' bytes and FLOPs (the GEMMs'
    k-loops set to 0) are a small part, and the k-loops, a latency too, are what the rooflines
    add beyond them."""
    doc = _eval(capsys, "dsr1-fp4-b200-tp8-minlat")
    step = doc["step_time_s"]
    terms = {t["name"]: t["seconds"] for t in doc["terms"]}
    floors = sum(s for n, s in terms.items() if n.endswith(".floor"))
    engine = sum(s for n, s in terms.items() if n.startswith("engine."))
    assert floors + engine > 0.6 * step, (floors, engine, step)
    sets = [a for k in NO_K_LOOP for a in ("--set", k)]
    streaming_and_math = _rooflines(_eval(capsys, "dsr1-fp4-b200-tp8-minlat", *sets))
    assert streaming_and_math < 0.2 * step, (streaming_and_math, step)
    assert _rooflines(doc) > streaming_and_math
    # the weights a GPU reads per step at the HBM's peak rate: far below the measured ~8 ms
    hw = tomllib.loads((SPECS / "hardware" / "b200.toml").read_text())
    streamed = sum(o["bytes_per_gpu"] for o in doc["ops"]) / _rate(hw["hbm_bandwidth"])
    assert streamed < 0.25 * step, (streamed, step)


def test_896_per_rank_routed_experts_are_fp4_compute_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _eval(capsys, "dsr1-fp4-b200-adp-ep8", "--set", "workload.concurrency=7168",
                "--set", 'model.kv_bits="8 bit"')  # fmt: skip
    hw = tomllib.loads((SPECS / "hardware" / "b200.toml").read_text())
    routed = next(o for o in doc["ops"] if o["name"] == "moe.routed_experts")
    fp4 = hw["fp4"]  # the grouped GEMMs' own kernel family at fp4 (plateau, streaming rate)
    compute = routed["flops_per_gpu"] / (_rate(fp4["flops"]) * fp4["moe_efficiency"])
    memory = routed["bytes_per_gpu"] / (
        _rate(hw["hbm_bandwidth"]) * fp4["moe_bandwidth_efficiency"]
    )
    assert compute > 1.5 * memory, (compute, memory)
    # the model's own term is that compute time, slowed by the grouped GEMM's own Hockney
    # ramp in rows per expert (t = flops·(1 + n½/rows)/r∞; rows = picks/hit, from the op's
    # FLOPs and bytes at 4.5-bit NVFP4 weights), not the bytes
    rows = routed["flops_per_gpu"] / (2 * routed["bytes_per_gpu"] / (4.5 / 8))
    term = next(t["seconds"] for t in doc["terms"] if t["name"] == "moe.routed_experts")
    assert term == pytest.approx(compute * (1 + fp4["moe_half_rows"] / rows), rel=1e-6)
    assert term > 1.5 * memory


def test_tp_split_experts_move_each_picks_activations(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 FP8 at TP-8 on H200, 64 users decoding: every GPU holds a slice of every
    expert and all 64 tokens, so it moves each of the 64·8 picks' rows (read at FP8 by the
    first GEMM, written and read back at 16 bits) and each token's state (read, quantised,
    combined: 5 bytes) in all 58 MoE layers, at the FP8 expert family's streaming rate."""
    doc = _eval(capsys, "dsv3-h200-tp8")
    hw = tomllib.loads((SPECS / "hardware" / "h200.toml").read_text())
    tokens, picks, hidden, layers = 64, 64 * 8, 7168, 61 - 3
    moved = layers * hidden * (picks * (1 + 2 * 2) + tokens * (2 * 2 + 1))
    acts = next(o for o in doc["ops"] if o["name"] == "moe.activations")
    assert acts["bytes_per_gpu"] == pytest.approx(moved, rel=1e-9)
    assert acts["flops_per_gpu"] == 0
    rate = _rate(hw["hbm_bandwidth"]) * hw["fp8"]["moe_bandwidth_efficiency"]
    term = next(t["seconds"] for t in doc["terms"] if t["name"] == "moe.activations")
    assert term == pytest.approx(moved / rate, rel=1e-6)
