"""The ``stepwall`` command line. Exit codes: 0 ok, 2 bad input, 1 internal error."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import sympy as sp

from stepwall import registry, symbols
from stepwall.errors import StepwallError
from stepwall.model import StepModel, build_model, summary
from stepwall.units import TIME, format_quantity

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

Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, tuple[Command, Callable[[argparse.ArgumentParser], None], str, str]] = {}


def command(name: str, help_: str, example: str) -> Callable[[Callable], Callable]:
    def wrap(fn: Callable) -> Callable:
        COMMANDS[name] = (fn, getattr(fn, "_args", lambda p: None), help_, example)
        return fn

    return wrap


def args(setup: Callable[[argparse.ArgumentParser], None]) -> Callable[[Callable], Callable]:
    def wrap(fn: Callable) -> Callable:
        fn._args = setup  # type: ignore[attr-defined]
        return fn

    return wrap


def _set_arg(p: argparse.ArgumentParser, help_: str) -> None:
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=help_)  # fmt: skip


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO", help="catalog name or path to a .toml")
    _set_arg(p, "override a spec value, e.g. parallel.tp=16 (repeatable)")


def warn(lines: Sequence[str]) -> None:
    """One stderr line per warning (plausibility of spec values), each once per run."""
    for line in lines:
        if line not in _WARNED:
            _WARNED.add(line)
            print(f"stepwall: warning: {line}", file=sys.stderr)


_WARNED: set[str] = set()


def _load(ns: argparse.Namespace, ref: str | None = None) -> StepModel:
    warn(registry.default().slow_imports())
    model = build_model(ref or ns.scenario, ns.sets)
    warn(model.scenario.warnings)
    return model


def _feasibility_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-infeasible",
        action="store_true",
        help="evaluate even where a constraint does not hold (memory, divisibility, …); the "
        "result is marked infeasible",
    )


def _checked(model: StepModel, allow: bool) -> StepModel:
    """The model, refused (one-line error, exit 2) where a constraint does not hold."""
    if not allow:
        model.check()
    return model


def _eval_args(p: argparse.ArgumentParser) -> None:
    _scenario_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _feasibility_arg(p)


@command(
    "eval",
    "evaluate a scenario: step-time breakdown and metrics",
    "stepwall eval k26-b300-tp8-ddtree --set workload.context=32768",
)
@args(_eval_args)
def cmd_eval(ns: argparse.Namespace) -> int:
    model = _checked(_load(ns), ns.allow_infeasible)
    s = summary(model)
    if ns.json:
        print(json.dumps(s, indent=2, sort_keys=False))
        return 0
    print(render_breakdown(s))
    return 0


def render_breakdown(s: dict[str, Any]) -> str:
    """The breakdown table (term, plugin, time, share) and the metrics, as text."""
    t = s["step_time_s"]
    rows = [("term", "group", "plugin", "time", "share")]
    for term in s["terms"]:
        rows.append(
            (
                term["name"],
                term["group"],
                term["plugin"],
                format_quantity(term["seconds"], TIME),
                f"{100 * term['seconds'] / t:.1f}%",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"scenario {s['scenario']}"]
    if s.get("overrides"):
        lines.append(f"overrides {', '.join(s['overrides'])}")
    lines.append("")
    for i, r in enumerate(rows):
        lines.append(
            "  ".join(
                c.rjust(w) if j >= 3 else c.ljust(w)
                for j, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    mem = s["memory"]
    lines += [
        "",
        "by group              "
        + ", ".join(f"{g} {format_quantity(v, TIME)}" for g, v in s["groups"].items()),
        f"step time             {format_quantity(t, TIME)}",
        f"tokens/s per user     {s['tokens_per_s_per_user']:.1f}",
        f"tokens/s              {s['tokens_per_s']:.1f}",
        f"tokens/s per GPU      {s['tokens_per_s_per_gpu']:.1f}   ({s['gpus']} GPUs)",
        f"memory per GPU        {mem['bytes_per_gpu'] / 1e9:.1f} GB of "
        f"{mem['capacity_per_gpu'] / 1e9:.1f} GB: {'fits' if mem['fits'] else 'DOES NOT FIT'}",
    ]
    if any(term["overlap"] for term in s["terms"]):
        lines.append("overlapped terms (same overlap tag) count once in the step, as their Max")
    for v in s.get("violations", []):
        lines.append(f"INFEASIBLE            {v['message']}")
    return "\n".join(lines)


def _expr_args(p: argparse.ArgumentParser) -> None:
    _scenario_args(p)
    p.add_argument(
        "--free",
        action="append",
        default=[],
        metavar="KEY",
        help="keep this parameter symbolic, e.g. parallel.tp (repeatable)",
    )
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of text")
    _feasibility_arg(p)


@command(
    "expr",
    "print the closed-form step time with chosen parameters left symbolic",
    "stepwall expr k26-b300-tp8-ddtree --free parallel.tp --free hardware.hbm_bandwidth",
)
@args(_expr_args)
def cmd_expr(ns: argparse.Namespace) -> int:
    model = _checked(_load(ns), ns.allow_infeasible)
    free = [model.parameter(key, "--free") for key in ns.free]
    expr = model.substituted(model.step_time, free)
    if ns.latex:
        print(sp.latex(expr, symbol_names=symbols.latex_names()))
    else:
        print(f"t_step = {expr}")
    return 0


def _derive_args(p: argparse.ArgumentParser) -> None:
    _scenario_args(p)
    p.add_argument(
        "what",
        choices=("wall", "optimum", "crossover", "elasticity", "regime", "plateau"),
        help="which derivation",
    )
    p.add_argument("key", nargs="?", metavar="KEY", help="the parameter, e.g. parallel.tp")
    p.add_argument("--eps", type=float, default=0.15, help="wall: remaining-gain tolerance")
    p.add_argument("--against", metavar="SCENARIO2", help="crossover: the other scenario")
    p.add_argument("--metric", default=None, help="metric (default per derivation)")
    p.add_argument(
        "--at", action="append", default=[], metavar="KEY=VALUE", help="elasticity: SI value"
    )
    p.add_argument("--fraction", type=float, default=0.9, help="plateau: experts hit")
    p.add_argument("--symbolic", action="store_true", help="keep other parameters symbolic")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document: the result's object, or for elasticity and regime "
        '{"kind", "scenario", "results": [...]}',
    )
    _feasibility_arg(p)


@command(
    "derive",
    "derive a wall, optimum, crossover, elasticities, regimes or the EP plateau in closed form",
    "stepwall derive k26-b300-tp8-ddtree wall parallel.tp --eps 0.15",
)
@args(_derive_args)
def cmd_derive(ns: argparse.Namespace) -> int:
    from stepwall import derive
    from stepwall.errors import SpecError

    model = _load(ns)
    if ns.what in ("wall", "optimum", "crossover", "regime") and not ns.key:
        raise SpecError("derive", ns.what, "needs a KEY", "e.g. parallel.tp")
    if ns.what == "wall":
        out = [derive.wall(model, ns.key, ns.eps, ns.symbolic, ns.metric or "step_time_s")]
    elif ns.what == "optimum":
        out = [derive.optimum(model, ns.key, ns.symbolic, ns.metric or "step_time_s")]
    elif ns.what == "crossover":
        if not ns.against:
            raise SpecError("derive", "--against", "crossover needs a second scenario")
        other = _load(ns, ns.against)
        metric = ns.metric or "tokens_per_s_per_gpu"
        out = [derive.crossover(model, other, ns.key, metric, ns.symbolic)]
    elif ns.what == "elasticity":
        _checked(model, ns.allow_infeasible)  # a sensitivity at an impossible point means nothing
        at = {}
        for item in ns.at:
            k, sep, v = item.partition("=")
            if not sep:
                raise SpecError("--at", item, "missing '='", "KEY=VALUE")
            try:
                at[k.strip()] = float(v)
            except ValueError:
                raise SpecError("--at", k, f"{v!r} is not a number", "KEY=SI value") from None
        out = derive.elasticity(model, ns.metric or "step_time_s", at, ns.symbolic)
    elif ns.what == "regime":
        out = derive.regime(model, ns.key, ns.symbolic)
    else:
        out = [derive.plateau(model, ns.fraction, ns.symbolic)]
    if ns.json:
        if ns.what in ("elasticity", "regime"):
            doc: Any = {
                "kind": ns.what,
                "scenario": model.scenario.label,
                "results": [d.to_json() for d in out],
            }
        else:
            doc = out[0].to_json()
        print(json.dumps(doc, indent=2))
        return 0
    if ns.what == "elasticity":
        print(f"elasticities of {out[0].details['metric']} [{out[0].scenario}]")
        print(f"  definition  {out[0].definition}")
        for d in out:
            if d.value:
                print(f"  {d.value:+.4f}  {d.key}")
        zero = sum(1 for d in out if not d.value)
        print(f"  ({zero} parameters with elasticity 0 not shown; --json lists all)")
        return 0
    print("\n\n".join(d.render() for d in out))
    return 0


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help="a scenario, or a catalog file of any kind")


@command(
    "check",
    "validate a spec file (model, hardware, cluster, scenario or report); writes nothing",
    "stepwall check specs/scenarios/k26-b300-tp8-ddtree.toml",
)
@args(_check_args)
def cmd_check(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from stepwall.spec import check_file, read_toml

    path = Path(ns.spec)
    if path.is_file() and "scenarios" in read_toml(path) and "title" in read_toml(path):
        from stepwall import report

        report.Report(path).render()  # a report is valid when every block renders
        print(f"ok: {path} is a valid report")
        return 0
    hooks = registry.default()
    message = check_file(ns.spec, hooks.kinds)
    target = path if path.is_file() else None
    if message.startswith("ok:") and "valid scenario" in message:
        model = build_model(target or ns.spec)
        warn(model.scenario.warnings)
        model.check()
    elif target is not None:
        from stepwall.model import check_entry

        warn(check_entry(target, message.rsplit(" ", 2)[-2], hooks))
    print(message)
    return 0


def _plugins_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


@command("plugins", "list plugins, their versions, kinds and hooks", "stepwall plugins --json")
@args(_plugins_args)
def cmd_plugins(ns: argparse.Namespace) -> int:
    rows = registry.default().describe()
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        secs = r.get("import_seconds")
        took = f"  (imported in {secs * 1e3:.0f} ms)" if secs is not None else ""
        print(f"{r['name']} {r['version']}{took}")
        if r["kinds"]:
            print(f"  kinds: {', '.join(r['kinds'])}")
        print(f"  hooks: {', '.join(r['hooks'])}")
        if r.get("problem"):
            print(f"  {r['problem']}")
    return 0


def _sweep_args(p: argparse.ArgumentParser) -> None:
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
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME",
        help="a metric, group.<group> or term.<term> (repeatable; default: step time and "
        "throughputs)",
    )
    p.add_argument(
        "--feasible-only",
        action="store_true",
        help="leave out points where a constraint does not hold (every row has a feasible "
        "column and names the first violated constraint otherwise)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write .csv or .json instead of a table")


@command(
    "sweep",
    "evaluate a scenario over a grid of parameter values, vectorized through one model",
    "stepwall sweep k26-b300-tp8-ddtree --vary parallel.tp=8,16,36,72 "
    "--vary hardware.hbm_bandwidth=8TB/s,9TB/s -o tp.csv",
)
@args(_sweep_args)
def cmd_sweep(ns: argparse.Namespace) -> int:
    from stepwall import output, sweep

    target = output.file_target(ns.output, suffixes=(".csv", ".json")) if ns.output else None
    vary = [sweep.parse_vary(v) for v in ns.vary]
    result = sweep.run(
        ns.scenario,
        vary,
        ns.sets,
        ns.metric or sweep.DEFAULT_METRICS,
        progress=sweep.ProgressBar(),
    )
    warn(result.warnings)
    only = ns.feasible_only
    if target is None:
        print(result.to_table(only))
        return 0
    text = result.to_csv(only) if target.suffix == ".csv" else result.to_json(only)
    output.write_file(target, text)
    n, ok = result.feasible.size, int(result.feasible.sum())
    print(f"wrote {target} ({ok if only else n} points; {ok} of {n} feasible)")
    return 0


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", metavar="REPORT", help="catalog name (specs/reports/) or a .toml path")
    _set_arg(p, "override a spec value in every scenario of the report (repeatable)")
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default: out/NAME)")


@command(
    "report",
    "render a report spec to REPORT.md, SVG plots and CSV tables (byte-reproducible)",
    "stepwall report k26-cluster-scaling -o docs/reports/k26-cluster-scaling",
)
@args(_report_args)
def cmd_report(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from stepwall import output, report

    if ns.output:
        output.folder_target(ns.output)
    rep = report.Report(ns.report, ns.sets)
    out = Path(ns.output) if ns.output else report.default_output(rep)
    output.folder_target(str(out))
    files = report.write(rep, out)
    print(f"wrote {len(files)} files to {out}")
    return 0


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


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error said in one line (and exit code 2) like every other."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"stepwall: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
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
        setup(sp_)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    _WARNED.clear()  # each run warns about each value once
    try:
        p = parser()
        try:
            ns = p.parse_args(argv)
        except SystemExit as e:  # --help, --version, a usage error: already printed
            return int(e.code or 0)
        if not ns.command:
            p.print_help()
            return 2
        return COMMANDS[ns.command][0](ns)
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
