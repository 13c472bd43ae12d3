"""``stepwall import-model``: a model spec written from a Hugging Face config, every value with
the config key it came from (`stepwall.spec.hf` reads the config; the model kinds' importers
map its keys to their fields)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from stepwall.spec.hf import Entry, HFConfig, Importer, importer_for, read_config, render
from stepwall.spec.validation import Kinds, importers_of

ATTENTION_NAMES = {"mla": "MLA", "gqa": "GQA", "compressed": "compressed attention"}
HEADER = (
    "Written by `stepwall import-model` from a Hugging Face config: regenerate it rather than",
    'edit it, or start a spec of your own from it (from = "this-file") and override there.',
)


def default_name(cfg: HFConfig) -> str:
    """``qwen3-235b-a22b-fp8`` for ``…/Qwen--Qwen3-235B-A22B-FP8/config.json`` or a hub
    cache's ``models--Qwen--Qwen3-235B-A22B-FP8/snapshots/…``: the folder, lower-cased,
    without its organisation."""
    path = Path(cfg.file).parent
    if path.parent.name == "snapshots":
        path = path.parent.parent
    return path.name.rsplit("--", 1)[-1].lower()


def _describe(cfg: HFConfig, entries: list[Entry]) -> str:
    v = {k: value for k, value, _ in entries}
    moe = (
        f"{v['n_experts']} routed experts top-{v['experts_per_token']}"
        + (f" with {v['n_shared_experts']} shared" if v["n_shared_experts"] else "")
        + f", {v['n_dense_layers']} dense layer{'s' * (v['n_dense_layers'] != 1)}"
        if v["n_experts"]
        else "dense FFNs"
    )
    if v["attention"] == "compressed":
        window = (
            f", a {v['sliding_window']}-token window on every layer, {v['csa_layers']} CSA and "
            f"{v['hca_layers']} HCA layers"
        )
    elif v.get("sliding_window"):
        window = f", a {v['sliding_window']}-token window on {v['sliding_layers']}"
    else:
        window = ""
    return (
        f"{cfg.architecture} as its config states it: {v['n_layers']} layers, {moe}; "
        f"{ATTENTION_NAMES[v['attention']]} with {v['n_heads']} heads{window}; experts "
        f"{v['expert_bits']}, attention {v['attention_bits']}, KV cache {v['kv_bits']}"
    )


def model_spec(
    ref: str, kinds: Kinds, name: str | None = None, importers: Mapping[str, Importer] | None = None
) -> str:
    """The TOML of a ``model`` spec for the config ``ref`` names (see `stepwall.spec.hf`)."""
    cfg = read_config(ref)
    entries = importer_for(cfg, importers or importers_of(kinds))(cfg)
    head: list[Entry] = [
        ("name", name or default_name(cfg), ""),
        ("description", _describe(cfg, entries), ""),
        entries[0],
        ("source", f"{ref} (Hugging Face config, architecture {cfg.architecture})", ""),
    ]
    return render([*head, *entries[1:]], HEADER)
