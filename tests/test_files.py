"""The one atomic write and the one JSON writer (stepwall.numeric.files), and the allocator
setting that the library leaves alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from stepwall.numeric.files import atomic_write, json_text


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    atomic_write(target, "näive\n")
    assert target.read_bytes() == "näive\n".encode()
    atomic_write(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    atomic_write(target, lambda f: f.write("a\r\nb"), text=True)
    assert target.read_bytes() == b"a\r\nb"  # newlines as written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_failed_check_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "entry.toml"
    target.write_text("old")
    seen: list[tuple[str, str]] = []

    def check(tmp: Path) -> None:
        seen.append((tmp.suffix, tmp.read_text()))
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        atomic_write(target, "new", check=check)
    assert seen == [(".toml", "new")]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.toml"]


def test_a_failing_fill_leaves_nothing(tmp_path: Path) -> None:
    def fill(f: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "new.bin", fill)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_sets_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "shared.html"
    atomic_write(target, "x", mode=0o644)
    assert target.stat().st_mode & 0o777 == 0o644
    atomic_write(target, "y")
    assert target.stat().st_mode & 0o777 == 0o600  # mkstemp's


def test_json_text_finite_writes_null_and_plain_reads_back() -> None:
    doc = {"a": [1.5, float("nan"), (float("inf"), 2)], "b": "x"}
    assert json_text(doc, finite=True) == '{"a": [1.5, null, [null, 2]], "b": "x"}'
    assert json_text(doc) == '{"a": [1.5, NaN, [Infinity, 2]], "b": "x"}'
    assert json_text({"k": 1}, indent=2) == '{\n  "k": 1\n}'
    assert json_text({"k": object()}, default=lambda x: "obj") == '{"k": "obj"}'


def test_evaluating_a_model_leaves_the_allocator_alone() -> None:
    """Only a program that asks (the CLI) tunes glibc's allocator, never a library call."""
    code = (
        "import numpy as np\n"
        "from stepwall.numeric import compiled\n"
        "from stepwall.model.compose import compile_scenario\n"
        "from stepwall.spec.validation import load_scenario\n"
        "from stepwall.testing import registry\n"
        "reg = registry()\n"
        "sc = load_scenario('k26-b300-tp8-ddtree', reg.kinds)\n"
        "numeric = compile_scenario(sc, reg)\n"
        "values = {s.name: float(v) for s, v in sc.values.items()}\n"
        "values['workload.concurrency'] = np.arange(1.0, 9.0)\n"
        "numeric.evaluate(values)\n"
        "print(len(compiled._ALLOCATOR))\n"
        "compiled.keep_freed_memory()\n"
        "compiled.keep_freed_memory()\n"
        "print(len(compiled._ALLOCATOR))\n"
    )
    env = {**os.environ, "STEPWALL_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]
