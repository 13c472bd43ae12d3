"""The explorer page in a real browser: first paint and one control update (not a test).

    python benchmarks/bench_explorer.py                   # k26-b300-tp8-ddtree
    python benchmarks/bench_explorer.py SCENARIO --runs 5

Writes the page with ``stepwall explore`` into a temporary folder, opens it from ``file://`` in
headless Chromium (the system's ``chromium``, driven by Playwright; nothing is fetched), and
reads times the page measures itself with ``performance.now()``:

1. first paint: from navigation start to the second animation frame after the page's first
   full render (metrics, breakdown, constraints, chart with the wall), median of ``--runs``
   fresh loads; also the browser's own first-contentful-paint. Target < 1 s.
2. one control update: typing a new value into a control (hardware.hbm_bandwidth, then
   parallel.tp) runs the compiled model, redraws the page and the chart and recomputes the
   wall; the handler's time as the page measures it, median and 90th percentile of 60
   updates after 10 to warm up; also the input's whole cost before painting (the handler,
   then the browser's style and layout, forced). Target < 16 ms (one frame at 60 Hz).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

FIRST_PAINT_TARGET_MS = 1000.0
UPDATE_TARGET_MS = 16.0

UPDATES = """async ([id, values]) => {
  const box = document.getElementById(id);
  const handler = [], frame = [];
  for (const [i, v] of values.entries()) {
    const t0 = performance.now();
    box.value = String(v);
    box.dispatchEvent(new Event("input"));
    void document.body.offsetHeight;  // style and layout of the new state, now
    const t1 = performance.now();
    if (i >= 10) { handler.push(window.stepwallTiming.update); frame.push(t1 - t0); }
    await new Promise((r) => requestAnimationFrame(() => r()));
  }
  return [handler, frame];
}"""


def line(what: str, ms: float, target: float) -> str:
    verdict = "meets" if ms < target else "MISSES"
    return f"  {what:<44} {ms:8.2f} ms   target < {target:g} ms: {verdict}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?", default="k26-b300-tp8-ddtree")
    ap.add_argument("--runs", type=int, default=5, help="fresh page loads for first paint")
    ns = ap.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("bench_explorer: playwright is not installed (pip install -e '.[test]')")
    chromium = (
        os.environ.get("STEPWALL_CHROMIUM") or shutil.which("chromium") or shutil.which(
            "chromium-browser")
    )  # fmt: skip
    if chromium is None:
        sys.exit("bench_explorer: no chromium on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "explorer.html"
        made = subprocess.run(
            [sys.executable, "-m", "stepwall.cli", "explore", ns.scenario, "-o", str(page_file)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            sys.exit(f"bench_explorer: stepwall explore failed: {made.stderr.strip()}")
        size = page_file.stat().st_size
        print(f"explorer of {ns.scenario}: {size / 1024:.0f} KB, {chromium}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium)
            paints, fcps, readies = [], [], []
            for _ in range(ns.runs):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                    "file:") else r.abort())  # fmt: skip
                page = context.new_page()
                page.goto(page_file.as_uri())
                page.wait_for_function("window.stepwallTiming.firstPaint !== null")
                t: dict[str, Any] = page.evaluate("window.stepwallTiming")
                fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0]"
                                    " || {startTime: NaN}).startTime")  # fmt: skip
                paints.append(t["firstPaint"])
                readies.append(t["ready"])
                fcps.append(fcp)
                context.close()
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(page_file.as_uri())
            page.wait_for_function("window.stepwallTiming.firstPaint !== null")
            handler: list[float] = []
            frame: list[float] = []
            for box, values in (
                ("control-hardware-hbm_bandwidth", [round(5 + 0.05 * i, 2) for i in range(70)]),
                ("control-parallel-tp", [1 + i % 16 for i in range(70)]),
            ):
                if page.query_selector(f"#{box}") is None:
                    continue
                h, f = page.evaluate(UPDATES, [box, values])
                handler += h
                frame += f
            browser.close()
    print(f"first paint (median of {ns.runs} loads)")
    print(line("navigation → first full render painted", statistics.median(paints),
               FIRST_PAINT_TARGET_MS))  # fmt: skip
    script = statistics.median(readies)
    print(f"  {'  of which the page script (compute + DOM)':<44} {script:8.2f} ms")
    print(f"  {'  first-contentful-paint (browser)':<44} {statistics.median(fcps):8.2f} ms")
    print(f"one control update ({len(handler)} updates)")
    print(line("handler: model, page, chart and wall (median)", statistics.median(handler),
               UPDATE_TARGET_MS))  # fmt: skip
    print(line("handler, 90th percentile", pct(handler, 0.9), UPDATE_TARGET_MS))
    print(line("with style and layout (median)", statistics.median(frame), UPDATE_TARGET_MS))
    ok = statistics.median(paints) < FIRST_PAINT_TARGET_MS
    ok = ok and statistics.median(handler) < UPDATE_TARGET_MS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
