"""Primitives: microbenchmarked operations and the laws the model prices them with.

A `Primitive` ties a kind of measurement (a GEMM of m×n×k, a memory copy of B bytes, an
all-reduce of S bytes over N GPUs, …) to the time law the model itself uses for that work,
written over the fields of one spec section. ``stepwall calibrate`` fits those fields to
tables of measurements: calibrate on primitives, validate on end-to-end serving. Plugins
declare primitives through the ``stepwall_primitives`` hook, next to the laws they price.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.core.errors import PluginError
from stepwall.core.units import Dim

if TYPE_CHECKING:
    import sympy as sp

    from stepwall.core.scenario import Scenario

__all__ = ["Primitive", "PrimitiveLaw"]

# a primitive's law: one call's time over the scenario's parameters and the table's columns
PrimitiveLaw = Callable[["Scenario", Mapping[str, "sp.Symbol"], Mapping[str, str]], Any]


@attrs.frozen
class Primitive:
    """A primitive operation as measured by a microbenchmark.

    ``section`` is the spec section whose fields the law reads (``hardware``,
    ``cluster.scale_up``); ``numbers`` are the numeric columns a table of measurements gives
    for it (name -> dimension, e.g. ``m``: dimensionless, ``bytes``: information) and
    ``texts`` the text columns with their allowed values (e.g. ``precision``), of which
    ``optional`` names those a table may leave out, with the value an absent column means
    (e.g. ``routing``: ``balanced``); ``fields``
    the section's fields (paths inside it, ``bf16.efficiency``) the law depends on, which a
    fit may adjust. ``law(scenario, numbers, texts)`` returns the time of one call as a
    sympy expression over the scenario's parameters and ``numbers`` (Symbols named after
    the columns, with their dimensions), for one combination of text values.
    ``check(scenario, numbers)`` names what makes one row's sizes (SI values) meaningless to
    the law, as ``(column, problem, expected)`` (top-k beyond the experts, more GPUs than
    the domain), or returns None; a table with such a row is refused."""

    name: str
    section: str
    doc: str
    numbers: Mapping[str, Dim]
    texts: Mapping[str, tuple[str, ...]]
    fields: tuple[str, ...]
    law: PrimitiveLaw
    plugin: str = ""
    check: Callable[[Scenario, Mapping[str, float]], tuple[str, str, str] | None] | None = None
    optional: Mapping[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        """An optional column is one of the text columns, and its default one of its values."""
        for col, value in self.optional.items():
            if value not in self.texts.get(col, ()):
                raise PluginError(f"plugin {self.plugin}: primitive {self.name}: optional "
                                  f"column {col!r} defaults to {value!r}, not one of its "
                                  "text column's values")  # fmt: skip
