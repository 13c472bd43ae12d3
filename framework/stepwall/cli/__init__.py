"""The ``stepwall`` command line. Exit codes: 0 ok, 2 bad input, 130 interrupted, 1 a bug.

Commands take an explicit registry (`main(argv, registry)`); the derive subcommands and
their options, and the output formats, come from the registry's analyses and formats.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from stepwall.core.errors import SpecError, StepwallError
from stepwall.core.progress import ProgressBar, quiet_argument
from stepwall.core.terminal import reset_warnings, visible, warn
from stepwall.io.breakdown import render_breakdown

if TYPE_CHECKING:
    from stepwall.plugin.registry import Registry

EPILOG = """\
examples:
  stepwall eval k26-b300-tp8-ddtree                      # breakdown and metrics
  stepwall eval k26-b300-tp8-ddtree --set parallel.tp=16 --set cluster.nodes=2
  stepwall eval k26-b300-tp8-ddtree --json               # one JSON object
  stepwall expr k26-b300-tp8-ddtree --free parallel.tp   # closed form in N_tp
  stepwall derive k26-b300-tp8-ddtree wall parallel.tp   # the TP wall, A/(eps*B)
  stepwall derive k26-b300-tp8-ddtree elasticity         # which lever matters
  stepwall sweep k26-b300-tp8-ddtree --vary parallel.tp=8,16,36,72
  stepwall report k26-cluster-scaling -o out/k26         # the shipped analysis
  stepwall check specs/hardware/b300.toml                # validate only
  stepwall plugins                                       # what is installed

