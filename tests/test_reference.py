"""docs/spec-reference.md is what the built-in plugins declare, to the byte."""

from pathlib import Path

from stepwall.reference import builtin_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "spec-reference.md"


def test_spec_reference_is_in_sync() -> None:
    assert DOC.read_text(encoding="utf-8") == builtin_markdown(), (
        "regenerate: python -m stepwall.reference > docs/spec-reference.md"
    )


def test_every_field_is_documented() -> None:
    text = builtin_markdown()
    assert "| `hbm_bandwidth` | peak device-memory bandwidth |" in text
    assert "| `tp` | tensor-parallel degree | a whole number" in text
