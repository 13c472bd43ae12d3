"""Output formats: how results leave stepwall.

A result is a `Table` (named columns with units; rows produced in chunks, so a sweep of
millions of points streams in bounded memory) and/or a JSON-able document. A `Format` writes
either to a stream: ``--format NAME`` on the command line, or the suffix of ``-o FILE``.
Plugins add formats through the ``stepwall_formats`` hook; this module is the built-in plugin
that declares text, json, csv, markdown and parquet (the last needs pyarrow:
``pip install 'stepwall[parquet]'``).
"""

from __future__ import annotations

import collections
import csv
import io
import itertools
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import IO, Any

import attrs

from stepwall.core.errors import SpecError
from stepwall.core.terminal import visible
from stepwall.numeric.files import json_text
from stepwall.plugin.entries import Format
from stepwall.plugin.hookspecs import hookimpl

__all__ = ["Column", "Format", "Table", "format_for", "write_json"]


@attrs.frozen
class Column:
    """A column: its name, unit ("" for none) and kind: "int", "float", "bool" or "text"."""

    name: str
    unit: str = ""
    kind: str = "float"

    @property
    def header(self) -> str:
        """The name and unit as printed (control characters made `visible`)."""
        return visible(f"{self.name} [{self.unit}]" if self.unit else self.name)


@attrs.frozen
class Table:
    """Columns and their data as chunks: each chunk a list of 1-D arrays (or lists), one per
    column, all of one length. ``document`` is the JSON form when it is not the rows."""

    columns: tuple[Column, ...]
    chunks: Callable[[], Iterator[Sequence[Any]]]
    title: str = ""
    document: Any = None

    @classmethod
    def of_rows(cls, columns: Sequence[Column], rows: Sequence[Sequence[Any]], **kw: Any) -> Table:
        """A small table from rows."""
        cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in columns]
        return cls(tuple(columns), lambda: iter([cols]), **kw)

    def rows(self) -> Iterator[list[Any]]:
        for chunk in self.chunks():
            yield from (list(r) for r in zip(*chunk, strict=True))


# ---------------------------------------------------------------- the built-ins


