"""Bad inputs to the non-model spec sections and calibration tables found by probing (issue
20, "Trust on any machine"): kernel floors past a second, fractional kernel counts, a DDTree
accepting more tokens than its depth allows, and calibration rows whose law cannot price
them (top-k or EP beyond the experts, collectives over one GPU or beyond the domain).

Each case runs in-process from an empty working folder (`place`) and must end as
`test_bad_inputs._check` demands: exit 0 or 2, no traceback, a refusal in one line that
contains the fragment (so it names the file, line, column or key at fault), nothing written.
CSV tables a case reads are written beside the working folder first (``{aside}``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_bad_inputs
from test_bad_inputs import BASE, EITHER, REFUSE, _check, _outcome

place = test_bad_inputs.place  # the corpus's fixture: an empty working folder and files aside

MTP = "dsv3-b200-tp8-mtp"
EP32 = "dsv3-h200-ep32-decode"
NVL72 = "k26-gb300nvl72-ep72"
SERVING = "llama8b-h100-serving"

MOE = "primitive,tokens,hidden,inter,experts,topk,ep,weight_bits [bit],precision,time [us],source\n"
GEMM = "primitive,m,n,k,weight_bits [bit],precision,time [us],source\n"
COMM = "primitive,bytes [B],gpus,time [us],source\n"
COPY = "primitive,bytes [B],time [us],source\n"

VALIDATION = (
    'description = "probe"\n[[row]]\nid = "r1"\nclass = "other"\nscenario = "' + BASE + '"\n'
    'set = [{set}]\nmetric = "tokens_per_s_per_user"\nmeasured = "100 tokens/s"\n'
    'source = "x"\nurl = "https://example.com"\nevidence = "x"\n'
)

TABLES: dict[str, str] = {
    "moe-topk.csv": MOE + "moe,4,7168,2048,256,300,8,4.5,fp4,47.7,x\n"
    "moe,8,7168,2048,256,8,8,4.5,fp4,50,x\n",
    "moe-ep.csv": MOE + "moe,4,7168,2048,256,8,512,4.5,fp4,47.7,x\n",
    "moe-topk-equal.csv": MOE + "moe,4,7168,2048,8,8,8,4.5,fp4,47.7,x\n",
    "gemm-m0.csv": GEMM + "gemm,0,2048,7168,16,bf16,8.7,x\n",
    "copy-0.csv": COPY + "memory_copy,0,5,x\n",
    "allreduce-16.csv": COMM + "all_reduce,1024,16,5,x\nall_reduce,4096,8,6,x\n",
    "allreduce-1.csv": COMM + "all_reduce,1024,1,5,x\n",
    "alltoall-72.csv": COMM + "all_to_all,1024,72,5,x\n",
    "alltoall-1.csv": COMM + "all_to_all,1024,1,5,x\n",
    "alltoall-73.csv": COMM + "all_to_all,1024,73,5,x\nall_to_all,2048,8,6,x\n",
    "manifest.toml": 'spec = "hgx-b300-ib"\ndata = ["allreduce-16.csv"]\n',
    "context.toml": f'from = "{BASE}"\n[workload]\ncontext = 100\ninput_tokens = 4096\n',
    "floor.toml": f'from = "{BASE}"\n[hardware]\nkernel_floor = "5 s"\n',
    "rows-floor.toml": VALIDATION.format(set='"hardware.kernel_floor=5s"'),
    "rows-kernels.toml": VALIDATION.format(set='"engine.layer_kernels=1.5"'),
}


def _set(scenario: str, *assignments: str) -> list[str]:
    return ["eval", scenario, *(a for s in assignments for a in ("--set", s))]


CASES: list[tuple[str, list[str], int | None, str]] = [
    # a kernel floor is microseconds: one past a second is a unit slip, not a GPU
    ("gemm-floor-2s", _set(BASE, "hardware.bf16.gemm_floor=2s"), REFUSE,
     "hardware.bf16.gemm_floor: '2s' is out of range"),
    ("kernel-floor-10s", _set(BASE, "hardware.kernel_floor=10s"), REFUSE,
     "hardware.kernel_floor: '10s' is out of range"),
    ("moe-floor-1000s", _set(BASE, "hardware.moe_floor=1000s"), REFUSE, "hardware.moe_floor"),
    ("attention-floor-1.5s", _set(BASE, "hardware.attention_floor=1.5s"), REFUSE,
     "hardware.attention_floor"),
    ("fp8-floor-1s", _set(BASE, "hardware.fp8.gemm_floor=1s"), EITHER, ""),  # the bound itself
    ("gemm-floor-1e6s-sweep", ["sweep", BASE, "--vary", "hardware.bf16.gemm_floor=1us,1e6s"],
     REFUSE, "hardware.bf16.gemm_floor"),
    # a count of kernels is whole
    ("layer-kernels-half", _set(BASE, "engine.layer_kernels=0.5"), REFUSE,
     "engine.layer_kernels: 0.5 is not a whole number"),
    ("layer-kernels-negative", _set(BASE, "engine.layer_kernels=-1"), REFUSE,
     "engine.layer_kernels"),
    # a path through a tree of depth D accepts at most D drafts and the target's token
    ("ddtree-block-1", _set(BASE, "decoding.block=1"), REFUSE,
     "decoding.accepted_tokens = 4.42 > 2"),
    ("ddtree-block-3", _set(BASE, "decoding.block=3"), REFUSE, "tree's depth"),
    ("ddtree-block-4", _set(BASE, "decoding.block=4"), 0, ""),
    ("ddtree-block-0", _set(BASE, "decoding.block=0"), REFUSE, "decoding.block"),
    ("ddtree-budget-negative", _set(BASE, "decoding.budget=-1"), REFUSE, "decoding.budget"),
    ("ddtree-acceptance-1", _set(BASE, "decoding.acceptance=1"), REFUSE, "decoding.acceptance"),
    ("ddtree-node-time-negative", _set(BASE, "decoding.node_time=-1ms"), REFUSE,
     "decoding.node_time"),
    ("ddtree-accepted-0", _set(BASE, "decoding.accepted_tokens=0"), REFUSE,
     "decoding.accepted_tokens"),
    # MTP chains
    ("mtp-drafts-0", _set(MTP, "decoding.drafts=0"), REFUSE, "decoding.drafts: 0 is out of range"),
    ("mtp-acceptance-0", _set(MTP, "decoding.acceptance=0"), REFUSE, "decoding.acceptance"),
    ("mtp-draft-layers-negative", _set(MTP, "decoding.draft_layers=-1"), REFUSE,
     "decoding.draft_layers"),
    ("mtp-accepted-50", _set(MTP, "decoding.accepted_tokens=50"), REFUSE,
     "50 > decoding.drafts + 1 = 2"),
    # hardware fields beyond the shipped corpus
    ("bf16-flops-0", _set(BASE, "hardware.bf16.flops=0TFLOP/s"), REFUSE, "hardware.bf16.flops"),
    ("bf16-efficiency-0", _set(BASE, "hardware.bf16.efficiency=0"), REFUSE,
     "hardware.bf16.efficiency"),
    ("moe-half-rows-negative", _set(BASE, "hardware.bf16.moe_half_rows=-1"), REFUSE,
     "hardware.bf16.moe_half_rows"),
    ("moe-efficiency-above-1", _set(BASE, "hardware.moe_efficiency=1.01"), REFUSE,
     "hardware.moe_efficiency"),
    ("attention-efficiency-0", _set(BASE, "hardware.attention_efficiency=0"), REFUSE,
     "hardware.attention_efficiency"),
    ("attention-user-bandwidth-0", _set(BASE, "hardware.attention_user_bandwidth=0TB/s"), REFUSE,
     "hardware.attention_user_bandwidth"),
    ("board-power-0", _set(BASE, "hardware.board_power=0W"), REFUSE, "hardware.board_power"),
    ("memory-negative", _set(BASE, "hardware.memory_capacity=-80GB"), REFUSE,
     "hardware.memory_capacity"),
    # cluster and interconnect
    ("domain-0", _set(BASE, "cluster.scale_up.domain_size=0"), REFUSE,
     "cluster.scale_up.domain_size"),
    ("domain-not-whole-nodes", _set(EP32, "cluster.scale_up.domain_size=4"), REFUSE,
     "4 is not a multiple of cluster.gpus_per_node = 8"),
    ("domain-beyond-cluster", _set(NVL72, "cluster.scale_up.domain_size=144"), REFUSE,
     "144 > cluster.gpus_per_node*cluster.nodes = 72"),
    ("gpus-per-node-5", _set(NVL72, "cluster.gpus_per_node=5"), REFUSE,
     "5 does not divide cluster.scale_up.domain_size = 72"),
    ("bus-bandwidth-0", _set(BASE, "cluster.scale_up.bus_bandwidth=0GB/s"), REFUSE,
     "cluster.scale_up.bus_bandwidth"),
    ("hop-latency-negative", _set(BASE, "cluster.scale_up.hop_latency=-1us"), REFUSE,
     "cluster.scale_up.hop_latency"),
    ("nic-bandwidth-0", _set(EP32, "cluster.scale_out.nic_bandwidth=0Gb/s"), REFUSE,
     "cluster.scale_out.nic_bandwidth"),
    ("oversubscription-below-1", _set(EP32, "cluster.scale_out.oversubscription=0.9"), REFUSE,
     "cluster.scale_out.oversubscription: 0.9 is out of range"),
    ("nodes-half", _set(BASE, "cluster.nodes=0.5"), REFUSE, "cluster.nodes"),
    ("price-0", _set(BASE, "cluster.price_per_gpu_hour=0USD/h"), REFUSE,
     "cluster.price_per_gpu_hour"),
    ("pue-below-1", _set(BASE, "cluster.pue=0.99"), REFUSE, "cluster.pue"),
    # engine and workload
    ("comm-sm-fraction-0.95", _set(EP32, "engine.comm_sm_fraction=0.95"), REFUSE,
     "engine.comm_sm_fraction"),
    ("prefill-chunk-0", _set(SERVING, "engine.prefill_chunk=0"), REFUSE, "engine.prefill_chunk"),
    ("memory-fraction-0.01", _set(BASE, "engine.memory_fraction=0.01"), REFUSE,
     "resident memory per GPU"),
    ("isl-0", _set(SERVING, "workload.input_tokens=0"), REFUSE, "workload.input_tokens"),
    ("osl-0", _set(SERVING, "workload.output_tokens=0"), REFUSE, "workload.output_tokens"),
    ("isl-1e12", _set(SERVING, "workload.input_tokens=1e12"), REFUSE, "workload.input_tokens"),
    # a decoding user's context holds its prompt
    ("context-below-prompt", _set(BASE, "workload.context=100"), REFUSE,
     "workload.context: 100 < workload.input_tokens = 1024"),
    ("prompt-beyond-context", _set(BASE, "workload.input_tokens=1e6"), REFUSE,
     "--set:workload.input_tokens: workload.context = 8192 < workload.input_tokens"),
    ("context-equals-prompt", _set(BASE, "workload.context=100", "workload.input_tokens=100"), 0,
     ""),
    ("context-file", ["eval", "{aside}/context.toml"], REFUSE,
     "context.toml:workload.context: 100 < workload.input_tokens = 4096"),
    ("context-sweep", ["sweep", BASE, "--vary", "workload.context=512,8192"], 0, ""),
    ("floor-file", ["check", "{aside}/floor.toml"], REFUSE,
     "floor.toml:hardware.kernel_floor: '5 s' is out of range (expected a value ≤ 1 s)"),
    ("validate-floor", ["validate", "{aside}/rows-floor.toml"], REFUSE,
     "rows-floor.toml:row[0].set: hardware.kernel_floor"),
    ("validate-kernels", ["validate", "{aside}/rows-kernels.toml"], REFUSE,
     "engine.layer_kernels: 1.5 is not a whole number"),
    ("serving-has-no-context", _set(SERVING, "workload.context=8192"), REFUSE,
     "workload.context: no such key"),
    # calibration rows whose law cannot price them: file:line and column
    ("cal-moe-topk", ["calibrate", "b300", "--data", "{aside}/moe-topk.csv"], REFUSE,
     "moe-topk.csv:line 2, topk: 300 > experts = 256"),
    ("cal-moe-ep", ["calibrate", "b300", "--data", "{aside}/moe-ep.csv"], REFUSE,
     "moe-ep.csv:line 2, ep: 512 > experts = 256"),
    ("cal-moe-topk-equal", ["calibrate", "b300", "--data", "{aside}/moe-topk-equal.csv", "--fit",
                            "fp4.moe_floor"], 0, ""),
    ("cal-gemm-m0", ["calibrate", "b300", "--data", "{aside}/gemm-m0.csv"], REFUSE,
     "gemm-m0.csv:line 2, m: 0 is not positive"),
    ("cal-copy-0", ["calibrate", "b300", "--data", "{aside}/copy-0.csv"], REFUSE,
     "copy-0.csv:line 2, bytes: 0 is not positive"),
    ("cal-allreduce-16", ["calibrate", "hgx-b300-ib", "--data", "{aside}/allreduce-16.csv"],
     REFUSE, "allreduce-16.csv:line 2, gpus: 16 GPUs"),
    ("cal-allreduce-1", ["calibrate", "hgx-b300-ib", "--data", "{aside}/allreduce-1.csv"],
     REFUSE, "allreduce-1.csv:line 2, gpus: 1 GPUs"),
    ("cal-alltoall-72", ["calibrate", "hgx-b300-ib", "--data", "{aside}/alltoall-72.csv"],
     REFUSE, "cluster.scale_up.domain_size = 8"),
    ("cal-alltoall-1", ["calibrate", "hgx-b300-ib", "--data", "{aside}/alltoall-1.csv"],
     REFUSE, "alltoall-1.csv:line 2, gpus"),
    ("cal-alltoall-73-nvl72", ["calibrate", "gb300-nvl72", "--data", "{aside}/alltoall-73.csv"],
     REFUSE, "alltoall-73.csv:line 2, gpus: 73 GPUs (expected 2 to cluster.scale_up.domain_size"
     " = 72 GPUs)"),
    ("cal-check-manifest", ["calibrate", "--check", "{aside}/manifest.toml"], REFUSE,
     "allreduce-16.csv:line 2, gpus"),
    ("cal-topk-output", ["calibrate", "b300", "--data", "{aside}/moe-topk.csv", "-o", "out.toml",
                         "--plot", "fit.svg"], REFUSE, "topk"),
    ("cal-alltoall-72-nvl72", ["calibrate", "gb300-nvl72", "--data", "{aside}/alltoall-72.csv",
                               "--fit", "scale_up.a2a_latency"], 0, ""),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "expect", "fragment"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_probe(name, argv, expect, fragment, place, capsys, tmp_path) -> None:
    aside = tmp_path / "aside"
    for file, body in TABLES.items():
        (aside / file).write_text(body, encoding="utf-8")
    work = Path(place["work"])
    code, out, err = _outcome([a.format(aside=aside) for a in argv], capsys)
    _check(code, out, err, expect, fragment, set(), work)


def test_a_validation_row_past_the_tree_depth_has_no_prediction(place, capsys, tmp_path) -> None:
    table = tmp_path / "aside" / "rows-block.toml"
    table.write_text(VALIDATION.format(set='"decoding.block=1"'), encoding="utf-8")
    code, out, err = _outcome(["validate", str(table), "--json"], capsys)
    assert code == 0, err
    assert '"predicted": null' in out and "decoding.accepted_tokens = 4.42 > 2" in out
