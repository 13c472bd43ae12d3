"""Files written whole or not at all, and JSON text: the one atomic write and the one JSON
writer of the package (the caches, `stepwall.io.output` and `stepwall.io.formats` use them).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

Fill = Callable[[IO[Any]], object]  # writes a file's content into an open stream


def atomic_write(
    path: Path,
    data: bytes | str | Fill,
    *,
    text: bool = False,
    check: Callable[[Path], object] | None = None,
    mode: int | None = None,
) -> None:
    """Write ``path`` whole or not at all: into a temporary file in its folder (named like
    ``path``, with ``path``'s suffix when ``check`` is given), then renamed over it, so a
    reader or a concurrent writer never sees half a file. ``data`` is bytes, text (UTF-8)
    or a function filling the open stream (a text stream, UTF-8 with newlines as written,
    when ``text``); ``check``, if given, reads the temporary file first and raises to keep
    ``path`` as it was; ``mode`` is the new file's permissions (mkstemp's 0600 otherwise).
    On any failure, Ctrl-C included, the temporary file is removed and the error raised."""
    suffix = path.suffix if check is not None else ".tmp"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        options: dict[str, Any] = {"encoding": "utf-8", "newline": ""} if text else {}
        with os.fdopen(fd, "w" if text else "wb", **options) as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode() if isinstance(data, str) and not text else data)
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_text(
    doc: Any,
    *,
    indent: int | None = None,
    finite: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``doc`` as JSON text. With ``finite``, every non-finite float is written as null
    (standard JSON has no NaN or Infinity: an unknown metric, an infeasible row's infinite
    error), else as Python's json reads it back (a cache); ``default`` makes any other
    object JSON-able (numpy's scalars and arrays)."""
    if finite:
        doc = _finite(doc)
    return json.dumps(doc, indent=indent, default=default, allow_nan=not finite)


def _finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (in dicts, lists and tuples) as None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
