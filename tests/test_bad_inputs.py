"""A corpus of bad inputs, across every command: files, --set, --vary, -o and flags.

Each case runs the command line in-process from an empty working folder and must end with
exit code 0 or 2 — never an internal error or a traceback — with at most two lines on stderr;
a refused case (exit 2) prints nothing on stdout and writes nothing. Cases marked REFUSE are
physically impossible or malformed and must be refused; where a fragment is given, the
one-line message must contain it (so the message points the right way).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepwall.cli import main

BASE = "k26-b300-tp8-ddtree"
REFUSE, EITHER = 2, None

# ---------------------------------------------------------------- --set on eval

SET_CASES: list[tuple[str, int | None, str]] = [
    # physically impossible configurations (the list and their relatives)
    ("model.n_dense_layers=100", REFUSE, "100 > model.n_layers = 61"),
    ("model.n_dense_layers=62", REFUSE, "dense layers are a subset"),
    # above the field's bound of 64 picks, refused before any law is built
    ("model.experts_per_token=500", REFUSE, "500 is out of range (expected a value ≤ 64)"),
    ("model.experts_per_token=385", REFUSE, "model.experts_per_token"),
    ("model.n_experts=4", REFUSE, "model.n_experts"),
    ("decoding.accepted_tokens=100", REFUSE, "100 > decoding.budget + 1 = 9"),
    ("decoding.accepted_tokens=9.5", REFUSE, "at most the M tokens"),
    ("decoding.accepted_tokens=0.5", REFUSE, "out of range"),
    ("cluster.scale_up.domain_size=800", REFUSE, "800 > cluster.gpus_per_node"),
    ("cluster.scale_up.domain_size=12", REFUSE, "holds whole nodes"),
    ("cluster.scale_up.oneshot_latency=-1us", REFUSE, "out of range"),
    ("cluster.scale_up.oneshot_bandwidth=0GB/s", REFUSE, "out of range"),
    ("cluster.scale_up.oneshot_bandwidth=5us", REFUSE, "cluster.scale_up.oneshot_bandwidth"),
    ("cluster.scale_up.a2a_bandwidth=-5GB/s", REFUSE, "out of range"),
    ("cluster.scale_up.a2a_bandwidth=5us", REFUSE, "cluster.scale_up.a2a_bandwidth"),
    ("cluster.scale_up.a2a_bandwidth=1TB/s", REFUSE, "> cluster.scale_up.link_bandwidth"),
    ("cluster.scale_up.oneshot_bandwidth=1TB/s", REFUSE, "> cluster.scale_up.link_bandwidth"),
    ("engine.nvlink.allreduce_latency=-1us", REFUSE, "out of range"),
    ("engine.nvlink.allreduce_bandwidth=3 us", REFUSE, "engine.nvlink.allreduce_bandwidth"),
    ("parallel.tp=3", REFUSE, "3 does not divide model.n_heads = 64"),
    ("parallel.tp=9", REFUSE, "does not divide"),
    ("parallel.tp=6", REFUSE, "does not divide"),
    ("parallel.tp=1", REFUSE, "resident memory per GPU"),
    ("parallel.tp=128", REFUSE, "tp·ep·dp GPUs"),
    ("parallel.ep=5", REFUSE, "5 does not divide"),
    ("parallel.ep=7", REFUSE, "does not divide"),
    ("parallel.ep=500", REFUSE, "parallel.ep"),
    ("parallel.dp=10", REFUSE, "tp·ep·dp GPUs"),
    ("parallel.dp=0", REFUSE, "out of range"),
    ("parallel.tp=0", REFUSE, "out of range"),
    ("parallel.tp=-8", REFUSE, "out of range"),
    ("parallel.tp=8.5", REFUSE, "whole number"),
    ("parallel.redundant_experts=-1", REFUSE, "out of range"),
    ("parallel.redundant_experts=3", EITHER, ""),  # tp-only: experts are not spread
    ("parallel.imbalance=0.5", REFUSE, "out of range"),
    ("engine.recv_interval=0", REFUSE, "0 is out of range (expected a value ≥ 1)"),
    ("engine.recv_interval=2.5", REFUSE, "2.5 is not a whole number"),
    ("engine.schedules_ahead=2", REFUSE, "2 is out of range"),
    ("engine.schedules_ahead=-1", REFUSE, "-1 is out of range"),
    ("engine.schedules_ahead=0.5", REFUSE, "0.5 is not a whole number"),
    ('model.expert_math="w4a16"', REFUSE, "'w4a16' is not allowed; did you mean 'wna16'?"),
    ("hardware.wna16.moe_bandwidth_efficiency=1.5", REFUSE, "1.5 is out of range"),
    ("hardware.wna16.moe_floor=-1us", REFUSE, "out of range"),
    ("hardware.fp8.moe_expert_latency=-1us", REFUSE, "out of range"),
    ("hardware.fp8.moe_expert_latency=2s", REFUSE, "out of range"),
    ("hardware.wna16.moe_expert_latency=1TB/s", REFUSE, "moe_expert_latency"),
    ("hardware.trtllm_gen.moe_bandwidth_efficiency=1.5", REFUSE, "1.5 is out of range"),
    ("hardware.trtllm_gen.moe_expert_latency=-1us", REFUSE, "out of range"),
    ("hardware.trtllm_gen.moe_floor=1TB/s", REFUSE, "moe_floor"),
    ("hardware.fp8.gqa_attention_bandwidth_efficiency=1.5", REFUSE, "1.5 is out of range"),
    ("hardware.fp8.gqa_attention_floor=-1us", REFUSE, "out of range"),
    ("hardware.bf16.gqa_attention_floor=1TB/s", REFUSE, "gqa_attention_floor"),
    ("hardware.bf16.chunk_recurrence_efficiency=1.5", REFUSE, "1.5 is out of range"),
    ("hardware.bf16.chunk_recurrence_efficiency=0", REFUSE, "out of range"),
    ("hardware.bf16.chunk_recurrence_latency=-1us", REFUSE, "out of range"),
    ("hardware.bf16.chunk_recurrence_floor=1TB/s", REFUSE, "chunk_recurrence_floor"),
    ('model.linear_form="mamba"', REFUSE, "'mamba' is not allowed"),
    ("hardware.memory_capacity=1GB", REFUSE, "resident memory per GPU"),
    ("hardware.memory_capacity=0GB", REFUSE, "out of range"),
    ("hardware.hbm_efficiency=1.5", REFUSE, "out of range"),
    ("hardware.hbm_efficiency=0", REFUSE, "out of range"),
    ("hardware.bf16.efficiency=-0.1", REFUSE, "out of range"),
    ("hardware.hbm_bandwidth=0TB/s", REFUSE, "out of range"),
    ("hardware.hbm_bandwidth=-8TB/s", REFUSE, "out of range"),
    ("hardware.hbm_bandwidth=1e-30B/s", EITHER, ""),  # computed, with a warning
    ("hardware.hbm_bandwidth=1e30TB/s", EITHER, ""),
    ("hardware.hbm_bandwidth=8TB", REFUSE, "not B/s"),
    ("hardware.hbm_bandwidth=8", REFUSE, "has no unit"),
    ("hardware.hbm_bandwidth=nan", REFUSE, "not a finite number"),
    ("hardware.hbm_bandwidth=inf", REFUSE, "not a finite number"),
    ("hardware.hbm_bandwidth='8 TQ/s'", REFUSE, "unknown unit"),
    ("hardware.hbm_bandwidth=true", REFUSE, "hardware.hbm_bandwidth"),
    ("hardware.hbm_bandwidth=[8,9]", REFUSE, "hardware.hbm_bandwidth"),
    ("hardware.hbm_bandwidth={a=1}", REFUSE, "hardware.hbm_bandwidth"),
    ('hardware.hbm_bandwidth=""', REFUSE, "hardware.hbm_bandwidth"),
    ("hardware.hbm_bandwidth=8TB/s/s", REFUSE, "hardware.hbm_bandwidth"),
    ("hardware.hbm_bandwidth=1e400TB/s", REFUSE, "not a finite number"),
    ("hardware.bf16.gemm_floor=-1us", REFUSE, "out of range"),
    ("hardware.bf16.gemm_floor=5", REFUSE, "has no unit"),
    ("hardware.bf16.gemm_floor=5GB", REFUSE, "not s"),
    ("hardware.bf16.flops=2250TB/s", REFUSE, "hardware.bf16.flops"),
    ("workload.concurrency=0", REFUSE, "out of range"),
    ("workload.concurrency=1.5", REFUSE, "whole number"),
    ("workload.concurrency=1e9", REFUSE, "resident memory"),
    ("workload.context=0", REFUSE, "out of range"),
    ("workload.context=-1", REFUSE, "out of range"),
    ("workload.context=1e12", REFUSE, "resident memory"),
    ("model.n_layers=0", REFUSE, "out of range"),
    ("model.hidden=7168.5", REFUSE, "whole number"),
    ("model.expert_bits=4", REFUSE, "has no unit"),
    ("model.expert_bits=0bit", REFUSE, "out of range"),
    ("model.attention=mha", REFUSE, "not allowed"),
    ("decoding.budget=0", REFUSE, "out of range"),
    ("decoding.acceptance=1.5", REFUSE, "out of range"),
    ("decoding.kind=beam", REFUSE, "no plugin provides kind 'beam'"),
    ("decoding.kind=mtp", REFUSE, "decoding.budget"),  # ddtree's fields under mtp
    ("engine.native=0", REFUSE, "out of range"),
    ("engine.per_step=-1ms", REFUSE, "out of range"),
    ("cluster.nodes=0", REFUSE, "out of range"),
    ("cluster.gpus_per_node=0", REFUSE, "out of range"),
    ("cluster.scale_up.kind=ethernet", REFUSE, "no plugin provides kind"),
    ("cluster.scale_out.kind=none", REFUSE, "the kind takes none"),
    ("cluster.scale_up.in_switch_reduce=2", REFUSE, "not a boolean"),
    ("hardware.source=5", REFUSE, "citation"),
    ("hardware.name=x", REFUSE, "label"),
    ("hardware.hbm_bandwith=8TB/s", REFUSE, "no such key"),
    ("nosuch.key=1", REFUSE, "no such key"),
    ("parallel=8", REFUSE, "no such key"),
    ("parallel.tp", REFUSE, "not an assignment"),
    ("=8", REFUSE, "not an assignment"),
    ("parallel.tp==8", REFUSE, "parallel.tp"),
    # the fields added by the fidelity, energy/cost and ranges work
    ("engine.memory_fraction=1.5", REFUSE, "out of range"),
    ("engine.memory_fraction=0", REFUSE, "out of range"),
    ("engine.floor_factor=-1", REFUSE, "out of range"),
    ("engine.activation_factor=-0.5", REFUSE, "out of range"),
    ("engine.activation_factor=1 GB", REFUSE, "engine.activation_factor"),
    ("engine.activation_factor=nan", REFUSE, "not a finite number"),
    ("engine.prefill_chunk=0", REFUSE, "out of range"),
    ("engine.prefill_layer_host=-1 ms", REFUSE, "out of range"),
    ("engine.prefill_layer_host=1 GB", REFUSE, "engine.prefill_layer_host"),
    ("engine.prefill_layer_host=nan", REFUSE, "not a finite number"),
    ("engine.balance_timeout=-1", REFUSE, "out of range"),
    ("engine.balance_timeout=2.5", REFUSE, "not a whole number"),
    ("engine.prefill_placement=balanced", REFUSE, "engine.prefill_placement"),
    ("engine.from=nope", REFUSE, "engine.from"),
    ("hardware.fp8.efficiency=2", REFUSE, "out of range"),
    ("hardware.bf16.half_rows=-5", REFUSE, "out of range"),
    ("hardware.fp8.flops=0TFLOP/s", REFUSE, "out of range"),
    ("hardware.attention_half_context=-1", REFUSE, "out of range"),
    ("hardware.board_power=-5W", REFUSE, "out of range"),
    ("hardware.board_power=5GB", REFUSE, "not W"),
    ("cluster.pue=0.5", REFUSE, "out of range"),
    ("cluster.price_per_gpu_hour=3 EUR/h", REFUSE, "unknown unit"),
    ("cluster.price_per_gpu_hour=3 USD", REFUSE, "not USD/s"),
    ("cluster.price_per_gpu_hour=-3 USD/h", REFUSE, "out of range"),
    ("workload.output_tokens=0", REFUSE, "out of range"),
    ("hardware.hbm_bandwidth=8..7 TB/s", REFUSE, "low end above its high end"),
    ("hardware.hbm_bandwidth=nan..8 TB/s", REFUSE, "not a finite number"),
    ("hardware.hbm_bandwidth=7..8 (9) TB/s", REFUSE, "lies outside it"),
    ("parallel.tp=4..8", REFUSE, "takes whole numbers"),
    ("hardware.memory_capacity=60..275 (275) GB", REFUSE, "impossible configuration"),
]

# ---------------------------------------------------------------- scenario files

FILE_CASES: list[tuple[str, str, int | None, str]] = [
    ("empty", "", REFUSE, "is empty"),
    ("comments-only", "# nothing\n", REFUSE, "is empty"),
    ("syntax", "model = \n", REFUSE, "TOML syntax error"),
    ("duplicate-key", 'from = "k26-b300-tp8-ddtree"\nfrom = "x"\n', REFUSE, "TOML syntax"),
    ("deep", "a = " + "{b = " * 400 + "1" + "}" * 400 + "\n", REFUSE, "deep"),
    ("deep-arrays", "a = " + "[" * 300 + "]" * 300 + "\n", REFUSE, "deep"),
    ("no-model", 'hardware = "b300"\ncluster = "hgx-b300-ib"\n', REFUSE, "model: missing"),
    ("no-hardware", 'model = "kimi-k2.6-int4"\ncluster = "hgx-b300-ib"\n', REFUSE, "hardware"),
    ("no-cluster", 'model = "kimi-k2.6-int4"\nhardware = "b300"\n', REFUSE, "cluster"),
    ("unknown-model", 'from = "k26-b300-tp8-ddtree"\nmodel = "kimi-k9"\n', REFUSE, "models"),
    ("model-number", 'from = "k26-b300-tp8-ddtree"\nmodel = 5\n', REFUSE, "not a name"),
    ("from-missing", 'from = "no-such-scenario"\n', REFUSE, "no-such-scenario"),
    ("from-self", 'from = "./bad.toml"\n', REFUSE, "cycle"),
    ("unknown-section", 'from = "k26-b300-tp8-ddtree"\n[gpu]\nx = 1\n', REFUSE, "unknown key"),
    ("unknown-key", f'from = "{BASE}"\n[parallel]\ntpp = 8\n', REFUSE, "did you mean"),
    ("kind-number", f'from = "{BASE}"\n[decoding]\nkind = 3\n', REFUSE, "not a kind name"),
    ("kind-unknown", f'from = "{BASE}"\n[parallel]\nkind = "pipeline"\n', REFUSE, "kind"),
    ("sources-text", f'from = "{BASE}"\n[hardware]\nsources = "x"\n', REFUSE, "sources"),
    ("sources-key", f'from = "{BASE}"\n[hardware.sources]\nnope = "x"\n', REFUSE, "sources"),
    ("table-for-value", f'from = "{BASE}"\n[parallel.tp]\nx = 1\n', REFUSE, "parallel.tp"),
    ("array-value", f'from = "{BASE}"\n[parallel]\ntp = [8]\n', REFUSE, "parallel.tp"),
    ("dense>layers", f'from = "{BASE}"\n[model]\nn_dense_layers = 100\n', REFUSE, "61"),
    ("tau>M", f'from = "{BASE}"\n[decoding]\naccepted_tokens = 50\n', REFUSE, "50 >"),
    (
        "domain>cluster",
        f'from = "{BASE}"\n[cluster.scale_up]\ndomain_size = 800\n',
        REFUSE,
        "800 >",
    ),
    ("tp3", f'from = "{BASE}"\n[parallel]\ntp = 3\n', REFUSE, "does not divide"),
    (
        "bandwidth-bytes",
        f'from = "{BASE}"\n[hardware]\nhbm_bandwidth = "8 TB"\n',
        REFUSE,
        "not B/s",
    ),
    (
        "capacity-tiny",
        f'from = "{BASE}"\n[hardware]\nmemory_capacity = "1 MB"\n',
        REFUSE,
        "resident memory",
    ),
    (
        "unit-garbage",
        f'from = "{BASE}"\n[hardware]\nhbm_bandwidth = "fast"\n',
        REFUSE,
        "cannot read quantity",
    ),
    ("bool-for-number", f'from = "{BASE}"\n[parallel]\ntp = true\n', REFUSE, "parallel.tp"),
    ("string-degree", f'from = "{BASE}"\n[parallel]\ntp = "eight"\n', REFUSE, "parallel.tp"),
    ("date-value", f'from = "{BASE}"\n[parallel]\ntp = 2026-01-01\n', REFUSE, "parallel.tp"),
    ("top-level-junk", f'from = "{BASE}"\nfoo = 1\n', REFUSE, "unknown key"),
    ("hardware-dir", f'from = "{BASE}"\nhardware = "./"\n', REFUSE, "folder"),
    (
        "hardware-missing-file",
        f'from = "{BASE}"\nhardware = "./nope.toml"\n',
        REFUSE,
        "not found",
    ),
    ("overlap-bad", f'from = "{BASE}"\n[engine]\ntwo_batch_overlap = "yes"\n', REFUSE, "boolean"),
    (
        "fuse-shared-bad",
        f'from = "{BASE}"\n[engine]\nfuse_shared_experts = "yes"\n',
        REFUSE,
        "fuse_shared_experts",
    ),
    (
        "prefill-host-text",
        f'from = "{BASE}"\n[engine]\nprefill_layer_host = "eager"\n',
        REFUSE,
        "engine.prefill_layer_host",
    ),
    (
        "activation-text",
        f'from = "{BASE}"\n[engine]\nactivation_factor = "all"\n',
        REFUSE,
        "engine.activation_factor",
    ),
]

HARDWARE_MISSING_FIELD = 'name = "h"\nkind = "gpu"\nhbm_bandwidth = "1 TB/s"\n'
BINARY = b"\xff\xfe\x00garbage"

# ---------------------------------------------------------------- other commands

ARGV_CASES: list[tuple[str, list[str], int | None, str]] = [
    ("no-command", [], REFUSE, ""),
    ("unknown-command", ["evaluate", BASE], REFUSE, "invalid choice"),
    ("eval-no-scenario", ["eval"], REFUSE, "SCENARIO"),
    ("eval-unknown-flag", ["eval", BASE, "--fast"], REFUSE, "unrecognized"),
    ("eval-unknown-scenario", ["eval", "k27"], REFUSE, "no scenarios entry"),
    ("eval-missing-path", ["eval", "/nonexistent/x.toml"], REFUSE, "not found"),
    ("eval-folder", ["eval", "."], REFUSE, "folder"),
    ("eval-dev-null", ["eval", "/dev/null"], REFUSE, "not a regular file"),
    ("eval-empty-name", ["eval", ""], REFUSE, ""),
    (
        "eval-allow-infeasible",
        ["eval", BASE, "--set", "parallel.tp=1", "--allow-infeasible"],
        0,
        "",
    ),
    (
        "eval-json-infeasible",
        ["eval", BASE, "--set", "parallel.tp=3", "--json"],
        REFUSE,
        "does not divide",
    ),
    ("eval-hardware-file", ["eval", "{catalog}/hardware/b300.toml"], REFUSE, ""),
    ("expr-free-unknown", ["expr", BASE, "--free", "parallel.tpp"], REFUSE, "parallel.tp"),
    ("expr-free-section", ["expr", BASE, "--free", "parallel"], REFUSE, "not a parameter"),
    ("expr-infeasible", ["expr", BASE, "--set", "model.n_dense_layers=99"], REFUSE, "61"),
    ("derive-no-what", ["derive", BASE], REFUSE, "required"),
    ("derive-bad-what", ["derive", BASE, "walls", "parallel.tp"], REFUSE, "invalid choice"),
    ("derive-no-key", ["derive", BASE, "wall"], REFUSE, "required: KEY"),
    ("derive-bad-key", ["derive", BASE, "wall", "parallel.tpp"], REFUSE, "not a parameter"),
    (
        "derive-structural",
        ["derive", BASE, "optimum", "model.n_experts"],
        REFUSE,
        "decides which terms",
    ),
    ("derive-eps-zero", ["derive", BASE, "wall", "parallel.tp", "--eps", "0"], REFUSE, "eps"),
    ("derive-eps-neg", ["derive", BASE, "wall", "parallel.tp", "--eps", "-1"], REFUSE, "eps"),
    ("derive-eps-nan", ["derive", BASE, "wall", "parallel.tp", "--eps", "nan"], REFUSE, "eps"),
    ("derive-eps-text", ["derive", BASE, "wall", "parallel.tp", "--eps", "x"], REFUSE, "eps"),
    ("derive-fraction-1", ["derive", BASE, "plateau", "--fraction", "1"], REFUSE, "fraction"),
    ("derive-fraction-0", ["derive", BASE, "plateau", "--fraction", "0"], REFUSE, "fraction"),
    (
        "derive-crossover-alone",
        ["derive", BASE, "crossover", "workload.concurrency"],
        REFUSE,
        "--against",
    ),
    (
        "derive-against-missing",
        ["derive", BASE, "crossover", "workload.concurrency", "--against", "nope"],
        REFUSE,
        "nope",
    ),
    (
        "derive-metric",
        ["derive", BASE, "optimum", "parallel.tp", "--metric", "speed"],
        REFUSE,
        "unknown metric",
    ),
    ("derive-at-no-eq", ["derive", BASE, "elasticity", "--at", "parallel.tp"], REFUSE, "'='"),
    (
        "derive-at-text",
        ["derive", BASE, "elasticity", "--at", "parallel.tp=x"],
        REFUSE,
        "not a number",
    ),
    ("derive-at-unknown", ["derive", BASE, "elasticity", "--at", "x.y=1"], REFUSE, "x.y"),
    (
        "derive-elasticity-infeasible",
        ["derive", BASE, "elasticity", "--set", "parallel.tp=3"],
        REFUSE,
        "does not divide",
    ),
    (
        "derive-plateau-dense",
        ["derive", BASE, "plateau", "--set", "model.n_experts=0"],
        REFUSE,
        "",
    ),
    (
        "derive-infeasible-optimum",
        ["derive", "dsv3-h200-tp8", "optimum", "parallel.tp", "--set", "parallel.tp=1"],
        0,
        "",
    ),
    ("sweep-no-vary", ["sweep", BASE], REFUSE, "--vary"),
    ("sweep-vary-empty", ["sweep", BASE, "--vary", "parallel.tp="], REFUSE, "not a sweep"),
    ("sweep-vary-no-eq", ["sweep", BASE, "--vary", "parallel.tp"], REFUSE, "not a sweep"),
    ("sweep-vary-commas", ["sweep", BASE, "--vary", "parallel.tp=,,"], REFUSE, "no values"),
    ("sweep-vary-text", ["sweep", BASE, "--vary", "parallel.tp=a,b"], REFUSE, "cannot read"),
    (
        "sweep-vary-unit",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=8s"],
        REFUSE,
        "not B/s",
    ),
    (
        "sweep-vary-nan",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=nanTB/s"],
        REFUSE,
        "finite",
    ),
    (
        "sweep-vary-twice",
        ["sweep", BASE, "--vary", "parallel.tp=8", "--vary", "parallel.tp=16"],
        REFUSE,
        "varied twice",
    ),
    (
        "sweep-vary-and-set",
        ["sweep", BASE, "--vary", "parallel.tp=8", "--set", "parallel.tp=8"],
        REFUSE,
        "also given with --set",
    ),
    (
        "sweep-vary-kind",
        ["sweep", BASE, "--vary", "decoding.kind=mtp,ddtree"],
        REFUSE,
        "numeric",
    ),
    (
        "sweep-vary-range-back",
        ["sweep", BASE, "--vary", "parallel.tp=8..1"],
        REFUSE,
        "backwards",
    ),
    (
        "sweep-vary-range-huge",
        ["sweep", BASE, "--vary", "workload.context=1..1e15"],
        REFUSE,
        "points",
    ),
    (
        "sweep-vary-range-grid",
        [
            "sweep",
            BASE,
            "--vary",
            "workload.context=1..10000",
            "--vary",
            "workload.concurrency=1..10000",
        ],
        REFUSE,
        "points",
    ),
    (
        "sweep-vary-range-bad-by",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:y"],
        REFUSE,
        "cannot read",
    ),
    (
        "sweep-vary-range-units",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=1..2TB"],
        REFUSE,
        "'1TB' is a B quantity, not B/s",  # 1..2TB is 1TB..2TB, as in a range
    ),
    (
        "sweep-metric",
        ["sweep", BASE, "--vary", "parallel.tp=8", "--metric", "speed"],
        REFUSE,
        "unknown metric",
    ),
    ("sweep-infeasible-rows", ["sweep", BASE, "--vary", "parallel.tp=1,3,8"], 0, ""),
    (
        "sweep-out-missing-dir",
        ["sweep", BASE, "--vary", "parallel.tp=8", "-o", "/nonexistent/x.csv"],
        REFUSE,
        "not found",
    ),
    (
        "sweep-out-dir",
        ["sweep", BASE, "--vary", "parallel.tp=8", "-o", "."],
        REFUSE,
        "is a folder",
    ),
    (
        "sweep-out-suffix",
        ["sweep", BASE, "--vary", "parallel.tp=8", "-o", "x.xlsx"],
        REFUSE,
        "unknown output format",
    ),
    (
        "sweep-out-in-file",
        ["sweep", BASE, "--vary", "parallel.tp=8", "-o", "{file}/x.csv"],
        REFUSE,
        "not a folder",
    ),
    ("report-unknown", ["report", "nope"], REFUSE, "no reports entry"),
    ("report-missing-path", ["report", "/nonexistent/r.toml"], REFUSE, "not found"),
    (
        "report-scenario-as-report",
        ["report", "{catalog}/scenarios/k26-b300-tp8-ddtree.toml"],
        REFUSE,
        "",
    ),
    ("report-out-file", ["report", "k26-cluster-scaling", "-o", "{file}"], REFUSE, "is a file"),
    (
        "report-out-foreign",
        ["report", "k26-cluster-scaling", "-o", "{folder}"],
        REFUSE,
        "other files",
    ),
    (
        "report-out-under-file",
        ["report", "k26-cluster-scaling", "-o", "{file}/r"],
        REFUSE,
        "not a folder",
    ),
    ("check-missing", ["check", "/nonexistent.toml"], REFUSE, "not found"),
    ("check-folder", ["check", "."], REFUSE, "folder"),
    ("check-binary", ["check", "{binary}"], REFUSE, "not UTF-8"),
    ("check-hardware-bad", ["check", "{badhw}"], REFUSE, "missing required key"),
    ("plugins-bad-flag", ["plugins", "--yaml"], REFUSE, "unrecognized"),
    ("version", ["--version"], 0, ""),
    ("help", ["--help"], 0, ""),
    ("eval-help", ["eval", "--help"], 0, ""),
]


def _outcome(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _check(code: int, out: str, err: str, expect: int | None, fragment: str, before: set[str],
           cwd: Path) -> None:  # fmt: skip
    assert code in (0, 2), f"exit {code}: {err}"
    assert "Traceback" not in out + err and "internal error" not in err, err
    assert err.count("\n") <= 2, err
    if expect is not None:
        assert code == expect, f"exit {code}, expected {expect}: {err or out[-300:]}"
    if code == 2:
        assert out == "" or out.startswith("usage:"), out[:200]
        assert {p.name for p in cwd.iterdir()} == before, "a refused command wrote files"
        if fragment:
            assert fragment in err, err


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty working folder plus a few fixtures the cases point at."""
    work = tmp_path / "work"
    work.mkdir()
    aside = tmp_path / "aside"
    aside.mkdir()
    (aside / "a-file").write_text("x")
    foreign = aside / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (aside / "binary.toml").write_bytes(BINARY)
    (aside / "badhw.toml").write_text(HARDWARE_MISSING_FIELD)
    monkeypatch.chdir(work)
    from stepwall.core.catalog import catalog_root

    return {
        "work": str(work),
        "file": str(aside / "a-file"),
        "folder": str(foreign),
        "binary": str(aside / "binary.toml"),
        "badhw": str(aside / "badhw.toml"),
        "catalog": str(catalog_root()),
    }


