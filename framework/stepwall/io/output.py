"""Writing results: targets checked before any work, files written atomically.

A file is written under a temporary name in its folder, then renamed over the target; a
report folder is built beside the target and moved into place. An interrupted or failed run
leaves the previous output intact, or nothing. A symlink is followed (its target is
replaced, the link kept); a FIFO, a character device (/dev/null) or a process's descriptor
(/dev/stdout) is written through, never replaced; any other node (a block device, a socket)
is refused. Every failure is a one-line `SpecError`.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from stepwall.core.errors import SpecError
from stepwall.core.terminal import visible
from stepwall.io.formats import Table
from stepwall.numeric.files import atomic_write

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


def _node(mode: int) -> str:
    """What a file mode names, for a message: "a file", "a block device", …"""
    kinds = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def _descriptor(path: Path) -> Path | None:
    """The process's descriptor that ``path``'s links lead through (/dev/stdout ->
    /proc/self/fd/1, /dev/fd/N: /proc/PID/fd/N), or None: it names an open stream, not a
    file to replace."""
    p = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's limit on links followed
        if not p.is_symlink():
            return None
        folder = Path(os.path.realpath(p.parent))
        if folder.match("/proc/*/fd"):
            return folder / p.name
        p = Path(os.path.abspath(folder / os.readlink(p)))
    return None


def _through(path: Path, where: str, key: str) -> bool:
    """Whether ``path`` is written through (a FIFO, a character device, a descriptor such as
    /dev/stdout) rather than replaced (a regular file, a missing path, a symlink's target);
    a node of any other kind (a block device, a socket) is refused."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing or a dangling link: a new file (a bad folder is said later)
        return False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return True
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return _descriptor(path) is not None
    raise SpecError(where, key, f"is {_node(mode)}",
                    "a regular file, a FIFO or a character device")  # fmt: skip


def file_target(
    path: str, where: str = "-o", suffixes: tuple[str, ...] = (), streams: bool = True
) -> Path:
    """Check that ``path`` can be written as a file (before any work is done): one of
    ``suffixes`` if given, or, with ``streams``, a FIFO, device or descriptor of any name
    (/dev/stdout)."""
    p = Path(path)
    if not path:
        raise SpecError(where, "", "is an empty path", "a file name")
    if p.is_dir():
        raise SpecError(where, path, "is a folder", "a file name")
    through = _through(p, where, path)
    if suffixes and p.suffix not in suffixes and not (through and streams):
        raise SpecError(where, path, "unknown output format",
                        " or ".join(f"a {s} file" for s in suffixes))  # fmt: skip
    if not through:  # replaced: a new file in the (link target's) folder
        _writable_folder(Path(os.path.realpath(p)).parent if p.is_symlink() else p.parent,
                         where, path)  # fmt: skip
    if p.exists() and not os.access(p, os.W_OK):
        raise SpecError(where, path, "cannot overwrite (permission denied)", "a writable file")
    return p


def folder_target(path: str, where: str = "-o", page: Path | None = None) -> Path:
    """Check that ``path`` can become a report folder: new, empty, or a previous report's
    (one holding REPORT.md, or the folder of the existing report page ``page``). Missing
    parent folders are created when the report is written."""
    p = Path(path)
    if not path:
        raise SpecError(where, "", "is an empty path", "a folder for the report")
    if p.exists() and not p.is_dir():
        raise SpecError(where, path, f"is {_node(os.stat(p).st_mode)}", "a folder for the report")
    previous = (p / REPORT_MARKER).is_file() or (page is not None and page.is_file())
    if p.is_dir() and any(p.iterdir()) and not previous:
        raise SpecError(where, path, "is a folder that holds other files",
                        "a new or empty folder, or a previous report's")  # fmt: skip
    ancestor = p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    _writable_folder(ancestor, where, path)
    return p


def _write(path: Path, mode: str, fill: Callable[[IO[Any]], object],
           check: Callable[[Path], Any] | None = None) -> None:  # fmt: skip
    """Write ``path`` with ``fill(stream)`` (``mode`` "w" or "wb"): through it, or atomically
    beside the file a link names (`atomic_write`); ``check``, if given, reads the written
    file (named with ``path``'s suffix) first and raises to keep the target as it was."""
    text: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
    try:
        through = _through(path, str(path), "")
        if through and check is None:
            _write_through(path, mode, text, fill)
        elif through:  # checked in a scratch copy, then written through
            with tempfile.TemporaryDirectory(dir=Path(os.path.realpath(path)).parent) as scratch:
                copy = Path(scratch) / f"checked{path.suffix}"
                atomic_write(copy, fill, text="b" not in mode, check=check)
                raw = copy.read_bytes()
            _write_through(path, "wb", {}, lambda f: f.write(raw))
        else:
            real = Path(os.path.realpath(path))
            atomic_write(real, fill, text="b" not in mode, check=check, mode=umask_mode())
    except BrokenPipeError:  # a reader that left: as for stdout
        raise
    except OSError as e:
        raise SpecError(str(path), "", f"cannot write: {e.strerror or e}") from None


def _write_through(path: Path, mode: str, text: dict[str, Any],
                   fill: Callable[[IO[Any]], object]) -> None:  # fmt: skip
    """Open ``path`` for writing as it is (no temporary, no rename, nothing created) and
    ``fill`` it. One of this process's descriptors (/dev/stdout) is written as itself, where
    the output so far ends; another's onto a regular file is appended to."""
    sys.stdout.flush()  # /dev/stdout: after what was printed before
    fd = _descriptor(path)
    if fd is not None and fd.parent == Path(f"/proc/{os.getpid()}/fd"):
        opened = os.dup(int(fd.name))
    else:
        append = os.O_APPEND if stat.S_ISREG(os.stat(path).st_mode) else 0
        opened = os.open(path, os.O_WRONLY | append)
    with os.fdopen(opened, mode, **text) as f:
        fill(f)


def announce(target: Path, line: str) -> None:
    """Print ``line`` (what was written to ``target``) on stdout, or on stderr where
    ``target`` is stdout itself (/dev/stdout), which then holds only the output."""
    try:
        own = os.path.samestat(os.stat(target), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):  # no such file, or a stdout without a descriptor
        own = False
    print(visible(line), file=sys.stderr if own else sys.stdout)


def write_file(path: Path, data: str | bytes, check: Callable[[Path], Any] | None = None) -> None:
    """Write ``data`` to ``path``: atomically, or through a FIFO, device or descriptor (see
    `_write`)."""
    raw = data.encode() if isinstance(data, str) else data
    _write(path, "wb", lambda f: f.write(raw), check)


def write_stream(path: Path, fmt: Any, table: Any) -> int:
    """Write a (streamed) table in a format to ``path`` (see `_write`); return the rows."""

    rows = [0]

    def counted() -> Any:
        for chunk in table.chunks():
            rows[0] += len(chunk[0]) if chunk else 0
            yield chunk

    counting = Table(table.columns, counted, table.title, table.document)
    _write(path, "wb" if fmt.binary else "w", lambda f: fmt.write(counting, f))
    return rows[0]


def write_folder(path: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write ``files`` (name -> bytes) as the folder ``path``, built aside and moved into
    place; a previous report folder there is replaced only once the new one is complete.
    A link is followed (the folder it names is replaced); a node that is no folder is kept."""
    given, path = path, Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.exists() and not path.is_dir():
        raise SpecError(str(given), "", f"is {_node(os.stat(path).st_mode)}",
                        "a folder for the report")  # fmt: skip
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
