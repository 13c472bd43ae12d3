"""The command outputs pasted in the docs are what the commands print today."""

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("docs_console", ROOT / "tools/docs_console.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("stepwall") is None, reason="console script not installed")
def test_derivations_doc_outputs_are_current() -> None:
    text = (ROOT / "docs" / "derivations.md").read_text(encoding="utf-8")
    _, stale = _tool().refresh(text)
    assert not stale, (
        f"refresh with: python tools/docs_console.py --write docs/derivations.md\n{stale}"
    )
