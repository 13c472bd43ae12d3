"""Parameters: sympy Symbols that carry their dimension.

A spec path (``hardware.hbm_bandwidth``) becomes one `Parameter`, made from the field that
declares it (its dimension, LaTeX name and doc). The dimension travels with the symbol, so an
expression can be checked anywhere without a catalog: the dimension walker reads it from each
symbol it meets. A physical constant in code is a `Parameter` with a fixed value, stated with
its unit (``constant("const.flops_per_mac", "2 FLOP")``); a model collects the constants its
expressions use.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sympy as sp
from sympy.core.sorting import default_sort_key, ordered

from stepwall.core.dimensions import dimension_of
from stepwall.core.units import Dim, parse_quantity

_PATH = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")


class Parameter(sp.Symbol):  # type: ignore[misc]  # sympy is untyped
    """A positive Symbol named by a spec path, with its dimension, LaTeX name and doc; a
    constant also carries its SI ``value``. Two parameters are equal when name and dimension
    are."""

    __slots__ = ("dim", "doc", "latex", "value")
    dim: Dim
    latex: str
    doc: str
    value: float | None

    def __new__(
        cls, name: str, dim: Dim, latex: str = "", doc: str = "", value: float | None = None
    ) -> Parameter:
        if not _PATH.fullmatch(name):
            raise ValueError(f"parameter path {name!r} is not dotted snake_case")
        obj: Parameter = sp.Symbol.__xnew__(cls, name, positive=True)
        obj.dim, obj.latex, obj.doc, obj.value = dim, latex or _default_latex(name), doc, value
        return obj

    def __getnewargs_ex__(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return ((self.name, self.dim, self.latex, self.doc, self.value), {})

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def _hashable_content(self) -> tuple[Any, ...]:
        return (*super()._hashable_content(), self.dim, repr(self.value))


def _default_latex(path: str) -> str:
    section, _, name = path.rpartition(".")
    body = name.replace("_", r"\_")
    sec = section.replace("_", r"\_")
    return rf"\mathrm{{{body}}}_{{\mathrm{{{sec}}}}}" if section else rf"\mathrm{{{body}}}"


def parameter(path: str, dim: Dim, latex: str = "", doc: str = "") -> Parameter:
    """The Parameter of a spec path."""
    return Parameter(path, dim, latex, doc)


def constant(path: str, text: str, latex: str = "", doc: str = "") -> Parameter:
    """A physical constant stated with its unit, e.g. ``constant("const.flops_per_mac",
    "2 FLOP")``: a Parameter whose value is fixed here, not in a spec."""
    value, d = parse_quantity(text)
    return Parameter(path, d, latex, doc, value)


def is_constant(symbol: sp.Basic) -> bool:
    return isinstance(symbol, Parameter) and symbol.value is not None


def constants_in(exprs: Iterable[sp.Basic]) -> dict[Parameter, float]:
    """The constants the expressions use, with their values."""
    # one walk over the distinct nodes: free_symbols re-walks every shared subtree
    return {s: float(s.value) for s in post_order(map(sp.sympify, exprs)) if is_constant(s)}


def dim(expr: sp.Basic) -> Dim:
    """The dimension of an expression built from Parameters (each symbol says its own)."""
    return dimension_of(expr)


def latex_names(exprs: Iterable[sp.Basic]) -> dict[sp.Symbol, str]:
    """LaTeX names of the Parameters in ``exprs``, for ``sp.latex(symbol_names=…)``."""
    out: dict[sp.Symbol, str] = {}
    for e in exprs:
        for s in sp.sympify(e).free_symbols:
            if isinstance(s, Parameter):
                out[s] = s.latex
    return out


def rebuild(
    expr: sp.Basic,
    leaves: Mapping[sp.Basic, sp.Basic],
    node: Callable[[sp.Basic, tuple[sp.Basic, ...]], sp.Basic | None] | None = None,
) -> sp.Basic:
    """``expr`` with atoms replaced per ``leaves`` (as ``xreplace``) and, bottom-up, each node
    offered to ``node(original, new_args)`` (None keeps the usual rebuild).

    Min and Max are rebuilt without sympy's pairwise comparison of their arguments (about
    10 ms a node on step-time expressions, most of the time a derivation took) unless all
    arguments are numbers; a Min/Max the laws built is already free of redundant arguments.
    Shared subtrees are rebuilt once."""
    memo: dict[sp.Basic, sp.Basic] = {}

    def walk(e: sp.Basic) -> sp.Basic:
        hit = memo.get(e)
        if hit is not None:
            return hit
        if not e.args:
            out = leaves.get(e, e)
        else:
            args = tuple(walk(a) for a in e.args)
            made = node(e, args) if node is not None else None
            if made is not None:
                out = made
            elif args == e.args:
                out = e
            elif isinstance(e, sp.Min | sp.Max) and not all(a.is_number for a in args):
                out = _min_max(e.func, args)
            else:
                out = e.func(*args)
        memo[e] = out
        return out

    return walk(sp.sympify(expr))


def _min_max(func: Any, args: tuple[sp.Basic, ...]) -> sp.Basic:
    """Min/Max of ``args`` without sympy's pairwise analysis: nested and repeated arguments
    once, and an argument dropped where another wins by structure alone: a larger positive
    multiple of it (the two sides of a roofline that scale alike, c₁·X vs c₂·X), or a
    difference whose collected terms are all positive (c·X + d vs c'·X + d')."""
    flat = list(dict.fromkeys(b for a in args for b in (a.args if a.func == func else (a,))))
    keep = list(flat)
    for a in flat:
        for b in keep:
            if b is a or a not in keep:
                continue
            ratio = b / a
            if ratio.is_number:
                wins = (
                    ratio.is_positive
                    and a.is_positive
                    and (ratio >= 1 if func is sp.Max else ratio <= 1)
                )
            else:  # b − a collects to terms of one sign: c·X + d vs c'·X + d'
                gap = b - a if func is sp.Max else a - b
                wins = isinstance(gap, sp.Add) and all(t.is_positive for t in gap.args)
            if wins:
                keep.remove(a)
    if len(keep) == 1:
        return keep[0]
    return unevaluated(func, keep)


def post_order(roots: Iterable[sp.Basic]) -> list[sp.Basic]:
    """Every distinct node of ``roots`` once, each after its arguments (a subtree shared by
    several parents, as in a model's DAG, is visited once)."""
    order: list[sp.Basic] = []
    seen: set[sp.Basic] = set()
    stack: list[tuple[sp.Basic, bool]] = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend((a, False) for a in reversed(node.args) if isinstance(a, sp.Basic))
    return order


def max_of(*args: Any) -> sp.Basic:
    """``Max(*args)``: evaluated where all arguments are numbers, else unevaluated
    (`unevaluated`)."""
    return unevaluated(sp.Max, args)


def min_of(*args: Any) -> sp.Basic:
    """``Min(*args)``: evaluated where all arguments are numbers, else unevaluated
    (`unevaluated`)."""
    return unevaluated(sp.Min, args)


def unevaluated(func: Any, args: Iterable[Any]) -> sp.Basic:
    """``func(*args, evaluate=False)`` for Min/Max (the same node: its distinct arguments in
    sympy's canonical order), built without sympy's cost on big arguments: its ordering
    (`sympy.core.sorting.ordered`) counts the nodes of each argument's tree afresh, every
    shared subtree of a model's DAG once per path to it, and its evaluation compares the
    arguments pairwise through assumption queries. All numbers: sympy's own evaluation."""
    distinct = frozenset(map(sp.sympify, args))
    if all(a.is_number for a in distinct):
        return func(*distinct)
    if len(distinct) == 1:
        return next(iter(distinct))
    order = ordered(distinct, [_node_count, default_sort_key], default=False)
    node: sp.Basic = sp.Expr.__new__(func, *order)
    node._argset = distinct  # as sympy's MinMaxBase.__new__ sets it
    return node


@functools.lru_cache(maxsize=1 << 16)
def _node_count(e: sp.Basic) -> float:
    """`sympy.core.sorting._node_count` (the tree's nodes, a Float counting ½), each distinct
    subtree counted once and remembered."""
    if e.is_Float:
        return 0.5
    return 1 + sum(map(_node_count, e.args))
