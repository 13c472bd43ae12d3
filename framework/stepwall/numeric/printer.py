"""How compiled functions are generated: parameters named ``_p0``, ``_p1``, … (the function's
arguments, in the order given), subexpressions met more than once named ``x0``, ``x1``, …
(`shared_subexpressions`, after the rewrites of sympy cse's first pass: `restructured`), each
printed once and exec'd in the namespace sympy's ``lambdify`` would give the function. It
computes what ``lambdify(…, cse=True)`` computes, without what made that slow: lambdify
rewrites every expression in new symbols to rename dotted parameters, and cse rebuilds the
tree again with evaluation (each Min/Max re-analysed). Here nothing is evaluated again:
`restructured` builds its rewrites unevaluated, and the printers print a parameter or a
shared node under its name.

`ModelPrinter` (the vectorized model, numpy) is sympy's `NumPyPrinter`, with two forms that
compute the same values:

- ``Max``/``Min`` as nested ``maximum``/``minimum`` calls, where sympy writes
  ``functools.reduce(maximum, [a, b, c])``: the same left fold, without building a list and
  calling ``reduce`` on every evaluation;
- ``Piecewise`` as nested ``where`` calls, where sympy writes ``select([c1, c2, True],
  [a, b, c], default=nan)``: the first condition that holds picks the value, as with
  ``select``, but without stacking every condition and choice into new arrays.

An intermediate of the function (``x12 = …``) is an array as large as the points evaluated;
kept to the end of the call, a few hundred of them would take fresh memory (page faults,
cache misses) for every call. Deleted once used, their memory is used again
(`release_intermediates`). `MathPrinter` (one point, plain Python) is sympy's
`PythonCodePrinter` as lambdify sets it for the ``math`` module.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sp
from sympy.functions.elementary.piecewise import ExprCondPair
from sympy.logic.boolalg import ITE, simplify_logic
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.pycode import PythonCodePrinter
from sympy.simplify.cse_main import Unevaluated, opt_cse

from stepwall.core.symbols import post_order, unevaluated
from stepwall.numeric.namespace import FUNCTION, code_names, resolve

# the settings lambdify gives its printer, and sums in their stored order: sympy's printing
# order (``lex``) decomposes every term into powers, rebuilding them, which took a sixth of
# a cold evaluation; the values agree to rounding (a few 1e-16 relative)
_SETTINGS = {
    "fully_qualified_modules": False,
    "inline": True,
    "allow_unknown_functions": True,
    "order": "none",
}


def argument_names(params: Sequence[sp.Basic]) -> dict[sp.Basic, str]:
    """Each argument's name in generated code: ``_p0``, ``_p1``, … in order."""
    return {p: f"_p{i}" for i, p in enumerate(params)}


def restructured(exprs: Sequence[Any]) -> list[Any]:
    """``exprs`` with the rewrites of ``sympy.cse``'s first pass (``opt_cse``: common factors
    of products and sums pulled into their own node, negations and negative powers made
    shareable), built unevaluated: the same values, more of them shared."""

    subs = opt_cse([e for e in exprs if isinstance(e, sp.Basic)], "canonical")
    memo: dict[Any, Any] = {}

    def walk(e: Any) -> Any:
        if not isinstance(e, sp.Basic | Unevaluated) or not e.args:
            return e
        hit = memo.get(e) if isinstance(e, sp.Basic) else None
        if hit is not None:
            return hit
        target = subs.get(e, e) if isinstance(e, sp.Basic) else e
        args = tuple(walk(a) for a in target.args)
        if isinstance(target, sp.Min | sp.Max) and args != target.args:
            out = unevaluated(target.func, args)
        elif isinstance(target, Unevaluated) or args != target.args:
            try:
                out = target.func(*args, evaluate=False)
            except TypeError:  # a class without ``evaluate`` (a Piecewise's pair)
                out = target.func(*args)
        else:
            out = target
        if isinstance(e, sp.Basic):
            memo[e] = out
        return out

    return [walk(e) for e in exprs]


