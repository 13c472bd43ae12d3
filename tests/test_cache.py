"""The compiled-model cache: a hit prints the same bytes as a fresh build, values never come
from the cache, a broken entry is a miss, concurrent writers leave it readable, and models of
plugins whose code cannot be identified are not cached."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from stepwall.model import compose
from stepwall.numeric import compiled
from stepwall.spec.validation import load_scenario
from stepwall.testing import registry

SCENARIO = "k26-b300-tp8-ddtree"


def _eval(cache: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPWALL_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "stepwall.cli", "eval", *argv],
        capture_output=True, text=True, env=env, check=False, cwd=ROOT,
    )  # fmt: skip


def _entries(cache: Path) -> list[dict]:
    files = sorted(cache.glob("model-*.json"))
    return [e for f in files for e in json.loads(f.read_text())]


def test_a_hit_prints_what_a_fresh_build_prints(tmp_path: Path) -> None:
    fresh = _eval(tmp_path, SCENARIO, "--no-cache")
    assert fresh.returncode == 0, fresh.stderr
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # --no-cache writes nothing
    first = _eval(tmp_path, SCENARIO)
    assert len(_entries(tmp_path)) == 1
    second = _eval(tmp_path, SCENARIO)
    assert fresh.stdout == first.stdout == second.stdout
    assert len(_entries(tmp_path)) == 1  # the hit did not add an entry


def test_values_come_from_the_scenario_not_the_cache(tmp_path: Path) -> None:
    _eval(tmp_path, SCENARIO)
    sets = ["--set", "hardware.hbm_bandwidth=4TB/s", "--json"]
    cached = json.loads(_eval(tmp_path, SCENARIO, *sets).stdout)
    fresh = json.loads(_eval(tmp_path, SCENARIO, *sets, "--no-cache").stdout)
    base = json.loads(_eval(tmp_path, SCENARIO, "--json").stdout)
    assert cached == fresh
    assert cached["step_time_s"] > base["step_time_s"]  # half the bandwidth is slower
    assert len(_entries(tmp_path)) == 1  # a number is not part of the shape


def test_a_structural_value_gets_its_own_entry(tmp_path: Path) -> None:
    _eval(tmp_path, SCENARIO)
    tp16 = _eval(tmp_path, SCENARIO, "--set", "parallel.tp=16", "--json")
    assert len(_entries(tmp_path)) == 1  # TP is a symbol of the model, not of its shape
    cached = _eval(tmp_path, SCENARIO, "--set", "model.n_dense_layers=3", "--json")
    fresh = _eval(tmp_path, SCENARIO, "--set", "model.n_dense_layers=3", "--json", "--no-cache")
    assert cached.returncode == 0, cached.stderr
    assert json.loads(cached.stdout) == json.loads(fresh.stdout) != json.loads(tp16.stdout)
    # the dense/MoE layer split decides which terms exist: another entry, same shape file
    assert len(_entries(tmp_path)) == 2


def test_a_broken_entry_is_a_miss(tmp_path: Path) -> None:
    good = _eval(tmp_path, SCENARIO)
    for f in tmp_path.glob("*.json"):  # the model and the eval point
        f.write_text('[{"format": 3, "reads": {}, "model": {"source": "raise')
    again = _eval(tmp_path, SCENARIO)
    assert again.returncode == 0, again.stderr
    assert again.stdout == good.stdout
    assert len(_entries(tmp_path)) == 1  # rewritten whole


def test_concurrent_writers_leave_a_readable_cache(tmp_path: Path) -> None:
    env = {**os.environ, "STEPWALL_CACHE_DIR": str(tmp_path)}
    argv = [sys.executable, "-m", "stepwall.cli", "eval", SCENARIO, "--set"]
    runs = [
        subprocess.Popen(
            [*argv, f"model.n_dense_layers={n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for n in (1, 2, 1, 2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
    assert {e["format"] for e in _entries(tmp_path)} == {compiled.FORMAT}
    assert not list(tmp_path.glob(".model-*.tmp"))  # no half-written file left behind


def test_a_plugin_without_a_module_file_is_not_cached(tmp_path, monkeypatch) -> None:
    from stepwall.plugin.hookspecs import hookimpl

    class Fixed:  # defined here: its code has no file the cache could key on
        @hookimpl
        def stepwall_fixed_terms(self, scenario, workload, decoding):
            return []

    monkeypatch.setenv("STEPWALL_CACHE_DIR", str(tmp_path))
    reg = registry(Fixed())
    assert compiled.code_identity(reg) is None
    compose.compile_scenario(load_scenario(SCENARIO, reg.kinds), reg)
    assert not list(tmp_path.glob("model-*.json"))
    builtins = registry()
    compose.compile_scenario(load_scenario(SCENARIO, builtins.kinds), builtins)
    assert len(list(tmp_path.glob("model-*.json"))) == 1


@pytest.mark.parametrize("value", ["1", "yes"])
def test_no_cache_environment_variable(tmp_path: Path, monkeypatch, value: str) -> None:
    monkeypatch.setenv("STEPWALL_NO_CACHE", value)
    assert compiled.cache_dir() is None


# ---------------------------------------------------------------- the eval point cache


def _quick(cache: Path, *argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``stepwall eval ARGV`` in a fresh process that also says whether sympy was imported."""
    code = (
        "import sys; from stepwall import cli; code = cli.main(sys.argv[1:]); "
        "print('SYMPY' if 'sympy' in sys.modules else 'NO-SYMPY', file=sys.stderr); "
        "sys.exit(code)"
    )
    env = {**os.environ, "STEPWALL_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", code, "eval", *argv],
        capture_output=True, text=True, env=env, check=False, cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize("fmt", [(), ("--json",), ("--format", "json")])
