"""Every bad input in issue 2's list: one line on stderr naming the file and the key and what
was expected, exit code 2, no traceback, nothing written. And every shipped spec checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwall.cli import main
from stepwall.core.catalog import catalog_root

BASE = "k26-b300-tp8-ddtree"  # a shipped scenario the bad files start from


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    """Run the CLI from an empty working directory; return (code, stdout, stderr)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    def _run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        assert list(cwd.iterdir()) == [], "a failed command wrote files"
        return code, out, err

    return _run


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def scenario(tmp_path: Path, body: str, name: str = "bad.toml") -> str:
    return write(tmp_path, name, f'from = "{BASE}"\n{body}')


def assert_one_line_error(code: int, out: str, err: str, where: str, key: str, *fragments: str):
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("stepwall: error: ")
    loc = f"{where}:{key}" if key else f"{where}:"
    assert loc in err, err
    for f in fragments:
        assert f in err, err


FILE_CASES = [
    # (id, TOML body after `from = BASE`, key, fragments of the message)
    (
        "wrong-dimension",
        '[hardware]\nhbm_bandwidth = "8 TB"\n',
        "hardware.hbm_bandwidth",
        ["'8 TB'", "not B/s", "(expected a bandwidth"],
    ),
    (
        "unknown-unit",
        '[hardware]\nhbm_bandwidth = "8 TQ/s"\n',
        "hardware.hbm_bandwidth",
        ["unknown unit 'TQ'", "(expected a bandwidth"],
    ),
    (
        "nan",
        "[hardware]\nhbm_bandwidth = nan\n",
        "hardware.hbm_bandwidth",
        ["not a finite number", "(expected"],
    ),
    (
        "nan-with-unit",
        '[hardware]\nhbm_bandwidth = "nan TB/s"\n',
        "hardware.hbm_bandwidth",
        ["not a finite number"],
    ),
    (
        "inf",
        '[hardware]\nhbm_bandwidth = "inf TB/s"\n',
        "hardware.hbm_bandwidth",
        ["not a finite number"],
    ),
    (
        "negative",
        '[hardware]\nhbm_bandwidth = "-8 TB/s"\n',
        "hardware.hbm_bandwidth",
        ["out of range", "(expected a value > 0)"],
    ),
    (
        "zero",
        '[hardware]\nmemory_capacity = "0 GB"\n',
        "hardware.memory_capacity",
        ["out of range", "(expected a value > 0)"],
    ),
    (
        "zero-degree",
        "[parallel]\ntp = 0\n",
        "parallel.tp",
        ["out of range", "(expected a value > 0)"],
    ),
    (
        "non-integer-degree",
        "[parallel]\ntp = 2.5\n",
        "parallel.tp",
        ["not a whole number", "(expected an integer)"],
    ),
    (
        "unknown-key",
        '[engine]\nper_stepp = "1 ms"\n',
        "engine.per_stepp",
        ["unknown key", "did you mean engine.per_step?", "(expected one of:"],
    ),
    (
        "unknown-section",
        '[hardwre]\nhbm_bandwidth = "9 TB/s"\n',
        "hardwre.hbm_bandwidth",
        ["unknown key", "did you mean hardware?", "(expected one of the sections"],
    ),
    (
        "unknown-kind",
        '[decoding]\nkind = "ddtre"\n',
        "decoding.kind",
        ["no plugin provides kind 'ddtre'", "did you mean 'ddtree'?", "(expected kind one of"],
    ),
    (
        "kind-not-text",
        "[decoding]\nkind = [1]\n",
        "decoding.kind",
        ["not a kind name", "(expected a string"],
    ),
    (
        "missing-catalog-reference",
        'hardware = "b3000"\n',
        "hardware",
        ["no hardware entry named 'b3000'", "did you mean 'b300'?", "(expected a file path"],
    ),
    (
        "missing-catalog-from",
        '[model]\nfrom = "kimi-k9"\n',
        "model.from",
        ["no models entry named 'kimi-k9'", "(expected a file path"],
    ),
    (
        "not-a-boolean",
        "[engine]\ntwo_batch_overlap = 1\n",
        "engine.two_batch_overlap",
        ["not a boolean", "(expected true or false)"],
    ),
    (
        "bool-for-number",
        "[parallel]\ntp = true\n",
        "parallel.tp",
        ["(expected a plain number)"],
    ),
]


