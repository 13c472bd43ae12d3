"""Configuration search speed, each figure measured in this one run (not a test).

    python benchmarks/bench_search.py            # 1. and 2.
    python benchmarks/bench_search.py --big      # 3. too: a 10^8-point search's peak memory

1. Vectorized evaluation of the full K2.6 model (k26-b300-tp8-ddtree: every metric, term,
   op and constraint the compiled model returns, and the feasibility of each point) on a
   chunk of 65,536 configurations fed as the search feeds it: a block of its grid, the layout
   (parallel.tp = 1, 2, 4, 8) as a column and the users (workload.concurrency = 1…16,384) as
   a row, so that numpy computes what depends on one of them once per row or column. Points
   per CPU-second (per core: the process is single-threaded, so CPU time is what one core
   gives it whatever else the machine runs) and per wall-clock second; target ≥ 10 M points
   per core-second. For reference, the same number of points given as flat arrays (each
   point its own random tp and concurrency), which computes everything for every point.
2. A search of DeepSeek-V3 layouts on 8–72 GPUs of HGX H200 and HGX B200 (every tp × ep × dp,
   1–2500 users per attention rank: more than 10^6 points) in one process: seconds (target
   < 10 s on one core) and its rate against aiconfigurator's own search rate. With
   aiconfigurator installed (``pip install aiconfigurator`` in its own environment; pass its
   executable with --aiconfigurator, or have it on PATH), it runs here on a comparable space,
   DeepSeek-V3 on 8 H200 with TensorRT-LLM, aggregated serving, and its rate is the
   configurations it reports for that experiment over the experiment's time in its log (and
   over its whole run); otherwise the issue's ~150 configurations per second is cited.
   A disaggregated search (``--disagg``) of the same model on HGX H200, HGX B200 and GB200
   NVL72: decode pools on 8–72 GPUs at 1–2500 users per attention rank and prefill pools on
   8–72 GPUs at 1–32 prompts per rank (every layout), the aggregated space beside them, paired
   into deployments of at most 144 GPUs within a TTFT p90 of 2 s: seconds on one core (target
   < 10 s), models compiled first.
3. With --big, a 10^8-point search (the same space × 100 values of hardware.hbm_bandwidth) in
   a fresh process: wall time and peak resident memory (the chunks keep it bounded).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from stepwall.numeric.compiled import keep_freed_memory

K26 = "k26-b300-tp8-ddtree"
AIC = 150.0  # configurations per second (aiconfigurator: ~900 configurations in ~6 s)
SEARCH = ["deepseek-v3-fp8", "--hardware", "h200,b200", "--cluster", "hgx-h200-ib,hgx-b200-ib",
          "--gpus", "8..72:8", "--engine", "trtllm", "--batch", "1..2500",
          "--at", "tokens_per_s_per_user>=50", "--spread", "0"]  # fmt: skip


def vectorized(chunk: int, repeat: int, grid: bool = True) -> tuple[float, float]:
    """(points per CPU-second, per wall second) of the compiled K2.6 model on ``chunk``
    points: a grid block (tp column × concurrency row) or, with ``grid=False``, flat."""
    from stepwall.model.compose import compile_scenario
    from stepwall.plugin import registry as registries
    from stepwall.spec.validation import load_scenario

    reg = registries.default()
    sc = load_scenario(K26, reg.kinds)
    numeric = compile_scenario(sc, reg)
    values: dict[str, object] = {s.name: float(v) for s, v in sc.values.items()}
    tp = np.array([1.0, 2.0, 4.0, 8.0])
    if grid:
        values["parallel.tp"] = tp[:, None]
        values["workload.concurrency"] = np.arange(1.0, chunk // tp.size + 1)[None, :]
    else:
        rng = np.random.default_rng(0)
        values["workload.concurrency"] = rng.integers(1, 2049, chunk).astype(float)
        values["parallel.tp"] = rng.choice(tp, chunk)
    numeric.evaluate(values)  # warm: compile the source
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        numeric.evaluate(values)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return repeat * chunk / cpu, repeat * chunk / wall


def search_run() -> tuple[int, float, float]:
    """(points, CPU seconds, wall seconds) of the DeepSeek-V3 search, models compiled first
    (from the cache, as after any first run) so that the evaluation is what is timed."""
    from stepwall.apps import search
    from stepwall.cli import main

    with open(os.devnull, "w") as null:  # compile (or load) the models once
        saved, sys.stdout = sys.stdout, null
        try:
            warm = list(SEARCH)
            warm[warm.index("--batch") + 1] = "1"  # one batch size: only the compile is wanted
            main(["search", *warm, "--json"])
        finally:
            sys.stdout = saved
    spec = search.Spec(targets=(search.parse_condition("tokens_per_s_per_user>=50", "--at"),))
    plan = search.plan_search(
        "deepseek-v3-fp8", ["h200", "b200"], ["hgx-h200-ib", "hgx-b200-ib"],
        gpus=list(range(8, 73, 8)), engines=["trtllm"], batch=list(range(1, 2501)), spec=spec,
    )  # fmt: skip
    cpu, wall = time.process_time(), time.perf_counter()
    result = search.run_search(plan)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.evaluated == plan.total
    return plan.total, cpu, wall


DISAGG = ["deepseek-v3-fp8", "--hardware", "h200,b200,gb200",
          "--cluster", "hgx-h200-ib,hgx-b200-ib,gb200-nvl72", "--gpus", "8..72:8",
          "--engine", "trtllm", "--batch", "1..2500", "--disagg", "--prefill-gpus", "8..72:8",
          "--prefill-batch", "1..32", "--max-gpus", "144", "--ttft", "p90<=2s",
          "--at", "tokens_per_s_per_user>=50", "--spread", "0", "-q"]  # fmt: skip


def disagg_run() -> tuple[int, float, float]:
    """(points of the three spaces, CPU seconds, wall seconds) of the disaggregated search
    (`DISAGG`) through its command line, models compiled (or loaded) by a first run."""
    from stepwall.cli import main

    with open(os.devnull, "w") as null:
        saved, sys.stdout = sys.stdout, null
        try:
            main(["search", *DISAGG, "--json"])  # compile (or load) the models once
            cpu, wall = time.process_time(), time.perf_counter()
            main(["search", *DISAGG, "--json"])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            sys.stdout = saved
    from stepwall.apps import disagg, search
    from stepwall.plugin import registry as registries

    reg = registries.default()
    ns = search.SearchOptions(*DISAGG[:1], hardware=DISAGG[2], cluster=DISAGG[4], gpus="8..72:8",
                              engine="trtllm", batch="1..2500", disagg=True,
                              prefill_gpus="8..72:8", prefill_batch="1..32")  # fmt: skip
    agg, dec, pre, _ = disagg.plans(ns, reg, search.search_spec(ns, reg))
    assert agg is not None
    return agg.total + dec.total + pre.total, cpu, wall


AIC_ARGS = ["cli", "default", "--model-path", "deepseek-ai/DeepSeek-V3", "--total-gpus", "8",
            "--system", "h200_sxm", "--backend", "trtllm", "--serving-mode", "agg",
            "--isl", "4000", "--osl", "1000", "--ttft", "5000", "--tpot", "50",
            "--no-color"]  # fmt: skip


def aiconfigurator(exe: str) -> tuple[int, float, float]:
    """(configurations, experiment seconds from its log, whole-run seconds) of one
    aiconfigurator search (`AIC_ARGS`), run in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="aic-") as tmp:
        t0 = time.perf_counter()
        run = subprocess.run([exe, *AIC_ARGS, "--save-dir", tmp], capture_output=True,
                             text=True, cwd=tmp, check=False)  # fmt: skip
        whole = time.perf_counter() - t0
    log = run.stdout + run.stderr
    start = re.search(r"(\d\d):(\d\d):(\d\d) .*Starting experiment: agg", log)
    done = re.search(r"(\d\d):(\d\d):(\d\d) .*Experiment agg completed with (\d+) results", log)
    if run.returncode != 0 or not start or not done:
        sys.exit(f"benchmark: aiconfigurator failed (rc {run.returncode}): {log.strip()[-400:]}")

    def secs(m: re.Match[str]) -> int:
        return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))

    return int(done.group(4)), float((secs(done) - secs(start)) % 86400), whole


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
    keep_freed_memory()  # as the CLI does: the allocator setting for many vectorized calls
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--big", action="store_true", help="also the 10^8-point search (minutes)")
    p.add_argument("--chunk", type=int, default=65_536, help="points per call (65536)")
    p.add_argument("--aiconfigurator", default=shutil.which("aiconfigurator"),
                   help="aiconfigurator's executable (default: on PATH, if installed)")  # fmt: skip
    ns = p.parse_args()
    per_cpu, per_wall = max(vectorized(ns.chunk, 20) for _ in range(3))
    flat_cpu, _ = max(vectorized(ns.chunk, 20, grid=False) for _ in range(3))
    ok = per_cpu >= 10e6
    print(f"1. K2.6 vectorized, a grid block as the search feeds it: {per_cpu / 1e6:.2f} M "
          f"points per core-second ({per_wall / 1e6:.2f} M per wall second); target ≥ 10 M: "
          f"{'meets' if ok else 'MISSES'} target (flat: {flat_cpu / 1e6:.2f} M)")  # fmt: skip
    n, cpu, wall = search_run()
    print(f"2. DeepSeek-V3 search, 8-72 GPUs, H200 + B200: {n:,} points in {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU ({n / cpu / 1e6:.2f} M points per core-second); target < 10 s on "
          f"one core: {'meets' if cpu < 10 else 'MISSES'} target")  # fmt: skip
    n, cpu, wall = disagg_run()
    print(f"   disaggregated search, H200 + B200 + GB200, decode and prefill pools on 8-72 GPUs: "
          f"{n:,} points in {wall:.2f} s wall, {cpu:.2f} s CPU; target < 10 s on one core: "
          f"{'meets' if cpu < 10 else 'MISSES'} target")  # fmt: skip
    if ns.aiconfigurator:
        configs, exp_s, whole_s = aiconfigurator(ns.aiconfigurator)
        rate = configs / max(exp_s, 1.0)
        print(f"   aiconfigurator (DeepSeek-V3, 8 H200, TensorRT-LLM, aggregated), run here: "
              f"{configs} configurations in {exp_s:.0f} s of search ({whole_s:.1f} s whole run)"
              f" = {rate:.0f} configurations/s; stepwall: {n / cpu / rate:,.0f}× that")  # fmt: skip
    else:
        print(f"   aiconfigurator not installed: against its cited ~{AIC:.0f} configurations/s, "
              f"stepwall is {n / cpu / AIC:,.0f}× faster")  # fmt: skip
    if ns.big:
        n, wall, rss = big()
        print(f"3. {n:,}-point search in a fresh process: {wall:.0f} s wall, peak RSS "
              f"{rss:.0f} MiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