def test_an_unchanged_eval_needs_no_sympy_and_prints_the_same_bytes(tmp_path, fmt) -> None:
    sets = ("--set", "workload.context=32768")
    fresh = _quick(tmp_path, SCENARIO, *sets, *fmt, "--no-cache")
    first = _quick(tmp_path, SCENARIO, *sets, *fmt)
    again = _quick(tmp_path, SCENARIO, *sets, *fmt)
    assert fresh.returncode == first.returncode == again.returncode == 0, first.stderr
    assert "SYMPY" in first.stderr.split() and "NO-SYMPY" in again.stderr.split()
    assert fresh.stdout == first.stdout == again.stdout


def test_an_edited_spec_file_is_a_miss(tmp_path: Path) -> None:
    hw = (ROOT / "specs" / "hardware" / "b300.toml").read_text()
    (tmp_path / "gpu.toml").write_text(hw)
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'from = "{ROOT / "specs" / "scenarios" / (SCENARIO + ".toml")}"\n'
                        'hardware = "./gpu.toml"\n')  # fmt: skip
    cache = tmp_path / "cache"
    before = _quick(cache, str(scenario), "--json")
    assert json.loads(_quick(cache, str(scenario), "--json").stdout) == json.loads(before.stdout)
    edited = hw.replace('hbm_bandwidth = "7.7 TB/s"', 'hbm_bandwidth = "4 TB/s"')
    assert edited != hw
    (tmp_path / "gpu.toml").write_text(edited)
    after = _quick(cache, str(scenario), "--json")
    assert "SYMPY" in after.stderr.split()  # rebuilt, not read from the cache
    assert json.loads(after.stdout)["step_time_s"] > json.loads(before.stdout)["step_time_s"]


