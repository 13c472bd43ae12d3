"""Progress of long work on stderr: a bar on a terminal, else a line every few seconds, and
nothing for a quick run or with ``--quiet`` (stdout never carries it). Standard library only,
so that the CLI can import it at start-up."""

from __future__ import annotations

import re
import sys
import time
from typing import Any

EVERY = 5.0  # seconds between progress lines where stderr is not a terminal
# a progress line as `ProgressBar` writes it off a terminal: when one comes depends on the
# machine's speed, so a tool that compares output (tools/docs_console.py) leaves them out
PROGRESS_LINE = re.compile(r"^stepwall: [\d,]+/[\d,]+ \w+ \(\d+%\), [\d.,e+-]+ \w+/s")


def _now() -> float:
    """The clock progress reads (a function of its own, so that a test can replace it)."""
    return time.monotonic()


def quiet_argument(p: Any) -> None:
    """``--quiet`` of the commands that report progress (sweep, search, validate)."""
    p.add_argument("-q", "--quiet", action="store_true",
                   help=f"no progress on stderr (else a bar on a terminal, or a line every "
                   f"{EVERY:g} s elsewhere, once a run lasts that long)")  # fmt: skip


class ProgressBar:
    """Progress on stderr: on a terminal a bar redrawn in place once a run passes ``after``
    seconds; elsewhere (a log, a pipe) a line with done/total and the rate every ``every``
    seconds, the first after ``every`` seconds, so that a quick run prints nothing. Nothing
    at all when ``quiet``; stdout never carries it."""

    def __init__(self, stream: Any = None, after: float = 1.0, *, every: float = EVERY,
                 what: str = "points", quiet: bool = False) -> None:  # fmt: skip
        self.stream = stream or sys.stderr
        self.start = self.last = _now()
        self.after, self.every, self.what, self.quiet = after, every, what, quiet
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        now = _now()
        if not getattr(self.stream, "isatty", lambda: False)():
            if now - self.last >= self.every:
                self.last = now
                rate = done / max(now - self.start, 1e-9)
                share, speed = done / max(total, 1), f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
                self.stream.write(f"stepwall: {done:,}/{total:,} {self.what} ({share:.0%}), "
                                  f"{speed} {self.what}/s\n")  # fmt: skip
                self.stream.flush()
            return
        if now - self.start < self.after and not self.shown:
            return
        self.shown = True
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