def shared_subexpressions(exprs: Sequence[Any], prefix: str = "x") -> dict[sp.Basic, str]:
    """The subexpressions met more than once in ``exprs`` (a DAG: a shared node counts once
    per parent), named ``x0``, ``x1``, … children before parents: what ``sympy.cse``'s tree
    elimination finds, without rebuilding any expression (which re-analyses every Min/Max).
    Atoms are not named, nor a Piecewise's (expression, condition) pairs."""
    roots = [e for e in exprs if isinstance(e, sp.Basic) and e.args]
    order = post_order(roots)
    count: dict[sp.Basic, int] = {}
    for e in [*roots, *(a for node in order for a in node.args)]:
        if isinstance(e, sp.Basic) and e.args:
            count[e] = count.get(e, 0) + 1
    named = [e for e in order if count.get(e, 0) > 1 and not isinstance(e, ExprCondPair)]
    return {e: f"{prefix}{i}" for i, e in enumerate(named)}


def read_definitions(
    defined: Sequence[tuple[str, str]], outputs: Sequence[str], prefix: str = "x"
) -> list[tuple[str, str]]:
    """The (name, printed definition) pairs, in order, that the printed ``outputs`` read,
    directly or through other definitions. A printer may print a shared node in its own
    form (``x/y`` where the shared node was ``y**-1``), which is then not read."""
    pattern = re.compile(rf"\b{re.escape(prefix)}\d+\b")
    needed = {n for text in outputs for n in pattern.findall(text)}
    kept = []
    for name, text in reversed(defined):
        if name in needed:
            kept.append((name, text))
            needed.update(pattern.findall(text))
    return kept[::-1]


class SharedNames:
    """A printer mixin: parameters by their argument names (``names``) and the shared
    subexpressions (``shared``) by theirs, except the one being defined (``defining``)."""

    names: dict[sp.Basic, str]
    shared: dict[sp.Basic, str]
    defining: sp.Basic | None = None

    def _print(self, expr: Any, **kwargs: Any) -> str:
        if isinstance(expr, sp.Basic) and expr is not self.defining:
            name = self.shared.get(expr) or self.names.get(expr)
            if name is not None:
                return name
        return str(super()._print(expr, **kwargs))  # type: ignore[misc]

    def _handle_UnevaluatedExpr(self, expr: Any) -> Any:
        # sympy's code printers walk the whole expression for UnevaluatedExpr on every
        # doprint, shared parts included; the models have none (and a printer prints one
        # by its argument anyway)
        return expr

    def definition(self, expr: sp.Basic) -> str:
        """``expr`` printed in terms of the shared subexpressions it contains."""
        self.defining = expr
        try:
            return str(self.doprint(expr))  # type: ignore[attr-defined]
        finally:
            self.defining = None


class ModelPrinter(SharedNames, NumPyPrinter):  # type: ignore[misc]  # sympy is untyped
    """`NumPyPrinter` with nested ``maximum``/``minimum`` and ``where``, set as lambdify sets
    its own printer (names unqualified: ``where``, not ``numpy.where``)."""

    def __init__(
        self,
        names: Mapping[sp.Basic, str] | None = None,
        shared: Mapping[sp.Basic, str] | None = None,
    ) -> None:
        super().__init__(dict(_SETTINGS))
        self.names, self.shared = dict(names or {}), dict(shared or {})

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


class MathPrinter(SharedNames, PythonCodePrinter):  # type: ignore[misc]  # sympy is untyped
    """`PythonCodePrinter` as lambdify sets it for the ``math`` module, parameters by name."""

    def __init__(
        self,
        names: Mapping[sp.Basic, str] | None = None,
        shared: Mapping[sp.Basic, str] | None = None,
    ) -> None:
        super().__init__(dict(_SETTINGS, user_functions={}))
        self.names, self.shared = dict(names or {}), dict(shared or {})


