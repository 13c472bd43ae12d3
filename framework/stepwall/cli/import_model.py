"""``stepwall import-model``: a model spec from a Hugging Face config.json."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from stepwall.apps.import_model import model_spec
from stepwall.core.terminal import visible
from stepwall.numeric.files import atomic_write
from stepwall.spec.validation import check_spec, importers_of

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry


def setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The arguments of ``stepwall import-model``; the epilog lists the architectures."""
    archs = textwrap.fill(
        "architectures known: " + ", ".join(sorted(importers_of(registry.kinds))), 88
    )
    p.epilog = (
        "Reads config.json (a multimodal model's text_config too) and the quantisation it states\n"
        "(quantization_config, or hf_quant_config.json beside it) offline, and writes a model\n"
        "spec naming, for each value, the config key it came from. A model spec may also start\n"
        'from a config directly: from = "hf:./config.json" (or model = "hf:…" in a scenario).\n'
        f"\n{archs}\n(some are refused at the key that needs physics not modelled yet, e.g. "
        "compress_ratios; docs/models.md)\n\nexamples:\n"
        "  stepwall import-model ./Qwen3-235B-A22B-FP8/config.json\n"
        "  stepwall import-model Qwen/Qwen3-235B-A22B-FP8 -o my-qwen.toml   # from the local "
        "HF cache\n"
        "  stepwall eval my-scenario.toml --set model.kv_bits='\"8 bit\"'"
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "config",
        metavar="CONFIG",
        help="a config.json, a folder holding one, or a hub id (ORG/NAME) already in "
        "the local Hugging Face cache (HF_HUB_CACHE, HF_HOME)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="SPEC.toml",
        help="write the spec there (checked first; nothing is written when it is "
        "not valid); default: print it",
    )
    p.add_argument(
        "--name",
        help="the spec's name (default: the config's folder, lower-cased, "
        "without the organisation)",
    )


def run(ns: argparse.Namespace, registry: Registry) -> int:
    """Print or write the spec."""
    text = model_spec(ns.config, registry.kinds, ns.name)
    if ns.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(ns.output)
    atomic_write(out, text, text=True, check=lambda p: check_spec(p, registry.kinds))
    print(visible(f"wrote {out}"))
    return 0
