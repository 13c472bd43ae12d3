"""Bad inputs nobody had listed (issue 20, "Trust on any machine"): misbehaving third-party
plugins, options given twice, and the JSON every command prints where a number is unknown.

A plugin that raises, returns the wrong type or declares a bad entry ends as one line naming
the plugin (and the hook or entry), exit 2; an installed one that cannot load is skipped and
listed by ``stepwall plugins``. An option of one value given twice with different values, or
a key set twice with ``--set``, is refused (the first would be ignored silently). JSON output
never holds NaN or Infinity.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import sympy as sp
from test_bad_inputs import BASE, REFUSE, _check, _outcome, place  # noqa: F401 (a fixture)

from stepwall.analyses import Derivation, option
from stepwall.core.errors import PluginError
from stepwall.core.fields import KindSpec, quantity
from stepwall.core.terms import Constraint, Term
from stepwall.plugin.entries import Analysis, BlockKind, Format
from stepwall.plugin.hookspecs import hookimpl
from stepwall.testing import PluginKit, run_cli

OK = 0
FT = ("scenario", "workload", "decoding")  # stepwall_fixed_terms's arguments used here
CT = ("scenario", "decoding", "layout", "workload")
SWEEP = ["sweep", BASE, "--vary", "parallel.tp=8,16", "--format", "qq"]
SEARCH = ["search", "kimi-k2.6-int4", "--hardware", "b300", "--cluster", "hgx-b300-ib"]


def _plugin(name: str, hook: str, args: tuple[str, ...], fn: Callable[..., Any]) -> object:
    """A throwaway plugin module ``name`` whose ``hook`` returns ``fn(*args)``."""
    ns: dict[str, Any] = {}
    exec(f"def {hook}({', '.join(args)}):\n    return fn({', '.join(args)})\n", {"fn": fn}, ns)
    module = types.ModuleType(name)
    setattr(module, hook, hookimpl(ns[hook]))
    return module


def _floor(s: Any) -> Any:
    return s.params.hardware.kernel_floor


def _term(**kw: Any) -> Callable[..., list[Term]]:
    def make(s: Any, *_: Any) -> list[Term]:
        return [Term(**{"name": "p.t", "expr": _floor(s), "plugin": "p", "why": "x", **kw})]

    return make


def _rule(**kw: Any) -> Callable[..., list[Constraint]]:
    def make(s: Any, *_: Any) -> list[Constraint]:
        fields = {"name": "p.c", "relation": s.params.parallel.tp > 100, "message": "m",
                  "keys": ("parallel.tp",), "plugin": "p", **kw}  # fmt: skip
        return [Constraint(**fields)]

    return make


@attrs.frozen
class Opts:
    top: int = option("how many", default=1)


class NotAttrs:
    pass


def _run(model: Any, o: Any, context: Any) -> Derivation:
    return Derivation("zz", "x", 1.0, None, "", "", "w", "numeric", scenario="")


def _analysis(**kw: Any) -> Callable[[], list[Analysis]]:
    fields = {"name": "zz", "doc": "d", "options": Opts, "run": _run, **kw}
    return lambda: [Analysis(**fields)]


def _format(**kw: Any) -> Callable[[], list[Format]]:
    fields = {"name": "qq", "doc": "d", "suffixes": (".qq",), "write": lambda t, o: None, **kw}
    return lambda: [Format(**fields)]


# (id, hook, its arguments, what it returns, command line, exit code, fragment)
HOOK_CASES: list[tuple[str, str, tuple[str, ...], Callable[..., Any], list[str], int, str]] = [
    ("terms-raise", "stepwall_fixed_terms", FT, lambda *_: 1 / 0, ["eval", BASE], REFUSE,
     "plugin probe_terms_raise: stepwall_fixed_terms raised ZeroDivisionError"),
    ("terms-none", "stepwall_fixed_terms", FT, lambda *_: None, ["eval", BASE], OK, ""),
    ("terms-int", "stepwall_fixed_terms", FT, lambda *_: 5, ["eval", BASE], REFUSE,
     "returned int where a list of Term"),
    ("terms-generator", "stepwall_fixed_terms", FT, lambda *_: iter(()), ["eval", BASE], REFUSE,
     "where a list of Term"),
    ("terms-bare-term", "stepwall_fixed_terms", FT, lambda s, *_: _term()(s)[0],
     ["eval", BASE], REFUSE, "returned Term where a list"),
    ("expr-text", "stepwall_fixed_terms", FT, _term(expr="1"), ["eval", BASE], REFUSE,
     "term p.t: a term must be a sympy expression, not str"),
    ("expr-nan", "stepwall_fixed_terms", FT, _term(expr=float("nan")), ["eval", BASE], REFUSE,
     "term p.t: a term is not finite"),
    ("expr-none", "stepwall_fixed_terms", FT, _term(expr=None), ["eval", BASE], REFUSE,
     "not NoneType"),
    ("expr-imaginary", "stepwall_fixed_terms", FT, lambda s, *_: _term(expr=sp.I * _floor(s))(s),
     ["eval", BASE], REFUSE, "term p.t"),
    ("expr-negative", "stepwall_fixed_terms", FT,
     lambda s, *_: _term(expr=-1000 * _floor(s))(s), ["eval", BASE], REFUSE, "negative"),
    ("expr-bare-symbol", "stepwall_fixed_terms", FT, _term(expr=sp.Symbol("zz")),
     ["eval", BASE], REFUSE, "symbol zz has no declared dimension"),
    ("expr-number", "stepwall_fixed_terms", FT, _term(expr=1.5), ["eval", BASE], REFUSE,
     "must have dimension s"),
    ("expr-overflow", "stepwall_fixed_terms", FT,
     lambda s, *_: _term(expr=_floor(s) * sp.Float("1e400"))(s), ["eval", BASE], REFUSE,
     "not finite"),
    ("name-number", "stepwall_fixed_terms", FT, lambda s, *_: _term(name=5)(s),
     ["eval", BASE], REFUSE, "plugin probe_name_number: stepwall_fixed_terms raised TypeError: "
     "term name must be text"),
    ("name-none", "stepwall_fixed_terms", FT, lambda s, *_: _term(name=None)(s),
     ["eval", BASE], REFUSE, "term name must be text, not NoneType"),
    ("plugin-number", "stepwall_fixed_terms", FT, lambda s, *_: _term(plugin=3)(s),
     ["eval", BASE], REFUSE, "plugin probe_plugin_number: stepwall_fixed_terms"),
    ("group-number", "stepwall_fixed_terms", FT, lambda s, *_: _term(group=3)(s),
     ["eval", BASE], REFUSE, "term group must be text"),
    ("overlap-number", "stepwall_fixed_terms", FT, lambda s, *_: _term(overlap=3)(s),
     ["eval", BASE], REFUSE, "term overlap must be text"),
    ("why-none", "stepwall_fixed_terms", FT, lambda s, *_: _term(why=None)(s),
     ["eval", BASE], REFUSE, "term why must be text"),
    ("duplicate-term", "stepwall_fixed_terms", FT, lambda s, *_: _term()(s) + _term()(s),
     ["eval", BASE], REFUSE, "two terms are named 'p.t'"),
    ("rules-raise", "stepwall_constraints", CT, lambda *_: 1 / 0, ["eval", BASE], REFUSE,
     "plugin probe_rules_raise: stepwall_constraints raised ZeroDivisionError"),
    ("rules-int", "stepwall_constraints", CT, lambda *_: 7, ["eval", BASE], REFUSE,
     "returned int where a list of Constraint"),
    ("rules-list-int", "stepwall_constraints", CT, lambda *_: [7], ["eval", BASE], REFUSE,
     "each item must be a Constraint"),
    ("relation-expr", "stepwall_constraints", CT,
     lambda s, *_: _rule(relation=s.params.parallel.tp)(s), ["eval", BASE], REFUSE,
     "constraint relation must be a sympy relation, not Parameter"),
    ("relation-bool", "stepwall_constraints", CT, lambda s, *_: _rule(relation=True)(s),
     ["eval", BASE], REFUSE, "not bool"),
    ("relation-false", "stepwall_constraints", CT, lambda s, *_: _rule(relation=sp.false)(s),
     ["eval", BASE], REFUSE, "can never hold"),
    ("relation-violated", "stepwall_constraints", CT, _rule(), ["eval", BASE], REFUSE,
     "parallel.tp: 8 ≤ 100 (m)"),
    ("relation-nan", "stepwall_constraints", CT,
     lambda s, *_: _rule(relation=s.params.parallel.tp > sp.nan)(s), ["eval", BASE], REFUSE,
     "plugin probe_relation_nan: stepwall_constraints raised"),
    ("rule-message-none", "stepwall_constraints", CT, lambda s, *_: _rule(message=None)(s),
     ["eval", BASE], REFUSE, "constraint message must be text"),
    ("rule-keys-text", "stepwall_constraints", CT, lambda s, *_: _rule(keys="parallel.tp")(s),
     ["eval", BASE], REFUSE, "constraint keys must be a tuple of spec keys"),
    ("rule-keys-none", "stepwall_constraints", CT, lambda s, *_: _rule(keys=None)(s),
     ["eval", BASE], REFUSE, "plugin probe_rule_keys_none: stepwall_constraints raised"),
    ("analyses-int", "stepwall_analyses", (), lambda: 5, ["plugins"], REFUSE,
     "stepwall_analyses returned int where a list of analysis"),
    ("analyses-raise", "stepwall_analyses", (), lambda: 1 / 0, ["derive", BASE, "--help"],
     REFUSE, "stepwall_analyses raised ZeroDivisionError"),
    ("analysis-options-int", "stepwall_analyses", (), _analysis(options=5),
     ["derive", BASE, "zz"], REFUSE, "its options is int 5, not a frozen attrs class"),
    ("analysis-options-plain", "stepwall_analyses", (), _analysis(options=NotAttrs),
     ["derive", BASE, "zz"], REFUSE, "not a frozen attrs class"),
    ("analysis-name-int", "stepwall_analyses", (), _analysis(name=5), ["plugins"], REFUSE,
     "declared analysis 5: its name must be a plain name"),
    ("analysis-name-space", "stepwall_analyses", (), _analysis(name="a b"), ["plugins"],
     REFUSE, "'a b': its name must be a plain name"),
    ("analysis-name-taken", "stepwall_analyses", (), _analysis(name="optimum"), ["plugins"],
     REFUSE, "analysis 'optimum' is already provided by plugin analyses"),
    ("analysis-run-int", "stepwall_analyses", (), _analysis(run=5), ["derive", BASE, "zz"],
     REFUSE, "its run is int 5, not a function"),
    ("analysis-doc-int", "stepwall_analyses", (), _analysis(doc=5), ["plugins"], REFUSE,
     "its doc is int 5, not str"),
    ("analysis-run-raise", "stepwall_analyses", (), _analysis(run=lambda m, o, c: 1 / 0),
     ["derive", BASE, "zz"], REFUSE, "analysis 'zz': run raised ZeroDivisionError"),
    ("analysis-run-none", "stepwall_analyses", (), _analysis(run=lambda m, o, c: None),
     ["derive", BASE, "zz"], REFUSE, "analysis 'zz' returned NoneType where a Derivation"),
    ("analysis-run-text", "stepwall_analyses", (), _analysis(run=lambda m, o, c: "x"),
     ["derive", BASE, "zz", "--json"], REFUSE, "returned str where a Derivation"),
    ("analysis-run-empty", "stepwall_analyses", (), _analysis(run=lambda m, o, c: []),
     ["derive", BASE, "zz"], REFUSE, "returned nothing where a Derivation"),
    ("formats-int", "stepwall_formats", (), lambda: 5, ["eval", BASE], REFUSE,
     "stepwall_formats returned int where a list of output format"),
    ("format-suffix-text", "stepwall_formats", (), _format(suffixes=".qq"), SWEEP, REFUSE,
     "its suffixes is str '.qq', not a tuple of names"),
    ("format-suffix-nodot", "stepwall_formats", (), _format(suffixes=("qq",)), SWEEP, REFUSE,
     "its suffix 'qq' is not a file suffix"),
    ("format-suffix-taken", "stepwall_formats", (), _format(suffixes=(".csv",)), SWEEP, REFUSE,
     "suffix '.csv' is already that of 'csv' (plugin formats)"),
    ("format-name-taken", "stepwall_formats", (), _format(name="csv"), SWEEP, REFUSE,
     "output format 'csv' is already provided by plugin formats"),
    ("format-write-int", "stepwall_formats", (), _format(write=5), SWEEP, REFUSE,
     "its write is int 5, not a function"),
    ("format-write-raise", "stepwall_formats", (), _format(write=lambda t, o: 1 / 0), SWEEP,
     REFUSE, "output format 'qq': write raised ZeroDivisionError"),
    ("format-name-int", "stepwall_formats", (), _format(name=5), SWEEP, REFUSE,
     "declared output format 5: its name must be a plain name"),
    ("blocks-text", "stepwall_report_blocks", (), lambda: "ab", ["plugins"], REFUSE,
     "returned str where a list of report block"),
    ("block-options-int", "stepwall_report_blocks", (),
     lambda: [BlockKind("bb", "d", 5, lambda r, o, a: [])], ["plugins"], REFUSE,
     "report block 'bb': its options is int 5"),
    ("block-name-int", "stepwall_report_blocks", (),
     lambda: [BlockKind(5, "d", Opts, lambda r, o, a: [])], ["plugins"], REFUSE,
     "declared report block 5: its name must be a plain name"),
    ("primitives-int", "stepwall_primitives", (), lambda: 5, ["plugins"], REFUSE,
     "stepwall_primitives returned int where a list of primitive"),
]  # fmt: skip


@pytest.mark.usefixtures("place")
@pytest.mark.parametrize(("name", "hook", "args", "fn", "argv", "expect", "fragment"),
                         HOOK_CASES, ids=[c[0] for c in HOOK_CASES])  # fmt: skip
def test_a_misbehaving_plugin(name, hook, args, fn, argv, expect, fragment) -> None:
    work = Path.cwd()
    kit = PluginKit()(_plugin("probe_" + name.replace("-", "_"), hook, args, fn))
    code, out, err = kit.cli(*argv)
    _check(code, out, err, expect, fragment, set(), work)


@pytest.mark.usefixtures("place")
def test_a_failed_declaration_is_asked_again() -> None:
    """A declaration that raised is not remembered as empty: the next command says it too."""
    kit = PluginKit()(_plugin("probe_twice", "stepwall_formats", (), lambda: 5))
    first, second = kit.cli("eval", BASE), kit.cli("plugins")
    assert first[0] == second[0] == REFUSE and first[2] == second[2], (first[2], second[2])


@attrs.frozen
class Fields:
    x: float = quantity("time", "a time", default=1.0)


# (id, what stepwall_spec_kinds returns, fragment of the PluginError)
KIND_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("kinds-raise", lambda: 1 / 0, "stepwall_spec_kinds raised ZeroDivisionError"),
    ("kinds-int", lambda: 5, "stepwall_spec_kinds returned int where a list of KindSpec"),
    ("kinds-text", lambda: "ab", "returned str where a list of KindSpec"),
    ("kinds-list-int", lambda: [5], "returned int where a KindSpec was expected"),
    ("fields-int", lambda: [KindSpec("hardware", "zz", 5)], "with fields 5 (expected"),
    ("fields-plain", lambda: [KindSpec("hardware", "zz", NotAttrs)], "a frozen attrs class"),
    ("section-int", lambda: [KindSpec(5, "zz", Fields)], "declared (5, 'zz')"),
    ("kind-int", lambda: [KindSpec("hardware", 5, Fields)], "declared ('hardware', 5)"),
    ("kind-taken", lambda: [KindSpec("hardware", "gpu", Fields)],
     "kind 'gpu' of section 'hardware' is already claimed by plugin gpu"),
    ("default-taken", lambda: [KindSpec("parallel", "zz", Fields, default=True)],
     "default of section 'parallel', which is already kind 'standard' of plugin parallelism"),
    ("extends-unknown", lambda: [KindSpec("hardware", "zz", Fields, extends=("hardware", "x"))],
     "which no plugin declares"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fn", "fragment"), KIND_CASES, ids=[c[0] for c in KIND_CASES])
def test_a_bad_kind_declaration_names_the_plugin(name, fn, fragment) -> None:
    plugin = "probe_" + name.replace("-", "_")
    with pytest.raises(PluginError) as caught:
        PluginKit()(_plugin(plugin, "stepwall_spec_kinds", (), fn))
    message = str(caught.value)
    assert message.startswith(f"plugin {plugin}: ") and "\n" not in message, message
    assert fragment in message, message


def test_an_unknown_dimension_of_a_field_says_which() -> None:
    with pytest.raises(PluginError, match=r"quantity\('s', \.\.\.\): unknown dimension"):
        quantity("s", "a time")


@pytest.mark.parametrize("default", ["abc", "1 s", True, [1]])
def test_a_field_default_that_is_no_number_is_refused(default: object) -> None:
    with pytest.raises(PluginError, match="is not a number"):
        quantity("time", "a time", default=default)


# ---------------------------------------------------------------- installed plugins

ENTRY_POINTS = {
    "exits": ("import sys\nsys.exit(3)\n", "cannot load entry point ep_exits: SystemExit(3)"),
    "nohooks": ("X = 5\n", "is a int with no @hookimpl function"),
    "gpu": ("from stepwall.plugin.hookspecs import hookimpl\n@hookimpl\n"
            "def stepwall_fixed_terms(scenario):\n    return []\n",
            "the name is a built-in plugin's"),
    "badargs": ("from stepwall.plugin.hookspecs import hookimpl\n@hookimpl\n"
                "def stepwall_fixed_terms(scenario, nonsense):\n    return []\n",
                "can not be found in the hookspec"),
}  # fmt: skip


def test_broken_installed_plugins_are_skipped_and_listed(tmp_path: Path) -> None:
    """An installed plugin whose import exits, that has no hook, takes a built-in's name or
    has a hook of the wrong arguments is skipped, listed in one line, and eval still works."""
    site = tmp_path / "site"
    site.mkdir()
    for name, (source, _) in ENTRY_POINTS.items():
        (site / f"ep_{name}.py").write_text(source)
    dist = site / "probe_eps-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-eps\nVersion: 1.0\n")
    lines = [f"{n} = ep_{n}" + (":X" if n == "nohooks" else "") for n in ENTRY_POINTS]
    (dist / "entry_points.txt").write_text("[stepwall]\n" + "\n".join(lines) + "\n")
    listed = run_cli("plugins", "--json", pythonpath=str(site))
    assert listed.returncode == 0, listed.stderr
    problems = {r["name"]: r["problem"] for r in json.loads(listed.stdout) if "problem" in r}
    for name, (_, fragment) in ENTRY_POINTS.items():
        assert fragment in problems[name] and "\n" not in problems[name], problems.get(name)
    ok = run_cli("eval", BASE, pythonpath=str(site))
    assert ok.returncode == 0 and "step time" in ok.stdout, ok.stderr


# ---------------------------------------------------------------- options given twice

TWICE_CASES: list[tuple[list[str], int, str]] = [
    (["eval", BASE, "--set", "parallel.tp=8", "--set", "parallel.tp=16"], REFUSE,
     "--set:parallel.tp: given twice"),
    (["eval", BASE, "--set", "parallel.tp=8", "--set", "parallel.tp=8"], REFUSE,
     "--set:parallel.tp: given twice"),
    (["eval", BASE, "--set", "parallel.tp=8", "--set", " parallel.tp =16"], REFUSE,
     "--set:parallel.tp: given twice"),
    (["eval", BASE, "--set", "parallel.tp=8", "--set", "parallel.ep=1"], OK, ""),
    (["eval", BASE, "--format", "csv", "--format", "json"], REFUSE,
     "--format: given twice (--format csv, then --format json)"),
    (["eval", BASE, "--json", "--format", "text"], REFUSE,
     "--format: given twice (--json, then --format text)"),
    (["eval", BASE, "--format=text", "--json"], REFUSE, "--json: given twice"),
    (["eval", BASE, "--json", "--json"], OK, ""),
    (["eval", BASE, "--json", "--format", "json"], OK, ""),
    (["eval", BASE, "--allow-infeasible", "--allow-infeasible"], OK, ""),
    (["derive", BASE, "wall", "parallel.tp", "--eps", "0.1", "--eps", "0.2"], REFUSE,
     "--eps: given twice"),
    (["derive", BASE, "optimum", "workload.concurrency", "--metric", "step_time_s",
      "--metric", "tokens_per_s"], REFUSE, "--metric: given twice"),
    (["derive", BASE, "--set", "parallel.tp=8", "--set", "parallel.tp=16", "elasticity"],
     REFUSE, "--set:parallel.tp: given twice"),
    (["derive", BASE, "--set", "parallel.tp=8", "elasticity", "--set", "parallel.tp=16"],
     REFUSE, "--set:parallel.tp: given twice"),
    (["derive", BASE, "--set", "parallel.tp=8", "elasticity", "--set", "parallel.ep=1"], OK, ""),
    ([*SEARCH, "--gpus", "8", "--batch", "1,8", "--spread", "nan"], REFUSE,
     "--spread: nan is not a fraction"),
    (["sweep", BASE, "--vary", "parallel.tp=8,16", "-o", "a.csv", "-o", "b.csv"], REFUSE,
     "-o: given twice (-o a.csv, then -o b.csv)"),
    (["sweep", BASE, "--vary", "parallel.tp=8,16", "--format", "csv", "--format", "json"],
     REFUSE, "--format: given twice"),
    (["sweep", BASE, "--vary", "parallel.tp=8,16", "--set", "workload.context=1000",
      "--set", "workload.context=2000"], REFUSE, "--set:workload.context: given twice"),
    (["expr", BASE, "--set", "parallel.tp=8", "--set", "parallel.tp=16"], REFUSE,
     "--set:parallel.tp: given twice"),
    ([*SEARCH, "--objective", "joules_per_token", "--objective", "step_time_s"], REFUSE,
     "--objective: given twice"),
    ([*SEARCH, "--gpus", "8", "--gpus", "16"], REFUSE, "--gpus: given twice"),
    ([*SEARCH, "--batch", "8", "--batch", "16"], REFUSE, "--batch: given twice"),
    ([*SEARCH, "--x", "tokens_per_s_per_user", "--x", "tokens_per_s"], REFUSE,
     "--x: given twice"),
    ([*SEARCH, "--isl", "1000", "--isl", "2000"], REFUSE, "--isl: given twice"),
    ([*SEARCH, "--hardware", "h200"], REFUSE, "--hardware: given twice"),
    ([*SEARCH, "--vary", "hardware.hbm_bandwidth=4TB/s", "--vary",
      "hardware.hbm_bandwidth=5TB/s"], REFUSE, "--vary:hardware.hbm_bandwidth: varied twice"),
    (["explore", BASE, "-o", "a.html", "-o", "b.html"], REFUSE, "-o: given twice"),
]  # fmt: skip


@pytest.mark.usefixtures("place")
@pytest.mark.parametrize(("argv", "expect", "fragment"), TWICE_CASES,
                         ids=[" ".join(c[0][2:]) for c in TWICE_CASES])  # fmt: skip
def test_an_option_given_twice(argv, expect, fragment, capsys) -> None:
    work = Path.cwd()
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, expect, fragment, set(), work)


@pytest.mark.usefixtures("place")
def test_a_cached_eval_refuses_two_formats_too(capsys) -> None:
    """``eval`` answered from the point cache reads its own arguments: two formats that
    disagree still go to argparse, which refuses them."""
    assert _outcome(["eval", BASE, "--json"], capsys)[0] == 0  # now cached
    code, out, err = _outcome(["eval", BASE, "--json", "--format", "text"], capsys)
    assert code == REFUSE and out == "" and "--format: given twice" in err, err


# ---------------------------------------------------------------- JSON stays JSON

JSON_CASES: list[list[str]] = [
    ["eval", BASE, "--json", "--allow-infeasible", "--set", "parallel.tp=1"],
    ["eval", BASE, "--json", "--allow-infeasible", "--set", "workload.context=1e12"],
    ["eval", BASE, "--json", "--set", "hardware.hbm_bandwidth=7..8 TB/s"],
    ["eval", BASE, "--json", "--allow-infeasible", "--set", "hardware.memory_capacity=1..275 GB"],
    ["derive", BASE, "wall", "parallel.tp", "--json", "--allow-infeasible",
     "--set", "parallel.tp=1"],
    ["derive", BASE, "elasticity", "--json", "--allow-infeasible", "--set", "parallel.tp=1"],
    ["derive", BASE, "tornado", "--json", "--set", "hardware.hbm_bandwidth=7..8 TB/s"],
    ["sweep", BASE, "--vary", "parallel.tp=1,8", "--format", "json"],
    ["sweep", BASE, "--vary", "parallel.tp=1,8", "--format", "json",
     "--metric", "usd_per_million_tokens"],
    ["plugins", "--json"],
]  # fmt: skip


def _strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"{token} in the JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.usefixtures("place")
@pytest.mark.parametrize("argv", JSON_CASES, ids=[" ".join(c[:2] + c[3:5]) for c in JSON_CASES])
def test_json_has_no_nan_or_infinity(argv, capsys) -> None:
    code, out, err = _outcome(argv, capsys)
    assert code in (0, 2) and "internal error" not in err, err
    if code == 0:
        assert isinstance(_strict(out), dict | list)


@pytest.mark.usefixtures("place")
def test_a_plugin_analysis_with_a_nan_value_prints_valid_json() -> None:
    def nan(model: Any, o: Any, context: Any) -> Derivation:
        return Derivation("zz", "x", float("nan"), None, "", "", "w", "numeric", scenario="")

    kit = PluginKit()(_plugin("probe_nan", "stepwall_analyses", (), _analysis(run=nan)))
    code, out, err = kit.cli("derive", BASE, "zz", "--json")
    assert code == 0, err
    assert _strict(out)["value"] is None


# ---------------------------------------------------------------- a plugin's report block


@attrs.frozen
class Text:
    text: str = option("what it says", default="x")


BLOCK_CASES: list[tuple[str, BlockKind, str]] = [
    ("render-raise", BlockKind("bb", "d", Text, lambda r, o, a: 1 / 0),
     "report block 'bb': render raised ZeroDivisionError"),
    ("render-none", BlockKind("bb", "d", Text, lambda r, o, a: None),
     "report block 'bb': render returned no list of Markdown lines"),
    ("render-numbers", BlockKind("bb", "d", Text, lambda r, o, a: [5]),
     "report block 'bb': render returned no list of Markdown lines"),
    ("prepare-raise", BlockKind("bb", "d", Text, lambda r, o, a: [],
                                prepare=lambda r, g, a: 1 / 0),
     "report block 'bb': prepare raised ZeroDivisionError"),
]  # fmt: skip


@pytest.mark.usefixtures("place")
@pytest.mark.parametrize(("name", "block", "fragment"), BLOCK_CASES,
                         ids=[c[0] for c in BLOCK_CASES])  # fmt: skip
@pytest.mark.parametrize("command", ["report", "check"])
def test_a_misbehaving_report_block(name, block, fragment, command, tmp_path) -> None:
    spec = tmp_path / "r.toml"
    spec.write_text(f'title = "t"\n[scenarios]\na = "{BASE}"\n[[block]]\nkind = "bb"\n')
    plugin = "probe_" + name.replace("-", "_")
    kit = PluginKit()(_plugin(plugin, "stepwall_report_blocks", (), lambda: [block]))
    code, out, err = kit.cli(command, str(spec))
    _check(code, out, err, REFUSE, f"plugin {plugin}: {fragment}", set(), Path.cwd())
