"""The globals a compiled model function runs with, built without sympy.

A model's source (`stepwall.numeric.printer`) names functions of one module (``numpy`` for the
vectorized form, ``math`` for one point), builtins, and the (module, name) imports the printer
listed. `function_globals` resolves exactly the names the code reads, so a cached model runs
without importing sympy; the printer checks, when it writes the source, that every name
resolves this way.
"""

from __future__ import annotations

import builtins
import dis
import importlib
from collections.abc import Sequence
from types import CodeType
from typing import Any

FUNCTION = "_lambdifygenerated"  # the name lambdify gives the function


def code_names(code: CodeType) -> set[str]:
    """Every global name ``code`` (and the code objects nested in it) reads (not attributes:
    ``logical_and.reduce`` reads ``logical_and``). Read from the raw bytecode: `dis` makes an
    object per instruction, which a cached ``stepwall eval`` would spend most of its own
    work on."""
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        raw, extended = c.co_code, 0
        for i in range(0, len(raw), 2):
            op, arg = raw[i], raw[i + 1] | extended
            extended = arg << 8 if op == dis.EXTENDED_ARG else 0
            if op == _LOAD_GLOBAL:  # since 3.11 the low bit of the argument is a flag
                names.add(c.co_names[arg >> 1])
            elif op == _LOAD_NAME:
                names.add(c.co_names[arg])
        stack += [k for k in c.co_consts if isinstance(k, CodeType)]
    return names - {FUNCTION}


_LOAD_GLOBAL, _LOAD_NAME = dis.opmap["LOAD_GLOBAL"], dis.opmap["LOAD_NAME"]
_MISSING = object()


def resolve(name: str, module: str, imports: Sequence[tuple[str, str]] = ()) -> Any:
    """What ``name`` is to a model function: from ``imports`` ((module, name) pairs), else from
    ``module`` ("numpy" or "math"; the module's own name is the module), else a builtin;
    `_MISSING` when none of these."""
    for m, n in imports:
        if n == name:
            return getattr(importlib.import_module(m), name)
    mod = importlib.import_module(module)
    if name == module:
        return mod
    return getattr(mod, name, getattr(builtins, name, _MISSING))


def function_globals(
    code: CodeType, module: str, imports: Sequence[tuple[str, str]] = ()
) -> dict[str, Any] | None:
    """The globals ``code`` needs (`resolve` for each name it reads); None when a name is
    missing."""
    out = {name: resolve(name, module, imports) for name in code_names(code)}
    return None if any(v is _MISSING for v in out.values()) else out
