"""Configuration search speed, each figure measured in this one run (not a test).

    python benchmarks/bench_search.py            # 1. and 2.
    python benchmarks/bench_search.py --big      # 3. too: a 10^8-point search's peak memory

1. Vectorized evaluation of the full K2.6 model (k26-b300-tp8-ddtree: every term, op and
   constraint the compiled model returns) over arrays of workload.concurrency and parallel.tp,
   as the search feeds it, in its chunks: points per CPU-second (per core: the process is
   single-threaded, so CPU time is what one core gives it whatever else the machine runs) and
   per wall-clock second. Target ≥ 10 M points per core-second.
2. A search of DeepSeek-V3 layouts on 8–72 GPUs of HGX H200 and HGX B200 (every tp × ep × dp,
   1–2500 users per attention rank: more than 10^6 points) in one process: seconds (target
   < 10 s on one core) and its rate against aiconfigurator's own search rate, which the issue
   measured at ~150 configurations per second (~900 in ~6 s); aiconfigurator itself is not
   installed here.
3. With --big, a 10^8-point search (the same space × 100 values of hardware.hbm_bandwidth) in
   a fresh process: wall time and peak resident memory (the chunks keep it bounded).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

K26 = "k26-b300-tp8-ddtree"
AIC = 150.0  # configurations per second (aiconfigurator: ~900 configurations in ~6 s)
SEARCH = ["deepseek-v3-fp8", "--hardware", "h200,b200", "--cluster", "hgx-h200-ib,hgx-b200-ib",
          "--gpus", "8..72:8", "--engine", "trtllm", "--batch", "1..2500",
          "--at", "tokens_per_s_per_user>=50", "--spread", "0"]  # fmt: skip


def vectorized(chunk: int, repeat: int) -> tuple[float, float]:
    """(points per CPU-second, per wall second) of the compiled K2.6 model."""
    from stepwall import registry as registries
    from stepwall.compiled import compile_scenario
    from stepwall.validation import load_scenario

    reg = registries.default()
    sc = load_scenario(K26, reg.kinds)
    numeric = compile_scenario(sc, reg)
    values: dict[str, object] = {s.name: float(v) for s, v in sc.values.items()}
    rng = np.random.default_rng(0)
    values["workload.concurrency"] = rng.integers(1, 2049, chunk).astype(float)
    values["parallel.tp"] = rng.choice([1.0, 2.0, 4.0, 8.0], chunk)
    numeric.evaluate(values)  # warm: compile the source
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        numeric.evaluate(values)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return repeat * chunk / cpu, repeat * chunk / wall


def search_run() -> tuple[int, float, float]:
    """(points, CPU seconds, wall seconds) of the DeepSeek-V3 search, models compiled first
    (from the cache, as after any first run) so that the evaluation is what is timed."""
    from stepwall import search
    from stepwall.cli import main

    with open(os.devnull, "w") as null:  # compile (or load) the models once
        saved, sys.stdout = sys.stdout, null
        try:
            main(["search", *SEARCH, "--batch", "1", "--json"])
        finally:
            sys.stdout = saved
    spec = search.Spec(targets=(search.parse_condition("tokens_per_s_per_user>=50", "--at"),))
    plan = search.plan_search(
        "deepseek-v3-fp8", ["h200", "b200"], ["hgx-h200-ib", "hgx-b200-ib"],
        gpus=list(range(8, 73, 8)), engine="trtllm", batch=list(range(1, 2501)), spec=spec,
    )  # fmt: skip
    cpu, wall = time.process_time(), time.perf_counter()
    result = search.run_search(plan)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.evaluated == plan.total
    return plan.total, cpu, wall


def big() -> tuple[int, float, float]:
    """(points, wall seconds, peak RSS MiB) of a 10^8-point search in a fresh process."""
    argv = [sys.executable, "-m", "stepwall.cli", "search", *SEARCH,
            "--vary", "hardware.hbm_bandwidth=4TB/s..8TB/s:100lin", "--json"]  # fmt: skip
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"benchmark: the 10^8 search failed: {err.read().decode().strip()}")
        out.seek(0)
        import json

        points = json.loads(out.read())["evaluated"]
    return points, wall, usage.ru_maxrss / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--big", action="store_true", help="also the 10^8-point search (minutes)")
    p.add_argument("--chunk", type=int, default=65_536, help="points per call (65536)")
    ns = p.parse_args()
    per_cpu, per_wall = vectorized(ns.chunk, 20)
    ok = per_cpu >= 10e6
    print(f"1. K2.6 vectorized: {per_cpu / 1e6:.2f} M points per core-second "
          f"({per_wall / 1e6:.2f} M per wall second); target ≥ 10 M: "
          f"{'meets' if ok else 'MISSES'} target")  # fmt: skip
    n, cpu, wall = search_run()
    print(f"2. DeepSeek-V3 search, 8-72 GPUs, H200 + B200: {n:,} points in {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU ({n / cpu / 1e6:.2f} M points per core-second); target < 10 s on "
          f"one core: {'meets' if cpu < 10 else 'MISSES'} target; "
          f"{n / cpu / AIC:,.0f}× aiconfigurator's ~{AIC:.0f} configurations/s")  # fmt: skip
    if ns.big:
        n, wall, rss = big()
        print(f"3. {n:,}-point search in a fresh process: {wall:.0f} s wall, peak RSS "
              f"{rss:.0f} MiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
