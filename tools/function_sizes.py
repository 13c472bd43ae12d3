"""The longest functions and the most branching in package stepwall, from the source's AST.

Lines are a function's source lines (decorators and docstring included); complexity is
McCabe's: 1 + one per if/elif, loop, except, with-item guard, boolean operator, comprehension
condition, match case, conditional expression and assert. A function over `MAX_LINES` lines or
`MAX_COMPLEXITY` must say in its docstring why it stays whole (docs/architecture.md): the
phrase `WHOLE` in the docstring.

Run: python tools/function_sizes.py [N]   (the N largest of each; exit 1 when one over a
limit does not say why)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "framework" / "stepwall", ROOT / "plugins" / "stepwall" / "plugins")
MAX_LINES = 80
MAX_COMPLEXITY = 15
WHOLE = "Stays whole:"


_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.Assert, ast.ExceptHandler,
             ast.match_case)  # fmt: skip


def complexity(fn: ast.AST) -> int:
    n = 1
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, _BRANCHES):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += len(node.ifs)
    return n


def functions() -> Iterator[tuple[str, int, int, bool]]:
    """(where, lines, complexity, says why it stays whole) of every function."""
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                    lines = (node.end_lineno or node.lineno) - first + 1
                    doc = ast.get_docstring(node) or ""
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    yield where, lines, complexity(node), WHOLE in doc


def over_limits() -> list[tuple[str, int, int, bool]]:
    return [f for f in functions() if f[1] > MAX_LINES or f[2] > MAX_COMPLEXITY]


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 10
    found = list(functions())
    print(f"{len(found)} functions; the {n} longest (lines, complexity):")
    for where, lines, cc, _ in sorted(found, key=lambda f: -f[1])[:n]:
        print(f"  {lines:4d} {cc:3d}  {where}")
    print(f"the {n} most branching:")
    for where, lines, cc, _ in sorted(found, key=lambda f: -f[2])[:n]:
        print(f"  {lines:4d} {cc:3d}  {where}")
    silent = [f for f in over_limits() if not f[3]]
    print(f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: {len(over_limits())}, "
          f"of which {len(silent)} do not say why they stay whole")  # fmt: skip
    for where, lines, cc, _ in silent:
        print(f"  {lines:4d} {cc:3d}  {where}")
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
