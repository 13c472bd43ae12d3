"""The reference docs (spec fields, analyses, report blocks, formats, JSON Schemas) are what
the registry declares, to the byte."""

import json

from stepwall.apps.reference import builtin_markdown, generated


def test_reference_docs_are_in_sync() -> None:
    stale = [str(p) for p, text in generated().items()
             if not p.is_file() or p.read_text(encoding="utf-8") != text]  # fmt: skip
    assert not stale, f"regenerate: python -m stepwall.apps.reference --write\n{stale}"


def test_every_field_is_documented() -> None:
    text = builtin_markdown()
    assert "| `hbm_bandwidth` | peak device-memory bandwidth |" in text
    assert "| `tp` | tensor-parallel degree | a whole number" in text


def test_every_analysis_block_and_format_is_documented_with_a_schema() -> None:
    files = {p.name: text for p, text in generated().items()}
    ref = files["extensions-reference.md"]
    for name in ("wall", "optimum", "crossover", "elasticity", "regime", "plateau", "tornado"):
        assert f"### `{name}`" in ref
        schema = json.loads(files[f"analysis-{name}.json"])
        assert schema["type"] == "object" and schema["additionalProperties"] is False
    for name in ("heading", "prose", "table", "plot", "formula", "derivation"):
        assert f"### `{name}`" in ref and f"block-{name}.json" in files
    for name in ("text", "json", "csv", "markdown", "parquet"):
        assert f"| `{name}` |" in ref
    wall = json.loads(files["analysis-wall.json"])
    assert wall["required"] == ["key"] and wall["properties"]["eps"]["default"] == 0.15
