"""What the composer and the core's metrics need from the spec's sections, by name rather than
by a plugin's field: device memory, the users per replica, the cluster's size and scale-up
domain, board power, PUE, price.

A kind states which of its fields provides a requirement in its declaration
(``KindSpec(..., provides={"device_memory": "memory_capacity"})``); a kind that extends
another inherits what that one provides. Building the registry checks every declaration: a
requirement of the kind's section, a field of the kind, of the requirement's dimension, and
each required one provided by every kind of its section. The core then reads a value through
`path` (e.g. ``"hardware.memory_capacity"`` for the built-in GPU), so a third-party hardware
kind may call its field what it likes.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from stepwall.core.fields import KindSpec
from stepwall.core.units import NAMED


@attrs.frozen
class Requirement:
    """A value the core needs from every (``optional``: from any) kind of ``section``."""

    section: str
    dimension: str  # a name of `stepwall.core.units.NAMED`
    meaning: str
    optional: bool = False


REQUIREMENTS: dict[str, Requirement] = {
    "device_memory": Requirement(
        "hardware", "information", "device memory per GPU that weights and KV cache share"
    ),
    "users": Requirement("workload", "dimensionless", "users served at once per replica"),
    "nodes": Requirement("cluster", "dimensionless", "nodes in the cluster"),
    "gpus_per_node": Requirement("cluster", "dimensionless", "GPUs per node"),
    "scale_up_domain": Requirement(
        "cluster.scale_up", "dimensionless", "GPUs in one scale-up domain (the widest TP)"
    ),
    "board_power": Requirement(
        "hardware", "power", "board power per GPU (energy metrics)", optional=True
    ),
    "pue": Requirement(
        "cluster", "dimensionless", "facility over IT power (provisioned power)", optional=True
    ),
    "price_per_gpu_hour": Requirement(
        "cluster", "price_rate", "what one GPU-hour costs (cost metrics)", optional=True
    ),
}


def problems(kinds: Mapping[tuple[str, str], KindSpec]) -> list[tuple[str, str]]:
    """(plugin, what is wrong) for each declaration that names an unknown requirement, a
    field the kind lacks or of another dimension, and each required value a kind of its
    section does not provide."""
    out = []
    for spec in kinds.values():
        fields = {f.name: f for f in attrs.fields(spec.fields)}
        at = f"plugin {spec.plugin}: kind {spec.kind!r} of section {spec.section!r}"
        for name, field in spec.provides.items():
            want = REQUIREMENTS.get(name)
            if want is None or want.section != spec.section:
                known = ", ".join(n for n, r in REQUIREMENTS.items() if r.section == spec.section)
                out.append((spec.plugin, f"{at} provides {name!r}, which is no requirement "
                                         f"of the section (expected one of: {known})"))  # fmt: skip
            elif field not in fields or fields[field].metadata.get("dim") != NAMED[want.dimension]:
                out.append((spec.plugin, f"{at} provides {name!r} by field {field!r}, which "
                                         f"is no {want.dimension} field of the kind"))  # fmt: skip
        for name, want in REQUIREMENTS.items():
            if want.section == spec.section and not want.optional and name not in spec.provides:
                out.append((spec.plugin, f"{at} does not say which field provides {name!r} "
                                         f"({want.meaning}): KindSpec(..., provides={{{name!r}: "
                                         "FIELD})"))  # fmt: skip
    return out


def path(kinds: Mapping[tuple[str, str], KindSpec], section_kinds: Mapping[str, str],
         name: str) -> str | None:  # fmt: skip
    """The spec path that provides requirement ``name`` in a scenario whose sections are of
    ``section_kinds`` (section -> kind); None when its kind does not (an optional one)."""
    section = REQUIREMENTS[name].section
    spec = kinds.get((section, section_kinds.get(section, "")))
    field = spec.provides.get(name) if spec is not None else None
    return f"{section}.{field}" if field is not None else None