@pytest.mark.parametrize(("assignment", "expect", "fragment"), SET_CASES,
                         ids=[c[0] for c in SET_CASES])  # fmt: skip
def test_bad_set(assignment, expect, fragment, place, capsys) -> None:
    work = Path(place["work"])
    code, out, err = _outcome(["eval", BASE, "--set", assignment], capsys)
    _check(code, out, err, expect, fragment, set(), work)


@pytest.mark.parametrize(("name", "body", "expect", "fragment"), FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])  # fmt: skip
def test_bad_scenario_file(name, body, expect, fragment, place, capsys, tmp_path) -> None:
    work = Path(place["work"])
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    code, out, err = _outcome(["eval", str(path)], capsys)
    _check(code, out, err, expect, fragment, set(), work)
    if code == 2 and expect == REFUSE:
        assert str(path) in err or "bad.toml" in err or "specs/" in err or ":" in err


@pytest.mark.parametrize(("name", "argv", "expect", "fragment"), ARGV_CASES,
                         ids=[c[0] for c in ARGV_CASES])  # fmt: skip
def test_bad_arguments(name, argv, expect, fragment, place, capsys) -> None:
    work = Path(place["work"])
    argv = [a.format(**place) for a in argv]
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, expect, fragment, set(), work)


def test_a_missing_field_is_blamed_on_the_file_that_lacks_it(place, capsys, tmp_path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(HARDWARE_MISSING_FIELD)
    sc = tmp_path / "sc.toml"
    sc.write_text(f'from = "{BASE}"\nhardware = "./hw.toml"\n')
    code, _, err = _outcome(["eval", str(sc)], capsys)
    assert code == 2 and "hw.toml:hardware.memory_capacity: missing" in err, err


def test_the_corpus_is_large() -> None:
    assert len(SET_CASES) + len(FILE_CASES) + len(ARGV_CASES) >= 150


def test_implausible_value_warns_once_and_computes(place, capsys) -> None:
    code, out, err = _outcome(["eval", BASE, "--set", "hardware.hbm_bandwidth=1e-30B/s"], capsys)
    assert code == 0 and "tokens/s per user" in out
    assert err.count("\n") == 1 and "plausible range of a bandwidth" in err


def test_interrupt_is_one_line(monkeypatch, capsys) -> None:
    from stepwall import cli

    def boom(ns, registry):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.command_module("eval"), "run", boom)
    assert main(["eval", BASE, "--no-cache"]) == 130  # not answered by the point cache
    assert capsys.readouterr().err == "stepwall: interrupted\n"


def test_interrupted_report_leaves_the_previous_one(tmp_path, monkeypatch) -> None:
    """A report folder is built aside and moved into place: an interruption midway leaves
    the previous report untouched and no stray folder."""
    from stepwall.io import output

    out = tmp_path / "rep"
    output.write_folder(out, {"REPORT.md": b"old", "a.csv": b"1"})
    real = Path.write_bytes
    calls = {"n": 0}

    def flaky(self: Path, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    with pytest.raises(KeyboardInterrupt):
        output.write_folder(out, {"REPORT.md": b"new", "a.csv": b"2", "b.csv": b"3"})
    monkeypatch.setattr(Path, "write_bytes", real)
    assert (out / "REPORT.md").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_failed_file_write_leaves_no_temporary(tmp_path, monkeypatch) -> None:
    from stepwall.core.errors import SpecError
    from stepwall.io import output

    target = tmp_path / "x.csv"
    target.write_text("previous")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(SpecError, match="No space left"):
        output.write_file(target, "new")
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]
