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
@pytest.mark.parametrize("doc", ["derivations.md", "physics.md"])
def test_doc_console_outputs_are_current(doc: str) -> None:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    _, stale = _tool().refresh(text)
    assert not stale, f"refresh: python tools/docs_console.py --write docs/{doc}\n{stale}"
