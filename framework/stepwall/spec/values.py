"""Checking one numeric spec value against its field's metadata (`stepwall.core.fields.quantity`:
dimension, bounds, whole number, plausible range): what validating a scenario does for each
quantity, and what a cached ``stepwall eval`` with a new ``--set`` value does without the
scenario's sections (`stepwall.numeric.point_cache`). Needs no sympy and no plugin."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from stepwall.core.errors import SpecError, UnitError
from stepwall.core.units import (
    DIMENSIONLESS,
    Dim,
    describe,
    format_quantity,
    implausible,
    parse_quantity,
)


def check_quantity(
    meta: Mapping[str, Any],
    value: Any,
    where: str,
    key: str,
    warnings: list[str] | None = None,
) -> float | int:
    """A spec value (a number or a quantity string, not a range) of a numeric field with
    metadata ``meta``, read and checked (`check_magnitude`): its SI magnitude."""
    dim: Dim = meta["dim"]
    try:
        magnitude, found = parse_quantity(value)
    except UnitError as e:
        raise SpecError(where, key, str(e), describe(dim)) from None
    if found == DIMENSIONLESS and dim != found and isinstance(value, int | float):
        if not math.isfinite(magnitude):
            raise SpecError(where, key, f"{value!r} is not a finite number", describe(dim))
        raise SpecError(where, key, f"{value!r} has no unit", describe(dim))
    return check_magnitude(meta, magnitude, found, repr(value), where, key, warnings)


def check_magnitude(
    meta: Mapping[str, Any],
    magnitude: float,
    found: Dim,
    shown: str,
    where: str,
    key: str,
    warnings: list[str] | None = None,
) -> float | int:
    """An SI magnitude of dimension ``found`` checked against a numeric field's metadata
    ``meta``: dimension, finiteness, bounds, whole number; a value far outside its quantity's
    physical range adds a warning. ``shown`` is how the value reads in a message."""
    dim: Dim = meta["dim"]
    if not math.isfinite(magnitude):
        raise SpecError(where, key, f"{shown} is not a finite number", describe(dim))
    if found != dim:
        raise SpecError(where, key, f"{shown} is a {found} quantity, not {dim}", describe(dim))
    low, inclusive, high = meta["minimum"], meta["inclusive"], meta["maximum"]
    if magnitude < low or (magnitude == low and not inclusive):
        bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
        raise SpecError(where, key, f"{shown} is out of range", f"a value {bound}")
    if high is not None and magnitude > high:
        top = f"{high:g}" if dim.dimensionless else format_quantity(high, dim)
        raise SpecError(where, key, f"{shown} is out of range", f"a value ≤ {top}")
    if meta["integer"]:
        if magnitude != int(magnitude):
            raise SpecError(where, key, f"{shown} is not a whole number", "an integer")
        return int(magnitude)
    odd = implausible(magnitude, dim, meta.get("plausible"))
    if odd and warnings is not None:
        warnings.append(f"{where}:{key}: {shown} is {odd}")
    return magnitude
