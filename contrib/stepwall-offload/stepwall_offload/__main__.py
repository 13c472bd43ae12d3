"""``python -m stepwall_offload``: the shipped catalog files, one path a line.

stepwall resolves catalog *names* from its own catalog only; pass these paths instead:
``stepwall eval $(python -m stepwall_offload k26-gh200-offload)``.
"""

import sys

from stepwall_offload import SPECS, scenario


def main(argv: list[str]) -> int:
    if argv:
        try:
            print(*(scenario(name) for name in argv), sep="\n")
        except FileNotFoundError as e:
            print(f"stepwall-offload: {e}", file=sys.stderr)
            return 2
        return 0
    for path in sorted(SPECS.rglob("*.toml")):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
