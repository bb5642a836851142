"""What several benchmarks do alike: their command line's frame, the machine they report, timing a call."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The argument parser of benchmark ``module`` (its ``__name__``): the module docstring as help,
    laid out as written (it holds example commands), under the name the user typed."""
    name = module.rpartition(".")[2]
    return argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_run_arguments(p: argparse.ArgumentParser, module: str) -> None:
    """``--out`` (default: a folder of the benchmark's own under the temp dir) and ``key=value`` overrides,
    what every benchmark that trains whole configs takes."""
    name = module.rpartition(".")[2]
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / f"pointrix_bench_{name}")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every run")


def load_average() -> str:
    """``os.getloadavg()`` as ``"1.2 0.9 0.7"``: these machines are shared, so every figure says how busy."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_name() -> str:
    """The CPU's model name (lscpu), to go beside measured seconds."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and its wall seconds."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def fresh_run(exp_dir: Path) -> Path:
    """Clear what an earlier run left in a benchmark's scratch ``exp_dir``: ``train.py`` refuses a folder that
    holds a run (``engine/run_folder.py``), and other revisions' ``train.py`` may not know ``--overwrite``."""
    from pointrix_lite.engine.run_folder import clear_run  # here: importing pointrix_lite imports torch

    clear_run(Path(exp_dir))
    return Path(exp_dir)


def code_tree(against: str | None) -> tuple[str, Path] | None:
    """``--against``: a folder holding ``pointrix_lite`` (e.g. a copy of the tree before a change) or a
    git revision (checked out once, :mod:`benchmarks.revision`), as ``(label, tree)``; None for None."""
    if against is None:
        return None
    path = Path(against)
    if (path / "pointrix_lite").is_dir():
        return str(path), path.resolve()
    from benchmarks import revision  # here: revision imports this module

    return revision.label(against), revision.tree_for(against)
