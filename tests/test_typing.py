"""The package type-checks under mypy --strict (pyproject's [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.slow  # a cold mypy run of the whole package
def test_mypy_strict_passes() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "typecheck.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success: no issues found" in run.stdout
