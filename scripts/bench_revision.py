"""Run benchmark code against another git revision of pointrix_lite, side by side with the working tree.

Shared by ``bench_rasterizer.py --against REV`` and ``bench_train.py --against REV / --compare CFG@REV``.
Only ratios measured in one run count on these noisy machines, so a benchmark alternates between
the two code trees within one invocation instead of comparing against a number measured earlier.

How a revision runs: ``git worktree add --detach`` checks REV out once under
``build/bench_worktrees/<sha>`` (ignored by git, reused by later runs). The *measurement* code is
always the working tree's script; only the ``pointrix_lite`` package it imports comes from the
chosen tree. A worker subprocess gets ``POINTRIX_LITE_ROOT=<tree>`` and calls :func:`use_root` before
importing the package, so the same timing loop measures both. The native extension is built per
source hash, so each tree gets its own build without clobbering the other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT_ENV = "POINTRIX_LITE_ROOT"
WORKTREES = REPO / "build" / "bench_worktrees"


def use_root() -> Path:
    """Put the tree named by ``$POINTRIX_LITE_ROOT`` (default: this checkout) first on ``sys.path``.

    Call before the first ``import pointrix_lite``. Returns the tree in use.
    """
    root = Path(os.environ.get(ROOT_ENV, REPO)).resolve()
    sys.path.insert(0, str(root))
    return root


def resolve(rev: str) -> str:
    """Full commit hash of ``rev``; a one-line ``SystemExit`` when git does not know it."""
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"error: --against/--compare: git revision {rev!r} not found in {REPO}")
    return out.stdout.strip()


def tree_for(rev: str | None) -> Path:
    """The code tree for ``rev``: this checkout when ``rev`` is None, else a cached detached worktree."""
    if rev is None:
        return REPO
    sha = resolve(rev)
    path = WORKTREES / sha[:12]
    if not (path / "pointrix_lite").is_dir():
        WORKTREES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=False, capture_output=True)
        out = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(path), sha],
                             capture_output=True, text=True)  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(f"error: could not check out {rev} into {path}: {out.stderr.strip().splitlines()[-1]}")
    return path


def label(rev: str | None) -> str:
    """Short printable name: ``working tree`` or ``REV (sha)``."""
    return "working tree" if rev is None else f"{rev} ({resolve(rev)[:7]})"


def run_worker(tree: Path, argv: list[str], env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run ``python <argv>`` (a working-tree script and its worker flags) importing ``pointrix_lite`` from ``tree``,
    with ``env`` added to the environment."""
    env = dict(os.environ, **(env or {}), **{ROOT_ENV: str(tree)})
    env.pop("PYTHONPATH", None)  # a PYTHONPATH pointing at this checkout would shadow the chosen tree
    return subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, **kwargs)
