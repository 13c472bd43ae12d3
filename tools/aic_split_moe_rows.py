"""Give every Blackwell GPU's FP8 MoE table the same split-expert DeepGEMM rows as B200's.

Usage: python tools/aic_split_moe_rows.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. The rows are TensorRT-LLM
1.3.0rc20's DeepGEMM grouped GEMMs, FP8 block-scaled weights, balanced routing, for experts
split across GPUs (each row is an expert of inter/moe_tp columns, as the ``moe`` primitive
counts it): DeepSeek-V3's 256 experts split 2, 4 and 8 ways at EP 8, Mixtral-8x7B's 8 split
8 ways at EP 1 and 2 ways at EP 4. Thin experts are what tell a per-expert time
(``moe_expert_latency``) from the layer's floor and streaming rate (docs/calibration.md, "A
fixed time per expert"). specs/calibration/b200-moe.csv already holds them, and the tool
checks it reproduces those lines; GB200's, B300's and GB300's tables gain theirs, appended
(run it twice and nothing changes; a row whose time differs from the table's is an error).
"""

from __future__ import annotations

import sys
from pathlib import Path

from aic_alltoall_tables import COMMIT, URL, aic_table

# (GPU, aiconfigurator's directory, the kernel_source its FP8 block-scaled experts run as)
GPUS = (
    ("b200", "b200_sxm", "deepgemm"),
    ("gb200", "gb200", "deepgemm"),
    ("b300", "b300_sxm", "deepgemm"),
    ("gb300", "gb300", "deepgemm"),
)
VERSION = "1.3.0rc20"
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384)
# (hidden, inter, experts, topk, moe_tp, moe_ep) of the split shapes
SHAPES = (
    (7168, 2048, 256, 8, 2, 8),
    (7168, 2048, 256, 8, 4, 8),
    (7168, 2048, 256, 8, 8, 8),
    (4096, 14336, 8, 2, 8, 1),
    (4096, 14336, 8, 2, 2, 4),
)


def split_rows(repo: Path, folder: str, kernels: str) -> list[str]:
    """The split shapes' rows as CSV lines, in SHAPES then token order."""
    table = f"{folder}/moe/trtllm/{VERSION}/moe_perf.parquet"
    by_key = {}
    for r in aic_table(repo, table):
        key = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"],
               r["moe_tp_size"], r["moe_ep_size"], r["num_tokens"])  # fmt: skip
        if (r["kernel_source"] == kernels and r["moe_dtype"] == "fp8_block"
                and r["distribution"] == "balanced" and key[:6] in SHAPES):  # fmt: skip
            by_key[key] = float(str(r["latency"]))
    lines = []
    for hidden, inter, experts, topk, tp, ep in SHAPES:
        for tokens in TOKENS:
            ms = by_key[(hidden, inter, experts, topk, tp, ep, tokens)]
            src = (f"aiconfigurator perf DB (ai-dynamo/aiconfigurator {COMMIT}) {kernels} "
                   f"(moe_tp {tp}: inter {inter}/{tp} per GPU; moe_ep {ep}) balanced "
                   f"{URL}/{table}")  # fmt: skip
            lines.append(f"moe,{tokens},{hidden},{inter // tp},{experts},{topk},{ep},8,fp8,"
                         f"{ms * 1000:.4g},{src}")  # fmt: skip
    return lines


def merge(path: Path, lines: list[str]) -> int:
    """Append the lines ``path`` lacks; refuse a row it holds with another time."""

    def key(line: str) -> str:  # primitive, sizes, weight bits and precision: all but time
        return ",".join(line.split(",")[:9])

    held = path.read_text().splitlines()
    keys = {key(line): line for line in held}
    new = []
    for line in lines:
        old = keys.get(key(line))
        if old is None:
            new.append(line)
        elif old != line:
            raise SystemExit(f"{path}: holds {old!r}, the table gives {line!r}")
    if new:
        path.write_text("\n".join([*held, *new]) + "\n")
    return len(new)


def main(repo: Path, out: Path) -> None:
    for gpu, folder, kernels in GPUS:
        added = merge(out / f"{gpu}-moe.csv", split_rows(repo, folder, kernels))
        print(f"{gpu}-moe.csv: {added} split-expert rows added")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