@pytest.mark.parametrize(("body", "key", "fragments"), [c[1:] for c in FILE_CASES],
                         ids=[c[0] for c in FILE_CASES])  # fmt: skip
def test_bad_scenario_file(run, tmp_path, body, key, fragments) -> None:
    path = scenario(tmp_path, body)
    assert_one_line_error(*run("eval", path), path, key, *fragments)
    # `check` reads the same file and reports the same error.
    code, out, err2 = run("check", path)
    assert code == 2 and out == ""
    assert f"{path}:{key}" in err2


SET_CASES = [
    ('hardware.hbm_bandwidth="8 TB"', "hardware.hbm_bandwidth", ["not B/s"]),
    ("hardware.hbm_bandwidth=8TQ/s", "hardware.hbm_bandwidth", ["unknown unit 'TQ'"]),
    ("hardware.hbm_bandwidth=nan", "hardware.hbm_bandwidth", ["not a finite number"]),
    ("hardware.hbm_bandwidth=-8TB/s", "hardware.hbm_bandwidth", ["out of range"]),
    ("workload.concurrency=0", "workload.concurrency", ["out of range"]),
    ("parallel.tp=1.5", "parallel.tp", ["not a whole number", "an integer"]),
    ("parallel.tpp=2", "parallel.tpp", ["no such key", "parallel.tp"]),
    ("hardware.hbm_bandwith=9TB/s", "hardware.hbm_bandwith", ["no such key"]),
    ("nosuch.key=1", "nosuch.key", ["no such key"]),
    ('decoding.kind="ddtre"', "decoding.kind", ["did you mean 'ddtree'?"]),
    ("decoding.kind=[1]", "decoding.kind", ["not a kind name"]),
    ("parallel.tp", "parallel.tp", ["not an assignment", "(expected KEY=VALUE"]),
]


@pytest.mark.parametrize(("setting", "key", "fragments"), SET_CASES)
def test_bad_set(run, setting, key, fragments) -> None:
    assert_one_line_error(*run("eval", BASE, "--set", setting), "--set", key, *fragments)


def test_reference_cycle(run, tmp_path) -> None:
    a = write(tmp_path, "a.toml", 'from = "b.toml"\n')
    write(tmp_path, "b.toml", 'from = "a.toml"\n')
    code, out, err = run("eval", a)
    assert_one_line_error(code, out, err, str(tmp_path / "b.toml"), "from", "reference cycle")
    assert "a -> b -> a" in err


def test_self_reference_cycle(run, tmp_path) -> None:
    a = write(tmp_path, "self.toml", 'from = "self.toml"\n')
    assert_one_line_error(*run("eval", a), a, "from", "reference cycle self -> self")


def test_catalog_entry_cycle(run, tmp_path) -> None:
    write(tmp_path, "gpu-a.toml", 'from = "gpu-b.toml"\nkind = "gpu"\n')
    write(tmp_path, "gpu-b.toml", 'from = "gpu-a.toml"\n')
    path = scenario(tmp_path, f'hardware = "{tmp_path / "gpu-a.toml"}"\n')
    code, _out, err = run("eval", path)
    assert code == 2 and "reference cycle" in err and err.count("\n") == 1


