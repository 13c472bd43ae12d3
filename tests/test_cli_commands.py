"""The command line as a layer: built-in commands come from a table and are imported only
when they run; a plugin adds a command with ``stepwall_commands``; ``stepwall check`` knows
a scenario from a catalog entry by data, not by its message."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from stepwall.plugin.entries import Command
from stepwall.plugin.hookspecs import hookimpl
from stepwall.spec.validation import check_spec
from stepwall.testing import PluginKit, registry

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "k26-b300-tp8-ddtree"


def _plugin(name: str, *commands: Command) -> types.ModuleType:
    """A throwaway plugin module named ``name`` that declares ``commands``."""
    plugin = types.ModuleType(name)

    @hookimpl
    def stepwall_commands() -> list[Command]:
        return list(commands)

    plugin.stepwall_commands = stepwall_commands  # type: ignore[attr-defined]
    return plugin


def _hello_setup(parser: Any, registry: Any) -> None:
    parser.add_argument("who", metavar="WHO")
    parser.add_argument("--times", type=int, default=1)


def _hello_run(ns: Any, registry: Any) -> int:
    for _ in range(ns.times):
        print(f"hello, {ns.who}")
    return 3


HELLO = Command("hello", "greet someone", "stepwall hello world --times 2", _hello_setup,
                _hello_run)  # fmt: skip


def test_a_plugin_command_is_listed_and_runs_with_its_own_arguments(
    stepwall_plugin: PluginKit,
) -> None:
    kit: PluginKit = stepwall_plugin(_plugin("hello_plugin", HELLO))
    code, out, _ = kit.cli("--help")
    assert code == 0
    assert re.search(r"\n    hello +greet someone\n", out)
    assert re.search(r"\n    eval +evaluate a scenario", out)  # the built-ins are still there
    code, out, _ = kit.cli("hello", "--help")
    assert code == 0 and "example:\n  stepwall hello world --times 2" in out
    code, out, err = kit.cli("hello", "world", "--times", "2")
    assert (code, out, err) == (3, "hello, world\nhello, world\n", "")
    code, out, err = kit.cli("hello", "world", "--times", "x")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("stepwall: error: argument --times: invalid int value: 'x'")
    code, out, _ = kit.cli("plugins")
    assert code == 0
    assert re.search(r"\nhello_plugin \S+  \(imported in 0 ms\)\n  commands: hello\n", out)


def test_a_plugin_command_named_like_a_built_in_is_refused(stepwall_plugin: PluginKit) -> None:
    clash = Command("eval", "not the real eval", "stepwall eval", _hello_setup, _hello_run)
    kit: PluginKit = stepwall_plugin(_plugin("clashing_plugin", clash))
    code, out, err = kit.cli("eval", SCENARIO)
    assert (code, out) == (2, "")
    assert err == "stepwall: error: plugin clashing_plugin: command 'eval' is a built-in command\n"


def test_a_failing_plugin_command_is_blamed_on_its_plugin(stepwall_plugin: PluginKit) -> None:
    def broken(ns: Any, registry: Any) -> int:
        raise ZeroDivisionError("no")

    bad = Command("hello", "greet", "stepwall hello x", _hello_setup, broken)
    kit: PluginKit = stepwall_plugin(_plugin("broken_plugin", bad))
    code, _, err = kit.cli("hello", "x")
    assert code == 2
    assert err == ("stepwall: error: plugin broken_plugin: command 'hello': run raised "
                   "ZeroDivisionError: no\n")  # fmt: skip


def test_two_plugins_with_one_command_name_are_refused() -> None:
    from stepwall.core.errors import PluginError

    reg = registry(_plugin("first_plugin", HELLO), _plugin("second_plugin", HELLO))
    with pytest.raises(PluginError, match="second_plugin: command 'hello' is already provided "
                       "by plugin first_plugin"):  # fmt: skip
        reg.commands  # noqa: B018 (gathering is what raises)


@pytest.mark.parametrize(
    ("argv", "imported"),
    [(["--help"], ["stepwall.cli.parser"]),
     (["sweep", "--help"], ["stepwall.cli.common", "stepwall.cli.parser", "stepwall.cli.sweep"])],
)  # fmt: skip
def test_help_imports_only_the_command_that_runs(argv: list[str], imported: list[str]) -> None:
    code = (
        "import sys, contextlib, io\n"
        "from stepwall.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('stepwall.cli.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)  # fmt: skip
    assert done.stdout == f"{imported}\n"


def test_check_spec_says_what_a_file_is() -> None:
    kinds = registry().kinds
    scenario = check_spec(ROOT / "specs" / "scenarios" / f"{SCENARIO}.toml", kinds)
    assert scenario.section is None
    assert scenario.message.endswith(f"is a valid scenario ({SCENARIO})")
    hardware = check_spec(ROOT / "specs" / "hardware" / "b300.toml", kinds)
    assert hardware.section == "hardware"
    assert hardware.message.endswith("b300.toml is a valid hardware entry")
