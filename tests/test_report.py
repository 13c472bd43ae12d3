"""`stepwall report`: byte-reproducible output, committed reports up to date, consistent
numbers and prose under an override, one-line errors for bad report specs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from stepwall.cli import main
from stepwall.model.compose import build_model

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "docs" / "reports"
SHIPPED = "k26-cluster-scaling"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _fresh(args: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, bytes]:
    """Run ``stepwall report ARGS -o OUT`` in a fresh interpreter (as CI and users do), so
    state other tests leave in this process (registered plugins, symbols) cannot leak in."""
    cmd = [sys.executable, "-m", "stepwall.cli", "report", *args, "-o", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return _files(out)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict[str, bytes]:
    """The shipped report, generated once for the module (it takes several seconds)."""
    return _fresh([SHIPPED], tmp_path_factory.mktemp("shipped"))


@pytest.mark.slow
def test_report_twice_is_byte_identical(shipped, tmp_path):
    again = _fresh([SHIPPED], tmp_path)
    assert again.keys() == shipped.keys()
    for name in shipped:
        assert again[name] == shipped[name], f"{name} differs between two runs"


@pytest.mark.slow
def test_report_is_the_same_without_the_helper_process(shipped, tmp_path):
    """Blocks' heavy work runs in a forked helper on a second core (stepwall.numeric.parallel); one
    process alone writes the same bytes."""
    alone = _fresh([SHIPPED], tmp_path, {"STEPWALL_NO_FORK": "1"})
    assert alone.keys() == shipped.keys()
    for name in shipped:
        assert alone[name] == shipped[name], f"{name} differs without the helper"


def test_shipped_report_contents(shipped):
    md = shipped["REPORT.md"].decode()
    assert {"REPORT.md", "c1_ceiling.csv", "tp_speed.svg", "breakdown_c1.svg"} <= set(shipped)
    assert "{" not in re.sub(r"\$\$.*?\$\$", "", md, flags=re.S).replace("```", "")
    # provenance: relative paths, hashes, versions, the command; no timestamps, no tmp paths
    assert "`specs/hardware/b300.toml`" in md and re.search(r"`[0-9a-f]{64}`", md)
    for dist in ("stepwall", "sympy", "numpy", "matplotlib"):
        assert f"| {dist} |" in md
    assert f"stepwall report {SHIPPED}\n" in md
    assert str(REPO) not in md and "/tmp" not in md
    for name, data in shipped.items():
        if name.endswith(".svg"):
            assert b"<dc:date>" not in data and b"Matplotlib v" not in data


def _regenerate_command(report_md: Path) -> list[str]:
    text = report_md.read_text()
    m = re.search(r"Regenerate with:\n\n```\n(.+)\n```", text)
    assert m, f"{report_md} has no regenerate command"
    argv = shlex.split(m.group(1))
    assert argv[:2] == ["stepwall", "report"]
    return argv[2:]


@pytest.mark.slow
@pytest.mark.parametrize(
    "folder",
    sorted(p.parent for p in COMMITTED.glob("*/REPORT.md")) or [None],
    ids=lambda p: p.name if p else "none",
)
def test_committed_reports_are_up_to_date(folder, shipped, tmp_path):
    """The CI check: every committed report regenerates to the same bytes."""
    if folder is None:
        pytest.skip("no committed reports under docs/reports/")
    args = _regenerate_command(folder / "REPORT.md")
    fresh = shipped if args == [SHIPPED] else _fresh(args, tmp_path)
    committed = _files(folder)
    assert sorted(fresh) == sorted(committed), "files added or removed; regenerate the report"
    stale = [n for n in committed if committed[n] != fresh[n]]
    assert not stale, f"stale in {folder}: {stale}; run: stepwall report {shlex.join(args)}"


SMALL = r'''
title = "Bandwidth check on {b.name}"
[scenarios.b]
scenario = "k26-b300-tp8-ddtree"
label = "B300"

[[block]]
kind = "table"
id = "t"
rows = { key = "parallel.tp", values = [8, 16], label = "TP-{value}" }
columns = { scenarios = ["b"] }
metric = "tokens_per_s_per_user"
format = ".3f"

[[block]]
kind = "prose"
text = """At {b.param.hardware.hbm_bandwidth as TB/s:.1f} TB/s the MoE term is \
{b.group.moe as ms:.4f} ms and TP-8 runs at {t['TP-8']['B300']:.3f} tok/s ({{literal}})."""
'''


def _small(tmp_path: Path, text: str = SMALL) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(text)
    return p


def _prose(md: str) -> tuple[float, float, float]:
    m = re.search(r"At ([\d.]+) TB/s the MoE term is ([\d.]+) ms and TP-8 runs at ([\d.]+)", md)
    assert m, md
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def test_override_changes_numbers_and_prose_consistently(tmp_path):
    spec = _small(tmp_path)
    base, fast = tmp_path / "base", tmp_path / "fast"
    assert main(["report", str(spec), "-o", str(base)]) == 0
    assert (
        main(["report", str(spec), "--set", "hardware.hbm_bandwidth=16TB/s", "-o", str(fast)]) == 0
    )
    md0, md1 = ((d / "REPORT.md").read_text() for d in (base, fast))
    bw0, moe0, tok0 = _prose(md0)
    bw1, moe1, tok1 = _prose(md1)
    b300 = tomllib.loads((REPO / "specs" / "hardware" / "b300.toml").read_text())
    assert (bw0, bw1) == (float(b300["hbm_bandwidth"].removesuffix(" TB/s")), 16.0)
    assert moe1 < moe0 and tok1 > tok0
    # the prose, the table and the CSV agree with an independent evaluation of the override
    ev = build_model("k26-b300-tp8-ddtree", ["hardware.hbm_bandwidth=16TB/s"]).evaluate()
    assert tok1 == pytest.approx(float(ev["tokens_per_s_per_user"]), abs=1e-3)
    assert f"| TP-8 | {tok1:.3f} |" in md1
    csv = (fast / "t.csv").read_text().splitlines()
    assert float(csv[1].split(",")[1]) == pytest.approx(tok1, abs=1e-3)
    assert "({literal})" in md1
    assert "--set hardware.hbm_bandwidth=16TB/s" in md1


BAD = [
    (
        'metric = "tokens_per_s_per_user"',
        'metric = "tokens_per_sec"',
        "block[0].metric",
        "unknown metric",
    ),
    ('key = "parallel.tp"', 'key = "parallel.tpp"', "block[0].rows", "not a numeric key"),
    ('key = "parallel.tp"', 'key = "model.hidden_size"', "block[0].rows", "not a numeric key"),
    (
        'columns = { scenarios = ["b"] }',
        'columns = { scenarios = ["c"] }',
        "block[0].columns.scenarios",
        "unknown scenario alias",
    ),
    ("{b.group.moe as ms:.4f}", "{b.group.moo as ms:.4f}", "block[1].text", "unknown value"),
    ("{b.group.moe as ms:.4f}", "{b.group.moe as GB:.4f}", "block[1].text", "unit 'GB'"),
    ('kind = "prose"', 'kind = "poem"', "block[1].kind", "unknown block kind"),
    ('format = ".3f"', 'formatt = ".3f"', "block[0].formatt", "unknown option"),
]


@pytest.mark.parametrize(("old", "new", "key", "problem"), BAD, ids=[b[3] for b in BAD])
def test_bad_report_specs_give_one_line_errors(tmp_path, capsys, old, new, key, problem):
    assert old in SMALL
    spec = _small(tmp_path, SMALL.replace(old, new, 1))
    assert main(["report", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"stepwall: error: {spec.name}:{key}:") or f"small.toml:{key}:" in err
    assert problem in err
    assert not (tmp_path / "out").exists()
