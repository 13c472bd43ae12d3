"""Adding an analysis, a report block or an output format is one plugin entry: a throwaway
plugin declares one of each and they appear everywhere the built-ins do (``derive --help``,
a report, ``--format``, the generated reference docs and JSON Schemas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import attrs
import pytest

from stepwall.analyses import Derivation, option
from stepwall.apps import reference
from stepwall.io.formats import Table
from stepwall.plugin.entries import Analysis, BlockKind, Format
from stepwall.plugin.hookspecs import hookimpl

SCENARIO = "k26-b300-tp8-ddtree"


@attrs.frozen
class LargestOptions:
    top: int = option("how many of the largest terms to list", default=1)


def largest(model: Any, o: LargestOptions, context: Any) -> list[Derivation]:
    """The step's largest terms, in seconds at the scenario's point."""
    ev = model.evaluate()
    times = sorted(((float(ev["terms"][t.name]), t.name) for t in model.terms), reverse=True)
    what = "a term's time at the point"
    label = model.scenario.label
    return [
        Derivation("largest", name, seconds, None, "", "", what, "numeric", scenario=label)
        for seconds, name in times[: o.top]
    ]


@attrs.frozen
class BannerOptions:
    text: str = option("what the banner says")
    level: int = option("heading level", default=2)


def banner(report: Any, o: BannerOptions, at: str) -> list[str]:
    return ["#" * o.level + " *** " + o.text + " ***"]


def tsv(table: Table, out: IO[str]) -> None:
    out.write("\t".join(c.header for c in table.columns) + "\n")
    for row in table.rows():
        out.write("\t".join(str(v) for v in row) + "\n")


class Extras:
    """The throwaway plugin: one analysis, one block kind, one format."""

    @hookimpl
    def stepwall_analyses(self) -> list[Analysis]:
        return [Analysis("largest", "the step's largest terms at the point", LargestOptions,
                         largest, many=True)]  # fmt: skip

    @hookimpl
    def stepwall_report_blocks(self) -> list[BlockKind]:
        return [BlockKind("banner", "a loud heading", BannerOptions, banner)]

    @hookimpl
    def stepwall_formats(self) -> list[Format]:
        return [Format("tsv", "tab-separated values", (".tsv",), tsv)]


@pytest.fixture
def kit(stepwall_plugin: Any) -> Any:
    return stepwall_plugin(Extras())


def test_the_analysis_is_a_derive_choice_with_its_options(kit: Any) -> None:
    code, out, _ = kit.cli("derive", "--help")
    assert code == 0 and "largest" in out
    code, out, _ = kit.cli("derive", SCENARIO, "largest", "--help")
    assert code == 0 and "--top" in out and "how many of the largest terms" in out


def test_the_analysis_runs_and_its_options_are_validated(kit: Any) -> None:
    code, out, err = kit.cli("derive", SCENARIO, "largest", "--top", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)["results"]
    assert [r["kind"] for r in rows] == ["largest", "largest"]
    assert rows[0]["value"] >= rows[1]["value"] > 0
    code, _, err = kit.cli("derive", SCENARIO, "largest", "--top", "two")
    assert code == 2 and "--top" in err and "Traceback" not in err


def test_without_the_plugin_there_is_no_such_analysis(stepwall_plugin: Any) -> None:
    code, _, err = stepwall_plugin().cli("derive", SCENARIO, "largest")
    assert code == 2 and "largest" in err


def test_the_block_and_the_analysis_render_in_a_report(kit: Any, tmp_path: Path) -> None:
    spec = tmp_path / "extras.toml"
    spec.write_text(
        f"""title = "Extras"
[scenarios]
base = "{SCENARIO}"

[[block]]
kind = "banner"
text = "from a plugin"
level = 3

[[block]]
kind = "derivation"
id = "big"
derive = "largest"
scenario = "base"
top = 3
title = "Largest terms"
"""
    )
    out = tmp_path / "out"
    code, _, err = kit.cli("report", str(spec), "-o", str(out))
    assert code == 0, err
    text = (out / "REPORT.md").read_text()
    assert "### *** from a plugin ***" in text
    assert "Largest terms" in text and "moe.routed_experts" in text


def test_a_bad_block_option_names_the_block_and_key(kit: Any, tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('title = "x"\n[scenarios]\nbase = "k26-b300-tp8-ddtree"\n'
                    '[[block]]\nkind = "banner"\ntext = "t"\nlevel = "loud"\n')  # fmt: skip
    code, _, err = kit.cli("report", str(spec), "-o", str(tmp_path / "o"))
    assert code == 2
    assert "bad.toml" in err and "level" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing written half-way


def test_the_format_writes_sweeps_by_name_and_by_suffix(kit: Any, tmp_path: Path) -> None:
    code, out, err = kit.cli("sweep", SCENARIO, "--vary", "parallel.tp=8,16", "--format", "tsv")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("parallel.tp\t") and len(lines) == 3
    path = tmp_path / "tp.tsv"
    code, _, err = kit.cli("sweep", SCENARIO, "--vary", "parallel.tp=8,16", "-o", str(path))
    assert code == 0, err
    assert path.read_text() == out


def test_the_generated_docs_and_schemas_list_them(kit: Any) -> None:
    text = reference.entries_markdown(kit.registry)
    assert "### `largest`" in text and "how many of the largest terms" in text
    assert "### `banner`" in text and "| `tsv` |" in text
    schemas = reference.schemas(kit.registry)
    doc = json.loads(schemas["analysis-largest.json"])
    assert doc["properties"]["top"]["type"] == "integer"
    assert set(json.loads(schemas["block-banner.json"])["required"]) >= {"text"}