A SCENARIO is a catalog name (see specs/scenarios/) or a path to a .toml file.
--set KEY=VALUE takes TOML values with units: --set hardware.hbm_bandwidth='"9 TB/s"'
(bare text works too: --set hardware.hbm_bandwidth=9TB/s).
"""

Command = Callable[[argparse.Namespace, "Registry"], int]
Setup = Callable[[argparse.ArgumentParser, "Registry"], None]
COMMANDS: dict[str, tuple[Command, Setup, str, str]] = {}


def command(name: str, help_: str, example: str, setup: Setup) -> Callable[[Command], Command]:
    def wrap(fn: Command) -> Command:
        COMMANDS[name] = (fn, setup, help_, example)
        return fn

    return wrap


# ---------------------------------------------------------------- shared arguments


def _set_arg(p: argparse.ArgumentParser, help_: str) -> None:
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=help_)  # fmt: skip


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO", help="catalog name or path to a .toml")
    _set_arg(p, "override a spec value, e.g. parallel.tp=16 (repeatable)")


def _feasibility_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-infeasible",
        action="store_true",
        help="evaluate even where a constraint does not hold (memory, divisibility, …); the "
        "result is marked infeasible",
    )


def _format_args(p: argparse.ArgumentParser, registry: Registry, what: str) -> None:
    names = sorted(registry.formats)
    p.add_argument("--format", choices=names, default=None,
                   help=f"how to print {what} (default text)")  # fmt: skip
    p.add_argument("--json", action="store_const", const="json", dest="format",
                   help="the same as --format json: one JSON document")  # fmt: skip


def _cache_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true",
                   help="build the model afresh instead of loading its compiled form from the "
                   "cache (~/.cache/stepwall; STEPWALL_NO_CACHE=1 does the same)")  # fmt: skip


def _load(ns: argparse.Namespace, registry: Registry, ref: str | None = None) -> Any:
    from stepwall.model.compose import build_model

    warn(registry.slow_imports())
    model = build_model(ref or ns.scenario, ns.sets, registry)
    warn(model.scenario.warnings)
    return model


def _emit(registry: Registry, name: str | None, obj: Any) -> None:
    """Write a result (a Table or a document) to stdout in a format."""
    from stepwall.io.formats import Table

    fmt = registry.formats[name or "text"]
    if fmt.binary:
        raise SpecError("--format", fmt.name, "writes a file, not a terminal", "-o FILE")
    if not isinstance(obj, Table) and not fmt.documents:
        raise SpecError("--format", fmt.name, "writes tables; this result is a document",
                        "--format text or json")  # fmt: skip
    fmt.write(obj, sys.stdout)


# ---------------------------------------------------------------- eval


def _eval_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    _scenario_args(p)
    _format_args(p, registry, "the result (csv and markdown: the terms)")
    _feasibility_arg(p)
    _cache_arg(p)


@command("eval", "evaluate a scenario: step-time breakdown and metrics",
         "stepwall eval k26-b300-tp8-ddtree --set workload.context=32768", _eval_setup)  # fmt: skip
def cmd_eval(ns: argparse.Namespace, registry: Registry) -> int:
    from stepwall.model.compose import compile_scenario, summary
    from stepwall.spec.validation import load_scenario

    warn(registry.slow_imports())
    scenario = load_scenario(ns.scenario, registry.kinds, ns.sets)
    warn(scenario.warnings)
    numeric = compile_scenario(scenario, registry, cache=not ns.no_cache, scalar=True)
    ev = numeric.evaluate({s.name: v for s, v in scenario.values.items()})
    violations = []
    if not ev["feasible"]:  # explain it: that needs the symbolic model
        from stepwall.model.compose import build_model

        model = build_model(scenario, registry=registry)
        if not ns.allow_infeasible:
            model.check()
        violations = model.violations(ev)
    doc = summary(scenario, numeric, violations, ev)
    if scenario.ranges:  # ranged values: each metric and term as [low, high] (docs/ranges.md)
        from stepwall.analyses import ranges
        from stepwall.model.compose import build_model

        model = build_model(scenario, registry=registry)
        if not ns.allow_infeasible:
            ranges.check_box(model, ranges.inputs(model, registry))
        ranges.annotate(doc, model, registry)
    elif not violations and not ns.no_cache and registry.is_default:
        from stepwall.numeric import point_cache

        point_cache.remember(ns.scenario, ns.sets, scenario, numeric)
    if ns.format in (None, "text"):
        print(render_breakdown(doc) + (ranges.render(doc) if scenario.ranges else ""))
    elif ns.format == "json":
        _emit(registry, "json", doc)
    else:
        _emit(registry, ns.format, _terms_table(doc))
    return 0


def _terms_table(doc: dict[str, Any]) -> Any:
    from stepwall.io.formats import Column, Table

    t = doc["step_time_s"]
    cols = (Column("term", kind="text"), Column("group", kind="text"),
            Column("plugin", kind="text"), Column("time", "s"), Column("share", "%"))  # fmt: skip
    rows = [[x["name"], x["group"], x["plugin"], x["seconds"], 100 * x["seconds"] / t]
            for x in doc["terms"]]  # fmt: skip
    return Table.of_rows(cols, rows, document=doc)


# ---------------------------------------------------------------- expr


def _expr_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    _scenario_args(p)
    p.add_argument("--free", action="append", default=[], metavar="KEY",
                   help="keep this parameter symbolic, e.g. parallel.tp (repeatable)")  # fmt: skip
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of text")
    _feasibility_arg(p)


@command("expr", "print the closed-form step time with chosen parameters left symbolic",
         "stepwall expr k26-b300-tp8-ddtree --free parallel.tp --free hardware.hbm_bandwidth",
         _expr_setup)  # fmt: skip
def cmd_expr(ns: argparse.Namespace, registry: Registry) -> int:
    import sympy as sp

    from stepwall.analyses.common import check_key
    from stepwall.core.symbols import latex_names

    model = _load(ns, registry)
    if not ns.allow_infeasible:
        model.check()
    free = [model.parameter(key, "--free") for key in ns.free]
    for sym in free:
        check_key(model, sym, "--free")  # its value decides the terms: it cannot stay symbolic
    expr = model.substituted(model.step_time, free)
    if ns.latex:
        print(sp.latex(expr, symbol_names=latex_names([expr])))
    else:
        print(f"t_step = {expr}")
    return 0


# ---------------------------------------------------------------- derive


def _derive_common(p: argparse.ArgumentParser, registry: Registry, after: bool) -> None:
    """Options every analysis takes; given after the analysis's name too."""
    p.add_argument("--set", dest="sets_after" if after else "sets", action="append",
                   default=argparse.SUPPRESS if after else [], metavar="KEY=VALUE",
                   help="override a spec value, e.g. parallel.tp=16 (repeatable)")  # fmt: skip
    names = sorted(registry.formats)
    keep: dict[str, Any] = {"default": argparse.SUPPRESS} if after else {"default": None}
    p.add_argument("--format", choices=names, help="how to print the results (default text)",
                   **keep)  # fmt: skip
    p.add_argument("--json", action="store_const", const="json", dest="format",
                   help="the same as --format json: one JSON document", **keep)  # fmt: skip
    p.add_argument("--allow-infeasible", action="store_true",
                   help="derive even at a point where a constraint does not hold",
                   **(keep if after else {}))  # fmt: skip