def test_a_file_that_shadows_a_name_is_a_miss(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _quick(cache, SCENARIO, cwd=tmp_path).returncode == 0
    assert "NO-SYMPY" in _quick(cache, SCENARIO, cwd=tmp_path).stderr.split()
    before = _quick(cache, SCENARIO, cwd=tmp_path)
    # a file of that name in the working folder: the name is now a path to it
    (tmp_path / SCENARIO).write_text('from = "k26-b300-tp8-ddtree-native"\n')
    shadowed = _quick(cache, SCENARIO, cwd=tmp_path)
    assert shadowed.returncode == 0, shadowed.stderr
    assert "SYMPY" in shadowed.stderr.split() and shadowed.stdout != before.stdout


def test_infeasible_points_are_not_kept(tmp_path: Path) -> None:
    for _ in range(2):
        out = _quick(tmp_path, "dsv3-h200-tp8", "--set", "parallel.tp=1")
        assert out.returncode == 2 and "resident memory per GPU" in out.stderr
    assert not list(tmp_path.glob("point-*.json"))


def test_warnings_are_repeated_from_the_cache(tmp_path: Path) -> None:
    sets = ("--set", "hardware.hbm_bandwidth=1e-30 B/s")
    first, again = _quick(tmp_path, SCENARIO, *sets), _quick(tmp_path, SCENARIO, *sets)
    assert "NO-SYMPY" in again.stderr.split()
    warned = [line for line in first.stderr.splitlines() if line.startswith("stepwall: warning")]
    assert warned and warned == [
        line for line in again.stderr.splitlines() if line.startswith("stepwall: warning")
    ]


def test_other_options_take_the_full_path() -> None:
    from stepwall.cli import cached_eval

    assert cached_eval.parse(["x", "--set", "a=1", "--json"]) == ("x", ("a=1",), "json")
    assert cached_eval.parse(["x", "--set=a=1", "--format=text"]) == ("x", ("a=1",), "text")
    for argv in (["x", "--allow-infeasible"], ["x", "--format", "csv"], ["--help"], ["x", "y"],
                 ["x", "--js"], []):  # fmt: skip
        assert cached_eval.parse(argv) is None, argv


# ---------------------------------------------------------------- new --set values (shape entry)

# keys of the K2.6 scenario that do not shape its model: a bandwidth, a latency, a whole
# number, a bounded fraction, a plain number; and one that does (the dense/MoE layer split)
NEW_VALUES = {
    "hardware.hbm_bandwidth": ["4TB/s", '"9.5 TB/s"', "800 GB/s", "6.5e12 B/s", "7 TiB/s",
                               "8e12", "0 TB/s", "-3TB/s", "5 TFLOP/s", "1e-30 B/s", "7..8TB/s",
                               "fast", "inf TB/s", "true"],
    "cluster.scale_up.a2a_latency": ["20us", "0 s", "1.5e-5 s", "3 ms", "5", "-1us", "2 PB"],
    "workload.concurrency": ["2", "64", "1.5", "0", "-4", "3e2", '"8"', "[1, 2]"],
    "engine.comm_sm_fraction": ["0.25", "0", "0.9", "0.95", "0.0001", "nan"],
    "workload.context": ["1", "131072", "65536.5", "2e5", "0"],
    "model.n_dense_layers": ["2", "3"],
}  # fmt: skip
# random values in range, written in different ways
GOOD = {
    "hardware.hbm_bandwidth": lambda r: f"{r.uniform(1, 20):.3g} {r.choice(['TB/s', 'TB / s'])}",
    "cluster.scale_up.a2a_latency": lambda r: f"{r.uniform(0, 50):.4g}us",
    "workload.concurrency": lambda r: str(r.randint(1, 256)),
    "engine.comm_sm_fraction": lambda r: f"{r.uniform(0.01, 0.9):.3f}",
    "workload.context": lambda r: str(r.choice([r.randint(1, 200_000), r.uniform(1, 1e5)])),
}


def _in_process(capsys, argv: list[str]) -> tuple[str, str, int]:
    from stepwall import cli

    code = cli.main(argv)
    out, err = capsys.readouterr()
    return out, err, code


def test_new_set_values_print_what_the_full_path_prints(tmp_path, monkeypatch, capsys) -> None:
    from stepwall.cli import cached_eval

    monkeypatch.setenv("STEPWALL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STEPWALL_NO_CACHE", raising=False)
    served: list[bool] = []  # whether each eval was answered by the quick path
    quick = cached_eval.run

    def recorded(argv: list[str]) -> int | None:
        code = quick(argv)
        served.append(code is not None)
        return code

    monkeypatch.setattr(cached_eval, "run", recorded)
    rng = random.Random(21)
    keys = list(NEW_VALUES)
    cases = [[(k, v)] for k in keys for v in NEW_VALUES[k]]  # each key alone, every value
    cases += [[(k, gen(rng))] for k, gen in GOOD.items() for _ in range(3)]
    pairs = [k for k in keys if k != "model.n_dense_layers"]
    for _ in range(8):  # two keys at once, and a key given twice (the last value counts)
        a, b = rng.sample(pairs, 2)
        cases.append([(a, rng.choice(NEW_VALUES[a])), (b, rng.choice(NEW_VALUES[b]))])
    cases.append([("workload.concurrency", "1.5"), ("workload.concurrency", "4")])
    hits = 0
    for case in cases:
        sets = [x for k, v in case for x in ("--set", f"{k}={v}")]
        for fmt in ([], ["--json"]):
            argv = ["eval", SCENARIO, *sets, *fmt]
            served.clear()
            fast = _in_process(capsys, argv)
            hit = served == [True]
            full = _in_process(capsys, [*argv, "--no-cache"])
            assert fast == full, argv
            hits += hit
        # its entry is there now: only an error, a warning or a range takes the full path
        if all(k != "model.n_dense_layers" and ".." not in v for k, v in case):
            assert hit or full[2] != 0 or "warning" in full[1], case
    assert hits > len(cases)  # many evals were answered from a shape entry


def test_a_structural_key_has_no_shape_entry(tmp_path: Path) -> None:
    _eval(tmp_path, SCENARIO, "--set", "model.n_dense_layers=2")
    assert not list(tmp_path.glob("shape-*.json"))  # it decides which terms exist
    _eval(tmp_path, SCENARIO, "--set", "workload.concurrency=2")
    assert len(list(tmp_path.glob("shape-*.json"))) == 1


@pytest.mark.parametrize("fmt", [(), ("--json",)])
def test_a_new_value_needs_no_sympy_and_prints_the_same_bytes(tmp_path, fmt) -> None:
    first = _quick(tmp_path, SCENARIO, "--set", "hardware.hbm_bandwidth=6TB/s", *fmt)
    assert first.returncode == 0, first.stderr
    sets = ("--set", "hardware.hbm_bandwidth=5.5 TB/s")
    new = _quick(tmp_path, SCENARIO, *sets, *fmt)
    fresh = _quick(tmp_path, SCENARIO, *sets, *fmt, "--no-cache")
    assert "NO-SYMPY" in new.stderr.split() and "SYMPY" in fresh.stderr.split()
    assert new.returncode == fresh.returncode == 0
    assert new.stdout == fresh.stdout and new.stdout != first.stdout
    assert new.stderr.replace("NO-SYMPY", "SYMPY") == fresh.stderr


# ---------------------------------------------------------------- the library, one point


def test_one_point_runs_the_plain_python_form_added_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STEPWALL_CACHE_DIR", str(tmp_path))
    model = compose.build_model(SCENARIO, registry=registry())  # its own models, none shared
    grid = model.evaluate({"workload.context": np.array([1000.0, 2000.0])})
    assert not model.numeric.scalar_source  # arrays: the numpy form alone
    assert not _entries(tmp_path)[0]["model"]["scalar_source"]
    one = model.evaluate({"workload.context": 2000})
    assert type(one["step_time_s"]) is float  # plain Python, not a numpy scalar
    assert one["step_time_s"] == pytest.approx(float(grid["step_time_s"][1]), rel=1e-12)
    assert model.numeric.scalar_source  # kept for the next points of this shape
    (entry,) = _entries(tmp_path)  # and on disk, for the next process: the same entry
    assert entry["model"]["scalar_source"] == model.numeric.scalar_source
    listed = model.evaluate({"workload.context": [1000.0, 2000.0]})  # a list is an array
    assert list(listed["step_time_s"]) == list(grid["step_time_s"])
    other = compose.build_model(SCENARIO, ["workload.concurrency=4"], registry())
    assert other.numeric.scalar_source  # another registry, same shape: from the disk
