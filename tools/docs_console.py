"""Keep ``console`` blocks in the docs true: rerun each ``$ command`` and compare its output.

    python tools/docs_console.py docs/derivations.md          # report stale blocks (exit 1)
    python tools/docs_console.py --write docs/derivations.md  # rewrite them from live runs

Every ```console block whose first line starts with ``$ `` is run in the repository root under
bash (stderr folded into stdout); a here-document (``$ python - <<'PY'`` … ``PY``) is part of
the command. In the expected output a line ``...`` stands for any lines, and timings that
differ from run to run (``imported in 12 ms``, ``2 passed in 3.18s``) are compared as
``…``. Commands with instructions rather than output (``pip install``) belong in ```sh
blocks, which are not run. docs/writing-plugins.md runs with the guide's example plugin and
contrib/stepwall-offload installed, as the docs test runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from stepwall.core.progress import PROGRESS_LINE

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^( *)```console\n\1\$ ([^\n]*)\n(.*?)^\1```", re.S | re.M)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
VOLATILE = (
    (re.compile(r"imported in \d+ ms"), "imported in … ms"),
    (re.compile(r" in \d+\.\d+s\b"), " in …s"),
)


def run(command: str, env: dict[str, str] | None = None) -> str:
    bindir = str(Path(sys.executable).parent)  # the stepwall of this interpreter first
    environ = {**os.environ, **(env or {})}
    environ["PATH"] = bindir + os.pathsep + environ.get("PATH", "")
    environ.setdefault("COLUMNS", "100")
    out = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, env=environ, check=False
    )
    # progress lines come or not with the machine's load (`PROGRESS_LINE`): not output
    err = out.stderr.splitlines(keepends=True)
    return out.stdout + "".join(e for e in err if not PROGRESS_LINE.fullmatch(e.rstrip("\n")))


def _split(first: str, rest: str) -> tuple[str, str]:
    """The command (with its here-document, if any) and the expected output."""
    m = HEREDOC.search(first)
    if not m:
        return first, rest
    lines = rest.split("\n")
    end = lines.index(m.group(1))
    return "\n".join([first, *lines[: end + 1]]), "\n".join(lines[end + 1 :])


def _mask(text: str) -> str:
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def matches(expected: str, live: str) -> bool:
    """``live`` equals ``expected``, where a line ``...`` in ``expected`` stands for any lines."""
    exp, got = _mask(expected).split("\n"), _mask(live)
    if "..." not in exp:
        return exp == got.split("\n")
    parts = []
    for i, line in enumerate(exp):
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line) + ("" if i == len(exp) - 1 else "\n"))
    return re.fullmatch("".join(parts), got) is not None


BROKEN = "stepwall: internal error"  # a bug's output is never a doc's


def refresh(
    text: str, env: dict[str, str] | None = None, broken: list[str] | None = None
) -> tuple[str, list[str]]:
    """The text with every stale block's output replaced; the commands that were stale. A
    command whose live output is an internal error keeps its old output and is added to
    ``broken``."""
    stale: list[str] = []

    def sub(m: re.Match[str]) -> str:
        pad = m.group(1)  # a block indented inside a list item
        body = "\n".join(line.removeprefix(pad) for line in m.group(3).split("\n"))
        command, expected = _split(m.group(2), body)
        live = run(command, env)
        if matches(expected, live):
            return m.group(0)
        stale.append(command.split("\n")[0])
        if BROKEN in live:
            if broken is not None:
                broken.append(command.split("\n")[0])
            return m.group(0)
        lines = f"$ {command}\n{live}".splitlines(True)
        shown = "".join(pad + line if line.strip() else line for line in lines)
        return f"{pad}```console\n{shown}{pad}```"

    return BLOCK.sub(sub, text), stale


def guide_env(root: Path) -> dict[str, str]:
    """The plugin guide's environment (its example plugin and contrib/stepwall-offload found
    through entry points, ``S`` the offload scenarios), written under ``root``: what the docs
    test gives docs/writing-plugins.md."""
    sys.path.insert(0, str(ROOT / "tests"))
    import conftest  # the tests' writer of the guide's package

    project, site = conftest.write_guide_package(root)
    offload = ROOT / "contrib" / "stepwall-offload"
    conftest.dist_info(site, offload / "pyproject.toml")
    return {
        "PYTHONPATH": os.pathsep.join(str(p) for p in (project, site, offload)),
        "S": "contrib/stepwall-offload/stepwall_offload/specs/scenarios",
    }


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="docs_console.py",
        description="Rerun each `$ command` of the docs' console blocks and compare (or "
        "rewrite) its output.",
    )
    p.add_argument("docs", nargs="+", type=Path, help="Markdown files with ```console blocks")
    p.add_argument("--write", action="store_true", help="rewrite stale blocks from live runs")
    ns = p.parse_args(argv)
    write = ns.write
    status = 0
    for path in ns.docs:
        if not path.is_file():
            p.error(f"{path}: not a file")
        with tempfile.TemporaryDirectory() as tmp:
            env = guide_env(Path(tmp)) if path.name == "writing-plugins.md" else None
            broken: list[str] = []
            new, stale = refresh(path.read_text(encoding="utf-8"), env, broken)
        for cmd in stale:
            print(f"{path}: stale output for: {cmd}")
        for cmd in broken:
            print(f"{path}: internal error (not written): {cmd}")
        if stale and write:
            path.write_text(new, encoding="utf-8")
        status |= (bool(stale) and not write) or bool(broken)
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