def _derive_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    from stepwall.core.options import add_arguments

    p.add_argument("scenario", metavar="SCENARIO", help="catalog name or path to a .toml")
    _derive_common(p, registry, after=False)
    sub = p.add_subparsers(dest="what", metavar="ANALYSIS", parser_class=_Parser, required=True)
    for name, analysis in sorted(registry.analyses.items()):
        sp_ = sub.add_parser(name, help=analysis.doc, description=f"{analysis.doc}.",
                             formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        add_arguments(sp_, analysis.options)
        _derive_common(sp_, registry, after=True)


@command("derive", "derive a wall, optimum, crossover, elasticities, regimes or the EP plateau "
         "in closed form (analyses from plugins too: stepwall derive --help lists them)",
         "stepwall derive k26-b300-tp8-ddtree wall parallel.tp --eps 0.15",
         _derive_setup)  # fmt: skip
def cmd_derive(ns: argparse.Namespace, registry: Registry) -> int:
    import attrs

    from stepwall.analyses.base import Context, run
    from stepwall.core.options import from_namespace

    analysis = registry.analyses[ns.what]
    before = {_set_key(s) for s in ns.sets}
    twice = [k for k in map(_set_key, getattr(ns, "sets_after", [])) if k and k in before]
    if twice:  # before and after ANALYSIS: two parsers, one rule
        raise SpecError("--set", twice[0], "given twice", "each key set once")
    ns.sets = [*ns.sets, *getattr(ns, "sets_after", [])]
    model = _load(ns, registry)
    if analysis.at_point and not ns.allow_infeasible:
        model.check()  # a sensitivity at an impossible point means nothing
    given = from_namespace(ns, analysis.options)
    positional = [f.name for f in attrs.fields(analysis.options)
                  if f.metadata.get("positional") and f.default is attrs.NOTHING]  # fmt: skip
    for name in positional:
        if given.get(name) is None:
            raise SpecError("derive", ns.what, f"needs a {name.upper()}", "e.g. parallel.tp")
    context = Context(registry, lambda ref, _name: _load(ns, registry, ref), ns.allow_infeasible)
    results = run(analysis, model, given, context, "derive", "--")
    if not analysis.many and model.scenario.ranges:  # a root over the ranges' box: an interval
        from stepwall.analyses.ranges import root_interval

        results = [root_interval(analysis, model, given, context, results[0], "derive", "--")]
    if ns.format in (None, "text"):
        print(visible(analysis.text(results), lines=True))
        return 0
    if ns.format == "json":
        doc: Any = (
            {"kind": ns.what, "scenario": model.scenario.label,
             "results": [d.to_json() for d in results]}
            if analysis.many else results[0].to_json()
        )  # fmt: skip
        _emit(registry, "json", doc)
        return 0
    from stepwall.io.formats import Column, Table

    head, rows = analysis.table(results)
    kinds = ["text" if any(isinstance(r[i], str) or r[i] is None for r in rows) else "float"
             for i in range(len(head))]  # fmt: skip
    _emit(registry, ns.format, Table.of_rows([Column(h, kind=k) for h, k in zip(head, kinds,
                                              strict=True)], rows))  # fmt: skip
    return 0


# ---------------------------------------------------------------- check


def _check_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("spec", metavar="SPEC", help="a scenario, or a catalog file of any kind")


@command("check", "validate a spec file (model, hardware, cluster, scenario or report); writes "
         "nothing", "stepwall check specs/scenarios/k26-b300-tp8-ddtree.toml",
         _check_setup)  # fmt: skip
def cmd_check(ns: argparse.Namespace, registry: Registry) -> int:
    from pathlib import Path

    from stepwall.model.compose import build_model, check_entry
    from stepwall.spec.loader import read_toml
    from stepwall.spec.validation import check_file

    path = Path(ns.spec)
    if path.is_file() and {"scenarios", "title"} <= set(read_toml(path)):
        from stepwall.apps.report.render import Report

        Report(path, registry=registry).render()  # a report is valid when every block renders
        print(visible(f"ok: {path} is a valid report"))
        return 0
    message = check_file(ns.spec, registry.kinds)
    if "valid scenario" in message:
        model = build_model(path if path.is_file() else ns.spec, registry=registry)
        warn(model.scenario.warnings)
        model.check()
    elif path.is_file():
        warn(check_entry(path, message.rsplit(" ", 2)[-2], registry))
    print(visible(message, lines=True))
    return 0


# ---------------------------------------------------------------- plugins


def _plugins_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")


@command("plugins", "list plugins, their versions, kinds, analyses, blocks and formats, hooks, "
         "and import times", "stepwall plugins --json", _plugins_setup)  # fmt: skip
def cmd_plugins(ns: argparse.Namespace, registry: Registry) -> int:
    import json

    rows = registry.describe()
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        secs = r.get("import_seconds")
        took = f"  (imported in {secs * 1e3:.0f} ms)" if secs is not None else ""
        print(f"{r['name']} {r['version']}{took}")
        if r["kinds"]:
            print(f"  kinds: {', '.join(r['kinds'])}")
        for what in ("analyses", "blocks", "formats"):
            if r.get(what):
                print(f"  {what}: {', '.join(r[what])}")
        print(f"  hooks: {', '.join(r['hooks'])}")
        if r.get("problem"):
            print(f"  {r['problem']}")
    return 0


# ---------------------------------------------------------------- sweep


def _sweep_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    _scenario_args(p)
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        required=True,
        metavar="KEY=VALUES",
        help="values of a numeric key: a list (parallel.tp=8,16,36,72; units allowed: "
        "hardware.hbm_bandwidth=8TB/s,9TB/s) or a range: 1..256 (step 1), 8..72:8 (step), "
        "1..256:x2 (factor), 1..4096:20log or 0.5..1:6lin (points), 7TB/s..9TB/s:0.5TB/s "
        "(repeatable; the grid is the cartesian product)",
    )
    p.add_argument("--metric", action="append", default=[], metavar="NAME",
                   help="a metric, group.<group> or term.<term> (repeatable; default: step time "
                   "and throughputs)")  # fmt: skip
    p.add_argument(
        "--feasible-only",
        action="store_true",
        help="leave out points where a constraint does not hold (every row has a feasible "
        "column and names the first violated constraint otherwise)",
    )
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE (its suffix picks the format: .csv .json .md .parquet) "
                   "or - for stdout; the grid streams in chunks")  # fmt: skip
    p.add_argument("--format", choices=sorted(registry.formats), default=None,
                   help="the output format (default: text on a terminal, else by -o's suffix; "
                   "csv for -o -)")  # fmt: skip
    _cache_arg(p)
    quiet_argument(p)


