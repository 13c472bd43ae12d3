"""stepwall calibrate: fits of data made by the model's own laws recover the values they were
made from, within their confidence intervals; the written spec keeps its file and reloads;
--check passes on the fixture calibrations and fails on an edited value; bad data is one
line and exit 2 with nothing written.

The fixture tables (tests/data/calibration/*.csv) come from generate.py beside them: the
laws at known values (TRUTH) with 2% log-normal noise from a fixed seed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from stepwall.apps.calibrate import calibrate, fit, load_entry, value_text
from stepwall.cli import main
from stepwall.core.errors import PluginError
from stepwall.core.primitives import Primitive
from stepwall.core.units import BANDWIDTH, DIMENSIONLESS, TIME, parse_quantity
from stepwall.plugin import registry

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "calibration"
GPU, CLUSTER = DATA / "demo-gpu.toml", DATA / "demo-cluster.toml"
GEMM, COPY, NCCL = DATA / "demo-gemm.csv", DATA / "demo-copy.csv", DATA / "demo-nccl.csv"


@pytest.fixture(scope="module")
def reg() -> Any:
    return registry.build(autoload=False)


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibration_generate", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def problems(gen: ModuleType) -> dict[str, Any]:
    """The fixture problems (the generator's cases on the start specs)."""
    return {
        "demo-gpu.toml": gen.problem_for(GPU, gen.gemm_cases() + gen.copy_cases()),
        "demo-cluster.toml": gen.problem_for(CLUSTER, gen.nccl_cases()),
    }


def run(reg: Any, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["calibrate", *argv], registry=reg)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- recovery


@pytest.mark.parametrize("spec", ["demo-gpu.toml", "demo-cluster.toml"])
def test_noise_free_data_are_fitted_exactly(gen: ModuleType, problems: dict[str, Any],
                                            spec: str) -> None:  # fmt: skip
    problem, truth = problems[spec], gen.TRUTH[spec]
    result = fit(problem, measured=gen.law_times(problem, truth))
    assert {f.path for f in result.fields} == set(truth)
    for f in result.fields:
        assert f.fitted and not f.flags, f
        assert f.value == pytest.approx(truth[f.path], rel=1e-6), f.path
    assert result.rms < 1e-4


@pytest.mark.parametrize("spec", ["demo-gpu.toml", "demo-cluster.toml"])
def test_fit_of_generated_tables_recovers_each_value_within_its_interval(
    reg: Any, gen: ModuleType, spec: str, tmp_path: Path
) -> None:
    """Tables made by today's laws (2% noise, generate.py's fixed seed), written, read and
    fitted end to end: every value that made them lies in its 95% interval. (Fourteen 95%
    intervals all hold for about half of all seeds; the next test checks the rate.)"""
    truth = gen.TRUTH[spec]
    tables = []
    for name, (made_on, _, _) in sorted(gen.TABLES.items()):
        if made_on == spec:
            tables.append(tmp_path / name)
            tables[-1].write_text(gen.table(name))
    result = calibrate(load_entry(DATA / spec, reg.kinds), tables, reg)
    assert {f.path for f in result.fields} == set(truth)
    for f in result.fields:
        assert f.low <= truth[f.path] <= f.high, (f.path, f.low, truth[f.path], f.high)
        assert f.low < f.value < f.high
        # the fit moved from the spec's first guess towards the truth
        assert abs(f.value - truth[f.path]) < abs(f.start - truth[f.path]), f.path
    assert 1.0 < result.rms < 3.0  # the 2% noise, as residual


@pytest.mark.parametrize("spec", ["demo-gpu.toml", "demo-cluster.toml"])
def test_intervals_cover_the_truth_at_about_the_stated_rate(
    gen: ModuleType, problems: dict[str, Any], spec: str
) -> None:
    """Over 40 noise draws each 95% interval holds the truth in at least 80% of them (a
    binomial tail of ~1e-4 for a true 95%), and the intervals are not vacuous."""
    problem, truth = problems[spec], gen.TRUTH[spec]
    clean = gen.law_times(problem, truth)
    hits = dict.fromkeys(truth, 0)
    widths: dict[str, list[float]] = {k: [] for k in truth}
    draws = 40
    for seed in range(draws):
        for f in fit(problem, measured=gen.noisy(clean, 1000 + seed)).fields:
            hits[f.path] += f.low <= truth[f.path] <= f.high
            widths[f.path].append((f.high - f.low) / 2 / truth[f.path])
    for path in truth:
        assert hits[path] >= 0.8 * draws, (path, hits[path])
        assert float(np.median(widths[path])) < 0.5, path


def test_fixture_tables_are_what_generate_writes(gen: ModuleType) -> None:
    """The committed tables are generate.py's, by today's laws (numbers to 5 digits)."""
    for name in sorted(gen.TABLES):
        committed = (DATA / name).read_text(encoding="utf-8").splitlines()
        made = gen.table(name).splitlines()
        assert len(committed) == len(made), name
        for old, new in zip(committed, made, strict=True):
            for a, b in zip(old.split(","), new.split(","), strict=True):
                same = a == b or float(a) == pytest.approx(float(b), rel=2e-4)
                assert same, f"{name}: {old} != {new}: run python {DATA / 'generate.py'}"


# ---------------------------------------------------------------- the written spec


def _flat(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


SOURCE = re.compile(r"stepwall calibrate: (.+), (\d+) points, RMS ([\d.]+)%, max ([\d.]+)%")


def test_written_spec_changes_only_fitted_values_and_their_sources(
    reg: Any, gen: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "demo-gpu-fitted.toml"
    code, text, err = run(reg, capsys, str(GPU), "--data", str(GEMM), "--data", str(COPY),
                          "-o", str(out))  # fmt: skip
    assert code == 0, err
    fitted = {p.removeprefix("hardware.") for p in gen.TRUTH["demo-gpu.toml"]}
    assert f"wrote {out} ({len(fitted)} values and their sources)" in text
    before, after = GPU.read_text().splitlines(), out.read_text().splitlines()
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):  # comments, tables, order: as they were
        if old.startswith(("#", "[")) or not old.strip():
            assert old == new
        elif "#" in old:
            assert new.endswith(old[old.index("#") :])  # a trailing comment stays
            assert new.index("#") == old.index("#")  # in its column
    a, b = _flat(tomllib.loads(GPU.read_text())), _flat(tomllib.loads(out.read_text()))
    changed = {k for k in a if a[k] != b[k]}
    assert set(a) == set(b)
    sources = {f"{k.rpartition('.')[0]}.sources.{k.rpartition('.')[2]}".removeprefix(".")
               for k in fitted}  # fmt: skip
    assert changed == fitted | sources
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in (GEMM, COPY)}
    m = SOURCE.fullmatch(b["sources.hbm_efficiency"])
    assert m is not None
    assert m.group(1) == (f"demo-gemm.csv (sha256 {digest['demo-gemm.csv']}), "
                          f"demo-copy.csv (sha256 {digest['demo-copy.csv']})")  # fmt: skip
    assert SOURCE.fullmatch(b["bf16.sources.efficiency"]).group(1) == (  # type: ignore[union-attr]
        f"demo-gemm.csv (sha256 {digest['demo-gemm.csv']})"
    )
    # the written values read back as the fit, to the 4 digits written
    doc = json.loads(run(reg, capsys, str(GPU), "--data", str(GEMM), "--data", str(COPY),
                         "--json")[1])  # fmt: skip
    entry = load_entry(out, reg.kinds)
    for f in doc["fields"]:
        assert entry.scenario.value(f["path"]) == pytest.approx(f["value"], rel=6e-4)
    assert main(["check", str(out)], registry=reg) == 0
    assert "is a valid hardware entry" in capsys.readouterr().out


def test_an_override_file_stays_an_override(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "mine").mkdir()
    shutil.copy(GPU, tmp_path / "base" / "demo-gpu.toml")
    spec = tmp_path / "mine" / "override.toml"
    spec.write_text('name = "demo-override"\nfrom = "../base/demo-gpu.toml"\n'
                    '# my part\nmemory_capacity = "100 GB"\n')  # fmt: skip
    out = tmp_path / "override-fitted.toml"
    code, _, err = run(reg, capsys, str(spec), "--data", str(COPY), "-o", str(out))
    assert code == 0, err
    doc = tomllib.loads(out.read_text())
    assert doc["from"] == "base/demo-gpu.toml"  # rebased onto the output's folder
    assert set(doc) == {"name", "from", "memory_capacity", "hbm_efficiency", "kernel_floor",
                        "sources"}  # fmt: skip
    assert set(doc["sources"]) == {"hbm_efficiency", "kernel_floor"}
    assert "# my part" in out.read_text()
    entry = load_entry(out, reg.kinds)
    assert entry.scenario.value("hardware.memory_capacity") == 100e9
    assert entry.scenario.value("hardware.bf16.flops") == 989e12  # from the base


def test_default_keeps_unidentifiable_fields_and_flags_them(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """GEMMs of one row never reach the compute roof: bf16's efficiency and n½ cannot be
    fitted; they are flagged and left as they were."""
    rows = [line for line in GEMM.read_text().splitlines()
            if line.startswith(("primitive", "gemm,1,"))]  # fmt: skip
    data = tmp_path / "m1.csv"
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out.toml"
    code, text, err = run(reg, capsys, str(GPU), "--data", str(data), "-o", str(out))
    assert code == 0, err
    for key in ("bf16.efficiency", "bf16.half_rows", "fp8.efficiency", "fp8.half_rows"):
        line = next(x for x in text.splitlines() if x.startswith(key + " "))
        assert "not identifiable" in line and "spec value kept" in line
    doc, start = tomllib.loads(out.read_text()), tomllib.loads(GPU.read_text())
    for p in ("bf16", "fp8"):
        for key in ("efficiency", "half_rows"):
            assert doc[p][key] == start[p][key] and doc[p]["sources"][key] == "guess"
        assert doc[p]["gemm_floor"] != start[p]["gemm_floor"]
    assert doc["hbm_efficiency"] != start["hbm_efficiency"]


def test_a_fit_on_a_bound_is_flagged_not_failed(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Copies faster than the peak bandwidth allows: the efficiency stops at 1."""
    data = tmp_path / "fast.csv"
    rows = [f"memory_copy,{b},{2 + b * 1e9 / 5.5e12 * 1e6:.4f},x\n" for b in (0.1, 0.5, 1, 2, 4)]
    data.write_text("primitive,bytes [GB],time [us],source\n" + "".join(rows))
    code, text, err = run(reg, capsys, str(GPU), "--data", str(data), "--json")
    assert code == 0, err
    fields = {f["key"]: f for f in json.loads(text)["fields"]}
    assert fields["hbm_efficiency"]["value"] == 1.0
    assert fields["hbm_efficiency"]["flags"] == ["at its upper bound 1"]


def test_json_document(reg: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run(reg, capsys, str(CLUSTER), "--data", str(NCCL), "--json")
    assert code == 0
    doc = json.loads(text)
    assert doc["section"] == "cluster" and doc["points"] == 60 and doc["output"] is None
    assert [g["primitive"] for g in doc["groups"]] == ["all_reduce", "all_to_all"]
    assert sum(g["points"] for g in doc["groups"]) == 60
    for f in doc["fields"]:
        low, high = f["ci95"]
        assert low < f["value"] < high
        p_low, p_high = f["pi95"]  # the prediction interval holds the confidence interval
        assert p_low <= low and p_high >= high and f["spread"] > 0
        assert f["path"].startswith("cluster.scale_up.") and f["fitted"]
        mag, _ = parse_quantity(f["text"])
        assert mag == pytest.approx(f["value"], rel=6e-4)


def test_fields_named_in_their_primitive_section(
    reg: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, err = run(reg, capsys, str(CLUSTER), "--data", str(NCCL), "--json",
                          "--fit", "hop_latency,scale_up.bus_bandwidth")  # fmt: skip
    assert code == 0, err
    assert [f["key"] for f in json.loads(text)["fields"]] == ["scale_up.bus_bandwidth",
                                                             "scale_up.hop_latency"]  # fmt: skip


def test_plot_is_a_deterministic_svg(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    svgs = []
    for name in ("a.svg", "b.svg"):
        code, text, err = run(reg, capsys, str(CLUSTER), "--data", str(NCCL),
                              "--plot", str(tmp_path / name))  # fmt: skip
        assert code == 0, err
        assert f"wrote {tmp_path / name}" in text
        svgs.append((tmp_path / name).read_bytes())
    assert svgs[0] == svgs[1]
    body = svgs[0].decode()
    assert body.startswith("<?xml")
    for title in ("all_reduce: RMS", "all_to_all: RMS", "bytes [B]", "gpus=8"):
        assert title in body


def test_values_are_written_in_the_unit_they_had() -> None:
    assert value_text(5.5513e-6, TIME, like="5 us") == "5.551 us"
    assert value_text(1.418e-7, TIME, like="0.1 us") == "0.1418 us"
    assert value_text(1.418e-7, TIME) == "141.8 ns"
    assert value_text(6.8e12, BANDWIDTH, like=None) == "6.8 TB/s"
    assert value_text(0.0, TIME, like="2 us") == "0 us"
    assert value_text(0.86374, DIMENSIONLESS) == 0.8637
    assert value_text(3e-3, TIME, like="5 us") == "3 ms"  # 3000 us would not read well


# ---------------------------------------------------------------- shipped calibrations


def test_check_passes_on_the_fixture_calibrations(
    reg: Any, gen: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, err = run(reg, capsys, "--check", str(DATA / "manifests"))
    assert code == 0, err
    lines = text.splitlines()
    values = sum(len(v) for v in gen.TRUTH.values())
    assert lines[-1] == f"ok: 2 calibrations, {values} values within 0.1% of their fit"
    assert sum(line.startswith("ok: ") and "RMS" in line for line in lines) == 2


@pytest.mark.parametrize("change, drifts", [(1.01, True), (1.0003, False)])
def test_check_fails_when_a_committed_value_is_edited(
    reg: Any, gen: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    change: float, drifts: bool,
) -> None:  # fmt: skip
    copy = tmp_path / "calibration"
    shutil.copytree(DATA, copy, ignore=shutil.ignore_patterns("__pycache__"))
    spec = copy / "demo-gpu-calibrated.toml"
    text = spec.read_text()
    m = re.search(r'^kernel_floor = "([\d.]+) us"', text, re.M)
    assert m is not None
    edited = f"{float(m.group(1)) * change:.6g}"
    spec.write_text(text.replace(m.group(0), f'kernel_floor = "{edited} us"', 1))
    code, out, err = run(reg, capsys, "--check", str(copy / "manifests"))
    assert err == ""
    if not drifts:
        assert code == 0
        return
    assert code == 1
    bad = [line for line in out.splitlines() if "committed" in line]
    assert len(bad) == 1
    assert bad[0].startswith(f"{spec}:hardware.kernel_floor: committed ")
    assert "(-1.0" in bad[0] or "(-0.9" in bad[0]  # the fit is 1% below the edited value
    values = sum(len(v) for v in gen.TRUTH.values())
    assert out.splitlines()[-1].startswith(f"FAILED: 1 of {values} calibrated values drifted")


def test_shipped_calibrations_are_current(reg: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`stepwall calibrate --check` on the catalog's specs/calibration/ (what CI runs)."""
    code, text, err = run(reg, capsys, "--check")
    assert code == 0, text + err
    assert text.splitlines()[-1].startswith("ok: ")


def test_check_of_no_manifests_says_so(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(reg, capsys, "--check", str(tmp_path))
    assert code == 2 and "holds no calibration manifests" in err


@pytest.mark.parametrize(
    "manifest, fragment",
    [
        ('spec = "../demo-gpu.toml"\n', "data: missing"),
        ('spec = "../demo-gpu.toml"\ndata = ["../demo-copy.csv"]\nfits = []\n',
         "fits: unknown key; did you mean 'fit'?"),
        ('spec = "../demo-gpu.toml"\ndata = ["../demo-copy.csv"]\nfit = ["hbm_eff"]\n',
         "fit: hbm_eff: is not a field of this hardware entry"),
        ('spec = "../demo-gpu.toml"\ndata = ["../demo-copy.csv"]\npi95 = "0.7..0.9"\n',
         "pi95: not a table of ranges"),
        ('spec = "../demo-gpu.toml"\ndata = ["../demo-copy.csv"]\n[pi95]\nhbm_efficiency = 0.8\n',
         "pi95: not a table of ranges"),
    ],
)  # fmt: skip
def test_bad_manifest_is_one_line(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, manifest: str, fragment: str
) -> None:
    folder = tmp_path / "calibration"
    shutil.copytree(DATA, folder, ignore=shutil.ignore_patterns("__pycache__", "manifests"))
    (folder / "manifests").mkdir()
    (folder / "manifests" / "bad.toml").write_text(manifest)
    code, _, err = run(reg, capsys, "--check", str(folder / "manifests"))
    assert code == 2
    assert err.count("\n") == 1 and fragment in err and "bad.toml" in err


# ---------------------------------------------------------------- bad data

HEAD = "primitive,bytes [B],time [us],source\n"
BAD = [
    (HEAD + "memroy_copy,1000,3,x\n", (),
     "bad.csv:line 2, primitive: unknown primitive 'memroy_copy'; did you mean 'memory_copy'?"),
    ("primitive,bytes [B],source\nmemory_copy,1000,x\n", (), "bad.csv:header: no 'time' column"),
    ("primitive,bytes,time [us],source\nmemory_copy,1000,3,x\n", (),
     "bad.csv:column bytes: has no unit"),
    ("primitive,bytes [us],time [us],source\nmemory_copy,1000,3,x\n", (),
     "bad.csv:column bytes [us]: unit 'us' is s, not B"),
    ("primitive,bytes [B],time [GB],source\nmemory_copy,1000,3,x\n", (),
     "bad.csv:column time [GB]: unit 'GB' is B, not s"),
    ("primitive,bytes [B],time [furlong],source\nmemory_copy,1000,3,x\n", (),
     "bad.csv:column time [furlong]: unknown unit 'furlong'"),
    (HEAD + "memory_copy,1000,nan,x\nmemory_copy,2000,3,x\n", (),
     "bad.csv:line 2, time: nan is not a finite number"),
    (HEAD + "memory_copy,1000,3,x\nmemory_copy,2000,inf,x\n", (),
     "bad.csv:line 3, time: inf is not a finite number"),
    (HEAD + "memory_copy,1000,0,x\n", (), "bad.csv:line 2, time: 0 is not positive"),
    (HEAD + "memory_copy,1000,-3,x\n", (), "bad.csv:line 2, time: -3 is not positive"),
    (HEAD + "memory_copy,,3,x\n", (), "bad.csv:line 2, bytes: the cell is empty"),
    (HEAD + "memory_copy,1000,3,x\n", (), "bad.csv: too few points: 1 for 2 fields"),
    ("primitive,m,n,k,weight_bits [bit],precision,time [us],source\n"
     "gemm,1,4096,4096,16,bf61,20,x\n", (),
     "bad.csv:line 2, precision: 'bf61' is not allowed; did you mean 'bf16'?"),
    ("primitive,m,n,k,weight_bits [bit],time [us],source\ngemm,1,4096,4096,16,20,x\n", (),
     "bad.csv:line 2, precision: no 'precision' column for primitive gemm"),
    ("primitive,tokens,hidden,inter,experts,topk,ep,weight_bits [bit],precision,routing,"
     "time [us],source\nmoe,1,7168,2048,256,8,8,8,fp8,randm,40,x\n", (),
     "bad.csv:line 2, routing: 'randm' is not allowed; did you mean 'random'?"),
    ("primitive,bytes [B],gpus,time [us],source\nall_reduce,1000,8,30,x\n", (),
     "bad.csv:line 2, primitive: primitive 'all_reduce' fits cluster.scale_up fields, not "
     "hardware"),
    (HEAD + "memory_copy,1000,3,x\nmemory_copy,2000,3.1,x\n", ("--fit", "kernel_flor"),
     "--fit:kernel_flor: is not a field of this hardware entry; did you mean 'kernel_floor'?"),
    (HEAD + "memory_copy,1000,3,x\nmemory_copy,2000,3.1,x\n", ("--fit", "bf16.efficiency"),
     "--fit:bf16.efficiency: is not a field the data's primitives fit"),
    ("primitive,m,n,k,weight_bits [bit],precision,time [us],source\n"
     "gemm,1,4096,4096,16,bf16,20,x\ngemm,1,7168,7168,16,bf16,30,x\n"
     "gemm,1,2048,7168,16,bf16,12,x\n", ("--fit", "bf16.gemm_floor,bf16.half_rows"),
     "--fit:bf16.half_rows: not identifiable from the data: no point's time depends on it"),
    ("primitive,time [us]\nsmall_kernel,3\n", (), "bad.csv:header: no 'source' column"),
    ("", (), "bad.csv: is empty"),
]  # fmt: skip


@pytest.mark.parametrize("csv, args, message", BAD)
def test_bad_data_is_one_line_and_exit_2_with_nothing_written(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    csv: str, args: tuple[str, ...], message: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    Path("bad.csv").write_text(csv)
    code, out, err = run(reg, capsys, str(GPU), "--data", "bad.csv", *args, "-o", "out.toml",
                         "--plot", "fit.svg")  # fmt: skip
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("stepwall: error: "), err
    assert message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_a_row_the_law_cannot_price_is_refused(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "one.csv"
    data.write_text("primitive,bytes [B],gpus,time [us],source\nall_reduce,1000,1,3,x\n"
                    "all_reduce,2000,8,9,x\n")  # fmt: skip
    code, _, err = run(reg, capsys, str(CLUSTER), "--data", str(data))
    assert code == 2
    assert "one.csv:line 2, gpus: 1 GPUs (expected 2 to cluster.scale_up.domain_size" in err


def test_spec_must_be_a_hardware_or_cluster_entry(
    reg: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(reg, capsys, "b2000", "--data", str(COPY))
    assert code == 2 and "did you mean 'b200'?" in err
    model = ROOT / "specs" / "models" / "deepseek-v3-fp8.toml"
    code, _, err = run(reg, capsys, str(model), "--data", str(COPY))
    assert code == 2 and "is a model entry; calibrate fits the fields of a hardware" in err


# ---------------------------------------------------------------- listing and help


def test_primitives_listing_covers_the_registry(
    reg: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, _ = run(reg, capsys, "--primitives")
    assert code == 0
    for name, prim in reg.primitives.items():
        block = text.split(f"{name}: ", 1)[1].split("\n\n", 1)[0]
        assert f"fits     {', '.join(prim.fields)}" in block
        assert f"section  {prim.section} (plugin {prim.plugin})" in block
    code, text, _ = run(reg, capsys, "--primitives", str(CLUSTER))
    assert "gemm" not in text
    assert "t = Min(" in text and "scale_up.switch_latency" in text


def test_help_teaches_the_format_and_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--help"]) == 0
    text = capsys.readouterr().out
    for phrase in ("time [us]", "--check", "specs/calibration", "--primitives",
                   "docs/calibration.md", "95% confidence"):  # fmt: skip
        assert phrase in text, phrase


def test_a_row_the_law_refuses_is_named_by_its_file_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row outside what its primitive's law prices (an all-to-all on one GPU) is refused in
    one line that names the file as given on the command line, not only its base name."""
    data = tmp_path / "bench" / "a2a.csv"
    data.parent.mkdir()
    data.write_text("primitive,bytes [B],gpus,time [us],source\nall_to_all,1000,1,10,x\n")
    assert main(["calibrate", "hgx-h200-ib", "--data", str(data)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err == f"stepwall: error: {data}:line 2, gpus: 1 GPUs (expected 2 to "
        "cluster.scale_up.domain_size = 8 GPUs)\n"
    )


# ---------------------------------------------------------------- ranged fields


def test_a_field_stated_as_a_range_is_priced_at_its_nominal_and_never_fitted(
    reg: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A spec may state a value no table measures as a range (its reasoning in sources): the
    fit reads the nominal and leaves the range out of the fields it fits by default, and asking
    to fit it is a one-line error naming the field."""
    ranged = tmp_path / "demo-gpu.toml"
    ranged.write_text(
        GPU.read_text().replace("hbm_efficiency = 0.8 ", 'hbm_efficiency = "0.5..0.9 (0.8)" ')
    )
    copy, gemm = str(DATA / "demo-copy.csv"), str(DATA / "demo-gemm.csv")
    code, out, _ = run(reg, capsys, str(ranged), "--data", copy, "--data", gemm, "--json")
    assert code == 0
    fitted = {f["path"] for f in json.loads(out)["fields"] if f["fitted"]}
    assert "hardware.hbm_efficiency" not in fitted and "hardware.bf16.efficiency" in fitted
    code, out, err = run(reg, capsys, str(ranged), "--data", copy, "--fit", "hbm_efficiency")
    assert code == 2 and out == ""
    assert "hbm_efficiency" in err and "range" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("optional", [{"routing": "balanced"}, {"precision": "fp3"}])
def test_an_optional_column_must_be_a_text_column_with_its_default_among_its_values(
    optional: dict[str, str],
) -> None:
    """A plugin that declares an optional column it does not have, or a default its column
    does not allow, is refused where it declares it."""
    with pytest.raises(PluginError, match="optional column"):
        Primitive("x", "hardware", "a kernel", {}, {"precision": ("bf16", "fp8")}, (),
                  lambda *_: 0, "demo", None, optional)  # fmt: skip
