"""Launch configurations (``--emit``): a searched deployment as the command line of the engine
whose profile priced it, at the release the profile names.

A point's scenario (loaded from its ``stepwall eval`` command, so the launch is what was
priced) gives the degrees, the users, the engine's chunk, memory fraction, KV block, overlap
and dispatcher, the KV cache's precision and the decoding's drafts. Each engine takes them
under its own names, and lays out a tp × ep replica its own way:

- SGLang: ``--tp-size tp·ep`` GPUs, attention data-parallel over ``--dp-size ep`` groups with
  ``--enable-dp-attention``, experts over ``--ep-size ep`` (each split over the tp GPUs of its
  group: SGLang's moe_tp = tp_size / ep_size), as stepwall's standard layout is;
- vLLM: ``--tensor-parallel-size tp`` (TP, experts split), or ``--data-parallel-size ep
  --enable-expert-parallel`` (attention DP, experts spread) where tp = 1; with both above 1
  vLLM spreads experts over all tp·ep GPUs, which is not the layout priced, so it is refused;
- TensorRT-LLM (``trtllm-serve`` and its ``--extra_llm_api_options`` YAML): ``--tp_size tp·ep
  --ep_size ep``, ``enable_attention_dp`` where ep > 1, which runs attention data-parallel
  over every GPU: the layout priced only where tp = 1 (refused otherwise).

A search or sizing with ``--emit`` keeps to the layouts its engine launches (`runs_layouts`),
so that its best points have launches.

Every option emitted is checked against the engine release's documented option list
(specs/engines/launch/LAUNCHER-VERSION.toml, each with its source); an engine profile with no
launcher, or a release with no list, is refused in one line naming what is missing. The
model is ``MODEL`` (the checkpoint's path or hub id), and dp replicas are dp copies of the
command behind a load balancer (a note says so). A disaggregated deployment's two sides are
launched apart, each with its role: SGLang's ``--disaggregation-mode prefill|decode``,
vLLM's NIXL connector (``--kv-transfer-config``, ``kv_both`` on both sides), TensorRT-LLM's
``cache_transceiver_config`` in each worker's YAML; the instance counts and the router that
joins them are notes."""

from __future__ import annotations

import json
import math
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from stepwall.core.catalog import catalog_root
from stepwall.core.errors import SpecError
from stepwall.core.scenario import Scenario
from stepwall.numeric.compiled import value_of
from stepwall.spec.validation import load_scenario

LAUNCHERS = ("vllm", "sglang", "trtllm")
# the launchers that run stepwall's tp × ep replica (attention DP over ep groups of tp GPUs);
# vLLM and TensorRT-LLM run tp = 1 or ep = 1 as priced (module docstring)
RUNS_TP_WITH_EP = frozenset({"sglang"})
FP8_BYTES = 1.0  # a KV cache of 8-bit elements (the fields hold bytes in SI)


@attrs.frozen
class Launch:
    """An engine's launch: its ``commands`` (one per replica kind: one here), files they read
    (name -> text), the ``options`` and YAML ``keys`` emitted (checked against the release's
    list), and ``notes`` for what a command line cannot say."""

    engine: str
    version: str
    commands: tuple[str, ...]
    files: Mapping[str, str]
    options: tuple[str, ...]
    keys: tuple[str, ...]
    notes: tuple[str, ...]


def option_list(launcher: str, version: str) -> dict[str, Any]:
    """The documented options of ``launcher`` at ``version`` (specs/engines/launch/)."""
    path = catalog_root() / "engines" / "launch" / f"{launcher}-{version}.toml"
    if not path.is_file():
        raise SpecError("--emit", launcher, f"no documented option list for {launcher} "
                        f"{version}", f"{display(path)}, or an engine profile of a release "
                        "that has one")  # fmt: skip
    return tomllib.loads(path.read_text())


def display(path: Path) -> str:
    try:
        return str(path.relative_to(catalog_root().parent))
    except ValueError:
        return str(path)


