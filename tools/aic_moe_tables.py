"""Write SGLang's own fused-MoE kernel tables: specs/calibration/h200-moe-sglang-0.5.14.csv
(Triton, Hopper) and b200-moe-sglang-0.5.14.csv (FlashInfer's TensorRT-LLM-generation MoE,
Blackwell).

Usage: python tools/aic_moe_tables.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. The rows are SGLang
0.5.14's routed-expert kernels where DeepEP does not exchange the experts, FP8 block-scaled
weights, balanced routing: on H200 its Triton fused MoE (``sglang_fused_moe_triton``), on B200
FlashInfer's TensorRT-LLM-generation fused MoE (``sglang_flashinfer_trtllm_moe``). Kept: the
tensor-parallel rows at TP4 and TP8 (EP 1, the only layout the model prices these families
at; the table's EP rows walk the other ranks' picks too, a configuration the model never runs
in them), each written as the ``moe_<family>`` primitive counts it (an expert of inter/TP
columns), for models of 128 experts or more, up to 16,384 tokens, less every shape one of whose
rows streams its experts' weights faster than the GPU's HBM peak (`physical`). The manifests
h200-triton-moe.toml and b200-trtllm-gen-moe.toml fit the GPUs' ``[triton]`` and
``[trtllm_gen]`` kernel families to them (docs/calibration.md, "Engines' own MoE kernels");
the GPUs' other FP8 experts stay fitted to TensorRT-LLM's kernels (h200-moe.csv, b200-moe.csv).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from aic_alltoall_tables import COMMIT, URL, aic_table, write_table

from stepwall.core.units import parse_quantity

VERSION = "0.5.14"
MIN_EXPERTS = 128
MAX_TOKENS = 16384
LAYOUTS = ((4, 1), (8, 1))  # (TP, EP) of the rows kept: EP 1, where the model runs the family
HEADER = ["primitive", "tokens", "hidden", "inter", "experts", "topk", "ep", "weight_bits [bit]",
          "precision", "time [us]", "source"]  # fmt: skip
SPECS = Path(__file__).resolve().parents[1] / "specs" / "hardware"
# (GPU, aiconfigurator's directory, its kernel_source, the family, the kernels in words)
TABLES = (
    ("h200", "h200_sxm", "sglang_fused_moe_triton", "triton", "Triton fused MoE"),
    ("b200", "b200_sxm", "sglang_flashinfer_trtllm_moe", "trtllm_gen",
     "FlashInfer TensorRT-LLM-gen fused MoE"),
)  # fmt: skip


def hbm_peak(gpu: str) -> float:
    """The GPU's HBM peak (B/s) as its spec states it."""
    return parse_quantity(tomllib.loads((SPECS / f"{gpu}.toml").read_text())["hbm_bandwidth"])[0]


def streamed_rate(row: list[object]) -> float:
    """The rate (B/s) a row's kernel streams its experts' FP8 weights at if it reads every
    expert that balanced routing hits on the rank: min(E/ep, T·k/ep) experts of 3·h·inter
    bytes each."""
    tokens, hidden, inter, experts, topk, ep = (int(str(v)) for v in row[1:7])
    hit = min(experts / ep, tokens * topk / ep)
    return hit * 3 * hidden * inter / (float(str(row[9])) * 1e-6)


def physical(out: list[list[object]], peak: float) -> list[list[object]]:
    """The rows of every shape none of whose rows streams faster than the HBM peak: a shape
    that does (on H200, DeepSeek-V3's TP-4 and TP-8 experts, 7.0 and 5.7 TB/s at 64 tokens)
    does not time the weights it states, so all its rows are left out."""
    over = {tuple(r[2:7]) for r in out if streamed_rate(r) > peak}
    return [r for r in out if tuple(r[2:7]) not in over]


def rows(repo: Path, gpu: str, folder: str, kernels: str, family: str, words: str
         ) -> list[list[object]]:  # fmt: skip
    table = f"{folder}/moe/sglang/{VERSION}/moe_perf.parquet"
    out = []
    for r in aic_table(repo, table):
        tp, ep = r["moe_tp_size"], r["moe_ep_size"]
        kept = (r["kernel_source"] == kernels and r["moe_dtype"] == "fp8_block"
                and r["distribution"] == "balanced" and r["num_experts"] >= MIN_EXPERTS
                and r["num_tokens"] <= MAX_TOKENS and (tp, ep) in LAYOUTS)  # fmt: skip
        if not kept:
            continue
        layout = f"EP{ep}" if ep > 1 else f"TP{tp}"
        src = (f"aiconfigurator perf DB ({COMMIT}) SGLang {VERSION} {words} FP8 block, "
               f"{layout}, inter {r['inter_size']} / {tp} per GPU {URL}/{table}")  # fmt: skip
        out.append([f"moe_{family}", r["num_tokens"], r["hidden_size"], r["inter_size"] // tp,
                    r["num_experts"], r["topk"], ep, 8, "fp8", round(r["latency"] * 1000, 3),
                    src])  # fmt: skip
    out.sort(key=lambda x: (x[6], x[2], x[3], x[4], x[5], x[1], x[10]))
    return physical(out, hbm_peak(gpu))


def main(repo: Path, out: Path) -> None:
    for gpu, *table in TABLES:
        write_table(out / f"{gpu}-moe-sglang-{VERSION}.csv", HEADER, rows(repo, gpu, *table))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
