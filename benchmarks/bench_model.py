"""Speed of the hot paths: build a model, compile it, evaluate a vectorized grid.

Run: python benchmarks/bench_model.py  (prints seconds; not a test, no thresholds).
Targets: build + first evaluation well under 1 s per scenario; a 10^5-point sweep in
milliseconds, because the expression is lambdified once and evaluated with numpy.
"""

from __future__ import annotations

import time

import numpy as np

from stepwall.model import build_model
from stepwall.spec import catalog_names


def main() -> None:
    for name in catalog_names("scenarios"):
        t0 = time.perf_counter()
        model = build_model(name)
        t1 = time.perf_counter()
        model.evaluate()
        t2 = time.perf_counter()
        grid = {
            "workload.concurrency": np.repeat(np.arange(1, 101), 1000),
            "workload.context": np.tile(np.linspace(1024, 131072, 1000), 100),
        }
        model.evaluate(grid)
        t3 = time.perf_counter()
        print(f"{name:32s} build {t1 - t0:6.3f} s  compile+eval {t2 - t1:6.3f} s  "
              f"1e5-point sweep {t3 - t2:7.4f} s")  # fmt: skip


def derivations() -> None:
    """Each derivation on the calibrated scenario (the issue's target: under 1 s each)."""
    from stepwall import derive

    model = build_model("k26-b300-tp8-ddtree")
    runs = {
        "wall parallel.tp": lambda: derive.wall(model, "parallel.tp"),
        "optimum parallel.tp": lambda: derive.optimum(model, "parallel.tp"),
        "regime parallel.tp": lambda: derive.regime(model, "parallel.tp"),
        "elasticity": lambda: derive.elasticity(model),
        "plateau": lambda: derive.plateau(model),
    }
    for name, fn in runs.items():
        t0 = time.perf_counter()
        fn()
        print(f"derive {name:24s} {time.perf_counter() - t0:6.3f} s")


if __name__ == "__main__":
    main()
    derivations()
