"""Write specs/calibration/<gpu>-alltoall.csv from aiconfigurator's collected dispatch tables.

Usage: python tools/aic_alltoall_tables.py AIC_CHECKOUT [OUT_DIR]   (needs pyarrow)

AIC_CHECKOUT is a clone of ai-dynamo/aiconfigurator at 095f58a51c4c. Each row is one kernel
call, rank 0's time, as the ``all_to_all`` primitive counts it: the bytes one GPU sends, its own
copies included, the law keeping (N−1)/N of them off the GPU.

- DeepEP low-latency kernels (SGLang 0.5.12, one node: 8 GPUs, 4 on GB200/GB300), the
  dispatcher SGLang and vLLM run at decode: one copy per chosen expert; dispatch sends FP8
  with a float scale per 128 and 16 B of index (hidden + hidden/32 + 16 B, DeepEP's own count,
  collector/wideep/sglang/deepep/test_low_latency.py), combine BF16. Shapes with fewer than
  128 experts are left out: the kernels give each local expert its own warp group, so one or
  two experts per GPU serialise, and no catalog model has so few.
- TensorRT-LLM's NVLinkOneSided all-to-all on GB200 (1.2.0rc6, EP 2-32, DeepSeek-V3's shape:
  hidden 7168, 256 experts, top-8), the dispatcher TensorRT-LLM picks first on a multi-node
  NVLink domain: one copy per destination rank, in expectation N·(1 − C(E − E/N, k)/C(E, k))
  of them; dispatch NVFP4 (hidden/2 + hidden/16 B), combine BF16; up to 16,384 tokens per rank.
- h200-alltoall-nodes.csv, held out (no manifest fits it): the same low-latency kernels across
  2, 4 and 8 HGX H200 nodes (EP 16-64, SGLang 0.5.6.post2's collection, the only one with
  several nodes; its H100 file holds the same numbers), to check the law across domains.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from math import comb
from pathlib import Path

import pyarrow.parquet as pq

COMMIT = "095f58a51c4c"
DATA = "aic-core/src/aiconfigurator_core/systems/data"
URL = f"https://github.com/ai-dynamo/aiconfigurator/blob/{COMMIT}/{DATA}"
GPUS = {"h100": ("h100_sxm", 8), "h200": ("h200_sxm", 8), "b200": ("b200_sxm", 8),
        "b300": ("b300_sxm", 8), "gb200": ("gb200", 4), "gb300": ("gb300", 4)}  # fmt: skip
LL = "comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet"
LL_NODES = "comm/sglang/0.5.6.post2/wideep_deepep_ll_perf.parquet"
TRT = "comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet"
MIN_EXPERTS = 128
MAX_TOKENS = 16384


def aic_table(repo: Path, path: str) -> list[dict[str, object]]:
    blob = subprocess.run(["git", "-C", str(repo), "show", f"{COMMIT}:{DATA}/{path}"],
                          check=True, capture_output=True).stdout  # fmt: skip
    return pq.read_table(io.BytesIO(blob)).to_pylist()


def _low_latency(repo: Path, dir_: str, gpus: int, path: str = LL) -> list[list[object]]:
    out = []
    version = path.split("/")[2]
    for r in aic_table(repo, f"{dir_}/{path}"):
        if r["num_experts"] < MIN_EXPERTS or (path == LL_NODES) != (r["node_num"] > 1):
            continue
        n = 8 * r["node_num"] if path == LL_NODES else gpus
        h, k, t = r["hidden_size"], r["num_topk"], r["num_token"]
        shape = f"hidden {h}, {r['num_experts']} experts, top-{k}, {t} tokens per rank"
        for op, per_pick, time in (("dispatch FP8", h + h // 32 + 16, r["dispatch_avg_t_us"]),
                                   ("combine BF16", 2 * h, r["combine_avg_t_us"])):  # fmt: skip
            src = (f"aiconfigurator perf DB ({COMMIT}) SGLang {version} DeepEP low-latency "
                   f"{op}, {n} GPUs, {shape}; bytes = tokens x top-k x {per_pick} B "
                   f"{URL}/{dir_}/{path}")  # fmt: skip
            out.append(["all_to_all", t * k * per_pick, n, round(time, 3), src])
    return out


def _one_sided(repo: Path, dir_: str) -> list[list[object]]:
    out = []
    for r in aic_table(repo, f"{dir_}/{TRT}"):
        op = r["op_name"]
        if (r["kernel_source"] != "NVLinkOneSided" or op not in ("alltoall_dispatch",
                "alltoall_combine") or r["num_tokens"] > MAX_TOKENS):  # fmt: skip
            continue
        h, k, e, n, t = (r["hidden_size"], r["topk"], r["num_experts"], r["moe_ep_size"],
                         r["num_tokens"])  # fmt: skip
        ranks = n * (1 - comb(e - e // n, k) / comb(e, k))
        per = h // 2 + h // 16 if op == "alltoall_dispatch" else 2 * h
        what = "dispatch NVFP4" if op == "alltoall_dispatch" else "combine BF16"
        src = (f"aiconfigurator perf DB ({COMMIT}) TensorRT-LLM {r['version']} NVLinkOneSided "
               f"{what}, EP {n}, hidden {h}, {e} experts, top-{k}, {t} tokens per rank; bytes = "
               f"tokens x {ranks:.4f} destination ranks x {per} B {URL}/{dir_}/{TRT}")  # fmt: skip
        out.append(["all_to_all", round(t * ranks * per), n, round(r["latency"] * 1000, 3), src])
    return out


def write_table(path: Path, header: list[str], rows: list[list[object]]) -> None:
    """A calibration table: ``header`` then ``rows``, newline-terminated, and a line saying
    how many rows it holds (shared by the aic_*_tables tools)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    print(f"{path.name}: {len(rows)} rows")


def _write(path: Path, rows: list[list[object]]) -> None:
    rows.sort(key=lambda r: (r[2], r[1], r[4]))
    write_table(path, ["primitive", "bytes [B]", "gpus", "time [us]", "source"], rows)


def main(repo: Path, out: Path) -> None:
    for gpu, (dir_, gpus) in GPUS.items():
        rows = _low_latency(repo, dir_, gpus)
        if gpu == "gb200":
            rows += _one_sided(repo, dir_)
        _write(out / f"{gpu}-alltoall.csv", rows)
    _write(out / "h200-alltoall-nodes.csv", _low_latency(repo, "h200_sxm", 8, LL_NODES))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "specs/calibration"))