@attrs.frozen
class Deployment:
    """What a launch needs of a priced point, read from its scenario."""

    tp: int
    ep: int
    dp: int
    pp: int
    cp: int
    users: int  # per replica
    per_rank: int  # per attention rank
    chunk: int
    memory_fraction: float
    kv_block: int
    fp8_kv: bool
    drafts: int  # MTP drafts (0: none)
    overlap: bool
    dispatcher: str
    role: str = ""  # "prefill" or "decode" in a disaggregated deployment; "": aggregated
    recv_interval: int = 1  # decode iterations between the scheduler's polls for requests
    schedules_ahead: int = 0  # iterations the scheduler launches ahead (overlap scheduler: 1)

    @classmethod
    def of(cls, sc: Scenario) -> Deployment:
        def num(path: str, default: float = 0.0) -> float:
            v = value_of(sc, path)
            return float(default if v is None else v)

        tp, ep = int(num("parallel.tp", 1)), int(num("parallel.ep", 1))
        users = int(num("workload.concurrency", 1))
        mtp = sc.kinds.get("decoding") == "mtp"
        engine = sc.section("engine")
        kind = sc.kinds.get("workload", "")
        received = kind == "decode" and bool(getattr(sc.workload, "kv_transfer", False))
        role = "prefill" if kind == "prefill" else "decode" if received else ""
        return cls(tp, ep, int(num("parallel.dp", 1)), int(num("parallel.pp", 1)),
                   int(num("parallel.cp", 1)), users, math.ceil(users / ep),
                   int(num("engine.prefill_chunk", 8192)), num("engine.memory_fraction", 1.0),
                   int(num("engine.kv_block", 1)), num("model.kv_bits", 2.0) <= FP8_BYTES,
                   int(num("decoding.drafts")) if mtp else 0,
                   bool(engine.two_batch_overlap), str(engine.dispatcher), role,
                   int(num("engine.recv_interval", 1)),
                   int(num("engine.schedules_ahead", 0)))  # fmt: skip


def launch(sc: Scenario, emit: str) -> Launch:
    """The launch of the scenario's deployment by its engine, which must be ``emit``."""
    engine = sc.section("engine")
    launcher, version = str(engine.launcher), str(engine.version)
    if launcher != emit:
        raise SpecError("--emit", emit, f"the point was priced with an engine profile of "
                        f"{launcher or 'no launcher'}: a {emit} launch would run another "
                        "engine than the one priced",
                        f"--engine with a {emit} profile (e.g. --engine {emit})")  # fmt: skip
    known = option_list(launcher, version)
    d = Deployment.of(sc)
    _schedules_ahead(launcher, d)
    out = EMITTERS[launcher](d, version)
    unknown = [o for o in out.options if o not in known.get("options", {})]
    unknown += [k for k in out.keys if k not in known.get("yaml", {})]
    if unknown:
        raise SpecError("--emit", launcher, f"{unknown[0]} is not a documented option of "
                        f"{launcher} {version}", "an option in its list, or another "
                        "layout")  # fmt: skip
    return out


def runs_layouts(launcher: str, degrees: Mapping[str, Any]) -> np.ndarray:
    """Which layouts (a search's degree columns, by path) ``launcher`` launches as priced:
    every one for SGLang; for vLLM and TensorRT-LLM those with tp = 1 or ep = 1 (a mix is
    refused by its emitter)."""
    tp = np.asarray(degrees.get("parallel.tp", 1.0))
    ep = np.asarray(degrees.get("parallel.ep", 1.0))
    if launcher in RUNS_TP_WITH_EP:
        return np.ones(np.broadcast(tp, ep).shape, dtype=bool)
    return np.asarray((tp <= 1) | (ep <= 1))


def for_point(point: Mapping[str, Any], emit: str, kinds: Any) -> Launch:
    """The launch of a searched point, from its scenario as its ``command`` loads it."""
    words = shlex.split(str(point["command"]))
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    return launch(load_scenario(words[2], kinds, sets), emit)


