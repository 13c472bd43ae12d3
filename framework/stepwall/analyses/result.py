"""The result of an analysis: a `Derivation` (closed form, value, definition, method), with
the defining `Equation` of a root and the root's `Sensitivity` to each parameter."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from stepwall.core.terminal import visible

if TYPE_CHECKING:
    import sympy as sp


@attrs.frozen
class Equation:
    """What defines a root x*: ``F(x*, p) = 0`` with F symbolic in the parameters and its
    branches resolved at the root (a crossover: metric₁ − metric₂; a wall:
    t(N) − (1 + ε)·t(∞); an optimum: ∂f/∂x; a kink: the boundary). ``values`` gives every
    free symbol of F but ``x``; ``names`` maps a symbol to (parameter path, side) where one
    equation holds two scenarios' parameters; ``what`` says what F is, in words. An analysis
    that records it gets the root's sensitivities from `stepwall.analyses.base.run`."""

    F: sp.Expr
    x: sp.Symbol
    values: Mapping[sp.Symbol, float]
    what: str
    names: Mapping[sp.Symbol, tuple[str, str]] = attrs.field(factory=dict)


@attrs.frozen
class Sensitivity:
    """∂ln x*/∂ln p = −(p/x*)·(∂F/∂p)/(∂F/∂x) at the point (``elasticity``), and ∂x*/∂p in SI
    (``derivative``; None for ``side = "both"`` when the two values differ). ``side`` is ""
    for one scenario, a scenario's name in a crossover, or "both": the parameter scaled alike
    on both sides (the sum). ``expression`` is the symbolic elasticity with --symbolic;
    ``whole`` marks a parameter the specs take in whole numbers (a parallel degree, a count
    of layers), whose sensitivity is that of the continuous relaxation."""

    parameter: str
    side: str
    elasticity: float
    derivative: float | None
    value: float | None
    expression: str = ""
    whole: bool = False  # a whole-number spec field (a degree, a count): its x* moves in steps

    def to_json(self) -> dict[str, Any]:
        out = {
            "parameter": self.parameter,
            "side": self.side,
            "elasticity": jsonable(self.elasticity),
            "derivative": jsonable(self.derivative),
            "value": jsonable(self.value),
            "whole": self.whole,
        }
        if self.expression:
            out["expression"] = self.expression
        return out


@attrs.frozen
class Derivation:
    """One derived result. ``value`` is the continuous answer; ``feasible_value`` the degree
    a cluster/model allows (None when none does); ``details`` is JSON-able.

    A root may carry more: ``srepr`` (sympy's srepr of the closed form), ``form`` (how it was
    obtained: polynomial, logarithm, Lambert W with its branch and conditions), ``regime``
    (an asymptotic closed form: which regime, its validity and its error against ``value``),
    its defining ``equation`` and the ``sensitivities`` computed from it; ``sensitivity_rows``
    is how many of them ``render`` prints."""

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
    srepr: str = ""
    form: Mapping[str, Any] | None = None
    regime: Mapping[str, Any] | None = None
    equation: Equation | None = attrs.field(default=None, eq=False, repr=False)
    sensitivities: tuple[Sensitivity, ...] = ()
    sensitivity_note: str = ""
    sensitivity_rows: int = attrs.field(default=0, eq=False)

    def to_json(self) -> dict[str, Any]:
        out = {
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
        if self.srepr or self.form or self.regime or self.equation is not None:
            out["srepr"] = self.srepr
            out["form"] = jsonable(self.form)
            out["regime"] = jsonable(self.regime)
        if self.equation is not None or self.sensitivity_note:
            out["equation"] = self.equation.what if self.equation is not None else None
            out["sensitivities"] = [s.to_json() for s in self.sensitivities]
            out["sensitivity_note"] = self.sensitivity_note
        return out

    def render(self) -> str:
        """Legible text: what, closed form, value, definition, method; the form of the root,
        its regime and, when asked, its sensitivities."""
        val = "none" if self.value is None else f"{self.value:.6g}"
        feas = "none" if self.feasible_value is None else f"{self.feasible_value:g}"
        lines = [
            f"{self.kind} {self.key}  [{visible(self.scenario)}]",
            f"  value          {val}   (feasible: {feas})",
            f"  closed form    {self.closed_form}",
        ]
        if self.form:
            lines.append(f"  form           {describe_form(self.form, bool(self.regime))}")
        if self.regime:
            lines.append(f"  regime         {describe_regime(self.regime)}")
        lines += [
            f"  definition     {self.definition}",
            f"  method         {self.method}",
        ]
        if self.note:
            lines.append(f"  note           {self.note}")
        if self.sensitivity_rows:
            lines += sensitivity_lines(self, self.sensitivity_rows)
        return "\n".join(lines)


def describe_form(form: Mapping[str, Any], approximate: bool = False) -> str:
    """One line: the form, its branch, the conditions and, for an exact root, the check (an
    approximate root's distance from the exact one is its regime's error)."""
    bits = [str(form.get("form", ""))]
    if form.get("branch"):
        bits[0] += f", branch {form['branch']}"
    if form.get("conditions"):
        bits.append(str(form["conditions"]))
    res = form.get("residual")
    if res is not None and not approximate:  # float noise below 1e-12 printed as such
        size = "< 1e-12" if res < 1e-12 else f"= {res:.1e}"
        bits.append(f"|F| at the closed form {size} of its largest term")
    return "; ".join(bits)


def describe_regime(regime: Mapping[str, Any]) -> str:
    """One line: the regime, what was replaced, where it holds and its error."""
    return (
        f"{regime['name']}: {regime['approximation']}; valid where {regime['validity']}; "
        f"root {regime['value']:.6g}, {regime['error']:.2%} from the exact root "
        f"(first-order estimate {regime['estimate']:.2%})"
    )


def sensitivity_lines(d: Derivation, rows: int) -> list[str]:
    """The ranked table: elasticity of the root to each parameter (and side)."""
    head = "  sensitivity    ∂ln x*/∂ln p = −(p/x*)·(∂F/∂p)/(∂F/∂x)"
    if d.equation is not None:
        head += f", F = {d.equation.what}"
    if not d.sensitivities:
        return [head, f"    none: {d.sensitivity_note or 'the root has no value'}"]
    shown = [s for s in d.sensitivities if s.elasticity][:rows]
    width = max(len(s.parameter) for s in shown) if shown else 0
    out = [head]
    for s in shown:
        side = f"  {s.side}" if s.side else ""
        whole = "  (whole)" if s.whole else ""
        out.append(f"    {s.elasticity:+.4f}  {s.parameter:<{width}}{side}{whole}".rstrip())
    rest = len(d.sensitivities) - len(shown)
    if rest:
        out.append(f"    ({rest} more, smaller or zero; --json lists all)")
    return out


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
