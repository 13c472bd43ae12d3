"""Every console block in the docs prints what the command prints today, and the guide's
example files are the ones committed under docs/examples/."""

import difflib
import importlib.util
from pathlib import Path

import pytest
from conftest import FILE_BLOCK, GUIDE

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(p.name for p in (ROOT / "docs").glob("*.md") if "```console" in p.read_text())


def _tool():
    spec = importlib.util.spec_from_file_location("docs_console", ROOT / "tools/docs_console.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_doc_with_console_blocks_is_checked() -> None:
    assert {"derivations.md", "physics.md", "writing-plugins.md"} <= set(DOCS)


@pytest.mark.slow  # reruns every command in the docs: the slow tier
@pytest.mark.parametrize("doc", DOCS)
def test_doc_console_outputs_are_current(doc: str, guide_env: dict[str, str]) -> None:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    env = guide_env if doc == "writing-plugins.md" else None
    new, stale = _tool().refresh(text, env)
    diff = "\n".join(difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=1))
    assert not stale, f"python tools/docs_console.py --write docs/{doc}\n{stale}\n{diff[:4000]}"


def test_guide_examples_are_the_committed_files() -> None:
    for name, body in FILE_BLOCK.findall(GUIDE.read_text()):
        if name.startswith("docs/examples/"):
            assert (ROOT / name).read_text() == body, name


def test_console_tool_matches_ellipsis_and_timings() -> None:
    tool = _tool()
    assert tool.matches("a\n...\nc\n", "a\nb\nb2\nc\n")
    assert tool.matches("a\n...\nc\n", "a\nc\n")
    assert not tool.matches("a\n...\nc\n", "a\nb\n")
    assert tool.matches("x (imported in 3 ms)\n", "x (imported in 120 ms)\n")
    assert not tool.matches("x 3\n", "x 4\n")


def test_an_internal_error_is_never_written_into_a_doc() -> None:
    """A command that hits a bug keeps the block's old output and is reported as broken."""
    tool = _tool()
    text = "```console\n$ echo 'stepwall: internal error: TypeError: x'\nold output\n```\n"
    broken: list[str] = []
    new, stale = tool.refresh(text, None, broken)
    assert new == text and stale and broken == ["echo 'stepwall: internal error: TypeError: x'"]


def test_no_committed_doc_shows_an_internal_error() -> None:
    docs = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")]
    assert docs and not [d for d in docs if "stepwall: internal error" in d.read_text()]
