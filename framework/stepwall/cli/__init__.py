"""The ``stepwall`` command line. Exit codes: 0 ok, 2 bad input, 130 interrupted, 1 a bug.

Each built-in command is a module of this package with ``setup(parser, registry)`` and
``run(namespace, registry) -> int``, listed in `COMMANDS` and imported only when it runs, so
that ``stepwall --help`` needs the table alone. Plugins add commands through the
``stepwall_commands`` hook. Commands take an explicit registry (`main(argv, registry)`); the
derive subcommands and their options, and the output formats, come from the registry's
analyses and formats.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from stepwall.cli.parser import Parser
from stepwall.core.errors import PluginError, SpecError, StepwallError
from stepwall.core.terminal import reset_warnings
from stepwall.numeric.compiled import keep_freed_memory

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


class Builtin(NamedTuple):
    """A built-in command: its line in ``stepwall --help``, one example, and the module of
    this package that has its ``setup(parser, registry)`` and ``run(namespace, registry)``."""

    help: str
    example: str
    module: str


COMMANDS: dict[str, Builtin] = {
    "eval": Builtin(
        "evaluate a scenario: step-time breakdown and metrics",
        "stepwall eval k26-b300-tp8-ddtree --set workload.context=32768",
        "eval",
    ),
    "expr": Builtin(
        "print the closed-form step time with chosen parameters left symbolic",
        "stepwall expr k26-b300-tp8-ddtree --free parallel.tp --free hardware.hbm_bandwidth",
        "expr",
    ),
    "derive": Builtin(
        "derive a wall, optimum, crossover, elasticities, regimes or the EP plateau in closed "
        "form (analyses from plugins too: stepwall derive --help lists them)",
        "stepwall derive k26-b300-tp8-ddtree wall parallel.tp --eps 0.15",
        "derive",
    ),
    "check": Builtin(
        "validate a spec file (model, hardware, cluster, scenario or report); writes nothing",
        "stepwall check specs/scenarios/k26-b300-tp8-ddtree.toml",
        "check",
    ),
    "collect": Builtin(
        "microbenchmark this GPU's primitives into the tables stepwall calibrate fits",
        "stepwall collect -o bench/ --prefix my-h200",
        "collect",
    ),
    "import-model": Builtin(
        "write a model spec from a Hugging Face config.json, each value with its config key",
        "stepwall import-model ./config.json -o my-model.toml",
        "import_model",
    ),
    "plugins": Builtin(
        "list plugins, their versions, kinds, analyses, blocks and formats, hooks, and import "
        "times",
        "stepwall plugins --json",
        "plugins",
    ),
    "sweep": Builtin(
        "evaluate a scenario over a grid of parameter values, vectorized through one compiled "
        "model",
        "stepwall sweep k26-b300-tp8-ddtree --vary parallel.tp=8,16,36,72 "
        "--vary hardware.hbm_bandwidth=8TB/s,9TB/s -o tp.csv",
        "sweep",
    ),
    "search": Builtin(
        "search layouts on one or more hardware options: Pareto frontier of tokens/s per GPU "
        "vs per user, best configuration at each target, energy and cost",
        "stepwall search deepseek-v3-fp8 --hardware h200 --cluster hgx-h200-ib --gpus 8,16",
        "search",
    ),
    "recommend": Builtin(
        "size a deployment: the cheapest (GPUs, USD/h or MW) that serves R requests/s within "
        "a TTFT/TPOT SLA, with runners-up and their eval commands",
        "stepwall recommend deepseek-v3-fp8 --rate 50 --isl 2048 --hardware h200 "
        "--cluster hgx-h200-ib --ttft 'p90<=2s' --tpot '<=30ms'",
        "recommend",
    ),
    "explore": Builtin(
        "write an interactive HTML explorer of a scenario (self-contained, offline): sliders, "
        "live metrics, constraints, wall",
        "stepwall explore k26-b300-tp8-ddtree -o k26.html",
        "explore",
    ),
    "report": Builtin(
        "render a report spec to REPORT.md, SVG plots and CSV tables (byte-reproducible)",
        "stepwall report k26-cluster-scaling -o docs/reports/k26-cluster-scaling",
        "report",
    ),
    "calibrate": Builtin(
        "fit a hardware or cluster spec to microbenchmark tables (CSV) with the model's own "
        "laws; --check re-fits the shipped calibrations",
        "stepwall calibrate b200 --data gemm.csv -o my-b200.toml --plot fit.svg",
        "calibrate",
    ),
    "validate": Builtin(
        "predict published end-to-end serving measurements and print each row's error, the "
        "median and the worst",
        "stepwall validate --class wide_ep",
        "validate",
    ),
}


def command_module(name: str) -> ModuleType:
    """The module of built-in command ``name``, imported now (what it imports is loaded only
    for the command that runs)."""
    return importlib.import_module(f"stepwall.cli.{COMMANDS[name].module}")


def _version() -> str:
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


def plugin_commands(registry: Registry) -> dict[str, Any]:
    """The commands plugins add (`stepwall.plugin.entries.Command`); one named like a built-in
    is refused."""
    commands: dict[str, Any] = registry.commands
    for name, cmd in commands.items():
        if name in COMMANDS:
            raise PluginError(f"plugin {cmd.plugin}: command {name!r} is a built-in command")
    return commands


def parser(registry: Registry, only: str | None = None) -> argparse.ArgumentParser:
    """The command-line parser. Every command gets its help line; only ``only`` gets its
    arguments (building ``derive``'s means importing every analysis)."""
    p = Parser(
        prog="stepwall",
        description="Closed-form, unit-checked step-time models for distributed LLM "
        "inference, composed from TOML specs by plugins.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"stepwall {_version()}")
    p.add_argument(
        "-p",
        dest="disable",
        action="append",
        default=[],
        metavar="no:NAME",
        help="run without the plugin NAME (built-in or installed), as pytest's -p no:NAME; "
        "repeatable; STEPWALL_DISABLE_PLUGINS=NAME,... does the same",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    table = [(name, b.help, b.example) for name, b in COMMANDS.items()]
    plugins = plugin_commands(registry)
    table += [(name, c.help, c.example) for name, c in plugins.items()]
    for name, help_, example in table:
        sp_ = sub.add_parser(
            name,
            help=help_,
            description=f"{help_}.",
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if only != name:
            continue
        if name in COMMANDS:
            command_module(name).setup(sp_, registry)
        else:
            plugins[name].setup(sp_, registry)
    return p


class Disabled(NamedTuple):
    """The plugins ``-p no:NAME`` options before the command name disable, and the option
    values as given (not the command's name)."""

    names: tuple[str, ...]
    given: tuple[str, ...]


def disabled_plugins(args: Sequence[str]) -> Disabled:
    """The ``-p no:NAME`` (or ``-pno:NAME``) options before the command; another ``-p`` value
    is a SpecError."""
    names: list[str] = []
    given: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-p"):
        value = args[i][2:] if len(args[i]) > 2 else (args[i + 1] if i + 1 < len(args) else "")
        i += 1 if len(args[i]) > 2 else 2
        if not value.startswith("no:") or not value[3:]:
            raise SpecError("-p", value, "is not no:NAME",
                            "no:NAME to run without the plugin NAME")  # fmt: skip
        names.append(value[3:])
        given.append(value)
    return Disabled(tuple(names), tuple(given))


def main(argv: Sequence[str] | None = None, registry: Registry | None = None) -> int:
    """Run ``stepwall ARGV`` (default ``sys.argv``) and return the exit code; ``registry``
    defaults to the built-ins and the installed plugins.

    Stays whole: one `try` whose handlers turn every way a command ends into its exit code and
    message.
    """
    reset_warnings()  # each run warns about each value once
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        disable = disabled_plugins(args)
        named = next((a for a in args if not a.startswith("-") and a not in disable.given), None)
        if "--version" in args[: args.index(named) if named is not None else len(args)]:
            print(f"stepwall {_version()}")  # stepwall's own version: no plugin is loaded
            return 0
        if registry is None and args[:1] == ["eval"]:  # an unchanged eval: from the cache
            code = importlib.import_module("stepwall.cli.cached_eval").run(args[1:])
            if code is not None:
                return int(code)
        keep_freed_memory()  # the CLI evaluates many points per call: a process-wide setting
        if registry is None:  # the registry imports sympy, which a cached eval does without
            registries = importlib.import_module("stepwall.plugin.registry")
            names = disable.names
            registry = registries.default(
                disable=(*registries.disabled(), *names) if names else None
            )
        p = parser(registry, named)
        try:
            ns = p.parse_args(args)
        except SystemExit as e:  # --help, --version, a usage error: already printed
            return int(e.code or 0)
        if not ns.command:
            p.print_help()
            return 2
        if ns.command in COMMANDS:
            return int(command_module(ns.command).run(ns, registry))
        return int(registry.commands[ns.command].run(ns, registry))
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
