"""Hugging Face model configs in, offline: a ``config.json`` (its nested ``text_config`` too)
and the quantisation it states (``quantization_config``, or an ``hf_quant_config.json`` beside
it), as the values a model kind's importer turns into a spec that names, for each value, the
config key it came from.

Nothing here knows a model kind's fields: a kind declares importers per architecture
(`stepwall.core.fields.KindSpec.importers`); this module finds the file, reads it, prices a
module's weights under the checkpoint's quantisation and writes the spec. Errors are one line:
``file:key: what is wrong``.

Stored bits per weight include the scales (the laws stream what is stored):
FP8 block-scaled ``8 + 32/(b1·b2)`` (one FP32 per block, DeepSeek-V3 README_WEIGHTS.md); NVFP4
``4 + 8/16`` (one E4M3 per 16, NVIDIA ModelOpt); MXFP4 ``4 + 8/32`` (one E8M0 per 32, OCP MX
spec v1.0); INT-N per group ``N + 16/g`` (one BF16 scale per group, compressed-tensors).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from stepwall.core.errors import SpecError

PREFIX = "hf:"  # `from = "hf:./config.json"`: a model spec read from a Hugging Face config
CONFIG = "config.json"
QUANT_FILE = "hf_quant_config.json"  # NVIDIA ModelOpt's quantisation file, beside config.json
MAX_CONFIG_BYTES = 4 * 2**20  # configs are a few KB (a vision tower's adds some)

# A weight's stored element, by checkpoint dtype (unquantised modules keep it).
DTYPE_BITS = {"bfloat16": 16.0, "float16": 16.0, "float32": 32.0}


@attrs.frozen
class Scheme:
    """How a checkpoint stores a quantised Linear: ``bits`` per weight (scales included), the
    ``math`` its GEMM runs in (`stepwall.core.terms.PRECISIONS`), the bits per element of the
    activations it takes (``input_bits``: what an expert dispatch can send), and in words."""

    bits: float
    math: str
    input_bits: float
    what: str


@attrs.frozen
class Quantization:
    """The checkpoint's one quantisation scheme, the module patterns it leaves out (glob,
    dotted-segment or ``re:`` regex, as the quantisers write them), the KV-cache bits it states
    (None: the cache keeps the model's dtype), and where it was read."""

    scheme: Scheme
    excluded: tuple[str, ...]
    kv_bits: float | None
    source: str
    experts_only: bool = False  # MXFP4 (gpt-oss): the quantiser converts the experts alone

    def covers(self, names: Iterable[str], expert: bool) -> bool:
        """Whether the module known by ``names`` (its aliases) is stored quantised."""
        if self.experts_only and not expert:
            return False
        return not any(_matches(p, n) for p in self.excluded for n in names)


def _matches(pattern: str, name: str) -> bool:
    """A quantiser's exclusion pattern against a module name: ``re:`` a regex from the start
    (compressed-tensors), a glob with ``*`` (ModelOpt), else the pattern's dotted segments
    appear together in the name's (transformers' ``modules_to_not_convert``: ``gate`` is
    ``model.layers.3.mlp.gate`` but not ``gate_proj``)."""
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    want, have = pattern.split("."), name.split(".")
    return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


@attrs.frozen
class Module:
    """A Linear of the model: its parameters and the names it is known by in checkpoints
    (``model.layers.3.self_attn.q_proj``; a multimodal wrapper prefixes ``language_model.``)."""

    names: tuple[str, ...]
    params: int
    expert: bool = False


@attrs.frozen
class Precision:
    """A component's weights as stored: bits per weight (parameter-weighted over its modules),
    the math of most of its parameters, the bits its inputs take, and why."""

    bits: float
    math: str
    input_bits: float
    why: str


@attrs.define
class HFConfig:
    """A read config: ``doc`` is the language model's (a ``text_config`` over the top level),
    ``file`` where errors point, ``quant`` the checkpoint's quantisation (None: unquantised)."""

    file: str
    doc: dict[str, Any]
    quant: Quantization | None
    wrapped: bool
    used: list[str] = attrs.field(factory=list)

    @property
    def architecture(self) -> str:
        archs = self.doc.get("architectures")
        if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
            raise SpecError(
                self.file,
                "architectures",
                "missing or empty",
                'a list naming the model class, e.g. ["LlamaForCausalLM"]',
            )
        return archs[0]

    def key(self, key: str) -> str:
        """How ``key`` is named in errors and sources (``text_config.hidden_size``)."""
        return f"text_config.{key}" if self.wrapped else key

    def has(self, key: str) -> bool:
        return self.doc.get(key) is not None

    def count(self, key: str, default: int | None = None, *, minimum: int = 1) -> int:
        """An integer of the config (at least ``minimum``); ``default`` when absent or null."""
        value = self.doc.get(key)
        if value is None:
            if default is None:
                raise SpecError(
                    self.file,
                    self.key(key),
                    "missing",
                    f"an integer (the {self.architecture} config states it)",
                )
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise SpecError(
                self.file, self.key(key), f"is {value!r}", f"an integer of at least {minimum}"
            )
        self.used.append(key)
        return value

    def value(self, key: str, default: Any = None) -> Any:
        value = self.doc.get(key, default)
        if key in self.doc:
            self.used.append(key)
        return value

    @property
    def dtype_bits(self) -> tuple[float, str]:
        """The bits of an unquantised weight and the key that says so."""
        for key in ("torch_dtype", "dtype"):
            name = self.doc.get(key)
            if isinstance(name, str):
                if name not in DTYPE_BITS:
                    raise SpecError(
                        self.file, self.key(key), f"is {name!r}", " or ".join(DTYPE_BITS)
                    )
                return DTYPE_BITS[name], f"{self.key(key)} {name}"
        return 16.0, "no torch_dtype: BF16, the checkpoints' default"

    def precision(self, modules: Sequence[Module]) -> Precision:
        """How ``modules`` are stored: quantised by the checkpoint's scheme where it covers
        them, else in the checkpoint's dtype."""
        plain, plain_why = self.dtype_bits
        q = self.quant
        covered = [m.params for m in modules if q is not None and q.covers(m.names, m.expert)]
        total = sum(m.params for m in modules)
        done = sum(covered)
        if q is None or done == 0:
            return Precision(plain, "bf16", plain, plain_why)
        share = done / total if total else 1.0
        bits = share * q.scheme.bits + (1 - share) * plain
        if share == 1.0:
            why = f"{q.scheme.what} ({q.source})"
        else:
            why = (
                f"{share:.0%} of the weights in {q.scheme.what}, the rest in the checkpoint "
                f"dtype, left out by the quantiser ({q.source}); parameter-weighted"
            )
        math = q.scheme.math if share >= 0.5 else "bf16"
        return Precision(bits, math, q.scheme.input_bits if share >= 0.5 else plain, why)


# An architecture's importer: the config -> the spec's entries (key, value, source), in order.
Entry = tuple[str, Any, str]
Importer = Callable[[HFConfig], list[Entry]]


def _hub_cache() -> Path:
    """Hugging Face's local cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    return Path(home) / "hub"


def _in_hub_cache(ref: str, where: str, key: str) -> Path:
    """The config of hub id ``ORG/NAME`` in the local cache: the revision ``refs/main``
    names, else the first snapshot holding one."""
    org, name = ref.split("/")
    repo = _hub_cache() / f"models--{org}--{name}"
    snapshots, main = repo / "snapshots", repo / "refs" / "main"
    if main.is_file():
        revs = [main.read_text().strip()]
    else:
        revs = sorted(p.name for p in snapshots.glob("*") if (p / CONFIG).is_file())
    for rev in revs:
        if (snapshots / rev / CONFIG).is_file():
            return snapshots / rev / CONFIG
    raise SpecError(
        where or ref,
        key,
        (f"{ref}: " if where else "") + f"not in the local Hugging Face cache ({repo})",
        "a config.json, a folder with one, or a hub id downloaded before "
        "(huggingface-cli download ORG/NAME config.json)",
    )


def locate(ref: str, where: str, key: str) -> Path:
    """``config.json``, a folder holding one (beside the referring spec first), or a hub id
    (``org/name``) found in the local Hugging Face cache (offline: nothing is downloaded)."""
    path = Path(ref).expanduser()
    if not path.is_absolute() and where and key:
        beside = Path(where).parent / path
        path = beside if beside.exists() else path
    if path.is_dir():
        path = path / CONFIG
    if path.is_file():
        return path
    parts = ref.split("/")
    if len(parts) == 2 and all(parts) and not ref.endswith(".json"):
        return _in_hub_cache(ref, where, key)
    raise SpecError(
        where or ref,
        key,
        (f"{ref}: " if where else "") + "not found",
        "a config.json, a folder with one, or a hub id in the local cache",
    )


def _json(path: Path, where: str, key: str) -> dict[str, Any]:
    try:
        raw = path.read_bytes()[: MAX_CONFIG_BYTES + 1]
    except OSError as e:
        raise SpecError(where or str(path), key, f"{path}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise SpecError(
            str(path),
            "",
            f"is larger than {MAX_CONFIG_BYTES >> 20} MiB",
            "a model config.json of a few KB",
        )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(str(path), "", f"is not JSON: {e}", "a Hugging Face config.json") from None
    if not isinstance(doc, dict):
        raise SpecError(str(path), "", "is not a JSON object", "a Hugging Face config.json")
    return doc


def read_config(ref: str, where: str = "", key: str = "") -> HFConfig:
    """The config ``ref`` names (see `locate`), with its quantisation."""
    path = locate(ref, where, key)
    top = _json(path, where, key)
    text = top.get("text_config")
    wrapped = isinstance(text, dict)
    doc = {**{k: v for k, v in top.items() if k != "text_config"}, **(text or {})}
    file = str(path)
    quant_file = path.parent / QUANT_FILE
    quant_doc = top.get("quantization_config") or (text or {}).get("quantization_config")
    quant_where = "quantization_config"
    if quant_file.is_file():  # ModelOpt's own file, which TensorRT-LLM reads, comes first
        quant_doc = _json(quant_file, where, key)
        file, quant_where = str(quant_file), "quantization"
        quant_doc = quant_doc.get("quantization", quant_doc)
    quant = None if quant_doc is None else _quantization(quant_doc, file, quant_where)
    return HFConfig(str(path), doc, quant, wrapped)


def _quantization(q: Any, file: str, where: str) -> Quantization:
    if not isinstance(q, dict):
        raise SpecError(file, where, "is not a table", "a quantisation config object")
    method = q.get("quant_method", "modelopt" if "quant_algo" in q else None)
    excluded = tuple(
        str(p)
        for p in (
            q.get("modules_to_not_convert") or q.get("ignore") or q.get("exclude_modules") or ()
        )
    )
    source = f"{Path(file).name} {where}"
    if method == "fp8":
        block = q.get("weight_block_size")
        if block is None:
            scheme = Scheme(8.0, "fp8", 8.0, "FP8 e4m3, one scale per tensor")
        else:
            b = int(block[0]) * int(block[1])
            scheme = Scheme(
                8 + 32 / b,
                "fp8",
                8.0,
                f"FP8 e4m3 with one FP32 scale per {block[0]}x{block[1]} block",
            )
        return Quantization(scheme, excluded, None, source)
    if method == "mxfp4":
        scheme = Scheme(4.25, "fp4", 16.0, "MXFP4: e2m1 with one E8M0 scale per 32")
        return Quantization(scheme, excluded, None, source, experts_only=True)
    if method == "modelopt" and "quant_algo" in q:
        return _modelopt(q, excluded, file, where, source)
    if method in ("compressed-tensors", "modelopt"):
        return _groups(q, excluded, file, where, source)
    raise SpecError(
        file,
        f"{where}.quant_method",
        f"is {method!r}",
        "fp8, mxfp4, modelopt or compressed-tensors",
    )


def _modelopt(
    q: dict[str, Any], excluded: tuple[str, ...], file: str, where: str, source: str
) -> Quantization:
    algo = q.get("quant_algo")
    kv = {"FP8": 8.0, None: None}.get(q.get("kv_cache_quant_algo"), -1.0)
    if kv == -1.0:
        raise SpecError(
            file,
            f"{where}.kv_cache_quant_algo",
            f"is {q.get('kv_cache_quant_algo')!r}",
            "FP8 or none",
        )
    scheme_kv = q.get("kv_cache_scheme")  # ModelOpt written into config.json
    if kv is None and isinstance(scheme_kv, dict) and scheme_kv.get("num_bits") is not None:
        kv = float(scheme_kv["num_bits"])
    if algo == "FP8":
        scheme = Scheme(8.0, "fp8", 8.0, "FP8 e4m3 W8A8, one scale per tensor (ModelOpt)")
    elif algo == "NVFP4":
        g = int(q.get("group_size", 16))
        scheme = Scheme(
            4 + 8 / g, "fp4", 4 + 8 / g, f"NVFP4 W4A4: e2m1 with one E4M3 scale per {g} (ModelOpt)"
        )
    else:
        raise SpecError(file, f"{where}.quant_algo", f"is {algo!r}", "FP8 or NVFP4")
    return Quantization(scheme, excluded, kv, source)


def _weights(w: dict[str, Any], file: str, key: str) -> tuple[float, int, str]:
    """A group's weights: (stored bits with scales, bits, in words). FP4 takes an 8-bit
    scale per group (NVFP4's E4M3 per 16, MXFP4's E8M0 per 32); INT-N a BF16 one."""
    bits, kind, g = w.get("num_bits"), w.get("type"), w.get("group_size")
    if not isinstance(bits, int) or kind not in ("int", "float") or bits not in (4, 8):
        raise SpecError(file, key, f"is {bits!r}-bit {kind!r}", "4- or 8-bit int or float")
    if kind == "float" and bits == 4:
        return 4 + 8 / int(g or 16), 4, f"FP4 e2m1 with one 8-bit scale per {int(g or 16)}"
    if kind == "float":
        return 8.0, 8, "FP8 e4m3"
    if g:
        return bits + 16 / int(g), bits, f"INT{bits} with one BF16 scale per {int(g)}"
    return float(bits), bits, f"INT{bits} per channel"


def _groups(
    q: dict[str, Any], excluded: tuple[str, ...], file: str, where: str, source: str
) -> Quantization:
    """compressed-tensors (and ModelOpt written in its form): one group over the Linears;
    weight-only (no input_activations) dequantises in the kernel and runs BF16 math as the
    wna16 kernel family."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        raise SpecError(
            file,
            f"{where}.config_groups",
            f"has {len(groups) if isinstance(groups, dict) else 'no'} groups",
            "one quantisation group (several are not expressible yet)",
        )
    ((name, group),) = groups.items()
    key = f"{where}.config_groups.{name}"
    stored, bits, what = _weights(group.get("weights") or {}, file, f"{key}.weights")
    a = group.get("input_activations")
    if a is None:
        scheme = Scheme(stored, "wna16", 16.0, f"{what}, weight-only (W{bits}A16)")
    else:
        a_bits = a.get("num_bits")
        math = {("float", 4): "fp4", ("float", 8): "fp8", ("int", 8): "int8"}.get(
            (a.get("type"), a_bits)
        )
        if math is None:
            raise SpecError(file, f"{key}.input_activations",
                            f"is {a_bits!r}-bit {a.get('type')!r}",
                            "4-bit float, 8-bit float or 8-bit int")  # fmt: skip
        a_stored = a_bits + (8 / 16 if a_bits == 4 else 0.0)
        scheme = Scheme(stored, math, a_stored, f"{what}, W{bits}A{a_bits}")
    kv_scheme = q.get("kv_cache_scheme")
    kv = float(kv_scheme["num_bits"]) if isinstance(kv_scheme, dict) else None
    return Quantization(scheme, excluded, kv, source)


