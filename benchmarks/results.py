"""Rewrite docs/results.md from the rows the benchmarks recorded (benchmarks/results/*.json).

    python -m benchmarks results            # rewrite docs/results.md
    python -m benchmarks results --check    # exit 1 if docs/results.md is not what the rows give

A benchmark run with ``--record`` stores its figures as rows of a named table in
``benchmarks/results/<table>.json`` (:func:`record`): each row keeps its cells, the command that measured
it, the machine (CPU model and vector ISA, or GPU) and the package version. A rerun with the same row key
replaces the row, so the page always shows the latest measurement of each case, and refreshing it is this
command, not hand editing. The JSON files are committed; the page is generated from them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import REPO, cpu_name, parser

STORE = REPO / "benchmarks" / "results"
PAGE = REPO / "docs" / "results.md"

HEAD = """# Results

Figures measured by the project's benchmarks, one table per benchmark, at the version named in each
row. Every row names its machine and the command that measured it; rerun that command with
`--record` to replace the row, then `python -m benchmarks results` to rewrite this page (it is
generated from `benchmarks/results/*.json`: do not edit it by hand). Seconds differ by up to 2x
between two hours on shared machines: only ratios measured side by side in one run compare.
"""


@dataclass(frozen=True)
class Table:
    """One table of the page: ``name`` (its JSON file's stem), a title, one paragraph on what it
    measures and why, the cell columns in order, and ``order`` (tables are sorted by it, then name)."""

    name: str
    title: str
    about: str
    columns: tuple[str, ...]
    order: int = 50


def machine() -> str:
    """The machine a figure was measured on: the GPU's name under CUDA, else the CPU's model name with
    its widest vector ISA (the native rasterizer's speed depends on it) and core count."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    isa = "scalar"
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
        isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else isa
    except OSError:
        isa = platform.machine()
    return f"{cpu_name()} ({isa}, {os.cpu_count()} cores)"


def version() -> str:
    """The package version in pyproject.toml (the release the figures belong to), with the short
    commit when the tree is a git checkout (so a row can be traced to its code)."""
    found = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    ver = found.group(1) if found else "unknown"
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return f"{ver} ({rev})" if rev else ver


def record(
    table: Table,
    key: str,
    cells: Mapping[str, Any],
    command: str | Sequence[str],
    *,
    on: str | None = None,
    at: str | None = None,
    store: Path = STORE,
) -> Path:
    """Store one measured row of ``table`` under ``key`` (replacing a row with the same key) and return
    the JSON file. ``cells`` maps column names to values (missing columns print empty); ``command`` is
    what measured it (a list is shell-joined); ``on`` the machine (default: :func:`machine`); ``at`` the
    version measured (default: :func:`version`, this checkout's), for a figure measured on another revision."""
    unknown = set(cells) - set(table.columns)
    if unknown:
        raise ValueError(f"table {table.name}: no column {sorted(unknown)} (columns: {list(table.columns)})")
    if not isinstance(command, str):
        command = shlex.join(command)
    path = store / f"{table.name}.json"
    data = _load(path) if path.exists() else {}
    rows = [r for r in data.get("rows", []) if r["key"] != key]
    rows.append(
        {"key": key, "cells": dict(cells), "command": command, "machine": on or machine(), "version": at or version()}
    )
    data = {
        "title": table.title,
        "about": table.about,
        "columns": list(table.columns),
        "order": table.order,
        "rows": sorted(rows, key=lambda r: r["key"]),
    }
    store.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return path


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"error: {path}: cannot read recorded results ({exc})") from None
    if not isinstance(data.get("rows"), list) or not isinstance(data.get("columns"), list):
        raise SystemExit(f"error: {path}: not a results table (needs 'columns' and 'rows')")
    return data


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        value = f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_page(store: Path = STORE) -> str:
    """The whole of docs/results.md from the tables in ``store``."""
    tables = sorted((_load(p) | {"name": p.stem} for p in store.glob("*.json")), key=lambda t: (t["order"], t["name"]))
    parts = [HEAD]
    for t in tables:
        cols = t["columns"]
        lines = [f"## {t['title']}", "", t["about"], ""]
        lines.append("| " + " | ".join([*cols, "machine", "version"]) + " |")
        lines.append("|" + " --- |" * (len(cols) + 2))
        commands: list[str] = []
        for r in t["rows"]:
            lines.append(
                "| " + " | ".join([*(_cell(r["cells"].get(c)) for c in cols), r["machine"], r["version"]]) + " |"
            )
            if r["command"] not in commands:
                commands.append(r["command"])
        lines += ["", "Measured with:", "", "```bash", *commands, "```", ""]
        parts.append("\n".join(lines))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/results.md differs from the rows")
    p.add_argument("--store", type=Path, default=STORE, help=argparse.SUPPRESS)
    p.add_argument("--page", type=Path, default=PAGE, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    text = render_page(args.store)
    if args.check:
        same = args.page.exists() and args.page.read_text() == text
        print(
            f"{args.page}: {'up to date' if same else 'differs from ' + str(args.store) + '; run python -m benchmarks results'}"
        )
        return 0 if same else 1
    args.page.write_text(text)
    n = sum(len(_load(f)["rows"]) for f in args.store.glob("*.json"))
    print(f"wrote {args.page} ({n} rows from {args.store})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
