"""Where the shipped catalog of specs (package data ``stepwall.specs``) lies in this install."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def catalog_root() -> Path:
    """The catalog folder (``specs/`` in a checkout, ``stepwall/specs`` when installed)."""
    return Path(str(resources.files("stepwall.specs")))