TEXT_LIMIT = 100_000  # a text table on a terminal; larger grids go to a file


@command("sweep", "evaluate a scenario over a grid of parameter values, vectorized through one "
         "compiled model", "stepwall sweep k26-b300-tp8-ddtree --vary parallel.tp=8,16,36,72 "
         "--vary hardware.hbm_bandwidth=8TB/s,9TB/s -o tp.csv", _sweep_setup)  # fmt: skip
def cmd_sweep(ns: argparse.Namespace, registry: Registry) -> int:
    from stepwall.apps import sweep
    from stepwall.io import output
    from stepwall.io.formats import format_for

    target = None
    if ns.output is not None and ns.output != "-":
        target = output.file_target(ns.output)
        fmt = format_for(registry.formats, ns.format, ns.output)
    else:
        fmt = registry.formats[ns.format or ("csv" if ns.output == "-" else "text")]
        if fmt.binary:
            raise SpecError("--format", fmt.name, "writes a file, not a terminal", "-o FILE")
    vary = [sweep.parse_vary(v) for v in ns.vary]
    plan = sweep.plan_sweep(ns.scenario, vary, ns.sets, ns.metric or sweep.DEFAULT_METRICS,
                            registry=registry, cache=not ns.no_cache)  # fmt: skip
    warn(plan.warnings)
    if target is None and fmt.name == "text" and plan.total > TEXT_LIMIT:
        raise SpecError("sweep", "--vary", f"{plan.total:,} points are too many for a text table",
                        f"at most {TEXT_LIMIT:,}, or -o FILE / --format csv")  # fmt: skip
    table = plan.table(ns.feasible_only, progress=ProgressBar(quiet=ns.quiet))
    if target is None:
        fmt.write(table, sys.stdout)
        return 0
    counts = output.write_stream(target, fmt, table)
    output.announce(target, f"wrote {target} ({counts} rows)")
    return 0


# ---------------------------------------------------------------- search


def _search_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    from stepwall.apps.search import add_arguments

    add_arguments(p)


@command("search", "search layouts on one or more hardware options: Pareto frontier of "
         "tokens/s per GPU vs per user, best configuration at each target, energy and cost",
         "stepwall search deepseek-v3-fp8 --hardware h200 --cluster hgx-h200-ib --gpus 8,16",
         _search_setup)  # fmt: skip
def cmd_search(ns: argparse.Namespace, registry: Registry) -> int:
    from stepwall.apps.search import run_cli

    return run_cli(ns, registry)


# ---------------------------------------------------------------- explore

