"""The command line's argparse parser: a usage error in one line, and an option given twice
with two values refused."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from stepwall.core.errors import SpecError


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error said in one line (and exit code 2) like every other, an
    option of one value given twice with different values refused (argparse would keep the
    last silently), and a key given twice with ``--set`` refused likewise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: dict[str, tuple[str, Any]] = {}  # dest (or --set KEY) -> (as shown, value)
        for name in (None, "store", "store_const", "store_true", "store_false", "append"):
            base = self._registry_get("action", name, name)
            self.register("action", name, type(f"Once{base.__name__}", (Once, base), {}))

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self.given = {}  # each parse starts afresh
        return super().parse_known_args(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"stepwall: error: {message} (see {self.prog} --help)\n")


class Once(argparse.Action):
    """Mixed into argparse's actions by `Parser`: refuse what a repeat would drop."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: Any, option_string: str | None = None,
    ) -> None:  # fmt: skip
        given: dict[str, tuple[str, Any]] = getattr(parser, "given", {})
        if option_string is None:
            pass
        elif option_string == "--set" and isinstance(values, str) and set_key(values):
            key = set_key(values)
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


def set_key(assignment: str) -> str:
    """The key of a ``--set KEY=VALUE`` ("" when it is no assignment: refused elsewhere)."""
    return assignment.split("=", 1)[0].strip() if "=" in assignment else ""
