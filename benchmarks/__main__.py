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
    module = importlib.import_module(f"benchmarks.{name}")
    if "--record" in argv and not getattr(module, "RECORDS_ITSELF", False):
        return recorded(name, module, [a for a in argv[1:] if a != "--record"])
    return module.main(argv[1:]) or 0


def recorded(name: str, module, args: list[str], store=None) -> int:
    """Run benchmark ``name`` with its output shown as usual and kept, then store its closing lines (where
    every benchmark prints its figures) as a row of its table in benchmarks/results/ (docs/results.md)."""
    import contextlib
    import io

    from benchmarks.results import STORE, Table, record

    class Tee(io.TextIOBase):
        def __init__(self, *streams) -> None:
            self.streams = streams

        def write(self, text: str) -> int:
            for s in self.streams:
                s.write(text)
            return len(text)

    kept = io.StringIO()
    with contextlib.redirect_stdout(Tee(sys.stdout, kept)):
        code = module.main(args) or 0
    if code == 0:
        lines = [line.strip() for line in kept.getvalue().splitlines() if line.strip()]
        table = Table(name, f"python -m benchmarks {name}", summary(name), ("arguments", "result"), order=60)
        cells = {"arguments": " ".join(args) or "(defaults)", "result": " / ".join(lines[-RESULT_LINES:])}
        command = ["python", "-m", "benchmarks", name, *args]
        path = record(table, " ".join(args) or "defaults", cells, command, store=store or STORE)
        print(f"recorded in {path}; python -m benchmarks results rewrites docs/results.md")
    return code


RESULT_LINES = 3  # the closing lines a benchmark prints its figures in


if __name__ == "__main__":
    sys.exit(main())