def for_points(
    points: Sequence[Mapping[str, Any] | None], emit: str, kinds: Any, strict: bool = True
) -> list[Launch | str | None]:
    """Each point's launch, or the one-line reason it has none (a layout the engine cannot
    run as priced, a point priced by another engine); None for no point. Where no point has
    a launch, the first reason is raised (exit 2), unless not ``strict``."""
    out: list[Launch | str | None] = []
    first: SpecError | None = None
    for p in points:
        if p is None:
            out.append(None)
            continue
        try:
            out.append(for_point(p, emit, kinds))
        except SpecError as e:
            first = first or e
            out.append(f"{e.problem} (expected {e.expected})")
    if strict and first is not None and not any(isinstance(x, Launch) for x in out):
        raise first
    return out


def none_launched(where: str, what: str, emit: str, reason: str) -> SpecError:
    """The error where no ``what`` can be launched with ``emit``: the first point's
    ``reason``, which already says what was expected."""
    return SpecError(where, "--emit", f"no {what} can be launched with {emit}: {reason}", "")


def json_of(lau: Launch | str | None) -> Any:
    """A launch as the JSON documents carry it (`document`), a reason as ``{"refused": …}``,
    no point as None."""
    if lau is None:
        return None
    return document(lau) if isinstance(lau, Launch) else {"refused": lau}


def lines_of(doc: Mapping[str, Any] | None) -> list[str]:
    """A launch's JSON form (`json_of`) as lines for a terminal: the command, each file, the
    notes; a refusal as one line; no point, none."""
    if doc is None:
        return []
    if "refused" in doc:
        return [f"launch: none: {doc['refused']}"]
    out = [f"launch ({doc['engine']} {doc['version']}):", *(f"  {c}" for c in doc["commands"])]
    for name, body in doc["files"].items():
        out += [f"  {name}:", *(f"    {line}" for line in body.rstrip("\n").split("\n"))]
    out += [f"  note: {n}" for n in doc["notes"]]
    return out


def _refuse(launcher: str, why: str, expected: str) -> SpecError:
    return SpecError("--emit", launcher, why, expected)


def _notes(d: Deployment) -> list[str]:
    notes = ["MODEL: the checkpoint's path or hub id"]
    if d.role:
        notes.append(f"the {d.role} side of a disaggregated deployment: its KV cache is "
                     f"{'sent to' if d.role == 'prefill' else 'received from'} the "
                     f"{'decode' if d.role == 'prefill' else 'prefill'} instances")  # fmt: skip
    if d.dp > 1:
        notes.append(f"{d.dp} replicas: run the command {d.dp} times (one per replica, each on "
                     "its own GPUs) behind a load balancer")  # fmt: skip
    return notes


