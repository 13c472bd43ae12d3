"""Fixture measurements for ``stepwall calibrate``'s tests and docs, made by the model's own
laws: each table's rows are priced with the spec's laws at known values (TRUTH), then given
2% log-normal noise from a fixed seed. Nothing here was measured.

    python tests/data/calibration/generate.py     # rewrite the CSVs and the calibrated specs
    python tools/docs_console.py --write docs/calibration.md     # then the docs' outputs

tests/test_calibrate.py checks that the committed CSVs are what this writes (so after a change
to a law the primitives use, rerun both commands) and that the calibrated specs (the fit of
demo-*.toml to them, written by ``stepwall calibrate -o``) pass ``--check``.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stepwall.apps.calibrate import DataFile, Problem, Row, build_problem, load_entry
from stepwall.plugin import registry

HERE = Path(__file__).resolve().parent
SEED = 20260714
NOISE = 0.02  # the standard deviation of log(measured / law)

# the values the data are generated from (the specs' own values are first guesses)
TRUTH: dict[str, dict[str, float]] = {
    "demo-gpu.toml": {
        "hardware.hbm_efficiency": 0.86,
        "hardware.kernel_floor": 2.3e-6,
        "hardware.bf16.efficiency": 0.78,
        "hardware.bf16.half_rows": 140.0,
        "hardware.bf16.gemm_floor": 5.6e-6,
        "hardware.fp8.efficiency": 0.62,
        "hardware.fp8.half_rows": 260.0,
        "hardware.fp8.gemm_floor": 6.1e-6,
    },
    "demo-cluster.toml": {
        "cluster.scale_up.hop_latency": 1.4e-6,
        "cluster.scale_up.switch_latency": 4.6e-6,
        "cluster.scale_up.bus_bandwidth": 360e9,
        "cluster.scale_up.a2a_latency": 17.5e-6,
        "cluster.scale_up.a2a_peer_latency": 0.18e-6,
        "cluster.scale_up.link_bandwidth": 720e9,
    },
}

Case = tuple[str, dict[str, float], dict[str, str]]  # primitive, sizes (SI), text values


def gemm_cases() -> list[Case]:
    """GEMMs of 1..8192 tokens (steps of √2: the bend at n½ needs points around it) on three
    weight shapes, bf16 and fp8 weights."""
    out: list[Case] = []
    tokens = sorted({round(2 ** (i / 2)) for i in range(27)})
    for precision, bits in (("bf16", 16), ("fp8", 8)):
        for n, k in ((4096, 4096), (7168, 7168), (2048, 7168)):
            for m in tokens:
                sizes = {"m": m, "n": n, "k": k, "weight_bits": bits / 8}
                out.append(("gemm", sizes, {"precision": precision}))
    return out


def copy_cases() -> list[Case]:
    """Copies of 4 KB..4 GB, and a tiny kernel measured 8 times."""
    out: list[Case] = [("memory_copy", {"bytes": 4.0**i * 1024}, {}) for i in range(11)]
    out += [("small_kernel", {}, {}) for _ in range(8)]
    return out


def nccl_cases() -> list[Case]:
    """All-reduces and all-to-alls of 1 KB..256 MB per GPU over 2, 4 and 8 GPUs."""
    out: list[Case] = []
    for prim in ("all_reduce", "all_to_all"):
        for gpus in (2, 4, 8):
            for i in range(0, 19, 2):
                out.append((prim, {"bytes": 1024.0 * 2**i, "gpus": gpus}, {}))
    return out


# file -> (spec, case maker, columns: (name, unit written or "" for a plain number))
TABLES: dict[str, tuple[str, Any, tuple[tuple[str, str], ...]]] = {
    "demo-gemm.csv": (
        "demo-gpu.toml",
        gemm_cases,
        (("m", ""), ("n", ""), ("k", ""), ("weight_bits", "bit"), ("precision", "")),
    ),
    "demo-copy.csv": ("demo-gpu.toml", copy_cases, (("bytes", "MB"),)),
    "demo-nccl.csv": ("demo-cluster.toml", nccl_cases, (("bytes", "KiB"), ("gpus", ""))),
}
UNIT = {"": 1.0, "bit": 0.125, "MB": 1e6, "KiB": 1024.0}
# calibrated spec -> (the spec it starts from, its tables); manifests/ name the same
CALIBRATED = {
    "demo-gpu-calibrated.toml": ("demo-gpu.toml", ("demo-gemm.csv", "demo-copy.csv")),
    "demo-cluster-calibrated.toml": ("demo-cluster.toml", ("demo-nccl.csv",)),
}


def problem_for(spec: Path, cases: Sequence[Case]) -> Problem:
    """The calibration problem of ``cases`` on ``spec`` (measured times are placeholders)."""
    reg = registry.build(autoload=False)
    entry = load_entry(spec, reg.kinds)
    rows = tuple(Row("generated", i + 2, p, sizes, texts, 1.0, "")
                 for i, (p, sizes, texts) in enumerate(cases))  # fmt: skip
    return build_problem(entry, [DataFile(spec, "", rows)], reg.primitives)


def law_times(problem: Problem, truth: Mapping[str, float]) -> np.ndarray:
    """Each row's time by the laws at ``truth``, in the order of the problem's rows."""
    return problem.model({**problem.values, **truth})


def noisy(times: np.ndarray, seed: int, noise: float = NOISE) -> np.ndarray:
    return times * np.exp(np.random.default_rng(seed).normal(0.0, noise, len(times)))


def table(name: str) -> str:
    """The CSV text of one fixture table."""
    spec, cases, columns = TABLES[name]
    problem = problem_for(HERE / spec, cases())
    times = noisy(law_times(problem, TRUTH[spec]), SEED + sorted(TABLES).index(name))
    by_line = {r.line: t for r, t in zip(problem.rows, times, strict=True)}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["primitive", *(f"{c} [{u}]" if u else c for c, u in columns), "time [us]",
                "gpu", "source"])  # fmt: skip
    for i, (prim, sizes, texts) in enumerate(cases()):
        cells = []
        for col, unit in columns:
            value = texts.get(col) if col in texts else sizes.get(col)
            if isinstance(value, float | int):
                value = f"{value / UNIT[unit]:.10g}"
            cells.append(value or "")
        w.writerow([prim, *cells, f"{by_line[i + 2] * 1e6:.5g}", "demo-gpu",
                    f"generate.py: the law at TRUTH, {NOISE:.0%} noise, seed {SEED}"])  # fmt: skip
    return buf.getvalue()


def main(argv: list[str]) -> int:
    from stepwall.cli import main as stepwall

    for name in sorted(TABLES):
        (HERE / name).write_text(table(name), encoding="utf-8")
        print(f"wrote {HERE / name}")
    reg = registry.build(autoload=False)
    for out, (spec, data) in CALIBRATED.items():
        args = [str(HERE / spec), *(a for d in data for a in ("--data", str(HERE / d)))]
        code = stepwall(["calibrate", *args, "-o", str(HERE / out)], registry=reg)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
