"""The symbol catalog: the only place parameters (sympy Symbols) are made.

One parameter per spec path (``hardware.hbm_bandwidth``), with a dimension and a LaTeX
name. The same path always yields the same Symbol, so expressions built by different
plugins share parameters, and a derivation can pick any of them to keep free.
"""

from __future__ import annotations

import re

import attrs
import sympy as sp

from stepwall.units import Dim, dimension_of


@attrs.frozen
class Parameter:
    path: str
    symbol: sp.Symbol
    dim: Dim
    latex: str
    doc: str = ""


_CATALOG: dict[str, Parameter] = {}
_BY_SYMBOL: dict[sp.Symbol, Parameter] = {}


def _default_latex(path: str) -> str:
    section, _, name = path.rpartition(".")
    body = name.replace("_", r"\_")
    sec = section.replace("_", r"\_")
    return rf"\mathrm{{{body}}}_{{\mathrm{{{sec}}}}}" if section else rf"\mathrm{{{body}}}"


def parameter(path: str, dim: Dim, latex: str = "", doc: str = "") -> sp.Symbol:
    """The Symbol for a spec path, made on first use.

    Asking again with another dimension is an error: one path, one meaning.
    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", path):
        raise ValueError(f"parameter path {path!r} is not dotted snake_case")
    found = _CATALOG.get(path)
    if found is not None:
        if found.dim != dim:
            raise ValueError(
                f"parameter {path} already declared with dimension {found.dim}, not {dim}"
            )
        return found.symbol
    sym = sp.Symbol(path, positive=True)
    entry = Parameter(path, sym, dim, latex or _default_latex(path), doc)
    _CATALOG[path] = entry
    _BY_SYMBOL[sym] = entry
    return sym


_CONSTANTS: dict[sp.Symbol, float] = {}


def constant(path: str, text: str, latex: str = "", doc: str = "") -> sp.Symbol:
    """A physical constant stated with its unit, e.g. ``constant("const.flops_per_mac",
    "2 FLOP")``: a parameter like any other whose value is fixed here, not in a spec."""
    from stepwall.units import parse_quantity

    value, d = parse_quantity(text)
    sym = parameter(path, d, latex, doc)
    _CONSTANTS[sym] = value
    return sym


def constant_values() -> dict[sp.Symbol, float]:
    return dict(_CONSTANTS)


def lookup(symbol_or_path: sp.Symbol | str) -> Parameter:
    """The catalog entry for a Symbol or a path."""
    if isinstance(symbol_or_path, str):
        return _CATALOG[symbol_or_path]
    return _BY_SYMBOL[symbol_or_path]


def dimensions() -> dict[sp.Symbol, Dim]:
    """Symbol -> dimension for every parameter made so far (the walker's input)."""
    return {s: p.dim for s, p in _BY_SYMBOL.items()}


def dim(expr: sp.Basic) -> Dim:
    """The dimension of an expression built from catalog parameters."""
    return dimension_of(expr, dimensions())


def latex_names() -> dict[sp.Symbol, str]:
    return {s: p.latex for s, p in _BY_SYMBOL.items()}
