"""The import contract of package stepwall, checked over the source's AST (standard library only).

Layers, lowest first (docs/architecture.md): core, spec, plugin, numeric, model, analyses, io,
apps, cli, then the package's top (``stepwall/__init__.py``, ``stepwall/testing.py``). A module
may import a module of its own layer or of a layer below; the built-in plugins
(``stepwall.plugins``) may import core up to analyses; nothing in the core imports a built-in
plugin. Every import counts: at module level, inside a function, under ``TYPE_CHECKING``. The
module graph has no cycle. An import inside a function is allowed only for a heavy optional
library (`LAZY`), with a comment on its line or the line above saying why. A module loaded by
name (``importlib.import_module("stepwall....")``) counts as an import too; only the command
line's dispatcher (`BY_NAME`) loads modules so, each command's module when it runs.

Run: python tools/import_contract.py   (exit 1 when the contract is broken)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (
    (ROOT / "framework" / "stepwall", "stepwall"),
    (ROOT / "plugins" / "stepwall" / "plugins", "stepwall.plugins"),
)
LAYERS = ("core", "spec", "plugin", "numeric", "model", "analyses", "io", "apps", "cli", "top")
PLUGINS_SEE = ("core", "spec", "plugin", "numeric", "model", "analyses")
# heavy optional libraries a function may import when it needs them (not on every start-up)
LAZY = ("matplotlib", "mpl_toolkits", "cycler", "scipy", "pyarrow", "distributed", "dask",
        "playwright", "torch")  # fmt: skip
# numpy, only in the modules a cached `stepwall eval` runs, which prints one point in plain
# Python (`stepwall.cli.cached_eval`): importing numpy would be most of its start-up
LAZY_ONLY_IN = {"numpy": ("stepwall.numeric.compiled", "stepwall.io.formats")}
# modules that load others by name: the command line's dispatcher (a command's module, the
# cached eval and the registry load when the command needs them, so that `stepwall --help`
# and a repeated eval start without sympy)
BY_NAME = ("stepwall.cli",)
# libraries only one layer may import: the command line's parser
ONLY_IN_LAYER = {"argparse": "cli"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a stepwall module, or the top-level name of another)
    line: int
    in_function: bool
    type_checking: bool
    commented: bool
    by_name: bool = False  # importlib.import_module("stepwall....")


@dataclass
class Report:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def layer(self, module: str) -> str:
        if module == "stepwall.plugins" or module.startswith("stepwall.plugins."):
            return "plugins"
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"

    def allowed(self, source: str, target: str) -> bool:
        a, b = self.layer(source), self.layer(target)
        if a == "plugins":
            return b in PLUGINS_SEE or b == "plugins"
        if b == "plugins":
            return False
        return LAYERS.index(b) <= LAYERS.index(a)

    def internal(self) -> list[Import]:
        return [i for i in self.imports if i.target in self.modules]

    def upward(self) -> list[Import]:
        return [i for i in self.internal() if not self.allowed(i.source, i.target)]

    def lazy(self) -> list[Import]:
        """Imports inside functions that break the rule (not a LAZY library, or no comment)."""

        def ok(i: Import) -> bool:
            top = i.target.split(".")[0]
            if i.by_name:
                return i.source in BY_NAME
            return i.commented and (top in LAZY or i.source in LAZY_ONLY_IN.get(top, ()))

        return [i for i in self.imports if i.in_function and not ok(i)]

    def confined(self) -> list[Import]:
        """Imports of a library outside the one layer that may import it (`ONLY_IN_LAYER`)."""
        return [i for i in self.imports if i.target in ONLY_IN_LAYER
                and self.layer(i.source) != ONLY_IN_LAYER[i.target]]  # fmt: skip

    def cycles(self) -> list[list[str]]:
        """The strongly connected components of more than one module (Tarjan), each sorted."""
        graph: dict[str, set[str]] = {m: set() for m in self.modules}
        for i in self.internal():
            graph[i.source].add(i.target)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []

        def visit(v: str) -> None:  # recursion depth is bounded by the module count
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in sorted(graph[v]):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.append(sorted(comp))

        for m in sorted(graph):
            if m not in index:
                visit(m)
        return sorted(out)


def module_name(path: Path, base: Path, package: str) -> str:
    parts = [package, *path.relative_to(base).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def commented(line: int) -> bool:
        here = lines[line - 1]
        above = lines[line - 2].strip() if line >= 2 else ""
        return "#" in here or above.startswith("#")

    def walk(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            f = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            t = type_checking or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, _resolve(alias.name, modules), child.lineno, f, t,
                                 commented(child.lineno))  # fmt: skip
            elif isinstance(child, ast.Call) and _by_name(child) is not None:
                target = _resolve(str(_by_name(child)), modules).rstrip(".")
                while target not in modules and "." in target:  # f"stepwall.cli.{name}"
                    target = target.rpartition(".")[0]
                if target != module:
                    yield Import(module, target, child.lineno, f, t, True, by_name=True)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*up, *([child.module] if child.module else [])])
                targets = {f"{base}.{a.name}" for a in child.names if f"{base}.{a.name}" in modules}
                for target in sorted(targets) or [_resolve(base, modules)]:
                    yield Import(module, target, child.lineno, f, t, commented(child.lineno))
            yield from walk(child, f, t)

    yield from walk(ast.parse(text), False, False)


def _by_name(call: ast.Call) -> str | None:
    """The module ``importlib.import_module(...)`` loads, when its name starts with a literal
    ``stepwall`` (an f-string: its literal prefix), else None."""
    fn = call.func
    named = isinstance(fn, ast.Attribute) and fn.attr == "import_module"
    if not named or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        arg = arg.values[0]
    if isinstance(arg, ast.Constant) and str(arg.value).startswith("stepwall"):
        return str(arg.value)
    return None


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """A stepwall module's full name; another library's top-level name."""
    return name if name.startswith("stepwall") else name.split(".")[0]


def check() -> Report:
    report = Report()
    for base, package in SOURCES:
        for path in sorted(base.rglob("*.py")):
            report.modules[module_name(path, base, package)] = path
    for module, path in report.modules.items():
        report.imports += _imports(module, path, report.modules)
    return report


def main() -> int:
    r = check()
    internal = r.internal()
    counts = {layer: sum(r.layer(m) == layer for m in r.modules) for layer in (*LAYERS, "plugins")}
    print("layers, lowest first: " + " < ".join(f"{k} ({counts[k]})" for k in LAYERS)
          + f"; plugins ({counts['plugins']}) see {', '.join(PLUGINS_SEE)}")  # fmt: skip
    print(f"{len(r.modules)} modules, {len(internal)} imports between them "
          f"({sum(i.in_function for i in internal)} inside functions, "
          f"{sum(i.type_checking for i in internal)} under TYPE_CHECKING, "
          f"{sum(i.by_name for i in internal)} by name in {', '.join(BY_NAME)}: "
          f"{', '.join(sorted({i.target for i in internal if i.by_name}))})")  # fmt: skip
    lazy_ok = [i for i in r.imports if i.in_function and not i.by_name and i not in r.lazy()]
    print(f"imports inside functions of heavy optional libraries: {len(lazy_ok)} "
          f"({', '.join(sorted({i.target for i in lazy_ok}))})")  # fmt: skip
    bad = 0
    checks = (("upward imports", r.upward()), ("imports inside functions", r.lazy()),
              ("imports of a library outside its layer", r.confined()))  # fmt: skip
    for name, found in checks:
        print(f"{name} breaking the contract: {len(found)}")
        for i in found:
            print(f"  {r.modules[i.source].relative_to(ROOT)}:{i.line}: {i.source} "
                  f"({r.layer(i.source)}) imports {i.target} ({r.layer(i.target)})")  # fmt: skip
        bad += len(found)
    cycles = r.cycles()
    print(f"import cycles: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(c))
    return 1 if bad or cycles else 0


if __name__ == "__main__":
    sys.exit(main())
