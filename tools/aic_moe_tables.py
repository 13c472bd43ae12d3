"""Write specs/calibration/h200-moe-sglang-0.5.9.csv: SGLang's own MoE kernels on H200, held out.

Usage: python tools/aic_moe_tables.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. The rows are SGLang
0.5.9's Triton fused-MoE kernels (``sglang_fused_moe_triton``, FP8 block-scaled weights,
balanced routing), the path SGLang runs on Hopper where experts are not exchanged by DeepEP:
the expert-parallel rows at EP8 and the tensor-parallel rows at TP4 and TP8, each written as
the ``moe`` primitive counts it (an expert of inter/TP columns on one of ``ep`` ranks), for
models of 128 experts or more, up to 16,384 tokens. No manifest fits the file: H200's FP8
experts are fitted to TensorRT-LLM's CUTLASS kernels (h200-moe.csv), and docs/calibration.md
("Engines' own MoE kernels") compares the two.
"""

from __future__ import annotations

import sys
from pathlib import Path

from aic_alltoall_tables import COMMIT, URL, aic_table, write_table

TABLE = "h200_sxm/moe/sglang/0.5.9/moe_perf.parquet"
MIN_EXPERTS = 128
MAX_TOKENS = 16384
LAYOUTS = ((1, 8), (4, 1), (8, 1))  # (TP, EP) of the rows kept
HEADER = ["primitive", "tokens", "hidden", "inter", "experts", "topk", "ep", "weight_bits [bit]",
          "precision", "time [us]", "source"]  # fmt: skip


def rows(repo: Path) -> list[list[object]]:
    out = []
    for r in aic_table(repo, TABLE):
        tp, ep = r["moe_tp_size"], r["moe_ep_size"]
        kept = (r["kernel_source"] == "sglang_fused_moe_triton" and r["moe_dtype"] == "fp8_block"
                and r["distribution"] == "balanced" and r["num_experts"] >= MIN_EXPERTS
                and r["num_tokens"] <= MAX_TOKENS and (tp, ep) in LAYOUTS)  # fmt: skip
        if not kept:
            continue
        layout = f"EP{ep}" if ep > 1 else f"TP{tp}"
        src = (f"aiconfigurator perf DB ({COMMIT}) SGLang 0.5.9 Triton fused MoE FP8 block, "
               f"{layout}, inter {r['inter_size']} / {tp} per GPU {URL}/{TABLE}")  # fmt: skip
        out.append(["moe", r["num_tokens"], r["hidden_size"], r["inter_size"] // tp,
                    r["num_experts"], r["topk"], ep, 8, "fp8", round(r["latency"] * 1000, 3),
                    src])  # fmt: skip
    out.sort(key=lambda x: (x[6], x[2], x[3], x[4], x[5], x[1], x[10]))
    return out


def main(repo: Path, out: Path) -> None:
    write_table(out / "h200-moe-sglang-0.5.9.csv", HEADER, rows(repo))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