def _command(head: Sequence[str], args: Sequence[tuple[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The command line and the options it sets, in order (a value of True: a flag)."""
    words = list(head)
    for opt, value in args:
        words += [opt] if value is True else [opt, str(value)]
    return shlex.join(words), tuple(o for o, _ in args)


def _schedules_ahead(launcher: str, d: Deployment) -> None:
    """Each launcher's release runs its overlap (async) scheduler by default, one iteration
    ahead; its option list names no switch that turns it off."""
    if d.schedules_ahead != 1:
        raise _refuse(launcher, f"engine.schedules_ahead {d.schedules_ahead}: its scheduler "
                      "launches one iteration ahead by default, and its option list names no "
                      "switch to turn that off", "engine.schedules_ahead = 1")  # fmt: skip


def _polls_every_iteration(launcher: str, d: Deployment) -> None:
    """Only SGLang's scheduler polls for requests less often than every iteration."""
    if d.recv_interval > 1:
        raise _refuse(launcher, f"engine.recv_interval {d.recv_interval}: its scheduler takes "
                      "new requests every iteration", "engine.recv_interval = 1")  # fmt: skip


def _tp_with_ep(launcher: str, d: Deployment) -> None:
    """Refuse a tp × ep mix where ``launcher`` cannot run it (`runs_layouts`)."""
    if runs_layouts(launcher, {"parallel.tp": d.tp, "parallel.ep": d.ep}):
        return
    how = {"vllm": f"vLLM spreads experts over all {d.tp * d.ep} GPUs with "
                   "--enable-expert-parallel, not the tp-split experts of the layout priced",
           "trtllm": "TensorRT-LLM's attention DP runs attention data-parallel over all "
                     f"{d.tp * d.ep} GPUs, not over ep groups of {d.tp} as priced"}  # fmt: skip
    raise _refuse(launcher, f"tp {d.tp} × ep {d.ep}: {how[launcher]}", "tp = 1 or ep = 1")


def _sglang(d: Deployment, version: str) -> Launch:
    if d.recv_interval > 1 and d.ep > 1:
        raise _refuse("sglang", f"engine.recv_interval {d.recv_interval} with attention DP "
                      f"(ep {d.ep}): SGLang's receive skipper asserts not enable_dp_attention",
                      "engine.recv_interval = 1, or ep = 1")  # fmt: skip
    args: list[tuple[str, Any]] = [("--model-path", "MODEL"), ("--tp-size", d.tp * d.ep)]
    if d.ep > 1:
        args += [("--dp-size", d.ep), ("--enable-dp-attention", True), ("--ep-size", d.ep)]
        if d.dispatcher != "gather":  # SGLang's DP attention gathers without DeepEP
            mode = {"per_expert": "low_latency", "per_rank": "normal"}.get(d.dispatcher, "auto")
            args += [("--moe-a2a-backend", "deepep"), ("--deepep-mode", mode)]
    if d.pp > 1:
        args.append(("--pp-size", d.pp))
    if d.cp > 1:
        args.append(("--attn-cp-size", d.cp))
    args += [
        ("--max-running-requests", d.users),
        ("--chunked-prefill-size", d.chunk),
        ("--mem-fraction-static", f"{d.memory_fraction:g}"),
        ("--page-size", d.kv_block),
    ]
    if d.fp8_kv:
        args.append(("--kv-cache-dtype", "fp8_e4m3"))
    if d.recv_interval > 1:
        args.append(("--scheduler-recv-interval", d.recv_interval))
    if d.drafts:
        args += [("--speculative-algorithm", "EAGLE"), ("--speculative-num-steps", d.drafts),
                 ("--speculative-eagle-topk", 1),
                 ("--speculative-num-draft-tokens", d.drafts + 1)]  # fmt: skip
    if d.overlap:
        args.append(("--enable-two-batch-overlap", True))
    if d.role:
        args.append(("--disaggregation-mode", d.role))
    line, options = _command(("python", "-m", "sglang.launch_server"), args)
    return Launch("sglang", version, (line,), {}, options, (), tuple(_notes(d)))


def _vllm(d: Deployment, version: str) -> Launch:
    _polls_every_iteration("vllm", d)
    _tp_with_ep("vllm", d)
    args: list[tuple[str, Any]] = []
    if d.ep > 1:
        args += [("--data-parallel-size", d.ep), ("--enable-expert-parallel", True)]
        backend = {"per_expert": "deepep_low_latency", "per_rank": "deepep_high_throughput",
                   "gather": "allgather_reducescatter"}  # fmt: skip
        if d.dispatcher in backend:
            args.append(("--all2all-backend", backend[d.dispatcher]))
    else:
        args.append(("--tensor-parallel-size", d.tp))
    if d.pp > 1:
        args.append(("--pipeline-parallel-size", d.pp))
    if d.cp > 1:
        args.append(("--prefill-context-parallel-size", d.cp))
    args += [
        ("--max-num-seqs", d.per_rank),
        ("--max-num-batched-tokens", d.chunk),
        ("--gpu-memory-utilization", f"{d.memory_fraction:g}"),
        ("--block-size", d.kv_block),
    ]
    if d.fp8_kv:
        args.append(("--kv-cache-dtype", "fp8"))
    if d.drafts:
        spec = json.dumps({"method": "mtp", "num_speculative_tokens": d.drafts})
        args.append(("--speculative-config", spec))
    if d.overlap:
        args.append(("--enable-dbo", True))
    if d.role:  # both sides run the NIXL connector as producer and consumer
        transfer = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
        args.append(("--kv-transfer-config", transfer))
    line, options = _command(("vllm", "serve", "MODEL"), args)
    return Launch("vllm", version, (line,), {}, options, (), tuple(_notes(d)))


def _trtllm(d: Deployment, version: str) -> Launch:
    _polls_every_iteration("trtllm", d)
    _tp_with_ep("trtllm", d)
    if d.cp > 1:
        raise _refuse("trtllm", f"cp {d.cp}: stepwall's prefill CP over attention ranks has no "
                      "trtllm-serve equivalent listed", "cp = 1")  # fmt: skip
    yaml: dict[str, Any] = {
        "enable_attention_dp": d.ep > 1,
        "cuda_graph_config.max_batch_size": d.per_rank,
        "kv_cache_config.free_gpu_memory_fraction": d.memory_fraction,
    }
    if d.fp8_kv:
        yaml["kv_cache_config.dtype"] = "fp8"
    if d.drafts:
        yaml["speculative_config.decoding_type"] = "MTP"
        yaml["speculative_config.num_nextn_predict_layers"] = d.drafts
    if d.role:  # each context and generation worker sends or receives the KV cache
        yaml["cache_transceiver_config.backend"] = "DEFAULT"
    args: list[tuple[str, Any]] = [("--backend", "pytorch"), ("--tp_size", d.tp * d.ep),
                                   ("--ep_size", d.ep)]  # fmt: skip
    if d.pp > 1:
        args.append(("--pp_size", d.pp))
    args += [("--max_batch_size", d.per_rank), ("--max_num_tokens", d.chunk),
             ("--extra_llm_api_options", "extra-llm-api-config.yml")]  # fmt: skip
    line, options = _command(("trtllm-serve", "MODEL"), args)
    files = {"extra-llm-api-config.yml": _yaml(yaml)}
    return Launch("trtllm", version, (line,), files, options, tuple(yaml), tuple(_notes(d)))


def _yaml(flat: Mapping[str, Any]) -> str:
    """Dotted keys as nested YAML mappings, in the order given (scalars only)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def lines(node: Mapping[str, Any], indent: int) -> list[str]:
        out = []
        for k, v in node.items():
            if isinstance(v, dict):
                out += [" " * indent + f"{k}:", *lines(v, indent + 2)]
            else:
                text = "true" if v is True else "false" if v is False else f"{v:g}" if \
                    isinstance(v, float) else str(v)  # fmt: skip
                out.append(" " * indent + f"{k}: {text}")
        return out

    return "\n".join(lines(tree, 0)) + "\n"


EMITTERS = {"sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm}
# what joins a disaggregated deployment's instances, per engine (a note: not an option)
ROUTERS = {
    "sglang": "SGLang's router in P/D mode (sglang-router --pd-disaggregation, each instance "
              "by its URL)",
    "vllm": "a proxy that sends each request to a prefill instance, then to a decode one "
            "(vLLM's NIXL P/D examples)",
    "trtllm": "trtllm-serve disaggregated, its config listing the context_servers and the "
              "generation_servers",
}  # fmt: skip


def for_deployment(point: Mapping[str, Any], emit: str, kinds: Any) -> dict[str, Any]:
    """A disaggregated deployment's launch as JSON: each side's (`json_of`: a launch, or why
    it has none), the instance counts and what joins them."""
    out: dict[str, Any] = {}
    for side in ("prefill", "decode"):
        try:
            out[side] = json_of(for_point(point[side], emit, kinds))
        except SpecError as e:
            out[side] = json_of(f"{e.problem} (expected {e.expected})")
    x, y = point["prefill_instances"], point["decode_instances"]
    out["instances"] = {"prefill": x, "decode": y}
    out["router"] = f"{x} prefill and {y} decode instances behind {ROUTERS[emit]}"
    return out


def document(lau: Launch) -> dict[str, Any]:
    return {"engine": lau.engine, "version": lau.version, "commands": list(lau.commands),
            "files": dict(lau.files), "notes": list(lau.notes)}  # fmt: skip
