"""``stepwall collect``: microbenchmarks of the primitives the model prices, on this machine's
GPU (or, with ``cpu``, its CPU at tiny sizes: the same code path, for tests), written as the
CSV tables `stepwall calibrate` fits (`stepwall calibrate --primitives` lists their columns).

What each table times, with PyTorch (the optional extra ``stepwall[collect]``):

- ``memory_copy``: ``dst.copy_(src)`` of a buffer, bytes read + written;
- ``small_kernel``: an add on one element, the launch floor;
- ``gemm``: an m x k activation times a k x n weight, per precision (bf16; fp8 through
  ``torch._scaled_mm`` where the GPU has FP8 tensor cores; NVFP4 through
  ``torch.nn.functional.scaled_mm`` on Blackwell, left out with a note where torch refuses it);
- ``moe``: one layer's routed experts on one rank, tokens routed evenly (balanced, as the
  ``moe`` primitive assumes), each expert's gate/up and down GEMMs in turn (PyTorch's reference
  path, not an engine's fused kernel: the fit then describes that path);
- ``mla_decode``: absorbed-MLA decode attention over a latent cache (scores, softmax, values);
- ``gqa_decode``: grouped-query decode attention (PyTorch's ``scaled_dot_product_attention``
  with ``enable_gqa``: its own kernels, not an engine's XQA);
- ``all_reduce`` and ``all_to_all``: ``torch.distributed.all_reduce`` and
  ``all_to_all_single`` (each GPU sends 1/N of its buffer to each of the N, itself included, as
  the ``all_to_all`` primitive counts) over groups of 2, 4, … and all the local GPUs (NCCL; three
  gloo processes on the CPU): the group sizes let the fit tell a per-peer latency from a fixed
  one.

Timing: the median over repeats after warm-up, CUDA events on a GPU, ``perf_counter`` on the
CPU. Each row's ``source`` names the device, driver, CUDA and torch versions and the date.
"""

from __future__ import annotations

import csv
import datetime as dt
import platform
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from stepwall.core.errors import SpecError
from stepwall.io.output import umask_mode
from stepwall.numeric.files import atomic_write

# The sizes each table sweeps: the frontier's decode GEMMs (a few to a few thousand rows), MoE
# layers to ~100 tokens per expert, MLA decode at batch; ``quick`` is the CPU test's.
FULL = {
    "copy_mib": (1, 4, 16, 64, 256, 1024),
    "gemm_m": (1, 4, 16, 64, 256, 1024, 4096),
    "gemm_nk": ((2048, 7168), (7168, 2048), (4096, 4096), (18432, 7168)),
    "moe_tokens": (1, 4, 16, 64, 256, 1024, 4096),
    "moe_shape": (7168, 2048, 256, 8, 8),  # hidden, inter, experts, topk, ep (DeepSeek-V3)
    "mla": ((1, 1024), (1, 8192), (8, 4096), (32, 4096), (64, 2048), (128, 8192)),
    "mla_shape": (64, 512, 64),  # heads on the GPU, kv_lora_rank, qk_rope_head_dim
    "gqa": ((1, 1024), (1, 16384), (8, 4096), (64, 1024), (64, 4096), (256, 1024)),
    "gqa_shape": (32, 8, 128),  # query heads, KV heads, head dimension (Llama-3.1-8B at TP-1)
    "allreduce_kib": (4, 64, 1024, 16384),
    "alltoall_kib": (4, 64, 1024, 16384, 65536),  # to DeepEP's ~7 MB (128 tokens x k = 8)
}
QUICK = {
    "copy_mib": (1, 2, 4, 8),
    "gemm_m": (1, 4, 16, 64),
    "gemm_nk": ((256, 512), (512, 256)),
    "moe_tokens": (1, 4, 16, 64),
    "moe_shape": (256, 128, 16, 2, 2),
    "mla": ((1, 128), (2, 256), (4, 512), (8, 256)),
    "mla_shape": (8, 64, 16),
    "gqa": ((1, 128), (2, 256), (4, 512), (8, 256)),
    "gqa_shape": (8, 2, 32),
    "allreduce_kib": (4, 1024, 16384),  # wide enough that bandwidth shows through CPU noise
    "alltoall_kib": (4, 1024, 16384),
}
WARMUP, REPEATS = 3, 10


