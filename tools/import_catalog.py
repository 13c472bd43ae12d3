"""Write (or check) the catalog's model specs that come from Hugging Face configs.

Each entry of tests/data/hf/catalog.toml is a config folder and a catalog name; the spec is
what `stepwall import-model tests/data/hf/FOLDER --name NAME` prints.

Run: python tools/import_catalog.py --write    (or --check: exit 1 when a file differs)
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from stepwall.apps.import_model import model_spec
from stepwall.plugin.registry import build

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("tests/data/hf")  # relative: the specs name their source as a repository path
MANIFEST = ROOT / DATA / "catalog.toml"
MODELS = ROOT / "specs" / "models"


def entries() -> list[dict[str, object]]:
    return list(tomllib.loads(MANIFEST.read_text())["model"])


def spec_text(entry: dict[str, object]) -> str:
    return model_spec(str(DATA / str(entry["config"])), build().kinds, str(entry["name"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the specs")
    ap.add_argument("--check", action="store_true", help="exit 1 when a spec differs")
    ns = ap.parse_args()
    stale = []
    for e in entries():
        path = MODELS / f"{e['name']}.toml"
        text = spec_text(e)
        if path.is_file() and path.read_text() == text:
            continue
        stale.append(path.name)
        if ns.write:
            path.write_text(text)
    print(f"{'wrote' if ns.write else 'differ'}: {', '.join(stale) or 'none'}")
    return 1 if stale and ns.check else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
