"""Text bound for a terminal: control characters made visible.

Names come from user files (a scenario's, a model's, an entry's, a row's), so any of them
may hold an escape sequence, a NUL, a bell, a newline or a right-to-left override. Each
printed name (or a whole printout, its lines kept) passes through `visible`, which writes
those as escapes (``\\x1b``, ``\\u202e``) and leaves every other character as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # embeddings, overrides, isolates
_ESCAPES = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))},  # C0, DEL, C1
    **{c: f"\\u{c:04x}" for c in _BIDI},
    **{ord(c): repr(c)[1:-1] for c in "\t\n\r"},  # tab, newline, CR: \t \n \r
}


_LINES = {c: e for c, e in _ESCAPES.items() if c != ord("\n")}


def visible(text: str, lines: bool = False) -> str:
    """``text`` with each control character (C0, DEL, C1) and bidirectional override or
    isolate (U+202A–U+202E, U+2066–U+2069) written as a visible escape; with ``lines``, a
    whole printout: its newlines are kept."""
    return text.translate(_LINES if lines else _ESCAPES)


_WARNED: set[str] = set()


def reset_warnings() -> None:
    """Forget the warnings given: a new command-line run warns about each value once."""
    _WARNED.clear()


def warn(lines: Sequence[str]) -> None:
    """One stderr line per warning (plausibility of spec values), each once per run."""
    for line in lines:
        if line not in _WARNED:
            _WARNED.add(line)
            print(f"stepwall: warning: {line}", file=sys.stderr)
