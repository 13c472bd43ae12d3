"""The command line: eval (table and --json), expr, plugins, --help, the console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp

from stepwall import cli
from stepwall.cli import main
from stepwall.core.symbols import Parameter
from stepwall.model.compose import build_model
from stepwall.plugin import registry

SCENARIO = "k26-b300-tp8-ddtree"  # BRIEF S7: B300, TP-8, DDTree, C=1, 303 tok/s


@pytest.fixture(scope="module")
def summary_json() -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["eval", SCENARIO, "--json"]) == 0
    return json.loads(buf.getvalue())


def test_eval_prints_the_breakdown(capsys, summary_json) -> None:
    assert main(["eval", SCENARIO]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("term"))
    for column in ("term", "plugin", "time", "share"):
        assert column in header
    zero = next(line for line in lines if line.startswith("zero here"))
    for term in summary_json["terms"]:
        if term["seconds"] == 0:  # listed by name on one line, not as rows
            assert term["name"] in zero
            continue
        row = next(line for line in lines if line.startswith(term["name"] + " "))
        assert term["plugin"] in row
        assert row.rstrip().endswith("%")
    shares = [
        float(line.split()[-1].rstrip("%"))
        for line in lines
        if line.rstrip().endswith("%") and not line.startswith("term")
    ]
    if not any(t["overlap"] for t in summary_json["terms"]):
        assert sum(shares) == pytest.approx(100.0, abs=0.1 * len(shares))
    for label in ("step time", "tokens/s per user", "tokens/s", "tokens/s per GPU", "memory"):
        assert any(line.startswith(label) for line in lines), label
    assert "(8 GPUs)" in out  # TP-8 on one node


def test_eval_json_fields(summary_json) -> None:
    s = summary_json
    for key in (
        "scenario",
        "step_time_s",
        "tokens_per_s_per_user",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "gpus",
        "memory",
        "terms",
    ):
        assert key in s, key
    assert s["scenario"] == SCENARIO
    assert isinstance(s["gpus"], int) and s["gpus"] == 8
    mem = s["memory"]
    assert set(mem) >= {"bytes_per_gpu", "capacity_per_gpu", "fits"}
    assert mem["capacity_per_gpu"] == pytest.approx(275e9)  # b300.toml: "275 GB"
    assert mem["fits"] is (mem["bytes_per_gpu"] <= mem["capacity_per_gpu"])
    assert mem["fits"] is True  # BRIEF S4: K2.6 fits on 8 × B300
    assert s["terms"], "no terms"
    for t in s["terms"]:
        assert set(t) >= {"name", "plugin", "seconds"}
        assert isinstance(t["seconds"], float) and t["seconds"] >= 0
    assert s["tokens_per_s_per_user"] == pytest.approx(303, rel=0.02)  # BRIEF S7
    # The metrics' definitions, by hand: one user, 8 GPUs.
    assert s["tokens_per_s"] == pytest.approx(s["tokens_per_s_per_user"])
    assert s["tokens_per_s_per_gpu"] == pytest.approx(s["tokens_per_s"] / 8)
    if not any(t.get("overlap") for t in s["terms"]):
        assert sum(t["seconds"] for t in s["terms"]) == pytest.approx(s["step_time_s"])


def test_expr_free_keeps_the_parameter(capsys) -> None:
    assert main(["expr", SCENARIO, "--free", "parallel.tp"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("t_step = ")
    assert "parallel.tp" in out
    assert "hardware.hbm_bandwidth" not in out  # every other parameter substituted

    assert main(["expr", SCENARIO]) == 0
    out, _ = capsys.readouterr()
    assert "parallel." not in out and "hardware." not in out


def test_expr_latex(capsys) -> None:
    assert main(["expr", SCENARIO, "--free", "parallel.tp", "--latex"]) == 0
    out, _ = capsys.readouterr()
    assert "parallel.tp" not in out  # printed with its LaTeX name instead
    assert build_model(SCENARIO).parameter("parallel.tp").latex in out
    assert "\\" in out


def test_expr_closed_form_agrees_with_eval(summary_json) -> None:
    model = build_model(SCENARIO)
    tp = model.parameter("parallel.tp")
    closed = model.substituted(model.step_time, [tp])
    assert closed.free_symbols == {tp}
    assert float(closed.subs(tp, 8)) == pytest.approx(summary_json["step_time_s"], rel=1e-5)


BUILTINS = list(registry.BUILTIN_PLUGINS)


def test_plugins_lists_the_builtins(capsys) -> None:
    assert main(["plugins"]) == 0
    out, _ = capsys.readouterr()
    for name in BUILTINS:
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "hardware:gpu" in out
    assert "stepwall_compute_terms" in out


def test_plugins_json(capsys) -> None:
    assert main(["plugins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in rows}
    assert set(BUILTINS) <= set(by_name)
    for name in BUILTINS:
        assert set(by_name[name]) >= {"name", "version", "kinds", "hooks", "import_seconds"}
        assert by_name[name]["hooks"]
    assert by_name["analyses"]["analyses"] == ["crossover", "elasticity", "optimum", "regime",
                                               "tornado", "wall"]  # fmt: skip
    assert by_name["moe_transformer"]["analyses"] == ["plateau"]
    assert "stepwall_spec_kinds" in by_name["gpu"]["hooks"]


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_each_command_help_shows_an_example(capsys, command: str) -> None:
    assert main([command, "--help"]) == 0  # returns, so an embedding program keeps running
    out = capsys.readouterr().out
    assert "example" in out
    assert f"stepwall {command}" in out


def test_top_level_help_shows_examples(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out
    for command in ("eval", "expr", "check", "plugins"):
        assert f"stepwall {command}" in out


def test_version(capsys) -> None:
    from importlib import metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"stepwall {metadata.version('stepwall')}\n"


def test_eval_says_which_overrides_it_applied(capsys) -> None:
    assert (
        main(["eval", SCENARIO, "--set", "parallel.tp=16", "--set", "workload.context=4096"]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "overrides parallel.tp=16, workload.context=4096"


def test_no_command_prints_help_and_exits_2(capsys) -> None:
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().out


def _console_script() -> str:
    here = Path(sys.executable).parent / "stepwall"
    found = str(here) if here.exists() else shutil.which("stepwall")
    assert found, "the console script `stepwall` is not installed"
    return found


def test_console_script_runs() -> None:
    exe = _console_script()
    env = {**os.environ, "STEPWALL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    ok = subprocess.run([exe, "plugins"], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "gpu" in ok.stdout
    bad = subprocess.run(
        [exe, "eval", SCENARIO, "--set", "parallel.tp=2.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "parallel.tp" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_internal_error_exits_1_without_traceback(monkeypatch, capsys) -> None:
    def broken(ns, registry):
        raise RuntimeError("boom")

    name = "expr"
    monkeypatch.setattr(cli.command_module(name), "run", broken)
    monkeypatch.delenv("STEPWALL_DEBUG", raising=False)
    assert main([name, SCENARIO]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "boom" in err and "Traceback" not in err


def test_free_symbols_of_expr_are_catalog_parameters() -> None:
    model = build_model(SCENARIO)
    for s in model.step_time.free_symbols:
        assert isinstance(s, sp.Symbol)
        assert isinstance(s, Parameter) and model.parameter(s.name) == s


def test_check_validates_a_report_spec(tmp_path, capsys) -> None:
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "specs/reports/k26-cluster-scaling.toml"
    assert main(["check", str(shipped)]) == 0
    assert "valid report" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(
        shipped.read_text(encoding="utf-8").replace("tokens_per_s_per_user", "tokens_per_s_per_usr")
    )
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tokens_per_s_per_usr" in err and bad.name in err
    assert list(tmp_path.iterdir()) == [bad]


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    """Outputs are written atomically through a private temporary file, yet end up with the
    mode a plain open would give (a shared report or page must be readable by others)."""
    old = os.umask(0o022)
    try:
        csv = tmp_path / "grid.csv"
        assert (
            main(["sweep", "k26-b300-tp8-ddtree", "--vary", "parallel.tp=4,8", "-o", str(csv)]) == 0
        )
        assert csv.stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        again = tmp_path / "private.csv"
        assert (
            main(["sweep", "k26-b300-tp8-ddtree", "--vary", "parallel.tp=8", "-o", str(again)]) == 0
        )
        assert again.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
