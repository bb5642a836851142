"""``python -m benchmarks [NAME [options...]]``: run benchmark NAME, or list them all."""

from __future__ import annotations

import importlib
import sys

from benchmarks import names, summary


def listing() -> str:
    """Usage and one line per benchmark."""
    rows = [f"  {name:<12} {summary(name)}" for name in names()]
    head = "usage: python -m benchmarks NAME [options]   (from the repository root; NAME --help: its options)"
    return "\n".join([head, "", "benchmarks:", *rows])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("list", "-h", "--help"):
        print(listing())
        return 0
    name = argv[0].replace("-", "_")  # end-of-run works as well as end_of_run
    if name not in names():
        print(f"error: unknown benchmark {argv[0]!r}\n\n{listing()}", file=sys.stderr)
        return 2
    return importlib.import_module(f"benchmarks.{name}").main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