def _text(obj: Any, out: IO[str]) -> None:
    """Aligned columns (numbers to 6 significant digits), for a terminal."""
    if not isinstance(obj, Table):
        out.write(str(obj).rstrip("\n") + "\n")
        return
    head = [c.header for c in obj.columns]
    body = [[_short(v, c.kind) for v, c in zip(r, obj.columns, strict=True)] for r in obj.rows()]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    out.write("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in body:
        out.write("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + "\n")


def _short(v: Any, kind: str) -> str:
    if kind == "int":
        return str(int(v))
    if kind == "bool":
        return "yes" if v else "no"
    if kind == "text" or isinstance(v, str):
        return visible(str(v))
    return f"{float(v):.6g}"


def _csv(table: Table, out: IO[str]) -> None:
    """Comma-separated, a header with units, numbers as ``%.10g`` (integers as integers).
    Written chunk by chunk; a table of several chunks is formatted by worker processes
    (where the platform forks) while the next chunk is computed, in order, so the bytes are
    those of a serial run."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow([c.header for c in table.columns])
    kinds = tuple(c.kind for c in table.columns)
    chunks = table.chunks()
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None:  # one chunk: no workers
        out.write(csv_rows(kinds, first))
        return
    pool = _formatting_pool()
    if pool is None:
        for chunk in itertools.chain([first, second], chunks):
            out.write(csv_rows(kinds, chunk))
        return
    with pool:
        pending: collections.deque[Any] = collections.deque()
        for chunk in itertools.chain([first, second], chunks):
            arrays = [_array(c) for c in chunk]
            for at in range(0, len(arrays[0]), _PIECE):  # small pieces: little memory each
                piece = [a[at : at + _PIECE] for a in arrays]
                pending.append(pool.submit(csv_rows, kinds, piece))
                if len(pending) > 2 * _WORKERS:
                    out.write(pending.popleft().result())
        while pending:
            out.write(pending.popleft().result())


_WORKERS = 2
_PIECE = 50_000  # rows a worker formats at a time


def _formatting_pool() -> Any:
    """Worker processes for CSV text, or None where processes cannot fork (the workers then
    would re-import everything) or there is one CPU."""

    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return ProcessPoolExecutor(
        _WORKERS,
        mp_context=multiprocessing.get_context("fork"),
        initializer=signal.signal,  # Ctrl-C is the parent's to report, once
        initargs=(signal.SIGINT, signal.SIG_IGN),
    )


def _array(column: Any) -> Any:
    import numpy as np  # numpy on first use (a cached eval runs without it)

    return column if isinstance(column, np.ndarray) else np.asarray(column, dtype=object)


def csv_rows(kinds: Sequence[str], chunk: Sequence[Any]) -> str:
    """One chunk as CSV lines: one %-template per row; a column with few distinct values
    (a sweep axis, bools, constraint names) is formatted once per value."""
    import numpy as np  # numpy on first use (a cached eval runs without it)

    cols, template = [], []
    for v, kind in zip(chunk, kinds, strict=True):
        arr = np.asarray(v, dtype=object if kind == "text" else None)
        if kind == "text":
            cells = arr.tolist()
            escaped = {x: _csv_text(x) for x in set(cells)}
            cols.append(list(map(escaped.__getitem__, cells)))
            template.append("%s")
        elif kind == "bool" or _repeats(arr):
            values, where = np.unique(arr, return_inverse=True)
            text = np.array([_csv_cell(x, kind) for x in values.tolist()], dtype=object)
            cols.append(text[where.ravel()].tolist())
            template.append("%s")
        elif kind == "int":
            cols.append(arr.astype(np.int64).tolist())
            template.append("%d")
        else:
            cols.append(arr.astype(float).tolist())
            template.append("%.10g")
    row = ",".join(template) + "\n"
    return "".join(map(row.__mod__, zip(*cols, strict=True)))


def _repeats(arr: Any) -> bool:
    """Few distinct values (a sweep axis): formatting each once pays."""
    n = arr.size
    return (
        n >= 1000 and arr.dtype.kind in "fiu" and len(set(arr[:: max(1, n // 2000)].tolist())) <= 64
    )


def _csv_cell(x: Any, kind: str) -> str:
    if kind == "bool":
        return "true" if x else "false"
    return f"{int(x):d}" if kind == "int" else f"{float(x):.10g}"


def _csv_text(x: Any) -> str:
    s = visible(str(x))
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n') else s


def _markdown(table: Table, out: IO[str]) -> None:
    """A Markdown table (numbers to 6 significant digits)."""
    out.write("| " + " | ".join(c.header for c in table.columns) + " |\n")
    align = ["---:" if c.kind in ("int", "float") else ":---" for c in table.columns]
    out.write("|" + "|".join(align) + "|\n")
    for r in table.rows():
        cells = [_short(v, c.kind) for v, c in zip(r, table.columns, strict=True)]
        out.write("| " + " | ".join(cells) + " |\n")


def write_json(obj: Any, out: IO[str]) -> None:
    """One JSON document: a table as {"columns", "units", "rows"}, a document as is."""
    if isinstance(obj, Table):
        if obj.document is not None:
            obj = obj.document
        else:
            rows = [
                [_plain(v, c.kind) for v, c in zip(r, obj.columns, strict=True)] for r in obj.rows()
            ]
            obj = {
                **({"title": obj.title} if obj.title else {}),
                "columns": [c.name for c in obj.columns],
                "units": {c.name: c.unit for c in obj.columns if c.unit},
                "rows": [dict(zip((c.name for c in obj.columns), r, strict=True)) for r in rows],
            }
    out.write(json_text(obj, indent=2, finite=True, default=_plain_default) + "\n")


def _plain(v: Any, kind: str) -> Any:
    import numpy as np  # numpy on first use (a cached eval runs without it)

    if kind == "int":
        return int(v)
    if kind == "bool":
        return bool(v)
    if kind == "text" or isinstance(v, str):
        return str(v)
    f = float(v)
    return f if np.isfinite(f) else None


def _plain_default(x: Any) -> Any:
    import numpy as np  # numpy on first use (a cached eval runs without it)

    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        f = float(x)
        return f if np.isfinite(f) else None
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _parquet(table: Table, out: IO[bytes]) -> None:
    """Apache Parquet (columnar, typed), one row group per chunk; needs pyarrow."""
    import numpy as np  # numpy on first use (a cached eval runs without it)

    try:
        import pyarrow as pa  # pyarrow only for --format parquet (optional extra)
        import pyarrow.parquet as pq  # pyarrow only for --format parquet (optional extra)
    except ImportError:
        raise SpecError("--format", "parquet", "pyarrow is not installed",
                        "pip install 'stepwall[parquet]'") from None  # fmt: skip
    types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "text": pa.string()}
    fields = [
        pa.field(c.name, types[c.kind], metadata={"unit": c.unit} if c.unit else None)
        for c in table.columns
    ]
    schema = pa.schema(fields)
    with pq.ParquetWriter(out, schema) as writer:
        for chunk in table.chunks():
            arrays = [
                pa.array(np.asarray(v, dtype=np.int64) if c.kind == "int" else list(v)
                         if c.kind == "text" else np.asarray(v), type=types[c.kind])
                for v, c in zip(chunk, table.columns, strict=True)
            ]  # fmt: skip
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


@hookimpl
def stepwall_formats() -> list[Format]:
    return [
        Format("text", "aligned columns for a terminal", (".txt",), _text, documents=True),
        Format("json", "one JSON document", (".json",), write_json, documents=True),
        Format("csv", "comma-separated values, a header with units", (".csv",), _csv),
        Format("markdown", "a Markdown table", (".md",), _markdown),
        Format("parquet", "Apache Parquet (needs pyarrow)", (".parquet",), _parquet, binary=True),
    ]


def format_for(
    formats: dict[str, Format], name: str | None, path: str | None, where: str = "--format"
) -> Format:
    """The format named, or the one whose suffix ``path`` has."""
    if name:
        if name not in formats:
            raise SpecError(where, name, "unknown format", f"one of: {', '.join(sorted(formats))}")
        return formats[name]
    suffix = "." + (path or "").rsplit(".", 1)[-1] if path and "." in path else ""
    found = [f for f in formats.values() if suffix in f.suffixes]
    if not found:
        known = sorted(s for f in formats.values() for s in f.suffixes)
        raise SpecError("-o", path or "", "unknown output format",
                        f"a file ending in {', '.join(known)} (or --format)")  # fmt: skip
    return found[0]


def render(fmt: Format, obj: Any) -> str:
    """A text format's output as a string."""
    buf = io.StringIO()
    fmt.write(obj, buf)
    return buf.getvalue()


def iter_once(chunks: Iterable[Sequence[Any]]) -> Callable[[], Iterator[Sequence[Any]]]:
    """Chunks that can be produced once (a stream), as a Table's ``chunks``."""
    it = iter(chunks)
    return lambda: it