def function_source(
    params: Sequence[sp.Basic], exprs: Any, module: str = "numpy", cse: bool = True
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The source of ``_lambdifygenerated(_p0, _p1, …)`` returning ``exprs`` (one expression,
    or a list) for ``module`` ("numpy": vectorized, intermediates released; "math": one
    point), and the (module, name) imports it needs beyond that module's lambdify namespace."""
    return function_sources(params, exprs, (module,), cse)[0]


def function_sources(
    params: Sequence[sp.Basic], exprs: Any, modules: Sequence[str], cse: bool = True
) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """`function_source` for each of ``modules``, the shared subexpressions found once."""
    if not modules:
        return []
    names = argument_names(params)
    roots = list(exprs) if isinstance(exprs, list | tuple) else [exprs]
    if cse:
        roots = restructured(roots)
        exprs = roots if isinstance(exprs, list | tuple) else roots[0]
    shared = shared_subexpressions(roots) if cse else {}
    return [_source(names, exprs, shared, module) for module in modules]


def _source(
    names: dict[sp.Basic, str], exprs: Any, shared: dict[sp.Basic, str], module: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    printer = (ModelPrinter if module == "numpy" else MathPrinter)(names, shared)
    out = _to_string(printer.doprint, exprs)
    defined = [(name, printer.definition(e)) for e, name in shared.items()]
    body = [f"{name} = {text}" for name, text in read_definitions(defined, [out])]
    body.append(f"return ({out})" if "\n" in out else f"return {out}")
    lines = [f"def {FUNCTION}({', '.join(names.values())}):", *(f"    {b}" for b in body)]
    source = "\n".join(lines) + "\n"
    if module == "numpy":
        source = release_intermediates(source)
    base = namespace(module)
    imports = tuple(
        (mod, name)
        for mod, keys in sorted((getattr(printer, "module_imports", None) or {}).items())
        for name in sorted(keys)
        if name not in base
    )
    return source, imports + _sympy_free_imports(source, module, imports)


def _sympy_free_imports(
    source: str, module: str, imports: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """The (module, name) imports that let `function_globals` (no sympy) give ``source`` the
    very objects sympy's lambdify namespace does (``reduce`` is functools'): what lets a cached
    model run without importing sympy. A name it cannot give that way is a bug, raised."""
    code = compile(source, "<stepwall check>", "exec")
    theirs = namespace(module, imports)
    extra: list[tuple[str, str]] = []
    for name in sorted(code_names(code)):
        want = theirs.get(name, getattr(builtins, name, None))
        if resolve(name, module, imports) is want:
            continue
        home = getattr(want, "__module__", None)
        if not home or getattr(importlib.import_module(home), name, None) is not want:
            raise RuntimeError(
                f"a model function reads {name!r} ({module}), which "
                "stepwall.numeric.namespace cannot resolve as lambdify does"
            )
        extra.append((home, name))
    return tuple(extra)


def _to_string(doprint: Callable[[Any], str], value: Any) -> str:
    """A list of expressions as ``[a, b, …]`` (nested lists alike), as lambdify writes it."""
    if isinstance(value, list | tuple):
        inner = ", ".join(_to_string(doprint, v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
    return str(doprint(value))


@functools.cache
def _namespace(module: str) -> dict[str, Any]:
    return dict(sp.lambdify([], 0, module).__globals__)


def namespace(module: str, imports: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The globals sympy gives a function it lambdifies for ``module`` ("numpy": ``ceil``,
    ``select``, …; "math"), with ``imports`` (module, name) added: a fresh dict."""
    out = dict(_namespace(module))
    for mod, name in imports:
        out[name] = getattr(importlib.import_module(mod), name)
    return out


def compile_function(
    params: Sequence[sp.Basic], exprs: Any, module: str = "numpy", cse: bool = False
) -> Callable[..., Any]:
    """``exprs`` (one or a list) as a function of ``params``, as ``sp.lambdify(params,
    exprs, module, cse=cse)`` computes it, for parameters of any name."""
    source, imports = function_source(params, exprs, module, cse)
    globs = namespace(module, imports)
    exec(compile(source, f"<stepwall ({module})>", "exec"), globs)
    fn: Callable[..., Any] = globs[FUNCTION]
    return fn


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