@attrs.frozen
class Device:
    """Where the benchmarks run, and how a row says so."""

    torch: Any
    name: str  # "cuda" or "cpu"
    source: str
    notes: list[str] = attrs.field(factory=list)  # what a table left out, and why

    def sync(self) -> None:
        if self.name == "cuda":
            self.torch.cuda.synchronize()

    def time(self, fn: Callable[[], object]) -> float:
        """Seconds per call of ``fn``: the median of `REPEATS` after `WARMUP` calls."""
        for _ in range(WARMUP):
            fn()
        self.sync()
        samples = []
        for _ in range(REPEATS):
            if self.name == "cuda":
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
        return float(statistics.median(samples))

    def has_fp8(self) -> bool:
        """FP8 GEMMs through ``torch._scaled_mm``: CUDA compute capability 8.9 and newer."""
        if self.name != "cuda":
            return False
        major, minor = self.torch.cuda.get_device_capability()
        return (major, minor) >= (8, 9) and hasattr(self.torch, "_scaled_mm")

    def has_fp4(self) -> bool:
        """NVFP4 GEMMs through ``torch.nn.functional.scaled_mm``: Blackwell (compute
        capability 10.0 and newer) with a torch that has the FP4 dtype."""
        if self.name != "cuda":
            return False
        major, _ = self.torch.cuda.get_device_capability()
        f = self.torch.nn.functional
        return major >= 10 and hasattr(f, "scaled_mm") and hasattr(self.torch, "float4_e2m1fn_x2")


def open_device(cpu: bool) -> Device:
    """The GPU (or the CPU with ``cpu``), with its provenance; a one-line error when PyTorch
    or a GPU is missing."""
    try:
        import torch  # a heavy optional extra: only `stepwall collect` needs it
    except ImportError:
        raise SpecError("collect", "", "PyTorch is not installed",
                        "pip install 'stepwall[collect]' (torch)") from None  # fmt: skip
    day = dt.date.today().isoformat()
    if cpu:
        what = f"CPU {platform.processor() or platform.machine()}, torch {torch.__version__}"
        return Device(torch, "cpu", f"stepwall collect --cpu on {what}, {day}")
    if not torch.cuda.is_available():
        raise SpecError("collect", "", "no CUDA GPU is visible to PyTorch",
                        "a GPU, or --cpu to run the same code on the CPU")  # fmt: skip
    props = torch.cuda.get_device_properties(0)
    driver = _driver()
    what = (f"{props.name} (driver {driver}, CUDA {torch.version.cuda}, torch "
            f"{torch.__version__})")  # fmt: skip
    return Device(torch, "cuda", f"stepwall collect on {what}, {day}")


def _driver() -> str:
    """The NVIDIA driver's version, as nvidia-smi reports it ("unknown" without it)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out.strip() else "unknown"


def _copy(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    t = d.torch
    for mib in sizes["copy_mib"]:
        n = mib * 2**20
        src = t.empty(n, dtype=t.uint8, device=d.name)
        dst = t.empty_like(src)
        yield ["memory_copy", 2 * n, d.time(partial(dst.copy_, src))]


def _tiny(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    x = d.torch.zeros(1, device=d.name)
    yield ["small_kernel", d.time(partial(x.add_, 1))]


NVFP4_BLOCK = 16  # elements per FP8 (E4M3) scale of an NVFP4 operand


def nvfp4_operand(t: Any, rows: int, k: int, device: str) -> tuple[Any, Any]:
    """A rows x k NVFP4 operand as ``scaled_mm`` takes it: two E2M1 values a byte, and one E4M3
    scale per 16 along k in the 128 x 4 swizzled layout (rows padded to 128, k/16 to 4). The
    scales are ones, so their order within the layout does not matter; the values are random."""
    values = t.randint(0, 256, (rows, k // 2), dtype=t.uint8, device=device)
    padded = -(-rows // 128) * 128 * (-(-k // (NVFP4_BLOCK * 4)) * 4)
    return values.view(t.float4_e2m1fn_x2), t.ones(padded, dtype=t.float8_e4m3fn, device=device)


def _gemm(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    t = d.torch
    fp8, fp4 = d.has_fp8(), d.has_fp4()  # fp4 until torch refuses the recipe
    for n, k in sizes["gemm_nk"]:
        w = t.randn(k, n, device=d.name).to(t.bfloat16)
        w4, w4_scale = nvfp4_operand(t, n, k, d.name) if fp4 else (None, None)
        for m in sizes["gemm_m"]:
            x = t.randn(m, k, device=d.name).to(t.bfloat16)
            yield ["gemm", m, n, k, 16, "bf16", d.time(partial(t.matmul, x, w))]
            if fp8:
                yield ["gemm", m, n, k, 8, "fp8", d.time(_fp8_gemm(t, x, w))]
            if not fp4:
                continue
            x4, x4_scale = nvfp4_operand(t, m, k, d.name)
            try:
                seconds = d.time(_fp4_gemm(t, x4, x4_scale, w4, w4_scale))
            except (RuntimeError, ValueError, TypeError) as err:  # refused here
                d.notes.append(f"fp4 rows left out: torch's scaled_mm refused NVFP4 "
                               f"({str(err).splitlines()[0]})")  # fmt: skip
                fp4 = False
                continue
            # NVFP4: 4 bits a weight and an 8-bit scale per 16
            yield ["gemm", m, n, k, 4 + 8 / NVFP4_BLOCK, "fp4", seconds]


def _fp8_gemm(t: Any, x: Any, w: Any) -> Callable[[], Any]:
    """x @ w in FP8 (E4M3, one scale per tensor) through ``torch._scaled_mm``."""
    x8, w8 = x.to(t.float8_e4m3fn), w.t().contiguous().to(t.float8_e4m3fn).t()
    one = t.ones((), device=x.device)
    return partial(t._scaled_mm, x8, w8, scale_a=one, scale_b=one, out_dtype=t.bfloat16)


def _fp4_gemm(t: Any, x4: Any, x4_scale: Any, w4: Any, w4_scale: Any) -> Callable[[], Any]:
    """x @ w in NVFP4 (E2M1 values, an E4M3 scale per 16 and an FP32 one per tensor), as
    NVFP4 checkpoints run, through ``torch.nn.functional.scaled_mm``."""
    f = t.nn.functional
    one = t.ones((), dtype=t.float32, device=x4.device)
    recipe = [f.ScalingType.BlockWise1x16, f.ScalingType.TensorWise]
    swizzle = [f.SwizzleType.SWIZZLE_32_4_4, f.SwizzleType.NO_SWIZZLE]
    return partial(f.scaled_mm, x4, w4.t(), [x4_scale, one], recipe, [w4_scale, one], recipe,
                   swizzle, swizzle, output_dtype=t.bfloat16)  # fmt: skip


def _moe(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    """Balanced routing: each of the rank's E/ep experts gets tokens·k/E rows (at least one)."""
    t = d.torch
    hidden, inter, experts, topk, ep = sizes["moe_shape"]
    local = experts // ep
    up = [t.randn(hidden, 2 * inter, device=d.name).to(t.bfloat16) for _ in range(local)]
    down = [t.randn(inter, hidden, device=d.name).to(t.bfloat16) for _ in range(local)]
    for tokens in sizes["moe_tokens"]:
        rows = max(1, round(tokens * topk / experts))
        x = t.randn(rows, hidden, device=d.name).to(t.bfloat16)

        def layer(x: Any = x) -> None:
            for u, w in zip(up, down, strict=True):
                h = x @ u
                (h[:, :inter] * h[:, inter:]) @ w

        yield ["moe", tokens, hidden, inter, experts, topk, ep, 16, "bf16", d.time(layer)]


