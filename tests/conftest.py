"""Shared fixtures: the plugin guide's example package, installed the way pip would."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "writing-plugins.md"
FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.M | re.S)


def pytest_configure(config: pytest.Config) -> None:
    """The tests (and the commands they start) use a compiled-model cache of their own,
    never the user's: a stale or foreign entry cannot make a test pass or fail."""
    os.environ["STEPWALL_CACHE_DIR"] = tempfile.mkdtemp(prefix="stepwall-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("STEPWALL_CACHE_DIR", ""), ignore_errors=True)


def dist_info(site: Path, pyproject: Path) -> None:
    """A dist-info for the project at ``pyproject`` in ``site``, so its entry points are found
    as if pip had installed it."""
    project = tomllib.loads(pyproject.read_text())["project"]
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
        for group, eps in project["entry-points"].items()
    ]
    (dist / "entry_points.txt").write_text("\n".join(lines))


def write_guide_package(root: Path) -> tuple[Path, Path]:
    """Write every ``file=`` block of the plugin guide under ``root`` and install its package
    as an entry point in ``root/site``. Returns (project folder, site folder)."""
    blocks = FILE_BLOCK.findall(GUIDE.read_text())
    assert blocks, "the guide has no file= code blocks"
    for name, body in blocks:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (pyproject,) = root.glob("*/pyproject.toml")
    site = root / "site"
    dist_info(site, pyproject)
    return pyproject.parent, site


@pytest.fixture
def guide_env(tmp_path: Path) -> dict[str, str]:
    """Environment for the guide's commands: its example plugin and contrib/stepwall-offload
    found through entry points, and ``S`` the offload scenarios (as the guide sets it)."""
    project, site = write_guide_package(tmp_path)
    offload = ROOT / "contrib" / "stepwall-offload"
    dist_info(site, offload / "pyproject.toml")
    path = os.pathsep.join(str(p) for p in (project, site, offload))
    return {
        "PYTHONPATH": path,
        "S": "contrib/stepwall-offload/stepwall_offload/specs/scenarios",
    }


def toy_factory(base: Any, unit: Any) -> Callable[..., Any]:
    """Toy models on a real scenario's parameters (so keys, ranges and compilation work as
    in the catalog): ``make(f, g, …)`` has one term per function of N = parallel.tp, each a
    number of ``unit`` (a time-valued parameter of ``base``), and no constraints."""
    import attrs
    import sympy as sp

    from stepwall.core.terms import Term

    n = base.parameter("parallel.tp")
    second = unit / base.values[unit]  # a time-valued expression worth one second

    def make(*parts: Callable[[Any], Any]) -> Any:
        terms = tuple(
            Term(f"part{i}", part(n) * second, "toy", "synthetic", "base")
            for i, part in enumerate(parts)
        )
        t = sp.Add(*(term.expr for term in terms))
        metrics = {k: e.xreplace({base.step_time: t}) for k, e in base.metrics.items()}
        return attrs.evolve(base, terms=terms, metrics=metrics, constraints=(), shared=[])

    return make
