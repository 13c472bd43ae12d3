"""The result of an analysis: a `Derivation` (closed form, value, definition, method)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class Derivation:
    """One derived result. ``value`` is the continuous answer; ``feasible_value`` the degree
    a cluster/model allows (None when none does); ``details`` is JSON-able."""

    kind: str
    key: str
    value: float | None
    feasible_value: float | int | None
    closed_form: str
    latex: str
    definition: str
    method: str
    note: str = ""
    scenario: str = ""
    details: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scenario": self.scenario,
            "key": self.key,
            "value": self.value,
            "feasible_value": self.feasible_value,
            "closed_form": self.closed_form,
            "latex": self.latex,
            "definition": self.definition,
            "method": self.method,
            "note": self.note,
            "details": jsonable(self.details),
        }

    def render(self) -> str:
        """Legible text: what, closed form, value, definition, method."""
        val = "none" if self.value is None else f"{self.value:.6g}"
        feas = "none" if self.feasible_value is None else f"{self.feasible_value:g}"
        lines = [
            f"{self.kind} {self.key}  [{self.scenario}]",
            f"  value          {val}   (feasible: {feas})",
            f"  closed form    {self.closed_form}",
            f"  definition     {self.definition}",
            f"  method         {self.method}",
        ]
        if self.note:
            lines.append(f"  note           {self.note}")
        return "\n".join(lines)


def jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str):  # a numpy scalar
        x = x.item()
    if isinstance(x, bool | str) or x is None:
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float) or getattr(x, "is_Number", False):
        f = float(x)
        return f if math.isfinite(f) else None
    return str(x)
