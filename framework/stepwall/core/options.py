"""Typed options for what follows the model (analyses, report blocks, output formats).

An entry declares its options as a frozen attrs class with fields made by `option` (a doc,
a default, whether it is positional on the command line). `structure_options` validates a
mapping against the class with cattrs (strict types: ``"0.15"`` is not a float, ``1`` is not
a boolean) and turns every problem into a one-line, path-qualified `SpecError`
(``report.toml:block[3].eps: 'x' is not a number``). The command line's arguments
(`add_arguments`) and the JSON Schema of each class (`json_schema`) come from the same
declaration.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote

from stepwall.core.errors import SpecError, did_you_mean


def option(
    doc: str,
    *,
    default: Any = attrs.NOTHING,
    positional: bool = False,
    choices: tuple[str, ...] = (),
    metavar: str = "",
) -> Any:
    """Declare an option: its doc (the ``--help`` line and the reference docs), a default
    (none: required), whether the command line takes it as a positional argument, and the
    values a text option may take."""
    meta = {"doc": doc, "positional": positional, "choices": choices, "metavar": metavar}
    return attrs.field(default=default, metadata=meta, kw_only=True)


def _strict(kind: type, label: str) -> Any:
    def hook(value: Any, _type: Any) -> Any:
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise ValueError(f"{value!r} is not {label}")
        return value

    return hook


_converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
_converter.register_structure_hook(bool, _strict(bool, "true or false"))
_converter.register_structure_hook(int, _strict(int, "a whole number"))
_converter.register_structure_hook(float, _strict(float, "a number"))
_converter.register_structure_hook(str, _strict(str, "text"))


def resolved(cls: type) -> type:
    attrs.resolve_types(cls)
    return cls


def structure_options(cls: type, given: Mapping[str, Any], where: str, prefix: str = "") -> Any:
    """``given`` as an instance of ``cls``; each problem a SpecError at ``where`` naming
    ``prefix`` + the option."""
    resolved(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    for key in given:
        if key not in fields:
            dym = did_you_mean(key, sorted(fields))
            raise SpecError(where, f"{prefix}{key}", f"unknown option{dym}",
                            f"one of: {', '.join(sorted(fields))}")  # fmt: skip
    for name, f in fields.items():
        if name not in given and f.default is attrs.NOTHING:
            raise SpecError(where, f"{prefix}{name}", "missing", f.metadata.get("doc", "a value"))
    for name, value in given.items():  # cattrs would read "ab" as ["a", "b"]
        _check_shape(value, base_type(fields[name].type), where, f"{prefix}{name}",
                     _expected(fields[name]))  # fmt: skip
    try:
        obj: Any = _converter.structure(dict(given), cls)
    except cattrs.BaseValidationError as e:
        name, problem = _first(e)
        raise SpecError(where, f"{prefix}{name}", problem, _expected(fields.get(name))) from None
    for name, f in fields.items():
        allowed = f.metadata.get("choices")
        value = getattr(obj, name)
        if allowed and value is not None and value not in allowed:
            dym = did_you_mean(str(value), allowed)
            raise SpecError(where, f"{prefix}{name}", f"{value!r} is not allowed{dym}",
                            f"one of: {', '.join(allowed)}")  # fmt: skip
    return obj


def _check_shape(value: Any, tp: Any, where: str, key: str, expected: str) -> None:
    """A list where the type is a sequence, a table where it is a mapping (and each item of a
    list of tables a table): what cattrs would iterate or index instead of refusing."""
    origin = typing.get_origin(tp)
    if value is None or origin not in (list, tuple, dict):
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(where, key, f"{value!r} is not a table", expected)
        return
    if not isinstance(value, list | tuple):
        raise SpecError(where, key, f"{value!r} is not a list", expected)
    item = next(iter(typing.get_args(tp)), None)
    if typing.get_origin(item) is dict:
        for i, v in enumerate(value):
            _check_shape(v, item, where, f"{key}[{i}]", expected)


def _first(error: cattrs.BaseValidationError) -> tuple[str, str]:
    """The first failing option's name and what is wrong with it."""
    for exc in error.exceptions:
        notes = getattr(exc, "__notes__", [])
        name = next((n.name for n in notes if isinstance(n, AttributeValidationNote)), "")
        if isinstance(exc, cattrs.BaseValidationError):
            inner, problem = _first(exc)
            return (f"{name}.{inner}" if name and inner else name or inner), problem
        return name, str(exc).split("\n")[0]
    return "", str(error)


def _expected(f: attrs.Attribute | None) -> str:  # type: ignore[type-arg]
    return f.metadata.get("doc", "") if f is not None else ""


# ---------------------------------------------------------------- command line


def base_type(tp: Any) -> Any:
    """``float | None`` -> float; ``list[str]`` stays."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else tp
    return tp


# ---------------------------------------------------------------- JSON Schema


def json_schema(cls: type, title: str = "") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an options class."""
    resolved(cls)
    props: dict[str, Any] = {}
    required = []
    for f in attrs.fields(cls):
        entry = _schema_type(f.type)
        entry["description"] = f.metadata.get("doc", "")
        if f.metadata.get("choices"):
            entry["enum"] = list(f.metadata["choices"])
        if f.default is attrs.NOTHING:
            required.append(f.name)
        elif not isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
            entry["default"] = f.default
        props[f.name] = entry
    out: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }
    if title:
        out["title"] = title
    if required:
        out["required"] = required
    return out


def _schema_type(tp: Any) -> dict[str, Any]:
    base = base_type(tp)
    nullable = base is not tp and type(None) in typing.get_args(tp)
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if base in simple:
        out: dict[str, Any] = {"type": simple[base]}
    elif typing.get_origin(base) in (list, tuple):
        inner = (typing.get_args(base) or (str,))[0]
        out = {"type": "array", "items": _schema_type(inner)}
    elif typing.get_origin(base) is dict:
        out = {"type": "object"}
    else:
        out = {}
    if nullable and "type" in out:
        out["type"] = [out["type"], "null"]
    return out
