"""Write specs/calibration/{h200,b200}-gdn-sglang-0.5.14.csv: Gated DeltaNet kernels.

Usage: python tools/aic_gdn_tables.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. The rows are SGLang
0.5.14's Gated DeltaNet kernels for Qwen3.5-397B-A17B's linear-attention layers (16 key heads,
64 value heads, 128 dimensions each) at every tensor-parallel split the table holds: the
chunked prefill (``chunk_gated_delta_rule``, ``batch`` prompts of ``seq_len`` tokens each,
in FLA's 64-token chunks) and the decode recurrence
(``fused_recurrent_gated_delta_rule_packed_decode``, one token for each of ``batch``
requests), one layer per row, time in microseconds. The collector keeps the recurrent state in
float32 (aiconfigurator collector/sglang/collect_gdn.py), 32 bits per element. The manifests
h200-gdn.toml and b200-gdn.toml fit the chunked prefill's own kernel family to them
(docs/calibration.md, "Linear attention's kernels").
"""

from __future__ import annotations

import sys
from pathlib import Path

from aic_alltoall_tables import COMMIT, URL, aic_table, write_table

MODEL = "Qwen/Qwen3.5-397B-A17B"
KERNELS = {"chunk_gated_delta_rule": "gdn_prefill",
           "fused_recurrent_gated_delta_rule_packed_decode": "gdn_decode"}  # fmt: skip
GPUS = {"h200": "h200_sxm", "b200": "b200_sxm"}
VERSION = "0.5.14"
CHUNK = 64  # FLA's chunk (BT = 64 in fla/ops/gated_delta_rule/chunk.py, which SGLang vendors)
STATE_BITS = 32  # the collector's float32 recurrent state
HEADER = ["primitive", "batch", "seq_len", "key_heads", "value_heads", "key_dim", "value_dim",
          "chunk", "state_bits [bit]", "precision", "time [us]", "source"]  # fmt: skip


def rows(repo: Path, gpu: str) -> list[list[object]]:
    table = f"{GPUS[gpu]}/linear_attention/sglang/{VERSION}/gdn_perf.parquet"
    out = []
    for r in aic_table(repo, table):
        if r["model_name"] != MODEL or r["kernel_source"] not in KERNELS:
            continue
        split = 16 // int(r["num_k_heads"])  # heads on one GPU of a TP-`split` layer
        src = (f"aiconfigurator perf DB ({COMMIT}) SGLang {VERSION} {r['kernel_source']} "
               f"({r['phase']}), {MODEL} linear attention at TP{split} {URL}/{table}")  # fmt: skip
        out.append([KERNELS[r["kernel_source"]], r["batch_size"], r["seq_len"], r["num_k_heads"],
                    r["num_v_heads"], r["head_k_dim"], r["head_v_dim"], CHUNK, STATE_BITS,
                    "bf16", round(r["latency"] * 1000, 3), src])  # fmt: skip
    out.sort(key=lambda x: (x[0], -int(x[3]), x[1], x[2], x[11]))
    return out


def main(repo: Path, out: Path) -> None:
    for gpu in GPUS:
        write_table(out / f"{gpu}-gdn-sglang-{VERSION}.csv", HEADER, rows(repo, gpu))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