def _mla(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    """Absorbed MLA: each query (heads x (r_kv + d_rope)) scores the cached latents, then
    reads their first r_kv elements as values."""
    t = d.torch
    heads, rank, rope = sizes["mla_shape"]
    for batch, kv_len in sizes["mla"]:
        q = t.randn(batch, heads, rank + rope, device=d.name).to(t.bfloat16)
        cache = t.randn(batch, kv_len, rank + rope, device=d.name).to(t.bfloat16)

        def attend(q: Any = q, cache: Any = cache) -> None:
            scores = t.softmax(q @ cache.transpose(1, 2), dim=-1)
            scores @ cache[:, :, :rank]

        yield ["mla_decode", batch, kv_len, heads, rank, rope, 16, "bf16", d.time(attend)]


def _gqa(d: Device, sizes: dict[str, Any]) -> Iterator[list[Any]]:
    """Grouped-query decode attention: each query's heads score the cached keys of their KV
    head and read its values (``scaled_dot_product_attention`` with ``enable_gqa``)."""
    t = d.torch
    heads, kv_heads, dim = sizes["gqa_shape"]
    for batch, kv_len in sizes["gqa"]:
        q = t.randn(batch, heads, 1, dim, device=d.name).to(t.bfloat16)
        k = t.randn(batch, kv_heads, kv_len, dim, device=d.name).to(t.bfloat16)
        v = t.randn_like(k)
        attend = partial(t.nn.functional.scaled_dot_product_attention, q, k, v, enable_gqa=True)
        yield ["gqa_decode", batch, kv_len, heads, kv_heads, dim, 16, "bf16", d.time(attend)]


HEADERS = {
    "copy": ["primitive", "bytes [B]", "time [s]", "source"],
    "small": ["primitive", "time [s]", "source"],
    "gemm": ["primitive", "m", "n", "k", "weight_bits [bit]", "precision", "time [s]", "source"],
    "moe": ["primitive", "tokens", "hidden", "inter", "experts", "topk", "ep",
            "weight_bits [bit]", "precision", "time [s]", "source"],
    "mla": ["primitive", "batch", "kv_len", "heads", "kv_lora_rank", "qk_rope_head_dim",
            "kv_bits [bit]", "precision", "time [s]", "source"],
    "gqa": ["primitive", "batch", "kv_len", "heads", "kv_heads", "head_dim", "kv_bits [bit]",
            "precision", "time [s]", "source"],
    "allreduce": ["primitive", "bytes [B]", "gpus", "time [s]", "source"],
    "alltoall": ["primitive", "bytes [B]", "gpus", "time [s]", "source"],
}  # fmt: skip
# The collectives' tables: the primitive each times and the sizes it sweeps.
COLLECTIVES = {"allreduce": ("all_reduce", "allreduce_kib"),
               "alltoall": ("all_to_all", "alltoall_kib")}  # fmt: skip
TABLES: dict[str, Callable[[Device, dict[str, Any]], Iterator[list[Any]]]] = {
    "copy": _copy, "small": _tiny, "gemm": _gemm, "moe": _moe, "mla": _mla, "gqa": _gqa,
}  # fmt: skip


def _gpus(device: Device) -> int:
    """Ranks of the collectives' tables: every visible GPU, or three CPU processes (two group
    sizes, as a GPU node gives several)."""
    return 3 if device.name == "cpu" else int(device.torch.cuda.device_count())


def group_sizes(world: int) -> list[int]:
    """The group sizes a collective is timed over: 2, 4, 8, … below ``world``, and ``world``."""
    return sorted({*(2**i for i in range(1, world.bit_length()) if 2**i < world), world})


def collect(out: Path, prefix: str, cpu: bool, quick: bool,
            tables: Sequence[str] = (*TABLES, *COLLECTIVES),
            progress: Callable[[str], None] | None = None) -> list[Path]:  # fmt: skip
    """Run the tables and write ``out/PREFIX-TABLE.csv`` for each; return the files. The
    collectives' tables need two or more GPUs (they are skipped on one, and said so)."""
    device = open_device(cpu)
    sizes = QUICK if quick else FULL
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in tables:
        if name in COLLECTIVES:
            gpus = _gpus(device)
            if gpus < 2:
                if progress is not None:
                    progress(f"{name}: skipped (one GPU)")
                continue
            made = _collective(device, sizes, gpus, *COLLECTIVES[name])
        else:
            made = TABLES[name](device, sizes)
        rows = [[*r, device.source] for r in made]
        if progress is not None:
            for note in device.notes:
                progress(f"{name}: {note}")
        device.notes.clear()
        path = out / f"{prefix}-{name}.csv"

        def fill(fh: Any, rows: list[list[Any]] = rows, name: str = name) -> None:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(HEADERS[name])
            w.writerows([f"{v:.6g}" if isinstance(v, float) else v for v in r] for r in rows)

        atomic_write(path, fill, text=True, mode=umask_mode())
        written.append(path)
        if progress is not None:
            progress(f"{name}: {len(rows)} rows -> {path}")
    return written


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _collective_rank(rank: int, world: int, cpu: bool, op: str, kib: Sequence[int], port: int,
                     results: Any) -> None:  # fmt: skip
    """One rank of a collective's table (a spawned process): for each group of
    `group_sizes` and each size, the median time of ``op`` (``all_reduce`` or
    ``all_to_all``), rank 0's, put on ``results`` as (gpus, bytes, seconds)."""
    device = open_device(cpu)
    t = device.torch
    dist = t.distributed
    backend = "gloo" if cpu else "nccl"
    if not cpu:
        t.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)  # fmt: skip
    try:
        for gpus in group_sizes(world):
            group = dist.new_group(list(range(gpus)))  # every rank takes part in making it
            if rank >= gpus:
                continue
            for size in kib:
                # size KiB of FP32, whole in each of the group's equal shares
                x = t.ones(size * 256 // gpus * gpus, dtype=t.float32, device=device.name)
                if op == "all_reduce":
                    fn = partial(dist.all_reduce, x, group=group)
                else:
                    fn = partial(dist.all_to_all_single, t.empty_like(x), x, group=group)
                seconds = device.time(fn)
                if rank == 0:
                    results.put((gpus, x.numel() * 4, seconds))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _collective(d: Device, sizes: dict[str, Any], gpus: int, op: str,
                key: str) -> Iterator[list[Any]]:  # fmt: skip
    """``op`` of each size of ``sizes[key]`` over ``gpus`` processes, one per GPU (three CPU
    processes over gloo with ``cpu``), timed over each group of `group_sizes`."""
    mp = d.torch.multiprocessing.get_context("spawn")
    results = mp.SimpleQueue()
    port = _free_port()
    procs = [mp.Process(target=_collective_rank, args=(r, gpus, d.name == "cpu", op,
                                                        sizes[key], port, results))
             for r in range(gpus)]  # fmt: skip
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if failed:
        raise SpecError("collect", op, f"a rank exited with {failed[0]}",
                        "torch.distributed working over the local GPUs")  # fmt: skip
    while not results.empty():
        group, nbytes, seconds = results.get()
        yield [op, nbytes, group, seconds]