def importer_for(cfg: HFConfig, importers: Mapping[str, Importer]) -> Importer:
    """The importer of the config's architecture, or an error listing those there are."""
    arch = cfg.architecture
    if arch not in importers:
        raise SpecError(
            cfg.file,
            cfg.key("architectures"),
            f"{arch} is not an architecture stepwall imports",
            f"one of {', '.join(sorted(importers))}",
        )
    return importers[arch]


def config_identity(ref: str, where: str = "", key: str = "") -> dict[str, tuple[Any, str]]:
    """What identifies the config ``ref`` names without importing it (a cache key): the
    SHA-256 of its bytes and of its quantisation file's."""
    path = locate(ref, where, key)
    digest = hashlib.sha256(path.read_bytes())
    quant = path.parent / QUANT_FILE
    if quant.is_file():
        digest.update(quant.read_bytes())
    return {"config": (digest.hexdigest(), str(path))}


def imported_flat(
    ref: str, importers: Mapping[str, Importer], where: str = "", key: str = ""
) -> dict[str, tuple[Any, str]]:
    """A model spec's keys read from the config ``ref`` names, as `stepwall.spec.loader`
    flattens a TOML file's (value, file)."""
    cfg = read_config(ref, where, key)
    entries = importer_for(cfg, importers)(cfg)
    flat: dict[str, tuple[Any, str]] = {k: (v, cfg.file) for k, v, _ in entries}
    flat["sources"] = ({k: why for k, _, why in entries if why}, cfg.file)
    return flat


def bits_text(bits: float) -> str:
    """``"8.002 bit"``: four significant figures, as the catalog writes precisions."""
    return f"{float(f'{bits:.4g}'):g} bit"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def render(entries: Sequence[Entry], header: Sequence[str]) -> str:
    """The spec as TOML: ``header`` as comments, each value with its source's config key as a
    comment, and a ``[sources]`` table with each value's whole source."""
    lines = [f"# {h}" if h else "#" for h in header]
    meta = ("name", "description", "kind", "source")
    body = [(f"{k} = {_toml(v)}", why) for k, v, why in entries]
    width = max((len(t) for t, why in body if why), default=0)
    for i, ((text, why), (k, _, _)) in enumerate(zip(body, entries, strict=True)):
        if i and entries[i - 1][0] in meta and k not in meta:
            lines.append("")
        short = why.split(";")[0].split(" (")[0]
        lines.append(f"{text.ljust(width)}  # {short}" if why and k not in meta else text)
    lines += ["", "[sources]"]
    lines += [f"{k} = {_toml(why)}" for k, _, why in entries if why and k not in meta]
    return "\n".join(lines) + "\n"
