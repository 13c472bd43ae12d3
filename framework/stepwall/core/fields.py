"""The field API for plugin authors: how a plugin declares the spec sections it owns.

A plugin claims ``(section, kind)`` pairs with `KindSpec`, each with a frozen attrs class
whose fields are declared here: `quantity` (a physical quantity with its dimension, bounds
and LaTeX name; every quantity becomes a `stepwall.core.symbols.Parameter`), `choice` (one of a
few strings) and `flag` (a boolean). A spec section is then checked against that class:
unknown keys, wrong units, values out of range are one-line errors naming file and key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from stepwall.core.errors import PluginError
from stepwall.core.units import NAMED, Dim

# Keys any section may carry besides its fields.
META_KEYS = ("kind", "name", "description", "source", "sources", "from")

# Plausible ranges of dimensionless fields (`quantity(plausible=…)`): an achieved fraction of a
# peak below 0.1%, or a factor on measured times beyond ×1000 either way, is almost surely a slip.
FRACTION = ("0.001", "1")
FACTOR = ("0.001", "1000")


def quantity(
    dim: str | Dim,
    doc: str,
    *,
    default: Any = attrs.NOTHING,
    latex: str = "",
    integer: bool = False,
    minimum: float = 0.0,
    inclusive: bool = False,
    maximum: float | None = None,
    plausible: tuple[str, str] | None = None,
) -> Any:
    """Declare a numeric spec field: its dimension, bounds and LaTeX name.

    Values are positive by default (``minimum=0`` exclusive); ``inclusive=True`` allows the
    minimum itself. Integer fields (parallel degrees, counts) reject fractional values.
    ``plausible`` (e.g. ``("0.001", "1")`` for an efficiency) is the range outside which a
    value is computed with a warning; without it, that of the field's dimension
    (`stepwall.core.units.PLAUSIBLE`) applies.
    """
    if isinstance(dim, str) and dim not in NAMED:
        raise PluginError(f"quantity({dim!r}, ...): unknown dimension (expected one of "
                          f"{', '.join(NAMED)}, or a stepwall.core.units.Dim)")  # fmt: skip
    number = isinstance(default, int | float) and not isinstance(default, bool)
    if not (number or default is None or default is attrs.NOTHING):
        raise PluginError(f"quantity({dim!r}, ...): default {default!r} is not a number "
                          "(expected a number in SI units)")  # fmt: skip
    d = NAMED[dim] if isinstance(dim, str) else dim
    meta = {
        "dim": d,
        "doc": doc,
        "latex": latex,
        "integer": integer,
        "minimum": minimum,
        "inclusive": inclusive,
        "maximum": maximum,
        "plausible": plausible,
    }
    return attrs.field(default=default, metadata=meta, kw_only=True)


def choice(options: Iterable[str], doc: str, *, default: Any = attrs.NOTHING) -> Any:
    """Declare a string field that must be one of ``options``."""
    return attrs.field(
        default=default, metadata={"choices": tuple(options), "doc": doc}, kw_only=True
    )


def flag(doc: str, *, default: bool = False) -> Any:
    """Declare a boolean field."""
    return attrs.field(default=default, metadata={"bool": True, "doc": doc}, kw_only=True)


def text(doc: str, *, default: Any = attrs.NOTHING, pattern: str = "", example: str = "") -> Any:
    """Declare a text field (a version, a date); ``pattern`` (a regular expression the whole
    value must match, shown to the user as ``example``) when its form is fixed."""
    meta = {"doc": doc, "pattern": pattern, "example": example} if pattern else {"doc": doc}
    return attrs.field(default=default, metadata=meta, kw_only=True)


@attrs.frozen
class KindSpec:
    """A plugin's claim: section ``section`` with ``kind = kind`` has these fields.

    ``extends`` names another (section, kind) whose fields this kind takes too (declared
    first): a GPU with one more field extends ``("hardware", "gpu")`` instead of copying it.
    ``provides`` maps a requirement (`stepwall.plugin.requirements.REQUIREMENTS`, e.g.
    ``"device_memory"``) to the field of this kind that states it (``"memory_capacity"``).
    ``importers`` maps a Hugging Face architecture (``"LlamaForCausalLM"``) to the function
    that reads this kind's entries from such a config (`stepwall.spec.hf.Importer`).
    """

    section: str
    kind: str
    fields: type
    doc: str = ""
    default: bool = False  # used when the section names no kind
    plugin: str = ""
    extends: tuple[str, str] | None = None
    provides: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    importers: Mapping[str, Callable[[Any], Any]] = attrs.field(factory=dict, hash=False)


def combined(base: type, own: type, name: str) -> type:
    """An attrs class with ``base``'s fields, then ``own``'s (which win on a clash)."""
    fields: dict[str, Any] = {}
    for f in (*attrs.fields(base), *attrs.fields(own)):
        fields[f.name] = attrs.field(default=f.default, metadata=dict(f.metadata), kw_only=True)
    return attrs.make_class(name, fields, frozen=True)
