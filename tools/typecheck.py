"""mypy --strict on the stepwall package (framework/ and plugins/), as it is imported.

The source tree maps package ``stepwall`` to ``framework/`` and ``stepwall.plugins`` to
``plugins/`` (pyproject's package-dir), which mypy cannot follow through an editable
install; so this links the tree into a temporary ``stepwall/`` package and runs
``mypy -p stepwall`` with the settings in pyproject.toml. Exit code is mypy's.

Run: python tools/typecheck.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="stepwall-mypy-") as tmp:
        package = Path(tmp) / "stepwall"
        package.mkdir()
        for entry in (ROOT / "framework").iterdir():
            if entry.name != "__pycache__":
                (package / entry.name).symlink_to(entry)
        (package / "plugins").symlink_to(ROOT / "plugins")
        cache = os.environ.get("MYPY_CACHE_DIR", str(Path(tmp) / ".mypy_cache"))
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", cache, "-p", "stepwall"]  # fmt: skip
        return subprocess.run(cmd, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
