"""stepwall-offload: hardware kind ``gpu-offload`` for stepwall.

A GPU whose routed MoE experts do not all fit in device memory: a resident fraction is read
from HBM, the rest streams from host memory over a link (PCIe 5.0 x16, NVLink-C2C). The
plugin is `stepwall_offload.plugin`, found by stepwall through the entry point
``offload`` in group ``stepwall``. Catalog entries ship in ``stepwall_offload/specs``;
``python -m stepwall_offload`` prints their paths.
"""

from pathlib import Path

__version__ = "0.1.0"

SPECS = Path(__file__).parent / "specs"


def scenario(name: str) -> Path:
    """The path of a shipped scenario, e.g. ``scenario("k26-gh200-offload")``."""
    path = SPECS / "scenarios" / f"{name}.toml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in (SPECS / "scenarios").glob("*.toml")))
        raise FileNotFoundError(f"no scenario {name!r} in stepwall-offload (one of: {names})")
    return path
