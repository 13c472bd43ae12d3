"""Bad inputs to the model commands found by probing (issue 20, "Trust on any machine"):
``eval``, ``expr``, ``derive``, ``sweep``, ``explore`` and ``check`` with odd ``--set`` and
``--at`` values, ``--vary`` spans, spec files of the wrong kind, and analysis options.

Each case runs in-process from an empty working folder (`place`) and must end as
`test_bad_inputs._check` demands: exit 0 or 2, no traceback, a refusal in one line that
contains the fragment (so it names the argument, file or key at fault), nothing written.
Files a case reads are written beside the working folder first (``{aside}``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_bad_inputs
from test_bad_inputs import BASE, EITHER, REFUSE, _check, _outcome

place = test_bad_inputs.place  # the corpus's fixture: an empty working folder and files aside

ELASTICITY = ["derive", BASE, "elasticity"]
DEEP_LIST = "[" * 5000
DEEP_TABLE = "{a=" * 3000

# Files the cases read, written into the aside folder: {catalog} is the shipped specs folder.
FILES: dict[str, str] = {
    "from-hardware.toml": 'from = "{catalog}/hardware/b300.toml"\n',
    "from-a-gpu-name.toml": 'from = "b300"\nname = "faster-b300"\n',
    "from-report.toml": 'from = "{catalog}/reports/k26-cluster-scaling.toml"\n',
    "hardware-is-model.toml": (
        f'from = "{BASE}"\nhardware = "{{catalog}}/models/deepseek-v3-fp8.toml"\n'
    ),
    "hardware-from-cluster.toml": (
        f'from = "{BASE}"\n[hardware]\nfrom = "{{catalog}}/clusters/hgx-b300-ib.toml"\n'
    ),
    "cluster-from-model.toml": 'from = "{catalog}/models/deepseek-v3-fp8.toml"\nkind = "gpu"\n',
    "sources-table.toml": f'from = "{BASE}"\n[parallel.sources]\ntp = {{a = 1}}\n',
    "sources-number.toml": f'from = "{BASE}"\n[parallel.sources]\ntp = 8\n',
    "kind-tpu.toml": 'name = "x"\nkind = "tpu"\n',
    "kind-of-a-subsection.toml": 'kind = "nvlink"\n',
    "source-list.toml": f'from = "{BASE}"\n[parallel]\nsource = ["a"]\n',
    "decoding-from.toml": f'from = "{BASE}"\n[decoding]\nfrom = "mtp"\n',
    "precision-from.toml": f'from = "{BASE}"\n[hardware.bf16]\nfrom = "h200"\n',
    "decoding-no-kind.toml": f'from = "{BASE}"\n[decoding]\nkind = "mtp"\n',
    "tree-no-kind.toml": (
        'model = "kimi-k2.6-int4"\nhardware = "b300"\ncluster = "hgx-b300-ib"\n[parallel]\n'
        "tp = 8\n[workload]\nconcurrency = 1\ncontext = 8192\n[decoding]\nbudget = 8\n"
    ),
    "cluster-no-kinds.toml": (
        'name = "c"\nnodes = 1\ngpus_per_node = 8\n[scale_up]\nkind = "nvlink"\n'
        'domain_size = 8\nbus_bandwidth = "350 GB/s"\n[scale_out]\nnic_bandwidth = "800 Gb/s"\n'
    ),
    "workload-typo.toml": f'from = "{BASE}"\n[workload]\nconcurency = 8\n',
    "my-gpu.toml": 'name = "my-gpu"\nkind = "gpu"\nmemory_capacity = "80 GB"\n',
}

CASES: list[tuple[str, list[str], int | None, str]] = [
    # argparse %-formats help lines: a '%' in an option's doc crashed `--help`
    ("tornado-help", ["derive", BASE, "tornado", "--help"], 0, ""),
    # --set: a value of several lines read its first line and dropped the rest
    (
        "set-two-lines",
        ["eval", BASE, "--set", "parallel.tp=16\nparallel.ep=2"],
        REFUSE,
        "--set:parallel.tp: the value spans more than one line",
    ),
    (
        "set-two-lines-junk",
        ["eval", BASE, "--set", "parallel.tp=16\nzzz=1"],
        REFUSE,
        "more than one line",
    ),
    ("set-crlf", ["eval", BASE, "--set", "parallel.tp=16\r\n"], 0, ""),  # stripped: one line
    # --set: nesting too deep for the TOML reader was a RecursionError
    (
        "set-deep-list",
        ["eval", BASE, "--set", f"parallel.tp={DEEP_LIST}"],
        REFUSE,
        "--set:parallel.tp: nests more than 32 deep",
    ),
    (
        "set-deep-table",
        ["eval", BASE, "--set", f"parallel.tp={DEEP_TABLE}"],
        REFUSE,
        "nests more than 32 deep",
    ),
    ("set-shallow-list", ["eval", BASE, "--set", "parallel.tp=[[[8]]]"], REFUSE, "parallel.tp"),
    (
        "set-deep-vary",
        ["sweep", BASE, "--vary", f"parallel.tp={DEEP_LIST}"],
        REFUSE,
        "nests more than",
    ),
    # files of another kind: the error named a key of the other file, or its own `from`
    (
        "eval-hardware-entry",
        ["eval", "{catalog}/hardware/b300.toml"],
        REFUSE,
        "b300.toml: is a hardware entry, not a scenario",
    ),
    (
        "eval-model-entry",
        ["eval", "{catalog}/models/deepseek-v3-fp8.toml"],
        REFUSE,
        "deepseek-v3-fp8.toml: is a model entry",
    ),
    (
        "eval-cluster-entry",
        ["eval", "{catalog}/clusters/hgx-b300-ib.toml"],
        REFUSE,
        "hgx-b300-ib.toml: is a cluster entry",
    ),
    (
        "eval-report",
        ["eval", "{catalog}/reports/k26-cluster-scaling.toml"],
        REFUSE,
        "is a report file",
    ),
    (
        "eval-validation-table",
        ["eval", "{catalog}/validation/published.toml"],
        REFUSE,
        "is a validation file",
    ),
    (
        "eval-calibration",
        ["eval", "{catalog}/calibration/b300.toml"],
        REFUSE,
        "is a calibration file",
    ),
    (
        "from-hardware",
        ["eval", "{aside}/from-hardware.toml"],
        REFUSE,
        "from-hardware.toml: is a hardware entry, not a scenario",
    ),
    (
        "from-a-gpu-name",  # was: "from: no scenarios entry named 'b300'"
        ["eval", "{aside}/from-a-gpu-name.toml"],
        REFUSE,
        "from-a-gpu-name.toml: is a hardware entry, not a scenario",
    ),
    ("check-from-a-gpu-name", ["check", "{aside}/from-a-gpu-name.toml"], 0, ""),
    (
        "eval-engine-entry",
        ["eval", "{catalog}/engines/trtllm.toml"],
        REFUSE,
        "trtllm.toml: is an engine entry, not a scenario",
    ),
    (
        "from-report",
        ["eval", "{aside}/from-report.toml"],
        REFUSE,
        "from: k26-cluster-scaling.toml is a report file",
    ),
    (
        "hardware-is-model",
        ["eval", "{aside}/hardware-is-model.toml"],
        REFUSE,
        "hardware-is-model.toml:hardware: deepseek-v3-fp8.toml is a model file (expected a "
        "hardware file",
    ),
    (
        "hardware-from-cluster",
        ["eval", "{aside}/hardware-from-cluster.toml"],
        REFUSE,
        "hardware.from: hgx-b300-ib.toml is a cluster file",
    ),
    (
        "check-from-model-as-gpu",
        ["check", "{aside}/cluster-from-model.toml"],
        REFUSE,
        "cluster-from-model.toml:from: deepseek-v3-fp8.toml is a model file",
    ),
    (
        "against-hardware",
        [
            "derive",
            BASE,
            "crossover",
            "workload.concurrency",
            "--against",
            "{catalog}/hardware/b300.toml",
        ],
        REFUSE,
        "b300.toml: is a hardware entry",
    ),
    (
        "eval-my-gpu",
        ["eval", "{aside}/my-gpu.toml"],
        REFUSE,
        "my-gpu.toml: is a hardware entry, not a scenario",
    ),
    ("check-my-gpu", ["check", "{aside}/my-gpu.toml"], REFUSE, "my-gpu.toml:hardware."),
    ("check-catalog-hardware", ["check", "{catalog}/hardware/b300.toml"], 0, ""),
    # a `kind` no catalog entry has was "kind: unknown key (expected one of the sections …)"
    (
        "check-kind-tpu",
        ["check", "{aside}/kind-tpu.toml"],
        REFUSE,
        "kind-tpu.toml:kind: no plugin provides an entry of kind 'tpu'; did you mean 'gpu'?",
    ),
    ("eval-kind-tpu", ["eval", "{aside}/kind-tpu.toml"], REFUSE, "kind 'tpu'"),
    (
        "check-kind-nvlink",
        ["check", "{aside}/kind-of-a-subsection.toml"],
        REFUSE,
        "entry of kind 'nvlink'",
    ),
    # a `sources` entry that is not text was taken
    (
        "sources-table",
        ["eval", "{aside}/sources-table.toml"],
        REFUSE,
        "sources-table.toml:parallel.sources: sources must map field names to text",
    ),
    ("sources-number", ["eval", "{aside}/sources-number.toml"], REFUSE, "parallel.sources"),
    # a key of another kind in a section without `kind =`: "unknown key for kind 'none'"
    (
        "tree-no-kind",
        ["eval", "{aside}/tree-no-kind.toml"],
        REFUSE,
        "tree-no-kind.toml:decoding.kind: missing, and the default kind 'autoregressive' takes "
        "no budget (expected kind one of: autoregressive, ddtree, mtp)",
    ),
    (
        "scale-out-no-kind",
        ["check", "{aside}/cluster-no-kinds.toml"],
        REFUSE,
        "cluster.scale_out.kind: missing, and the default kind 'none' takes no nic_bandwidth",
    ),
    (
        "workload-typo",
        ["eval", "{aside}/workload-typo.toml"],
        REFUSE,
        "did you mean workload.concurrency?",
    ),  # a typo is still a typo
    (
        "kind-named-keys-of-another",
        ["eval", "{aside}/decoding-no-kind.toml"],
        REFUSE,
        "decoding.budget: unknown key for decoding kind 'mtp'",
    ),
    # a `source` that is not text, and a `from` where none is followed, were ignored
    (
        "source-list",
        ["eval", "{aside}/source-list.toml"],
        REFUSE,
        "source-list.toml:parallel.source: ['a'] is not text",
    ),
    (
        "decoding-from",
        ["eval", "{aside}/decoding-from.toml"],
        REFUSE,
        "decoding-from.toml:decoding.from: decoding cannot start from another spec",
    ),
    (
        "precision-from",
        ["eval", "{aside}/precision-from.toml"],
        REFUSE,
        "hardware.bf16.from: hardware.bf16 cannot start from another spec",
    ),
    # an inline scenario naming a section twice kept the last silently
    (
        "inline-twice",
        ["eval", "model=deepseek-v3-fp8,model=kimi-k2.6-int4,hardware=h200,cluster=hgx-h200-ib"],
        REFUSE,
        "inline scenario:model: given twice",
    ),
    (
        "inline-hardware-is-model",
        [
            "eval",
            "model=deepseek-v3-fp8,hardware={catalog}/models/"
            "deepseek-v3-fp8.toml,cluster=hgx-h200-ib",
        ],
        REFUSE,
        "inline scenario:hardware: deepseek-v3-fp8.toml is a model file",
    ),
    # derive elasticity --at: the value was never checked (a crash, or numbers at an
    # impossible point), and a key given twice kept one of them
    (
        "at-overflow",
        [*ELASTICITY, "--at", "parallel.tp=1e400"],
        REFUSE,
        "--at:parallel.tp: 1e400 is not a finite number",
    ),
    ("at-nan", [*ELASTICITY, "--at", "parallel.tp=nan"], REFUSE, "not a finite number"),
    (
        "at-zero",
        [*ELASTICITY, "--at", "parallel.tp=0"],
        REFUSE,
        "--at:parallel.tp: 0 is out of range",
    ),
    ("at-negative", [*ELASTICITY, "--at", "parallel.tp=-8"], REFUSE, "out of range"),
    ("at-fraction", [*ELASTICITY, "--at", "parallel.tp=8.5"], REFUSE, "not a whole number"),
    (
        "at-indivisible",
        [*ELASTICITY, "--at", "parallel.tp=3"],
        REFUSE,
        "--at:parallel.tp: 3 does not divide model.n_heads = 64",
    ),
    (
        "at-memory",
        [*ELASTICITY, "--at", "parallel.tp=1"],
        REFUSE,
        "--at:parallel.tp: resident memory per GPU",
    ),
    ("at-cluster", [*ELASTICITY, "--at", "parallel.tp=128"], REFUSE, "tp·ep·dp GPUs"),
    (
        "at-bandwidth-zero",
        [*ELASTICITY, "--at", "hardware.hbm_bandwidth=0"],
        REFUSE,
        "--at:hardware.hbm_bandwidth: 0 is out of range",
    ),
    (
        "at-bandwidth-negative",
        [*ELASTICITY, "--at", "hardware.hbm_bandwidth=-1e12"],
        REFUSE,
        "out of range",
    ),
    (
        "at-twice",
        [*ELASTICITY, "--at", "parallel.tp=8", "--at", "parallel.tp=16"],
        REFUSE,
        "--at:parallel.tp: given twice",
    ),
    (
        "at-structural",
        [*ELASTICITY, "--at", "decoding.accepted_tokens=5"],
        REFUSE,
        "decides which terms",
    ),
    ("at-feasible", [*ELASTICITY, "--at", "parallel.tp=16"], 0, ""),
    ("at-si-bandwidth", [*ELASTICITY, "--at", "hardware.hbm_bandwidth=8e12"], 0, ""),
    ("at-allow-infeasible", [*ELASTICITY, "--at", "parallel.tp=3", "--allow-infeasible"], 0, ""),
    # crossover --against "": the empty name fell back to the scenario itself
    (
        "against-empty",
        ["derive", BASE, "crossover", "workload.concurrency", "--against", ""],
        REFUSE,
        "derive:--against: is empty",
    ),
    (
        "against-blank",
        ["derive", BASE, "crossover", "workload.concurrency", "--against", " "],
        REFUSE,
        "--against",
    ),
    # expr --free of a structural key printed a constant: the key silently not kept
    (
        "expr-free-structural",
        ["expr", BASE, "--free", "decoding.accepted_tokens"],
        REFUSE,
        "--free:decoding.accepted_tokens: decides which terms the model has",
    ),
    ("expr-free-twice", ["expr", BASE, "--free", "parallel.tp", "--free", "parallel.tp"], 0, ""),
    # sweep --vary spans: an empty step was read as 1; a count of points that is not a whole
    # number read as an unknown unit 'lin'; the point limit's message lost the key
    (
        "vary-empty-step",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:"],
        REFUSE,
        "--vary:parallel.tp=1..8:: nothing follows ':'",
    ),
    (
        "vary-blank-step",
        ["sweep", BASE, "--vary", "parallel.tp=1..8: "],
        REFUSE,
        "nothing follows ':'",
    ),
    (
        "vary-negative-count",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:-3lin"],
        REFUSE,
        "'-3lin' needs at least 2 points, a whole number",
    ),
    (
        "vary-fraction-count",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:2.5lin"],
        REFUSE,
        "'2.5lin' needs at least 2 points",
    ),
    (
        "vary-exponent-count",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:1e9lin"],
        REFUSE,
        "'1e9lin' needs at least 2 points",
    ),
    (
        "vary-bare-log",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:log"],
        REFUSE,
        "'log' needs at least 2 points",
    ),
    (
        "vary-huge-count",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:99999999lin"],
        REFUSE,
        "--vary:parallel.tp=1..8:99999999lin: a range of 1e+08 points",
    ),
    (
        "vary-tiny-step",
        ["sweep", BASE, "--vary", "parallel.tp=1..8:1e-300"],
        REFUSE,
        "--vary:parallel.tp=1..8:1e-300: a range of",
    ),
    (
        "vary-tiny-factor",
        ["sweep", BASE, "--vary", "workload.concurrency=1..4096:x1.000000001"],
        REFUSE,
        "workload.concurrency=1..4096:x1.000000001: a range of",
    ),
    ("vary-count", ["sweep", BASE, "--vary", "parallel.tp=1..8:4lin", "-q"], 0, ""),
    ("vary-one-point", ["sweep", BASE, "--vary", "parallel.tp=1..1", "-q"], 0, ""),
    (
        "vary-zero-step",
        ["sweep", BASE, "--vary", "parallel.tp=1..2:0"],
        REFUSE,
        "the step must be positive",
    ),
    (
        "vary-negative-step",
        ["sweep", BASE, "--vary", "parallel.tp=1..2:-1"],
        REFUSE,
        "the step must be positive",
    ),
    ("vary-x-alone", ["sweep", BASE, "--vary", "parallel.tp=x1"], REFUSE, "cannot read"),
    (
        "vary-factor-below-1",
        ["sweep", BASE, "--vary", "parallel.tp=1..2:x0.5"],
        REFUSE,
        "a factor > 1",
    ),
    (
        "vary-step-unit",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=7TB/s..9TB/s:1s"],
        REFUSE,
        "not of the range's dimension",
    ),
    (
        "vary-ends-units",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=7TB..9TB/s"],
        REFUSE,
        "ends of different dimensions",
    ),
    # an end without a unit takes the other's, as in a range ("7..9 TB/s")
    (
        "vary-end-unit-shared",
        ["sweep", BASE, "--vary", "hardware.hbm_bandwidth=7..9TB/s", "-q"],
        0,
        "",
    ),
    # tornado --spread that moves nothing said "the scenario has no ranged values"
    (
        "spread-metric-of-counts",
        ["derive", BASE, "tornado", "--spread", "0.1", "--metric", "gpus"],
        REFUSE,
        "derive:--spread: ±0.1 moves no continuous",
    ),
    (
        "spread-tiny",
        ["derive", BASE, "tornado", "--spread", "1e-300"],
        REFUSE,
        "--spread: ±1e-300 moves no continuous parameter",
    ),
    # derive options around the edges
    ("derive-eps-inf", ["derive", BASE, "wall", "parallel.tp", "--eps", "inf"], REFUSE, "--eps"),
    (
        "derive-metric-empty",
        ["derive", BASE, "wall", "parallel.tp", "--metric", ""],
        REFUSE,
        "unknown metric",
    ),
    ("derive-key-empty", ["derive", BASE, "wall", ""], REFUSE, "not a parameter"),
    ("spread-nan", ["derive", BASE, "tornado", "--spread", "nan"], REFUSE, "--spread"),
    ("spread-one", ["derive", BASE, "tornado", "--spread", "1"], REFUSE, "--spread"),
    ("fraction-nan", ["derive", BASE, "plateau", "--fraction", "nan"], REFUSE, "--fraction"),
    ("explore-eps-nan", ["explore", BASE, "--eps", "nan"], REFUSE, "--eps"),
    ("explore-chart-unknown", ["explore", BASE, "--chart", "nosuch"], REFUSE, "--chart"),
    (
        "explore-free-structural",
        ["explore", BASE, "--free", "decoding.accepted_tokens"],
        REFUSE,
        "--free:decoding.accepted_tokens",
    ),
    ("explore-top-negative", ["explore", BASE, "--top", "-1"], REFUSE, "--top"),
    (
        "eval-1e18-layers",
        ["eval", BASE, "--set", "model.n_layers=1e18"],
        REFUSE,
        "resident memory per GPU",
    ),
    (
        "eval-10e30-layers",
        ["eval", BASE, "--set", "model.n_layers=" + "1" + "0" * 30],
        REFUSE,
        "resident memory per GPU",
    ),
    (
        "eval-power-syntax",
        ["eval", BASE, "--set", "model.n_layers=10**30"],
        REFUSE,
        "model.n_layers",
    ),
    ("eval-one-layer", ["eval", BASE, "--set", "model.n_layers=1"], EITHER, ""),
    # counts the laws loop over: a trillion picks, groups or drafts hung the build (or overflowed
    # a float in the group-limited law at 256 groups) before the constraints could refuse them
    # within the bound, the cross-field constraint still names both keys
    (
        "eval-top-k-above-experts",
        [
            "eval",
            "k26-b300-tp8-ddtree",
            "--set",
            "model.n_experts=32",
            "--set",
            "model.experts_per_token=48",
        ],
        REFUSE,
        "48 > model.n_experts = 32",
    ),
    (
        "eval-trillion-picks",
        ["eval", "dsv3-h200-ep32-decode", "--set", "model.experts_per_token=1000000000000"],
        REFUSE,
        "--set:model.experts_per_token: 1000000000000 is out of range (expected a value ≤ 64)",
    ),
    (
        "eval-256-groups-of-256",
        [
            "eval",
            "dsv3-h200-ep32-decode",
            "--set",
            "model.n_group=256",
            "--set",
            "model.topk_group=256",
        ],
        REFUSE,
        "--set:model.topk_group: 256 is out of range (expected a value ≤ 64)",
    ),
    (
        "eval-trillion-drafts",
        ["eval", "dsr1-fp4-b200-tep8-mtp3-decode", "--set", "decoding.drafts=1000000000000"],
        REFUSE,
        "--set:decoding.drafts: 1000000000000 is out of range (expected a value ≤ 64)",
    ),
]


def _placed(text: str, names: dict[str, str]) -> str:
    """``{catalog}`` and ``{aside}`` replaced (other braces are the case's own)."""
    return text.replace("{catalog}", names["catalog"]).replace("{aside}", names["aside"])


@pytest.mark.parametrize(("name", "argv", "expect", "fragment"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_probe(name, argv, expect, fragment, place, capsys) -> None:
    work = Path(place["work"])
    aside = work.parent / "aside"
    names = {**place, "aside": str(aside)}
    for file, body in FILES.items():
        (aside / file).write_text(_placed(body, names), encoding="utf-8")
    argv = [_placed(a, names) for a in argv]
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, expect, fragment, set(), work)
    if expect == REFUSE:
        assert err.count("\n") == 1, err  # the refusal alone: one line


def test_a_crossover_with_itself_says_the_metric_is_the_same(place, capsys) -> None:
    """No scenario leads where the two sides are one: the note says they are equal."""
    argv = ["derive", BASE, "crossover", "workload.concurrency", "--against", BASE, "--json"]
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["value"] is None and "the same for both" in doc["note"], doc["note"]
    assert "leads" not in doc["note"]


def test_elasticity_at_a_point_is_that_points(place, capsys) -> None:
    """--at moves the point: the metric's value there is the one eval gives there."""
    code, out, _ = _outcome([*ELASTICITY, "--at", "parallel.tp=16", "--json"], capsys)
    assert code == 0
    at16 = json.loads(out)["results"][0]["details"]["metric_value"]
    code, out, _ = _outcome(["eval", BASE, "--set", "parallel.tp=16", "--json"], capsys)
    assert code == 0
    assert at16 == pytest.approx(json.loads(out)["step_time_s"], rel=1e-9)


def test_the_probe_corpus_is_broad() -> None:
    assert len(CASES) >= 60


AXIS_INFEASIBLE = [
    ("wall", ["wall", "hardware.hbm_bandwidth"], "no hardware.hbm_bandwidth satisfies"),
    ("optimum", ["optimum", "hardware.hbm_bandwidth"], "no feasible hardware.hbm_bandwidth"),
    ("regime", ["regime", "hardware.hbm_bandwidth"], "no feasible hardware.hbm_bandwidth"),
    ("crossover", ["crossover", "workload.concurrency", "--against", "dsv3-h200-tp8"],
     "no feasible workload.concurrency"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "note"), AXIS_INFEASIBLE,
                         ids=[c[0] for c in AXIS_INFEASIBLE])  # fmt: skip
def test_an_axis_infeasible_all_along_has_no_feasible_answer(name, args, note, place,
                                                             capsys) -> None:  # fmt: skip
    """parallel.tp = 3 splits 64 heads unevenly whatever the bandwidth (or the users): a
    divisibility constraint the axis does not enter fails all along it, so there is no
    optimum, regime change or crossover, and the wall has no feasible value."""
    argv = ["derive", BASE, *args, "--set", "parallel.tp=3", "--json"]
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    doc = json.loads(out)
    doc = doc["results"][0] if "results" in doc else doc  # regime: one result per change
    assert doc["feasible_value"] is None
    if name != "wall":
        assert doc["value"] is None, doc
    assert note in (doc["note"] or ""), doc["note"]


@pytest.mark.parametrize("nodes", ["9", "100000", "1e15"])
def test_a_large_cluster_keeps_the_whole_degrees_of_a_wall(nodes, place, capsys) -> None:
    """Past 200 000 candidate degrees the scan was a float grid, where no degree divides the
    heads: "no parallel.tp satisfies every constraint" on a large cluster. Every whole degree
    near the small end is tried, so the wall's feasible degree is the same on any cluster."""
    argv = ["derive", BASE, "wall", "parallel.tp", "--set", f"cluster.nodes={nodes}", "--json"]
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    assert json.loads(out)["feasible_value"] == 16, out


@pytest.mark.parametrize("command", ["eval", "check", "from"])
def test_a_huge_file_is_refused_before_it_is_read(command, place, capsys) -> None:
    """A sparse 3 GB file named .toml was read whole (6 GB of memory, a minute) before
    anything was checked; now its size is, in a bounded read."""
    aside = Path(place["work"]).parent / "aside"
    huge = aside / "huge.toml"
    with huge.open("wb") as fh:
        fh.truncate(3 * 2**30)
    target = huge
    if command == "from":
        target = aside / "child.toml"
        target.write_text(f'from = "{huge}"\n')
    code, out, err = _outcome(["check" if command == "check" else "eval", str(target)], capsys)
    _check(code, out, err, REFUSE, "huge.toml: is larger than 8 MiB", set(), Path(place["work"]))


@pytest.mark.parametrize(("metric", "sense"), [("joules_per_token", "minimum"),
                                                ("usd_per_million_tokens", "minimum"),
                                                ("tokens_per_s_per_gpu", "maximum")])  # fmt: skip
def test_an_optimum_of_a_cost_is_its_minimum(metric, sense, place, capsys) -> None:
    """Energy and money per token were maximised (only names ending in _s or holding "bytes"
    counted as costs): the "optimum" was the most expensive point. More users per step cost
    less per token and give more tokens per GPU: both are best at the memory bound."""
    argv = ["derive", BASE, "optimum", "workload.concurrency", "--metric", metric, "--set",
            "cluster.price_per_gpu_hour=3 USD/h", "--json"]  # fmt: skip
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert f"({sense})" in doc["definition"], doc["definition"]
    assert doc["value"] == pytest.approx(359), doc
