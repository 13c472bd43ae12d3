"""Committed outputs are the same bytes on any machine with the pinned dependencies.

Two ways a machine shows through, each tested here: numpy picks SIMD kernels for the CPU at
run time (AVX-512 here, AVX2 or SSE elsewhere), which can change the last bit of a result;
and matplotlib names SVG elements by a hash of their geometry at full float precision. The
slow test regenerates the committed reports with every SIMD path above numpy's baseline
switched off (``NPY_DISABLE_CPU_FEATURES``) — the code path of an older CPU — and compares
them byte for byte with the committed copies.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepwall.apps.report.plots import (
    plot_metric_vs_key,
    plot_predicted_vs_measured,
    stable_svg_ids,
)

ROOT = Path(__file__).resolve().parents[1]


def _dispatched_features() -> list[str]:
    """The SIMD features above numpy's baseline that this CPU has (numpy dispatches to them)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def _metric_plot(xs: list[float], ys: list[float]) -> bytes:
    return plot_metric_vs_key(xs, [("a", ys), ("b", [2 * y for y in ys])], [("wall", xs[2])],
                              "TP", "tokens/s per user", "t", logx=True)  # fmt: skip


def test_svg_ids_do_not_carry_float_bits() -> None:
    """An SVG whose hashed ids differ (as they do when a clip box differs in its last bit) is
    renamed to the same bytes; references follow their element."""
    svg = _metric_plot([1.0, 2.0, 4.0, 8.0], [30.0, 45.0, 52.0, 50.0])
    ids = sorted(set(re.findall(rb'id="((?:p|m)id\d+)"', svg)))
    assert ids, "the plot has no clip path or marker ids to rename"
    assert not re.search(rb'id="[a-zA-Z]+[0-9a-f]{10}"', svg), "a hashed id survived"
    for name in ids:  # every renamed element is referenced as #name
        assert b"#" + name in svg

    # the same picture with other hashes (another CPU's last bits) renames to the same bytes
    def rehash(m: re.Match[bytes]) -> bytes:
        return m.group(1) + b"%010x" % (0xABC0000000 + int(m.group(2)))

    other = re.sub(rb"(p|m)id(\d+)", rehash, svg)
    assert other != svg
    assert stable_svg_ids(other) == svg


def test_last_bit_perturbed_inputs_draw_the_same_bytes() -> None:
    """Inputs one ulp apart (what another SIMD path computes) give the same SVG."""
    xs = [1.0, 2.0, 4.0, 8.0, 16.0]
    ys = [31.7, 44.1, 52.3, 49.9, 40.2]
    up = [float(np.nextafter(v, np.inf)) for v in ys]
    assert _metric_plot(xs, ys) == _metric_plot(xs, up)
    groups = [("x", [1.5, 20.0, 300.0], [1.6, 18.0, 310.0])]
    nudged = [("x", [float(np.nextafter(v, 0)) for v in groups[0][1]], groups[0][2])]
    assert plot_predicted_vs_measured(groups, 0.15, "", "ms") == plot_predicted_vs_measured(
        nudged, 0.15, "", "ms"
    )


def _regenerate(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "stepwall.cli", "report", *args],
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_reports_regenerate_to_the_same_bytes_on_another_cpu_path(tmp_path: Path) -> None:
    """With numpy held to its baseline SIMD path, every committed report and the validation
    page regenerate to the committed bytes."""
    features = _dispatched_features()
    if not features:
        pytest.skip("this CPU has no SIMD path above numpy's baseline to switch off")
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(features), STEPWALL_NO_CACHE="1")
    probe = "from numpy._core._multiarray_umath import __cpu_features__ as f; " \
            f"print([n for n in {features!r} if f[n]])"  # fmt: skip
    check = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                           text=True)  # fmt: skip
    assert check.stdout.strip() == "[]", check.stdout + check.stderr  # the switch took
    committed = ROOT / "docs" / "reports"
    for folder in sorted(p.parent for p in committed.glob("*/REPORT.md")):
        out = tmp_path / folder.name
        _regenerate([folder.name, "-o", str(out)], env)
        for f in sorted(folder.iterdir()):
            assert (out / f.name).read_bytes() == f.read_bytes(), f"{folder.name}/{f.name}"
    page = tmp_path / "validation.md"
    _regenerate(["validation", "-o", str(page)], env)
    assert page.read_bytes() == (ROOT / "docs" / "validation.md").read_bytes()
    for f in sorted((ROOT / "docs" / "validation").iterdir()):
        assert (tmp_path / "validation" / f.name).read_bytes() == f.read_bytes(), f.name


def test_ci_runs_the_readme_commands_with_the_pins() -> None:
    """.ci/run installs with constraints.txt and runs both tiers the README names, with a
    fresh HOME; every package the pins name is one pip can resolve (name==version)."""
    readme = (ROOT / "README.md").read_text()
    test_line = next(line for line in readme.splitlines() if "python -m pytest" in line)
    ci = (ROOT / ".ci" / "run").read_text()
    for step in ("pip install -c constraints.txt -e '.[test]'", "python -m pytest",
                 "python -m pytest -m slow"):  # fmt: skip
        assert step in test_line, step
    assert "pip install -q -c constraints.txt -e '.[test]'" in ci
    assert "\npython -m pytest\n" in ci and "\npython -m pytest -m slow\n" in ci
    assert 'export HOME="$ci_home"' in ci
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#")]  # fmt: skip
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][\w.]*", p) for p in pins), pins
    pinned = {p.split("==")[0].lower().replace("_", "-") for p in pins}
    assert {"numpy", "matplotlib", "sympy", "fonttools"} <= pinned
