"""The house rules, checked over the source (docs/architecture.md): the import contract of
tools/import_contract.py, and long or branching functions saying why they stay whole."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from types import ModuleType

from conftest import ROOT


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_the_import_contract_holds() -> None:
    report = _tool("import_contract").check()
    assert len(report.modules) > 80  # the walk found the package, not an empty folder
    assert report.cycles() == []
    assert [f"{i.source} -> {i.target}" for i in report.upward()] == []
    assert [f"{i.source}:{i.line} -> {i.target}" for i in report.lazy()] == []
    assert [f"{i.source}:{i.line} -> {i.target}" for i in report.confined()] == []  # argparse


def test_the_contract_counts_every_kind_of_import(tmp_path) -> None:
    """A cycle through a function-level import, an upward import under TYPE_CHECKING and an
    unexplained lazy import are each found (the checker on a package of its own)."""
    contract = _tool("import_contract")
    pkg = tmp_path / "stepwall"
    for layer in ("core", "model"):
        (pkg / layer).mkdir(parents=True)
        (pkg / layer / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stepwall.model import b\n"
    )
    (pkg / "model" / "b.py").write_text("def f():\n    from stepwall.model import c\n")
    (pkg / "model" / "c.py").write_text("from stepwall.model import b\ndef g():\n    import json\n")
    old = contract.SOURCES
    contract.SOURCES = ((pkg, "stepwall"),)
    try:
        r = contract.check()
    finally:
        contract.SOURCES = old
    assert [(i.source, i.target) for i in r.upward()] == [("stepwall.core.a", "stepwall.model.b")]
    assert r.cycles() == [["stepwall.model.b", "stepwall.model.c"]]
    assert sorted(i.target for i in r.lazy()) == ["json", "stepwall.model.c"]


def test_the_contract_tool_prints_its_verdict() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "import_contract.py")],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert "import cycles: 0" in run.stdout
    assert "upward imports breaking the contract: 0" in run.stdout


def test_long_or_branching_functions_say_why_they_stay_whole() -> None:
    sizes = _tool("function_sizes")
    silent = [f"{where} ({lines} lines, complexity {cc})"
              for where, lines, cc, says in sizes.over_limits() if not says]  # fmt: skip
    assert silent == []


def test_every_package_is_in_the_distribution() -> None:
    """pyproject lists packages explicitly (the folders map onto one package name): a
    subpackage left out installs in editable mode but is missing from a wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for base in (ROOT / "framework", ROOT / "plugins"):
        for init in (base / "stepwall").rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(base).parts))
    assert found - listed == set()
