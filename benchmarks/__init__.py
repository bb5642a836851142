"""The project's benchmarks behind one command, run from the repository root:

    .venv/bin/python -m benchmarks                 # list them, each with its one-line description
    .venv/bin/python -m benchmarks NAME --help     # one benchmark's options
    .venv/bin/python -m benchmarks NAME [options]

``python -m`` finds this package in the current folder, so the command needs the repository root as
its working directory (elsewhere: ``PYTHONPATH=/path/to/checkout python -m benchmarks ...``). The
worker processes a benchmark starts find it from any folder (:mod:`benchmarks.workers`).

Every module here is a benchmark with ``main(argv) -> int``, except the shared helpers: the names
in :data:`HELPERS` and the ones starting with ``_``. Nothing here is installed with ``pointrix_lite``
(pyproject's package discovery includes ``pointrix_lite*`` only): it is a development tool that
measures this checkout and, side by side, other revisions of it.
"""

from __future__ import annotations

from pathlib import Path

HELPERS = frozenset({"curves", "datasets", "revision", "scenes", "training", "workers"})
_HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every benchmark's name (its module's), sorted."""
    return sorted(p.stem for p in _HERE.glob("*.py") if not p.stem.startswith("_") and p.stem not in HELPERS)


def summary(name: str) -> str:
    """The first line of benchmark ``name``'s docstring, read from its source: importing a benchmark
    may import torch (seconds), too slow for a list of a dozen."""
    import ast

    doc = ast.get_docstring(ast.parse((_HERE / f"{name}.py").read_text())) or ""
    return doc.splitlines()[0] if doc else ""
