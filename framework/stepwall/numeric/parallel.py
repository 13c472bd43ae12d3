"""Independent jobs shared with one forked helper process, results taken in order.

A report's heavy blocks (derivations, frontier searches) depend only on the specs and their
own options, so their work can run before they are rendered. `Jobs` forks one helper (where
the machine has a second core and the platform forks): the caller takes jobs from the front,
in the order it needs their results; the helper takes them from the back and sends each
result through a pipe. A job the helper could not finish (an error, a result that does not
pickle) is run again by the caller, where its error is raised as usual.

Every result, whoever computed it, is passed through ``pickle`` once (a result that does not
pickle is used as computed), so what the caller gets does not depend on which process
computed it: the output is the same bytes with and without the helper, on an idle or a busy
machine. ``STEPWALL_NO_FORK=1`` runs every job in the calling process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from stepwall.core.errors import env_flag

_HEADER = struct.Struct("<iQ")  # job index (-1: could not), payload length


def helper_available() -> bool:
    """Whether a helper process would run beside this one: a second core, and fork from a
    process with one thread (forking beside other threads may copy a lock one of them
    holds: in a notebook or a server stepwall stays in its own process)."""
    if not hasattr(os, "fork") or env_flag("STEPWALL_NO_FORK"):
        return False
    if threading.active_count() > 1:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        cores = os.cpu_count() or 1
    return cores >= 2


class Jobs:
    """``jobs[k]()`` for each k, the caller asking with `result(k)` in increasing order."""

    def __init__(self, jobs: Sequence[Callable[[], Any]], helper: bool | None = None) -> None:
        self.jobs = list(jobs)
        self.done: dict[int, tuple[bool, bytes]] = {}
        self.pid = 0
        if len(self.jobs) < 2 or not (helper_available() if helper is None else helper):
            return

        ctx = multiprocessing.get_context("fork")
        # jobs [0, front) are the caller's, [back, n) the helper's; one lock guards both
        self.front = ctx.Value("i", 0, lock=False)
        self.back = ctx.Value("i", len(self.jobs), lock=False)
        self.lock = ctx.Lock()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the helper: never returns
            os.close(read)
            self._helper(write)
        os.close(write)
        self.pid, self.pipe = pid, os.fdopen(read, "rb")
        # a thread keeps the pipe drained, so the helper never waits for the caller
        self.arrived = threading.Condition()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _helper(self, fd: int) -> None:
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            with os.fdopen(fd, "wb") as out:
                while True:
                    with self.lock:
                        if self.back.value <= self.front.value:
                            break
                        self.back.value -= 1
                        k = self.back.value
                    try:
                        payload = pickle.dumps(self.jobs[k](), pickle.HIGHEST_PROTOCOL)
                    except BaseException:  # the caller runs it again and reports the error
                        out.write(_HEADER.pack(-1, k))
                    else:
                        out.write(_HEADER.pack(k, len(payload)) + payload)
                    out.flush()
        except BaseException:
            code = 1
        finally:
            os._exit(code)

    def result(self, k: int) -> Any:
        """Job ``k``'s result (computed here or received from the helper), through pickle."""
        if self.pid and k not in self.done:
            with self.lock:
                mine = k < self.back.value
                if mine:
                    self.front.value = max(self.front.value, k + 1)
            if not mine:
                with self.arrived:
                    self.arrived.wait_for(lambda: k in self.done or not self.reader.is_alive())
        with self.arrived if self.pid else contextlib.nullcontext():
            ok, payload = self.done.pop(k, (False, b""))
        if ok:
            return pickle.loads(payload)
        value = self.jobs[k]()
        try:
            return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError):  # as the helper's would
            return value

    def _drain(self) -> None:
        """Receive the helper's results into ``done`` until it ends (the reader thread)."""
        try:
            while True:
                head = self.pipe.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    break
                k, size = _HEADER.unpack(head)
                got = (False, b"") if k < 0 else (True, self.pipe.read(size))
                with self.arrived:
                    self.done[size if k < 0 else k] = got
                    self.arrived.notify_all()
        except (OSError, ValueError):  # the pipe closed under the thread
            pass
        finally:
            with self.arrived:
                self.arrived.notify_all()

    def close(self) -> None:
        """Stop the helper (if still running) and reap it."""
        if not self.pid:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        self.reader.join()
        self.pipe.close()
        self.pid = 0

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
