"""An options class (`stepwall.core.options`) on the command line: one argument per option,
and the namespace's values back as the options' keys."""

from __future__ import annotations

import argparse
import typing
from typing import Any

import attrs

from stepwall.core.options import base_type, resolved


def add_arguments(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """One argument per option: positional where declared, else ``--name`` (booleans as
    flags, lists repeatable)."""
    resolved(cls)
    for f in attrs.fields(cls):
        if f.name in skip:
            continue
        meta, tp = f.metadata, base_type(f.type)
        doc = meta.get("doc", "").replace("%", "%%")  # argparse %-formats a help line
        kw: dict[str, Any] = {"help": doc, "default": argparse.SUPPRESS}
        if meta.get("metavar"):
            kw["metavar"] = meta["metavar"]
        if meta.get("choices"):
            kw["choices"] = meta["choices"]
        if meta.get("positional"):
            if f.default is not attrs.NOTHING:
                kw["nargs"] = "?"
            kw.setdefault("metavar", f.name.upper())
            parser.add_argument(f.name, type=_cli_type(tp), **kw)
            continue
        flag = "--" + f.name.replace("_", "-")
        if tp is bool:
            parser.add_argument(flag, dest=f.name, action="store_true", **kw)
        elif typing.get_origin(tp) in (list, tuple):
            inner = (typing.get_args(tp) or (str,))[0]
            parser.add_argument(flag, dest=f.name, action="append", type=_cli_type(inner), **kw)
        else:
            parser.add_argument(flag, dest=f.name, type=_cli_type(tp), **kw)


def _cli_type(tp: Any) -> Any:
    def number(kind: type) -> Any:
        def convert(text: str) -> Any:
            try:
                return kind(text)
            except ValueError:
                label = "whole number" if kind is int else "number"
                raise argparse.ArgumentTypeError(f"{text!r} is not a {label}") from None

        return convert

    return number(tp) if tp in (int, float) else str


def from_namespace(ns: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options the command line gave (those left out keep their defaults)."""
    return {f.name: getattr(ns, f.name) for f in attrs.fields(cls) if hasattr(ns, f.name)}