EXPLORE_EPILOG = """\
The page is one HTML file with nothing to fetch: open it from disk, offline. The model's
metrics, term times and constraints run in it as JavaScript compiled from the same closed form
`stepwall eval` evaluates (same numbers); each control updates the metrics, the breakdown by
term group, the memory fit, the failed constraints and a chart with the wall (as `stepwall
derive SCENARIO wall KEY` defines it) or the optimum marked. docs/explorer.md has the details.

Controls (--free): by default the whole-number parallel degrees, workload.concurrency and the
--top parameters with the largest elasticity of step time (`stepwall derive SCENARIO
elasticity` ranks them; `stepwall eval SCENARIO --json` lists every key under "parameters").
Structural keys (those that decide which terms exist, e.g. decoding.accepted_tokens where a
plugin reads it) cannot be controls: fix them with --set. The chart starts on --chart, else
parallel.tp, else parallel.ep, else the first control; the page switches metric and key.

examples:
  stepwall explore k26-b300-tp8-ddtree -o k26.html
  stepwall explore k26-b300-tp8-ddtree --free parallel.tp,hardware.hbm_bandwidth -o x.html
  stepwall explore k26-b300-tp8-ddtree --top 0 -o layout.html   # degrees and users only
  stepwall explore k26-gb300nvl72-ep72 --set workload.concurrency=64 --chart parallel.ep
"""


def _explore_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.epilog = EXPLORE_EPILOG
    p.description = (
        "Write an interactive explorer of a scenario: one self-contained HTML page with\n"
        "sliders for chosen parameters, the metrics, breakdown, constraints and a chart, all\n"
        "computed in the page from the compiled closed form."
    )
    _scenario_args(p)
    p.add_argument("--free", action="append", default=[], metavar="KEY,KEY,…",
                   help="the parameters given controls, comma-separated (repeatable; "
                   "default: parallel degrees, workload.concurrency and the --top most "
                   "elastic)")  # fmt: skip
    p.add_argument("--top", type=int, default=6, metavar="N",
                   help="how many of the most elastic parameters the default adds "
                   "(default 6)")  # fmt: skip
    p.add_argument("--chart", default="", metavar="KEY",
                   help="the control on the chart's x axis at first (default parallel.tp, "
                   "else parallel.ep, else the first control)")  # fmt: skip
    p.add_argument("--eps", type=float, default=0.15, metavar="E",
                   help="the wall's tolerance ε: t(N)/t(∞) − 1 < ε (default 0.15)")  # fmt: skip
    p.add_argument("-o", "--output", metavar="FILE.html",
                   help="where to write the page (default explorer-SCENARIO.html)")  # fmt: skip


@command("explore", "write an interactive HTML explorer of a scenario (self-contained, offline): "
         "sliders, live metrics, constraints, wall", "stepwall explore k26-b300-tp8-ddtree -o "
         "k26.html", _explore_setup)  # fmt: skip
def cmd_explore(ns: argparse.Namespace, registry: Registry) -> int:
    import shlex

    from stepwall.apps.explore import explorer_html
    from stepwall.io import output

    if ns.top < 0:
        raise SpecError("--top", str(ns.top), "is negative", "0 or more")
    free = [k.strip() for item in ns.free for k in item.split(",")]
    if "" in free:
        raise SpecError("--free", "", "names an empty key", "KEY,KEY,… such as parallel.tp")
    if ns.output is not None:
        target = output.file_target(ns.output, suffixes=(".html", ".htm"))
    model = _load(ns, registry)
    if ns.output is None:
        target = output.file_target(f"explorer-{model.scenario.name}.html")
    cmd = ["stepwall", "explore", ns.scenario, *(a for s in ns.sets for a in ("--set", s))]
    if free:
        cmd += ["--free", ",".join(free)]
    for flag, value, default in (("--top", ns.top, 6), ("--chart", ns.chart, ""),
                                 ("--eps", ns.eps, 0.15)):  # fmt: skip
        if value != default:
            cmd += [flag, str(value)]
    cmd += ["-o", str(target)]
    page = explorer_html(model, free or None, registry=registry, command=shlex.join(cmd),
                         top=ns.top, eps=ns.eps, chart_key=ns.chart)  # fmt: skip
    output.write_file(target, page)
    output.announce(target, f"wrote {target} ({len(page) / 1024:.0f} KB); open it in a browser "
                    "(it works offline)")  # fmt: skip
    return 0


# ---------------------------------------------------------------- report


def _report_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("report", metavar="REPORT", help="catalog name (specs/reports/) or a .toml path")
    _set_arg(p, "override a spec value in every scenario of the report (repeatable)")
    p.add_argument("-o", "--output", metavar="DIR|FILE.md",
                   help="output folder (default: out/NAME); a FILE.md puts the Markdown there "
                   "and its plots and tables in the folder FILE/ beside it")  # fmt: skip


@command("report", "render a report spec to REPORT.md, SVG plots and CSV tables "
         "(byte-reproducible)", "stepwall report k26-cluster-scaling -o "
         "docs/reports/k26-cluster-scaling", _report_setup)  # fmt: skip