def test_toml_syntax_error_names_the_line(run, tmp_path) -> None:
    path = write(tmp_path, "syntax.toml", f'from = "{BASE}"\n\n[parallel\ntp = 8\n')
    code, out, err = run("eval", path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{path}: TOML syntax error" in err
    assert "line 3" in err


def test_syntax_error_in_a_referenced_file_names_that_file(run, tmp_path) -> None:
    gpu = write(tmp_path, "gpu.toml", 'kind = "gpu"\nhbm_bandwidth = = "8 TB/s"\n')
    path = scenario(tmp_path, f'hardware = "{gpu}"\n')
    code, _out, err = run("eval", path)
    assert code == 2 and f"{gpu}: TOML syntax error" in err and "line 2" in err


def test_file_not_utf8(run, tmp_path) -> None:
    p = tmp_path / "latin1.toml"
    p.write_bytes(b'name = "caf\xe9"\n')
    code, out, err = run("eval", str(p))
    assert_one_line_error(code, out, err, str(p), "", "not UTF-8")


def test_missing_scenario_file(run, tmp_path) -> None:
    code, out, err = run("eval", str(tmp_path / "nope.toml"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "nope.toml" in err


def test_misspelled_scenario_name_suggests(run) -> None:
    code, _out, err = run("eval", BASE[:-1])
    assert code == 2 and f"did you mean '{BASE}'?" in err


def test_unknown_free_parameter(run) -> None:
    code, out, err = run("expr", BASE, "--free", "parallel.tpp")
    assert_one_line_error(code, out, err, "--free", "parallel.tpp", "not a parameter")


def test_check_catalog_entry_with_wrong_dimension(run, tmp_path) -> None:
    gpu = write(
        tmp_path,
        "my-gpu.toml",
        'kind = "gpu"\nfrom = "b300"\nhbm_bandwidth = "8 TB"\n',
    )
    assert_one_line_error(*run("check", gpu), gpu, "hardware.hbm_bandwidth", "not B/s")


def test_check_catalog_entry_outside_the_catalog_follows_from(run, tmp_path) -> None:
    # A hardware file derived from a catalog entry, kept anywhere, checks as hardware.
    gpu = write(tmp_path, "faster.toml", 'from = "b300"\nhbm_bandwidth = "9 TB/s"\n')
    code, out, err = run("check", gpu)
    assert (code, err) == (0, "")
    assert "valid hardware entry" in out


# The spec kinds of issue 2 (report specs belong to the report command).
SHIPPED = sorted(
    p
    for d in ("models", "hardware", "clusters", "scenarios")
    for p in catalog_root().glob(f"{d}/*.toml")
)


# The seed's one-GPU thought experiment: its weights do not fit, and check says so.
INFEASIBLE = {"k26-b300-tp1-moe": "resident memory per GPU 527.4 GB > usable 275 GB"}


@pytest.mark.parametrize("path", SHIPPED, ids=[f"{p.parent.name}/{p.stem}" for p in SHIPPED])
def test_every_shipped_spec_checks(run, path: Path) -> None:
    code, out, err = run("check", str(path))
    if path.stem in INFEASIBLE:
        assert code == 2 and INFEASIBLE[path.stem] in err, err
        return
    assert (code, err) == (0, ""), err
    assert out.startswith("ok: ")


def test_check_refuses_an_entry_that_contradicts_itself(run, tmp_path) -> None:
    bad = write(tmp_path, "my-model.toml", 'from = "kimi-k2.6-int4"\nn_dense_layers = 100\n')
    assert_one_line_error(*run("check", bad), bad, "model.n_dense_layers", "100 > model.n_layers")


def test_catalog_is_not_empty() -> None:
    folders = {p.parent.name for p in SHIPPED}
    assert {"models", "hardware", "clusters", "scenarios"} <= folders


def test_sources_table_must_name_fields(tmp_path, capsys) -> None:
    from stepwall.cli import main

    hw = tmp_path / "my-gpu.toml"
    hw.write_text('from = "b300"\n[sources]\nhbm_bandwith = "typo"\n', encoding="utf-8")
    assert main(["check", str(hw)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "hardware.sources" in err and "sources must map field names" in err


def test_derive_without_a_key_is_bad_input(capsys) -> None:
    from stepwall.cli import main

    assert main(["derive", "k26-b300-tp8-ddtree", "wall"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "required: KEY" in err
