"""``stepwall collect`` (issue 23, item 4): the primitives' microbenchmarks, written as the
tables ``stepwall calibrate`` fits. ``--cpu --quick`` runs the same code on the CPU at tiny
sizes: the tables it writes must be ones calibrate reads and fits into a spec."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import pytest

from stepwall.apps.collect import group_sizes, nvfp4_operand
from stepwall.cli import main

torch = pytest.importorskip("torch")  # the `collect` extra (the test extra pins it)

HEADS = {
    "copy": "memory_copy",
    "small": "small_kernel",
    "gemm": "gemm",
    "moe": "moe",
    "mla": "mla_decode",
    "gqa": "gqa_decode",
    "allreduce": "all_reduce",
    "alltoall": "all_to_all",
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    assert main(["collect", "--cpu", "--quick", "-o", str(out), "--prefix", "cpu"]) == 0
    return out


@pytest.mark.parametrize("table", sorted(HEADS))
def test_each_table_is_written_with_provenance(tables: Path, table: str) -> None:
    with (tables / f"cpu-{table}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["primitive"] for r in rows} == {HEADS[table]}
    assert all(float(r["time [s]"]) > 0 for r in rows)
    assert all("stepwall collect --cpu" in r["source"] and "torch" in r["source"] for r in rows)


def test_collectives_are_timed_over_each_group_size(tables: Path) -> None:
    """Three CPU processes stand in for GPUs: each collective is timed over groups of 2 and 3
    at every size, and each row's bytes split evenly over its group."""
    for table in ("allreduce", "alltoall"):
        with (tables / f"cpu-{table}.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        assert [int(r["gpus"]) for r in rows] == [2, 2, 2, 3, 3, 3]
        assert all(int(r["bytes [B]"]) % (4 * int(r["gpus"])) == 0 for r in rows)


@pytest.mark.parametrize(("world", "sizes"), [(2, [2]), (3, [2, 3]), (4, [2, 4]),
                                              (8, [2, 4, 8]), (12, [2, 4, 8, 12])])  # fmt: skip
def test_group_sizes(world: int, sizes: list[int]) -> None:
    assert group_sizes(world) == sizes


def test_calibrate_fits_the_collected_tables(tables: Path, tmp_path: Path) -> None:
    """The hardware tables fit a GPU spec's fields and the collectives' tables a cluster's:
    calibrate writes specs whose fitted values are the data's, not the starting spec's."""
    data = [a for t in ("copy", "small", "gemm", "moe", "mla", "gqa")
            for a in ("--data", str(tables / f"cpu-{t}.csv"))]  # fmt: skip
    out = tmp_path / "cpu-gpu.toml"
    assert main(["calibrate", "h200", *data, "-o", str(out)]) == 0
    fitted = tomllib.loads(out.read_text())
    start = tomllib.loads((Path(__file__).parents[1] / "specs/hardware/h200.toml").read_text())
    assert fitted["hbm_efficiency"] != start["hbm_efficiency"]
    assert main(["check", str(out)]) == 0
    # a cluster whose law has no one-shot kernel: gloo's (and NCCL's) all-reduce has none
    cluster = tmp_path / "cpu-cluster.toml"
    assert main(["calibrate", "hgx-h800-ib", "--data", str(tables / "cpu-allreduce.csv"),
                 "--data", str(tables / "cpu-alltoall.csv"), "-o", str(cluster)]) == 0  # fmt: skip
    assert main(["check", str(cluster)]) == 0
    fitted = tomllib.loads(cluster.read_text())["scale_up"]
    start = tomllib.loads((Path(__file__).parents[1] / "specs/clusters/hgx-h800-ib.toml")
                          .read_text())["scale_up"]  # fmt: skip
    for field in ("bus_bandwidth", "link_bandwidth"):
        assert fitted[field] != start[field], field


def test_only_some_tables(tmp_path: Path) -> None:
    assert main(["collect", "--cpu", "--quick", "-o", str(tmp_path), "--only", "small"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["collected-small.csv"]


def test_unknown_table_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["collect", "--cpu", "-o", str(tmp_path), "--only", "gemm,warp"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--only" in err and "'warp'" in err and "\n" not in err
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible here")
def test_no_gpu_without_cpu_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["collect", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA GPU" in err and "--cpu" in err and "\n" not in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("rows", "k", "scales"), [(1, 7168, 128 * 448), (129, 2048, 256 * 128),
                                                   (4096, 48, 4096 * 4)])  # fmt: skip
def test_nvfp4_operand_layout(rows: int, k: int, scales: int) -> None:
    """The operands of the Blackwell FP4 GEMM (built on the CPU here; timed only on a GPU): two
    E2M1 values a byte, and the E4M3 scales of 16-element blocks in the 128 x 4 tiles
    scaled_mm's swizzled layout takes, rows padded to 128 and k/16 to a multiple of 4."""
    values, scale = nvfp4_operand(torch, rows, k, "cpu")
    assert values.dtype == torch.float4_e2m1fn_x2 and tuple(values.shape) == (rows, k // 2)
    assert scale.dtype == torch.float8_e4m3fn and scale.numel() == scales