def cmd_report(ns: argparse.Namespace, registry: Registry) -> int:
    from pathlib import Path

    from stepwall.apps.report import render as report
    from stepwall.io import output

    page = ns.output is not None and ns.output.endswith(".md")
    if page:  # the page, and its files in a folder beside it
        output.file_target(ns.output, suffixes=(".md",))
        output.folder_target(str(Path(ns.output).with_suffix("")), page=Path(ns.output))
    elif ns.output is not None:
        output.folder_target(ns.output)
    rep = report.Report(ns.report, ns.sets, registry=registry)
    if page:
        files = report.write_page(rep, Path(ns.output))
        output.announce(Path(ns.output), f"wrote {ns.output} and {len(files) - 1} files to "
                        f"{Path(ns.output).with_suffix('')}")  # fmt: skip
        return 0
    out = Path(ns.output) if ns.output is not None else report.default_output(rep)
    output.folder_target(str(out))
    files = report.write(rep, out)
    print(f"wrote {len(files)} files to {out}")
    return 0


# ---------------------------------------------------------------- calibrate

CALIBRATE_EPILOG = """\
Each --data file is a CSV table of measurements, one row per call of a primitive:

  primitive,m,n,k,weight_bits [bit],precision,time [us],source
  gemm,1,7168,7168,16,bf16,19.4,my H200 bench 2026-07-01
  memory_copy,...              (stepwall calibrate --primitives lists each primitive's
                                columns, the fields it fits and its law)

Sizes carry their unit in the header (bytes [GB], weight_bits [bit]; dimensions are checked),
the measured time is required (time [us], time [ms], ...); other columns are ignored. Rows
are priced by the laws the model itself uses, and the spec fields those laws read (those the
primitives name; --fit to choose) are fitted by bounded least squares on log(model/measured),
starting from the spec's values. The output shows the residual per primitive group and each
field with a 95% confidence interval and flags (on a bound, not identifiable: kept at the
spec value, too few points). -o writes the spec back with comments and layout kept, each
fitted value replaced and its sources entry naming the data's SHA-256, points and residual.

--check re-fits every shipped calibration (specs/calibration/*.toml: spec = "b200",
data = ["b200-gemm.csv", ...], optional fit = [...]) and exits 1 with a line per committed
value more than 0.1% off its fit; exit 0 when all agree. Bad data is one line and exit 2.

examples:
  stepwall calibrate --primitives                       # the primitives and their columns
  stepwall calibrate b200 --data gemm.csv --data copy.csv            # fit and show
  stepwall calibrate b200 --data gemm.csv -o my-b200.toml --plot fit.svg
  stepwall calibrate hgx-b200-ib --data nccl.csv --fit hop_latency,bus_bandwidth --json
  stepwall calibrate --check                            # the shipped calibrations
docs/calibration.md has the format, each primitive's law and a walk-through for a new GPU.
"""


def _calibrate_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.epilog = CALIBRATE_EPILOG
    p.description = (
        "Fit a hardware or cluster spec's efficiencies, n½, floors, latencies and bandwidths "
        "to microbenchmark tables, with the laws the model prices that work by."
    )
    p.add_argument("spec", nargs="*", metavar="SPEC",
                   help="a hardware or cluster catalog name or .toml path (with --check: "
                   "manifests or folders of them, default specs/calibration/)")  # fmt: skip
    p.add_argument("--data", action="append", default=[], metavar="FILE.csv",
                   help="a CSV of measurements (repeatable)")  # fmt: skip
    p.add_argument("-o", "--output", metavar="OUT.toml",
                   help="write the calibrated spec here (default: write nothing)")  # fmt: skip
    p.add_argument("--fit", action="append", default=[], metavar="FIELD,…",
                   help="fit only these fields, e.g. hbm_efficiency,bf16.efficiency "
                   "(default: every field the data's primitives identify)")  # fmt: skip
    p.add_argument("--plot", metavar="FILE.svg",
                   help="write the measured points against the fitted law, per group "
                   "(SVG)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--check", action="store_true",
                   help="re-fit the shipped calibrations; exit 1 if a committed value drifted "
                   "by more than 0.1%%")  # fmt: skip
    p.add_argument("--primitives", action="store_true",
                   help="list the primitives (columns, fields, law); with SPEC, each law as a "
                   "formula over its fields")  # fmt: skip


@command("calibrate", "fit a hardware or cluster spec to microbenchmark tables (CSV) with the "
         "model's own laws; --check re-fits the shipped calibrations",
         "stepwall calibrate b200 --data gemm.csv -o my-b200.toml --plot fit.svg",
         _calibrate_setup)  # fmt: skip
def cmd_calibrate(ns: argparse.Namespace, registry: Registry) -> int:
    from stepwall.apps.calibrate import run_cli

    return run_cli(ns, registry, warn)


