"""Keep ``console`` blocks in the docs true: rerun each ``$ stepwall …`` and compare its output.

    python tools/docs_console.py docs/derivations.md          # report stale blocks (exit 1)
    python tools/docs_console.py --write docs/derivations.md  # rewrite them from live runs

A block qualifies when its first line is ``$ stepwall …`` (a pipe into head/tail is allowed);
it runs in the repository root under bash, stderr folded into stdout.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```console\n\$ (stepwall [^\n]*)\n(.*?)```", re.S)


def run(command: str) -> str:
    out = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return out.stdout + out.stderr


def refresh(text: str) -> tuple[str, list[str]]:
    """The text with every qualifying block's output replaced; the commands that changed."""
    stale: list[str] = []

    def sub(m: re.Match[str]) -> str:
        live = run(m.group(1))
        if live != m.group(2):
            stale.append(m.group(1))
        return f"```console\n$ {m.group(1)}\n{live}```"

    return BLOCK.sub(sub, text), stale


def main(argv: list[str]) -> int:
    write = "--write" in argv
    status = 0
    for name in [a for a in argv if a != "--write"]:
        path = Path(name)
        new, stale = refresh(path.read_text(encoding="utf-8"))
        for cmd in stale:
            print(f"{path}: stale output for: {cmd}")
        if stale and write:
            path.write_text(new, encoding="utf-8")
        status |= bool(stale) and not write
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
