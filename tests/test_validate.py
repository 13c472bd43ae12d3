"""stepwall validate: tables of published measurements, their errors, the shipped table's
coverage, and the docs page regenerated from it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from stepwall.apps import validate
from stepwall.cli import main
from stepwall.model.compose import build_model
from stepwall.spec.loader import read_toml

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "specs" / "validation"

ROW = """
[[row]]
id = "{id}"
class = "tp_batch1"
scenario = "gptoss-h100-tp8"
metric = "tokens_per_s_per_user"
measured = "{measured}"
source = "a test"
url = "https://example.org"
"""


def _table(tmp_path: Path, text: str, name: str = "t.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_error_is_predicted_over_measured(tmp_path, capsys):
    """The row's prediction is the scenario's metric, and its error predicted/measured − 1."""
    predicted = build_model("gptoss-h100-tp8").evaluate()["tokens_per_s_per_user"]
    table = _table(tmp_path, ROW.format(id="a", measured="250 tokens/s")
                   + ROW.format(id="b", measured="0.5 ktokens/s"))  # fmt: skip
    assert main(["validate", str(table), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    a, b = doc["rows"]
    assert a["predicted"] == pytest.approx(float(predicted), rel=1e-9)
    assert a["error"] == pytest.approx(float(predicted) / 250 - 1, rel=1e-9)
    assert b["measured"] == pytest.approx(500)
    errs = sorted([abs(a["error"]), abs(b["error"])])
    assert doc["summary"]["median_abs_error"] == pytest.approx(sum(errs) / 2)
    assert doc["summary"]["worst_abs_error"] == pytest.approx(errs[1])


def test_divide_by_turns_a_per_node_figure_per_gpu(tmp_path, capsys):
    text = ROW.format(id="a", measured="2400 tokens/s").replace(
        'metric = "tokens_per_s_per_user"', 'metric = "tokens_per_s_per_gpu"\ndivide_by = 8'
    )
    assert main(["validate", str(_table(tmp_path, text)), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["measured"] == pytest.approx(300)


def test_gates_exit_one_when_exceeded(tmp_path, capsys):
    table = _table(tmp_path, ROW.format(id="a", measured="100 tokens/s"))
    assert main(["validate", str(table), "--max-worst", "0.01"]) == 1
    assert main(["validate", str(table), "--max-worst", "1%"]) == 1
    assert main(["validate", str(table), "--max-median", "10000%"]) == 0
    out = capsys.readouterr().out
    assert "median |error|" in out and "worst" in out


@pytest.mark.parametrize("bound", ["15", "-0.1", "nan", "abc", "-5%"])
def test_a_gate_is_a_fraction_or_a_percentage(bound, capsys):
    """'--max-median 15' would be 1500%: refused in one line rather than never failing."""
    assert main(["validate", "--max-median", bound]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-median" in err


def test_fill_memory_finds_the_largest_batch_that_fits(tmp_path):
    text = ROW.format(id="a", measured="1000 tokens/s").replace(
        'scenario = "gptoss-h100-tp8"',
        'scenario = "llama8b-h100-serving"\nfill_memory = true',
    )
    (res,) = validate.predict(validate.load_rows([_table(tmp_path, text)]))
    c = res.concurrency
    assert c is not None and c > 1
    model = build_model("llama8b-h100-serving")
    fits = model.evaluate({"workload.concurrency": c})
    over = model.evaluate({"workload.concurrency": c + 1})
    assert fits["memory_bytes_per_gpu"] <= fits["memory_capacity_per_gpu"]
    assert over["memory_bytes_per_gpu"] > over["memory_capacity_per_gpu"]
    assert res.predicted == pytest.approx(float(fits["tokens_per_s_per_user"]), rel=1e-9)


@pytest.mark.parametrize(
    "old, new, key, problem",
    [
        ('class = "tp_batch1"', 'class = "fast"', "row[0].class:", "fast"),
        ('measured = "100 tokens/s"', 'measured = "100 ms"', "row[0].measured", "not a"),
        ('measured = "100 tokens/s"', 'measured = "-1 tokens/s"', "row[0].measured",
         "not positive"),
        ('scenario = "gptoss-h100-tp8"', 'scenario = "nope"', "row[0].scenario", "nope"),
        ('url = "https://example.org"', 'url = "x"\nspeed = 3', "row[0]", "speed"),
        ('metric = "tokens_per_s_per_user"', 'metric = "tokens_per_user"', "row[0].metric",
         "unknown metric"),
    ],
)  # fmt: skip
def test_bad_rows_are_one_line_errors(tmp_path, capsys, old, new, key, problem):
    text = ROW.format(id="a", measured="100 tokens/s")
    assert old in text
    table = _table(tmp_path, text.replace(old, new))
    assert main(["validate", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(table) in err and key in err and problem in err, err


def test_duplicate_ids_are_refused(tmp_path, capsys):
    text = ROW.format(id="a", measured="1 tokens/s") * 2
    assert main(["validate", str(_table(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert "row[1].id" in err and "also" in err


def test_an_infeasible_row_has_no_prediction_and_no_error(tmp_path, capsys):
    """A row whose configuration cannot run is listed as infeasible, with the constraint, and
    left out of the summary: no error figure (never an infinite one) stands for it."""
    text = ROW.format(id="a", measured="100 tokens/s") + '\nset = ["parallel.tp=1"]\n'
    text = text.replace('scenario = "gptoss-h100-tp8"', 'scenario = "dsv3-h200-tp8-prefill"')
    text = text.replace("tokens_per_s_per_user", "tokens_per_s_per_gpu")
    assert main(["validate", str(_table(tmp_path, text)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"][0]["predicted"] is None and "memory" in doc["rows"][0]["infeasible"]
    assert doc["summary"]["worst_abs_error"] is None
    assert doc["summary"]["median_abs_error"] is None
    assert main(["validate", str(_table(tmp_path, text))]) == 0
    out = capsys.readouterr().out
    assert "inf%" not in out and "infeasible" in out


# ---------------------------------------------------------------- the shipped table


def _scenario_key(row: validate.Row, key: str) -> str:
    """A top-level key of a row's scenario, following one ``[engine] from = …``."""
    doc = read_toml(row.scenario)
    value = doc.get(key)
    if isinstance(value, dict):
        value = value.get("from")
    return str(value)