# ---------------------------------------------------------------- validate

VALIDATE_EPILOG = """\
A validation table is a TOML file of [[row]] tables, each a published end-to-end
measurement: the scenario and --set overrides that describe the configuration, the metric,
the measured value with its unit, the class of the regime it tests and the source:

  [[row]]
  id = "trtllm-b200-dsr1-fp4-maxtput-896"
  class = "dp_ep_node"
  scenario = "dsr1-fp4-b200-adp-ep8"
  set = ["workload.concurrency=896"]
  metric = "tokens_per_s_per_gpu"
  measured = "5393 tokens/s"        # divide_by = 8 for a per-node figure
  source = "TensorRT-LLM: best performance practice on DeepSeek-R1"
  url = "https://github.com/NVIDIA/TensorRT-LLM/..."

The error of a row is predicted/measured - 1. The rows are never fitted (hardware and
engine values come from primitive microbenchmarks: stepwall calibrate), so these errors are
out of sample. --max-median and --max-worst make it a gate (exit 1 when exceeded). A row
whose configuration breaks a constraint is listed as infeasible, with no error: it is left out
of the median and the worst (a line says how many), and --max-worst fails on it.
A run takes at most 1,000 rows (each builds a model), each table once.

examples:
  stepwall validate                                   # the shipped tables
  stepwall validate --class tp_batch1 --json          # one class, as JSON
  stepwall validate my-measurements.toml --max-median 0.15 --max-worst 0.40
docs/validation.md has the shipped table, the plot and what dominates each class.
"""


def _validate_setup(p: argparse.ArgumentParser, registry: Registry) -> None:
    from stepwall.apps.validate import CLASSES

    p.epilog = VALIDATE_EPILOG
    p.add_argument("tables", nargs="*", metavar="TABLE",
                   help="validation tables (.toml); default: specs/validation/*.toml")  # fmt: skip
    p.add_argument("--class", dest="classes", action="append", default=[], choices=sorted(CLASSES),
                   help="only rows of this class (repeatable)")  # fmt: skip
    p.add_argument("--row", dest="ids", action="append", default=[], metavar="ID",
                   help="only this row (repeatable)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-median", type=_error_bound, metavar="FRACTION",
                   help="exit 1 if the median |error| exceeds this (0.15 or 15%%)")  # fmt: skip
    p.add_argument("--max-worst", type=_error_bound, metavar="FRACTION",
                   help="exit 1 if any |error| exceeds this (0.40 or 40%%) or a row is "
                   "infeasible")  # fmt: skip
    quiet_argument(p)


def _error_bound(text: str) -> float:
    """A relative error bound: a fraction in [0, 1] (0.15) or a percentage (15%, 250%). A bare
    number above 1 is refused: '15' is far more often meant as 15% than as 1500%."""
    import math

    percent = text.endswith("%")
    try:
        value = float(text[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number (expected 0.15 or 15%)"
        ) from None
    if not math.isfinite(value) or value < 0 or (value > 1 and not percent):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a fraction in [0, 1] or a percentage (expected 0.15 or 15%)"
        )
    return value


@command("validate", "predict published end-to-end serving measurements and print each "
         "row's error, the median and the worst", "stepwall validate --class wide_ep",
         _validate_setup)  # fmt: skip
def cmd_validate(ns: argparse.Namespace, registry: Registry) -> int:
    from pathlib import Path

    from stepwall.apps import validate

    paths = [Path(t) for t in ns.tables] or validate.default_tables()
    for p in paths:
        if not p.is_file():
            what = ("is a folder" if p.is_dir() else
                    "is not a regular file" if p.exists() else "not found")  # fmt: skip
            raise SpecError(str(p), "", what, "a validation table (.toml)")
        if [q.resolve() for q in paths].count(p.resolve()) > 1:
            raise SpecError(str(p), "", "is given twice", "each table once")
    rows = validate.load_rows(paths)  # every table has rows (or is refused)
    known = {r.spec.id for r in rows}
    for i in ns.ids:
        if i not in known:
            from stepwall.core.errors import did_you_mean

            raise SpecError("--row", i, f"no such row{did_you_mean(i, sorted(known))}",
                            "a row id of the tables")  # fmt: skip
    rows = [r for r in rows if (not ns.classes or r.spec.row_class in ns.classes)
            and (not ns.ids or r.spec.id in ns.ids)]  # fmt: skip
    if not rows:  # --class, or --class with --row
        also = f" among --row {', '.join(ns.ids)}" if ns.ids else ""
        raise SpecError("--class", ",".join(ns.classes), f"selects no rows{also}",
                        "a class that the tables (and the rows) have")  # fmt: skip
    progress = ProgressBar(what="rows", quiet=ns.quiet)
    results = validate.predict(rows, registry, progress)
    if ns.json:
        _emit(registry, "json", validate.document(results))  # infinite errors as null
    else:
        sys.stdout.write(visible(validate.text(results), lines=True))
    s = validate.summary(results)  # NaN where no row is feasible: that fails a gate too
    failed = (ns.max_median is not None and not s["median_abs_error"] <= ns.max_median) or (
        ns.max_worst is not None and (s["infeasible"] or not s["worst_abs_error"] <= ns.max_worst)
    )
    return 1 if failed else 0


