"""The package type-checks under mypy --strict, run exactly as a contributor would: ``mypy``
with no arguments, from pyproject's [tool.mypy] (no symlink tool, no extra path)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.slow  # a cold mypy run of the whole package
def test_mypy_strict_passes(tmp_path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success: no issues found" in run.stdout