def test_shipped_table_covers_the_regimes():
    """≥ 20 rows, ≥ 4 GPU types, ≥ 3 engines, batch 1 to ≥ 512 per rank, each class, with
    and without MTP, a source for each."""
    rows = validate.load_rows(validate.default_tables())
    assert len(rows) >= 20
    gpus = {_scenario_key(r, "hardware") for r in rows}
    engines = {_scenario_key(r, "engine") for r in rows}
    assert len(gpus) >= 4, gpus
    assert {"trtllm", "sglang", "vllm"} <= engines, engines
    classes = {r.spec.row_class for r in rows}
    assert {"tp_batch1", "dp_ep_node", "wide_ep", "prefill", "dense"} <= classes
    assert sum(r.spec.row_class == "prefill" for r in rows) >= 2
    mtp = [r for r in rows if any("mtp" in s for s in r.spec.set)]
    assert mtp and len(mtp) < len(rows)
    for r in rows:
        assert r.spec.url.startswith("https://") and r.spec.source


@pytest.mark.slow  # every published row built and evaluated: minutes on 2 cores
def test_shipped_table_meets_the_median_target():
    """The median |error| over the shipped single-configuration rows (published.toml: the
    corners, batch 1 to maximum throughput) is within 15% (docs/validation.md shows every row
    of every table, the worst included, and the middle, frontier and latency classes' own
    medians)."""
    published = [t for t in validate.default_tables() if t.name == "published.toml"]
    results = validate.predict(validate.load_rows(published))
    s = validate.summary(results)
    assert not [r.row.spec.id for r in results if r.infeasible]
    assert s["median_abs_error"] <= 0.15, validate.text(results)
    per_rank = [float(r.model.substituted(r.model.layout.users_per_attention_rank))
                for r in results if r.concurrency is None]  # fmt: skip
    assert min(per_rank) == 1 and max(per_rank) >= 512


@pytest.mark.slow
def test_docs_page_is_regenerated_from_the_table(tmp_path):
    """docs/validation.md and docs/validation/ are what `stepwall report validation -o
    docs/validation.md` writes, byte for byte."""
    page = ROOT / "docs" / "validation.md"
    text = page.read_text()
    cmd = text.split("Regenerate with:\n\n```\n", 1)[1].split("\n```", 1)[0]
    args = shlex.split(cmd)
    assert args[:3] == ["stepwall", "report", "validation"]
    out = tmp_path / "validation.md"
    assert main(["report", "validation", "-o", str(out)]) == 0
    assert out.read_text() == text
    for f in (ROOT / "docs" / "validation").iterdir():
        assert (tmp_path / "validation" / f.name).read_bytes() == f.read_bytes(), f.name