# ---------------------------------------------------------------- the parser


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error said in one line (and exit code 2) like every other, an
    option of one value given twice with different values refused (argparse would keep the
    last silently), and a key given twice with ``--set`` refused likewise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: dict[str, tuple[str, Any]] = {}  # dest (or --set KEY) -> (as shown, value)
        for name in (None, "store", "store_const", "store_true", "store_false", "append"):
            base = self._registry_get("action", name, name)
            self.register("action", name, type(f"Once{base.__name__}", (_Once, base), {}))

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self.given = {}  # each parse starts afresh
        return super().parse_known_args(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"stepwall: error: {message} (see {self.prog} --help)\n")


class _Once(argparse.Action):
    """Mixed into argparse's actions by `_Parser`: refuse what a repeat would drop."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: Any, option_string: str | None = None,
    ) -> None:  # fmt: skip
        given: dict[str, tuple[str, Any]] = getattr(parser, "given", {})
        if option_string is None:
            pass
        elif option_string == "--set" and isinstance(values, str) and _set_key(values):
            key = _set_key(values)
            if f"--set {key}" in given:
                raise SpecError("--set", key, "given twice", "each key set once")
            given[f"--set {key}"] = ("--set", values)
        elif not isinstance(self, argparse._AppendAction):
            flag = self.const is not None and not values  # --json, --allow-infeasible
            value = self.const if flag else values
            shown = option_string if flag else f"{option_string} {value}"
            first = given.setdefault(self.dest, (shown, value))
            if first[0] != shown and first[1] != value:  # as written or as read
                raise SpecError(option_string, "", f"given twice ({first[0]}, then {shown})",
                                "the option once")  # fmt: skip
        super().__call__(parser, namespace, values, option_string)


def _set_key(assignment: str) -> str:
    """The key of a ``--set KEY=VALUE`` ("" when it is no assignment: refused elsewhere)."""
    return assignment.split("=", 1)[0].strip() if "=" in assignment else ""


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("stepwall")
    except metadata.PackageNotFoundError:
        return "unknown"


def _quiet_stdout() -> None:
    """After a closed pipe (``stepwall … | head``), send what is left of stdout nowhere so
    that Python's exit flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def parser(registry: Registry, only: str | None = None) -> argparse.ArgumentParser:
    """The command-line parser; with ``only``, the other commands get their help line but
    not their arguments (building ``derive``'s means importing every analysis)."""
    p = _Parser(
        prog="stepwall",
        description="Closed-form, unit-checked step-time models for distributed LLM "
        "inference, composed from TOML specs by plugins.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"stepwall {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (_, setup, help_, example) in COMMANDS.items():
        sp_ = sub.add_parser(
            name,
            help=help_,
            description=f"{help_}.",
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if only is None or only == name:
            setup(sp_, registry)
    return p


def main(argv: Sequence[str] | None = None, registry: Registry | None = None) -> int:
    reset_warnings()  # each run warns about each value once
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        named = next((a for a in args if not a.startswith("-")), None)
        if "--version" in args[: args.index(named) if named is not None else len(args)]:
            print(f"stepwall {_version()}")  # stepwall's own version: no plugin is loaded
            return 0
        if registry is None and args[:1] == ["eval"]:  # an unchanged eval: from the cache
            from stepwall.cli import cached_eval

            code = cached_eval.run(args[1:])
            if code is not None:
                return code
        if registry is None:
            from stepwall.plugin import registry as registries

            registry = registries.default()
        p = parser(registry, named if named in COMMANDS else None)
        try:
            ns = p.parse_args(args)
        except SystemExit as e:  # --help, --version, a usage error: already printed
            return int(e.code or 0)
        if not ns.command:
            p.print_help()
            return 2
        return COMMANDS[ns.command][0](ns, registry)
    except StepwallError as e:
        print(f"stepwall: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stepwall: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except Exception as e:  # an internal error is a bug: say so, keep the trace on request
        if os.environ.get("STEPWALL_DEBUG"):
            traceback.print_exc()
        print(
            f"stepwall: internal error: {type(e).__name__}: {e} "
            "(a bug; rerun with STEPWALL_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
