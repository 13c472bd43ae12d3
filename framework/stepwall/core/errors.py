"""The error hierarchy. Each error renders as one line a user can act on.

`SpecError` reads ``file:key: what is wrong (expected …)``; `DimensionError` names both
dimensions, the term and the plugin. The CLI prints ``str(error)`` and exits 2.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from stepwall.core.catalog import catalog_root
from stepwall.core.terminal import visible

T = TypeVar("T")


def first_repeat(items: Iterable[T]) -> T | None:
    """The first item that repeats an earlier one (what a "given twice" error names), or
    None when all differ."""
    seen: set[T] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def did_you_mean(word: str, choices: Iterable[str], *, prefix: str = "", quote: bool = True) -> str:
    """``"; did you mean 'tp'?"`` for the closest of ``choices``, or "" when none is close."""
    hint = difflib.get_close_matches(str(word), list(choices), n=1)
    if not hint:
        return ""
    name = f"{prefix}{hint[0]}"
    return f"; did you mean {name!r}?" if quote else f"; did you mean {name}?"


FLAG_VALUES = {"": False, "0": False, "false": False, "no": False, "off": False,
               "1": True, "true": True, "yes": True, "on": True}  # fmt: skip


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` turns its switch on: unset, empty, 0, false,
    no or off is off; 1, true, yes or on is on; anything else is an error (not a guess)."""
    value = os.environ.get(name, "")
    if value.strip().lower() not in FLAG_VALUES:
        raise SpecError(name, "", f"{value!r} is not a switch",
                        f"{name}=1 to turn it on, 0 or unset for off")  # fmt: skip
    return FLAG_VALUES[value.strip().lower()]


class StepwallError(Exception):
    """Base of every error stepwall raises on purpose (bad input, bad plugin)."""


class SpecError(StepwallError, ValueError):
    """A spec (TOML file, catalog reference or --set override) is wrong."""

    def __init__(
        self, where: str, key: str, problem: str, expected: str = "", *, why: str = ""
    ) -> None:
        self.where, self.key, self.problem, self.expected = where, key, problem, expected
        self.why = why
        super().__init__(where, key, problem, expected)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_spec_error, (self.where, self.key, self.problem, self.expected, self.why))

    def __str__(self) -> str:
        where = shown_path(self.where)
        loc = f"{where}:{self.key}" if self.key else where
        if self.expected:
            tail = f" (expected {self.expected})"
        else:
            tail = f" ({self.why})" if self.why else ""
        return _one_line(f"{loc}: {self.problem}{tail}")


def shown_path(where: str) -> str:
    """A file as a user should read it: ``specs/hardware/b300.toml`` for the catalog, relative
    to the working folder when inside it, else as given."""
    return _shown(where, os.getcwd()) if where else where


@functools.lru_cache(maxsize=4096)
def _shown(where: str, cwd: str) -> str:
    p = Path(where)
    if not where or not p.is_absolute():
        return where
    p = p.resolve()
    for base in (catalog_root().parent, Path(cwd)):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return where


def _spec_error(where: str, key: str, problem: str, expected: str, why: str) -> SpecError:
    return SpecError(where, key, problem, expected, why=why)


class UnitError(StepwallError, ValueError):
    """A unit string could not be parsed; re-raised as a SpecError with its location."""


class DimensionError(StepwallError, TypeError):
    """An expression combines quantities of different dimensions."""

    def __init__(
        self, message: str, *, left: str = "", right: str = "", term: str = "", plugin: str = ""
    ) -> None:
        self.message, self.left, self.right = message, left, right
        self.term, self.plugin = term, plugin
        super().__init__(str(self))

    def located(self, *, term: str, plugin: str) -> DimensionError:
        return DimensionError(
            self.message, left=self.left, right=self.right, term=term, plugin=plugin
        )

    def __str__(self) -> str:
        who = ""
        if self.plugin or self.term:
            who = f"plugin {self.plugin or '?'}: term {self.term or '?'}: "
        if self.left and self.right:
            dims = f" ({self.left} vs {self.right})"
        else:
            dims = f" ({self.left or self.right})" if self.left or self.right else ""
        return _one_line(f"{who}{self.message}{dims}")


def _one_line(text: str) -> str:
    """Errors are printed as one line: fold any newline a nested message brought along, and
    show any other control character of a name as an escape (`visible`)."""
    return visible(" ".join(text.splitlines()) if "\n" in text or "\r" in text else text)


class PluginError(StepwallError, RuntimeError):
    """A plugin misbehaved: raised, returned the wrong type, or claimed a taken kind."""
