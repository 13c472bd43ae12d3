"""Write specs/calibration/{h200,b200}-gdn-sglang-0.5.14.csv: Gated DeltaNet kernels, held out.

Usage: python tools/aic_gdn_tables.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. The rows are SGLang
0.5.14's Gated DeltaNet kernels for Qwen3.5-397B-A17B's linear-attention layers (16 key heads,
64 value heads, 128 dimensions each) at every tensor-parallel split the table holds: the
chunked prefill (``chunk_gated_delta_rule``, ``batch`` prompts of ``seq_len`` tokens each)
and the decode recurrence (``fused_recurrent_gated_delta_rule_packed_decode``, one token for
each of ``batch`` requests), one layer per row, time in microseconds. No manifest fits them:
no law of stepwall prices the chunked scan's serial chain yet, and docs/calibration.md
("Linear attention's kernels, held out") compares them with what the model prices.
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
HEADER = ["primitive", "batch", "seq_len", "key_heads", "value_heads", "key_dim", "value_dim",
          "precision", "time [us]", "source"]  # fmt: skip


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
                    r["num_v_heads"], r["head_k_dim"], r["head_v_dim"], "bf16",
                    round(r["latency"] * 1000, 3), src])  # fmt: skip
    out.sort(key=lambda x: (x[0], -int(x[3]), x[1], x[2], x[9]))
    return out


def main(repo: Path, out: Path) -> None:
    for gpu in GPUS:
        write_table(out / f"{gpu}-gdn-sglang-{VERSION}.csv", HEADER, rows(repo, gpu))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
