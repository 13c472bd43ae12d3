"""docs/hooks.md documents every hook of framework/stepwall/plugin/hookspecs.py with its exact
signature."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from stepwall.plugin import hookspecs

DOC = Path(__file__).resolve().parent.parent / "docs" / "hooks.md"
HEADING = re.compile(r"^## `(?P<sig>(?P<name>\w+)\(.*\)(?: -> .+)?)`\s*$")


def _ann(a: object) -> str:
    # hookspecs.py uses `from __future__ import annotations`: annotations are strings.
    return a if isinstance(a, str) else inspect.formatannotation(a)


def signature_of(fn) -> str:
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        text = p.name
        if p.annotation is not inspect.Parameter.empty:
            text += f": {_ann(p.annotation)}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        params.append(text)
    ret = ""
    if sig.return_annotation is not inspect.Signature.empty:
        ret = f" -> {_ann(sig.return_annotation)}"
    return f"{fn.__name__}({', '.join(params)}){ret}"


def hookspec_functions() -> dict[str, object]:
    return {
        name: fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "stepwall_spec")
    }


def sections() -> dict[str, tuple[str, str]]:
    """Hook name -> (signature in the heading, body up to the next heading)."""
    out: dict[str, tuple[str, str]] = {}
    current, body = None, []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            if current:
                out[current[0]] = (current[1], "\n".join(body))
            m = HEADING.match(line)
            assert m, f"docs/hooks.md: heading is not `name(signature) -> type`: {line}"
            assert m["name"] not in out, f"docs/hooks.md documents {m['name']} twice"
            current, body = (m["name"], m["sig"]), []
        elif current:
            body.append(line)
    if current:
        out[current[0]] = (current[1], "\n".join(body))
    return out


SPECS = hookspec_functions()
DOCUMENTED = sections()


def test_there_are_hooks() -> None:
    assert len(SPECS) >= 7
    assert all(name.startswith("stepwall_") for name in SPECS)


def test_every_hook_is_documented() -> None:
    missing = sorted(set(SPECS) - set(DOCUMENTED))
    assert not missing, f"docs/hooks.md lacks a `## ` heading for {missing}"


def test_no_stale_headings() -> None:
    stale = sorted(set(DOCUMENTED) - set(SPECS))
    assert not stale, f"docs/hooks.md documents hooks that hookspecs.py lacks: {stale}"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_heading_has_the_exact_signature(name: str) -> None:
    if name not in DOCUMENTED:
        pytest.skip("reported by test_every_hook_is_documented")
    assert DOCUMENTED[name][0] == signature_of(SPECS[name])


@pytest.mark.parametrize("name", sorted(SPECS))
def test_firstresult_is_stated_as_declared(name: str) -> None:
    if name not in DOCUMENTED:
        pytest.skip("reported by test_every_hook_is_documented")
    body = DOCUMENTED[name][1]
    m = re.search(r"\*\*firstresult:\*\* (yes|no)", body)
    assert m, f"{name}: no '**firstresult:** yes|no' line"
    declared = bool(SPECS[name].stepwall_spec.get("firstresult"))
    assert (m[1] == "yes") == declared


@pytest.mark.parametrize("name", sorted(SPECS))
def test_section_explains_and_shows_an_example(name: str) -> None:
    if name not in DOCUMENTED:
        pytest.skip("reported by test_every_hook_is_documented")
    body = DOCUMENTED[name][1]
    assert "**When:**" in body and "**Returns:**" in body
    blocks = re.findall(r"```python\n(.*?)```", body, flags=re.S)
    assert blocks, f"{name}: no python example"
    tree = ast.parse(blocks[-1])  # the example is valid Python
    impls = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == name]
    assert impls, f"{name}: the example does not define {name}"
    decorators = [ast.unparse(d) for d in impls[0].decorator_list]
    assert "hookimpl" in decorators
    # pluggy passes an implementation only arguments the hookspec has.
    allowed = set(inspect.signature(SPECS[name]).parameters)
    assert {a.arg for a in impls[0].args.args} <= allowed
