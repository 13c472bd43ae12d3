"""Writing results: targets checked before any work, files written atomically.

A file is written under a temporary name in its folder, then renamed over the target; a
report folder is built beside the target and moved into place. An interrupted or failed run
leaves the previous output intact, or nothing. Every failure is a one-line `SpecError`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from stepwall.errors import SpecError

REPORT_MARKER = "REPORT.md"  # a folder holding this was written by `stepwall report`


def umask_mode(folder: bool = False) -> int:
    """The mode a plain ``open``/``mkdir`` would give under the process's umask (mkstemp and
    mkdtemp give 0600/0700: a shared page or report would be private to its writer)."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if folder else 0o666) & ~mask


def _writable_folder(folder: Path, where: str, target: str) -> None:
    if not folder.exists():
        raise SpecError(where, target, f"folder {folder} not found", "an existing folder")
    if not folder.is_dir():
        raise SpecError(where, target, f"{folder} is not a folder", "a path inside a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SpecError(where, target, f"cannot write in {folder} (permission denied)",
                        "a writable folder")  # fmt: skip


def file_target(path: str, where: str = "-o", suffixes: tuple[str, ...] = ()) -> Path:
    """Check that ``path`` can be written as a file (before any work is done)."""
    p = Path(path)
    if p.is_dir():
        raise SpecError(where, path, "is a folder", "a file name")
    if suffixes and p.suffix not in suffixes:
        raise SpecError(where, path, "unknown output format",
                        " or ".join(f"a {s} file" for s in suffixes))  # fmt: skip
    _writable_folder(p.parent if str(p.parent) else Path("."), where, path)
    if p.exists() and not os.access(p, os.W_OK):
        raise SpecError(where, path, "cannot overwrite (permission denied)", "a writable file")
    return p


def folder_target(path: str, where: str = "-o", page: Path | None = None) -> Path:
    """Check that ``path`` can become a report folder: new, empty, or a previous report's
    (one holding REPORT.md, or the folder of the existing report page ``page``). Missing
    parent folders are created when the report is written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SpecError(where, path, "is a file", "a folder for the report")
    previous = (p / REPORT_MARKER).is_file() or (page is not None and page.is_file())
    if p.is_dir() and any(p.iterdir()) and not previous:
        raise SpecError(where, path, "is a folder that holds other files",
                        "a new or empty folder, or a previous report's")  # fmt: skip
    ancestor = p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    _writable_folder(ancestor, where, path)
    return p


def write_file(path: Path, data: str | bytes, check: Callable[[Path], Any] | None = None) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file, then a rename); ``check``, if
    given, reads the temporary file (named with ``path``'s suffix) first and raises to keep
    the target as it was."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        suffix = ".tmp" if check is None else path.suffix
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise SpecError(str(path), "", f"cannot write: {e.strerror or e}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_stream(path: Path, fmt: Any, table: Any) -> int:
    """Write a (streamed) table in a format to ``path`` atomically; return the rows."""
    from stepwall.formats import Table

    rows = [0]

    def counted() -> Any:
        for chunk in table.chunks():
            rows[0] += len(chunk[0]) if chunk else 0
            yield chunk

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, umask_mode())
        f: IO[Any] = (
            os.fdopen(fd, "wb") if fmt.binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        )
        with f:
            fmt.write(Table(table.columns, counted, table.title, table.document), f)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise SpecError(str(path), "", f"cannot write: {e.strerror or e}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return rows[0]


def write_folder(path: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write ``files`` (name -> bytes) as the folder ``path``, built aside and moved into
    place; a previous report folder there is replaced only once the new one is complete."""
    work = old = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.new-"))
        work.chmod(umask_mode(folder=True))
        for name, data in files.items():
            (work / name).write_bytes(data)
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
            os.replace(path, old / "previous")
        os.replace(work, path)
        work = None
    except BaseException as e:  # also Ctrl-C: put the previous report back first
        if old is not None and (old / "previous").exists() and not path.exists():
            os.replace(old / "previous", path)
        if isinstance(e, OSError):
            raise SpecError(str(path), "", f"cannot write: {e.strerror or e}") from None
        raise
    finally:
        for leftover in (work, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    return [path / name for name in files]
