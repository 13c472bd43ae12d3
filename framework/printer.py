"""How a model's vectorized function is generated (`stepwall.model`): sympy's ``lambdify``
with common subexpressions (``cse=True``), printed by `ModelPrinter`, then each intermediate
deleted after its last use (`release_intermediates`). The values are the same as with sympy's
own printer; the work is less.

`ModelPrinter` is sympy's `NumPyPrinter`, with two forms that compute the same values:

- ``Max``/``Min`` as nested ``maximum``/``minimum`` calls, where sympy writes
  ``functools.reduce(maximum, [a, b, c])``: the same left fold, without building a list and
  calling ``reduce`` on every evaluation;
- ``Piecewise`` as nested ``where`` calls, where sympy writes ``select([c1, c2, True],
  [a, b, c], default=nan)``: the first condition that holds picks the value, as with
  ``select``, but without stacking every condition and choice into new arrays.

An intermediate of the function (``x12 = …``) is an array as large as the points evaluated;
kept to the end of the call, a few hundred of them would take fresh memory (page faults,
cache misses) for every call. Deleted once used, their memory is used again.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
from sympy.logic.boolalg import ITE, simplify_logic
from sympy.printing.numpy import NumPyPrinter


class ModelPrinter(NumPyPrinter):  # type: ignore[misc]  # sympy is untyped
    """`NumPyPrinter` with nested ``maximum``/``minimum`` and ``where``, set as lambdify sets
    its own printer (names unqualified: ``where``, not ``numpy.where``)."""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(
            {"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True}
            | (settings or {})
        )

    def _helper_minimum_maximum(self, op: str, *args: Any) -> str:
        if not args:
            raise NotImplementedError(f"Need at least one argument for {op}")
        out = str(self._print(args[0]))
        for arg in args[1:]:  # reduce's order: ((a, b), c)
            out = f"{op}({out}, {self._print(arg)})"
        return out

    def _print_Piecewise(self, expr: sp.Piecewise) -> str:
        where = self._module_format(self._module + ".where")
        pieces = list(expr.args)
        # the last choice when its condition is True, else select's default: nan
        last = pieces.pop().expr if pieces[-1].cond == sp.true else sp.nan
        out = self._choice(last)
        for piece in reversed(pieces):
            cond = piece.cond
            shown = self._print(simplify_logic(cond) if cond.has(ITE) else cond)
            out = f"{where}({shown}, {self._choice(piece.expr)}, {out})"
        return out

    def _choice(self, value: sp.Expr) -> str:
        """A choice as a float, as select gives it (its default, nan, makes it one): a
        Piecewise of integer constants stays floating-point."""
        if value.is_Number and value.is_finite:
            return repr(float(value))
        return str(self._print(value))


def numpy_function(names: Sequence[Any], exprs: Sequence[Any]) -> tuple[Callable[..., Any], str]:
    """The vectorized function of ``exprs`` over ``names`` and its source; its globals are
    those lambdify gave it (numpy's names and any imports)."""
    fn = sp.lambdify(names, exprs, modules="numpy", cse=True, printer=ModelPrinter())
    source = release_intermediates(inspect.getsource(fn))
    defined: dict[str, Any] = {}
    exec(compile(source, "<stepwall model (numpy)>", "exec"), dict(fn.__globals__), defined)
    return defined[fn.__name__], source


def release_intermediates(source: str) -> str:
    """``source`` (one function of assignments and a return, as lambdify writes it) with a
    ``del`` after the statement that last reads each intermediate the return does not name."""
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.FunctionDef)
    assigned = [
        t.id
        for st in body.body
        if isinstance(st, ast.Assign)
        for t in st.targets
        if isinstance(t, ast.Name)
    ]
    last: dict[str, ast.stmt] = {}
    for st in body.body:
        for node in ast.walk(st):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                last[node.id] = st
    final = body.body[-1]
    after: dict[int, list[str]] = {}  # line -> names last read in the statement ending there
    for name in assigned:
        reader = last.get(name)
        if reader is not None and reader is not final and reader.end_lineno is not None:
            after.setdefault(reader.end_lineno, []).append(name)
    lines = source.splitlines()
    indent = lines[body.body[0].lineno - 1][: body.body[0].col_offset]
    out = []
    for number, line in enumerate(lines, 1):
        out.append(line)
        if number in after:
            out.append(f"{indent}del {', '.join(after[number])}")
    return "\n".join(out) + "\n"
