"""The explorer page without a browser: what it holds, that it is self-contained, small and
byte-reproducible, the JavaScript printer, the command's errors and the report block.
(tests/test_explore_browser.py runs the page in Chromium.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sympy as sp

from stepwall.apps.explore import (
    MAX_BYTES,
    Unsupported,
    default_free,
    explorer_html,
    expression_graph,
    js_function,
    make_controls,
)
from stepwall.cli import main
from stepwall.core.errors import SpecError
from stepwall.model.compose import build_model

SCENARIO = "k26-b300-tp8-ddtree"


@pytest.fixture(scope="module")
def model():
    return build_model(SCENARIO)


@pytest.fixture(scope="module")
def page(model) -> str:
    return explorer_html(model, command=f"stepwall explore {SCENARIO}").decode()


def data_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="stepwall-data">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def test_page_is_self_contained_and_small(page: str) -> None:
    assert len(page.encode()) < MAX_BYTES
    # nothing fetched: no external resources of any kind, no network calls in the scripts
    for pattern in (r"\ssrc=", r"\shref=", r"@import", r"url\(", r"fetch\(", "XMLHttpRequest",
                    r"<link", r"<iframe", "importScripts", "WebSocket"):  # fmt: skip
        assert not re.search(pattern, page), pattern
    assert page.startswith("<!DOCTYPE html>")
    assert "<math" in page  # closed forms as MathML, rendered by the browser itself
    assert "Provenance" in page and "specs/hardware/b300.toml" in page
    assert re.search(r"<code>[0-9a-f]{64}</code>", page)  # spec hashes


def test_page_carries_the_model_not_its_numbers(model, page: str) -> None:
    """The page holds the compiled model and the spec values; metrics are computed there."""
    doc = data_of(page)
    assert [p["path"] for p in doc["parameters"]] == [s.name for s in model.parameters]
    assert doc["metrics"][0] == "step_time_s"
    assert "function stepwallModel(p)" in page and "function stepwallSides(p)" in page
    assert len(doc["constraints"]) == len(model.constraints)
    assert doc["wall"]["nodes"], "the relaxed step time travels as an expression graph"
    step = str(model.evaluate()["step_time_s"])
    assert step not in page  # not a precomputed number


def test_page_reduces_expressions_as_the_evaluator_does(model, page: str) -> None:
    """The page's subexpressions are those of `compile_model`'s lambdify (same list, same
    cse), so it computes in the same order: a tripwire for a change to that list."""
    from stepwall.model.compose import compile_model

    source = compile_model(model, scalar=True).scalar_source
    py = dict(re.findall(r"^    (x\d+) = (.*)$", source, re.M))
    body = page[page.index("function stepwallModel(p)") : page.index("function stepwallSides(p)")]
    js = dict(re.findall(r"^  const (x\d+) = (.*);$", body, re.M))
    assert len(js) > 20 and set(js) <= set(py)
    same = 0
    for name, text in js.items():  # the same operations, spelled for JavaScript
        if any(s in py[name] for s in ("**", " if ", "%", " and ", " or ", "<", ">", "==")):
            continue  # spelled differently (Math.pow, ?:, pymod, &&, parentheses)
        spelled = re.sub(r"\b(ceil|floor|log|exp|max|min)\(", r"Math.\1(", py[name])
        assert text == spelled, (name, text, py[name])
        same += 1
    assert same > 20


def test_same_inputs_same_bytes(model) -> None:
    a = explorer_html(model, command="x")
    b = explorer_html(build_model(SCENARIO), command="x")
    assert a == b


def test_default_controls(model) -> None:
    free = default_free(model)
    assert free[:3] == ["parallel.dp", "parallel.ep", "parallel.redundant_experts"] or (
        "parallel.tp" in free
    )
    assert {"parallel.tp", "parallel.ep", "parallel.dp", "workload.concurrency"} <= set(free)
    assert not set(free) & model.structural_keys
    assert not any(p.startswith("const.") for p in free)
    assert len(free) >= 6
    controls = make_controls(model, ["hardware.hbm_bandwidth", "decoding.draft_time"])
    bw, draft = controls
    assert (bw.unit, bw.exponent) == ("TB/s", 12) and bw.lo < bw.value < bw.hi and bw.log
    assert (draft.unit, draft.exponent) == ("ms", -3)
    assert bw.source and bw.file == "specs/hardware/b300.toml"
    assert bw.element_id == "control-hardware-hbm_bandwidth"


def test_js_printer_handles_every_node_kind() -> None:
    x, y = sp.symbols("x y", positive=True)
    exprs = [
        sp.Piecewise((x, x < y), (y, True)),
        sp.Max(x, y, 3),
        sp.Min(x, y),
        sp.ceiling(x / y),
        sp.floor(x * y),
        sp.log(x) / sp.log(2),
        sp.exp(-x),
        sp.Mod(x, y),
        sp.And(x >= 1, sp.Eq(sp.Mod(x, y), 0)),
        sp.Rational(1, 3) * x**-2,
        sp.Float(0.1) * x,
        sp.LambertW(x) + sp.LambertW(-x / 4, -1),
    ]
    code = js_function("f", [x, y], exprs)
    assert code.startswith("function f(p) {") and code.rstrip().endswith("}")
    for needle in ("Math.max(", "Math.min(", "Math.ceil(", "Math.floor(", "Math.log(",
                   "Math.exp(", "pymod(", "?", "&&", ", 0)", ", -1)"):  # fmt: skip
        assert needle in code, needle
    assert code.count("lambertw(") == 2  # the page's helper (tests/test_explore_browser.py)
    assert "True" not in code and "None" not in code
    with pytest.raises(SpecError, match="gamma cannot be compiled to JavaScript") as e:
        js_function("g", [x], [sp.gamma(x)])
    assert "strict" not in str(e.value)  # sympy's advice on printing partial code is not ours


def test_expression_graph_shares_subtrees() -> None:
    x, y = sp.symbols("x y", positive=True)
    shared = sp.ceiling(x / y)
    nodes = expression_graph(shared + sp.Max(shared, 1) * x + sp.LambertW(y), {x: 0, y: 1})
    assert sum(1 for n in nodes if n[0] == "ceil") == 1
    assert any(n[0] == "lambertw" for n in nodes)
    assert nodes[-1][0] == "+"
    with pytest.raises(Unsupported, match="gamma"):
        expression_graph(sp.gamma(x), {x: 0})


def test_page_compiles_every_metric_the_model_has(model, page: str) -> None:
    """The metrics come from the model itself (`stepwall.numeric.compiled.METRICS`, those the specs
    give): a metric added there is in the page without a change here; one the specs cannot
    give (energy without a board power) is left out, as eval leaves it unknown."""
    from stepwall.model.metrics import METRICS, OPTIONAL_METRICS

    doc = data_of(page)
    assert doc["metrics"] == [m for m in METRICS if m in model.metrics]
    assert {"ttft_s", "e2e_latency_s", "pd_tokens_per_s_per_gpu"} <= set(doc["metrics"])
    assert set(doc["optional"]) == set(doc["metrics"]) & OPTIONAL_METRICS
    body = page[page.index("function stepwallModel(p)") : page.index("function stepwallSides(p)")]
    returned = body[body.index("return [") :]
    # one output per metric, term and constraint (ops are dropped), at top level of the array
    depth, commas = 0, 0
    for ch in returned[len("return [") :]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
    assert commas + 1 == len(doc["metrics"]) + len(model.terms) + len(model.constraints)


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_explore_command_writes_the_page(tmp_path: Path, capsys) -> None:
    target = tmp_path / "x.html"
    args = ["--free", "parallel.tp,hardware.hbm_bandwidth", "--set", "workload.context=4096"]
    code, out, err = _run(["explore", SCENARIO, *args, "-o", str(target)], capsys)
    assert code == 0, err
    assert f"wrote {target}" in out and "offline" in out
    page = target.read_text()
    doc = data_of(page)
    assert [c["path"] for c in doc["controls"]] == ["parallel.tp", "hardware.hbm_bandwidth"]
    assert 'id="control-parallel-tp"' in page and 'id="control-hardware-hbm_bandwidth"' in page
    assert "workload.context=4096" in page  # the label and the command to regenerate
    first = target.read_bytes()
    assert _run(["explore", SCENARIO, *args, "-o", str(target)], capsys)[0] == 0
    assert target.read_bytes() == first


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--free", "decoding.accepted_tokens"], "decides which terms the model has"),
        (["--free", "hardware.hbm_bandwith"], "not a parameter of this scenario"),
        (["--free", "const.flops_per_mac"], "is a constant"),
        (["--chart", "model.hidden", "--free", "parallel.tp"], "not among the controls"),
        (["--eps", "0"], "not a useful tolerance"),
        (["-o", "nowhere/x.html"], "not found"),
        (["-o", "x.txt"], "unknown output format"),
    ],
)
def test_explore_bad_input_is_one_line(args: list[str], said: str, capsys, tmp_path: Path,
                                       monkeypatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    if "-o" not in args:
        args = [*args, "-o", "x.html"]
    code, _, err = _run(["explore", SCENARIO, *args], capsys)
    assert code == 2
    assert said in err and err.count("\n") == 1, err


def test_explore_help_teaches(capsys) -> None:
    code, out, _ = _run(["explore", "--help"], capsys)
    assert code == 0
    for needle in ("--free", "--set", "offline", "examples:", "stepwall explore", "Structural"):
        assert needle in out, needle


REPORT = """\
title = "Explorer block"
[scenarios.base]
scenario = "k26-b300-tp8-ddtree"

[[block]]
kind = "explorer"
id = "k26"
scenario = "base"
free = ["parallel.tp", "hardware.hbm_bandwidth"]
text = "Explore the TP wall"
"""


def test_report_block_writes_and_links_its_explorer(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "r.toml"
    spec.write_text(REPORT)
    out = tmp_path / "out"
    code, _, err = _run(["report", str(spec), "-o", str(out)], capsys)
    assert code == 0, err
    md = (out / "REPORT.md").read_text()
    assert "[Explore the TP wall](explorer-k26.html)" in md
    page = (out / "explorer-k26.html").read_text()
    assert [c["path"] for c in data_of(page)["controls"]] == ["parallel.tp",
                                                              "hardware.hbm_bandwidth"]  # fmt: skip
    assert "stepwall report" in page  # regenerated by the report's command
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert _run(["report", str(spec), "-o", str(out)], capsys)[0] == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_report_block_errors_name_the_block(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "r.toml"
    spec.write_text(REPORT.replace('"parallel.tp", ', '"decoding.accepted_tokens", '))
    code, _, err = _run(["report", str(spec), "-o", str(tmp_path / "out")], capsys)
    assert code == 2
    assert "block[0]" in err and "decoding.accepted_tokens" in err
