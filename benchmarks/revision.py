"""Other git revisions of this checkout, for side-by-side runs: their code tree and their config files.

``--against REV`` (rasterizer, train) measures REV's code with the same measuring code as the
working tree's; ``--compare CFG@REV`` (train, end_of_run) is REV's config *and* code; ``--config
CFG@REV`` (train) is REV's config file on both trees, so a ratio is about code, not recipe.

A revision's tree: ``git worktree add --detach`` checks REV out once under
``build/bench_worktrees/<sha>`` (ignored by git, reused by later runs). Workers import its
``pointrix_lite`` (:mod:`benchmarks.workers`).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from benchmarks._common import REPO

WORKTREES = REPO / "build" / "bench_worktrees"


def resolve(rev: str) -> str:
    """Full commit hash of ``rev``; a one-line ``SystemExit`` when git does not know it."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"error: --against/--compare: git revision {rev!r} not found in {REPO}")
    return out.stdout.strip()


def worktree_path(rev: str) -> Path:
    """Where :func:`tree_for` checks ``rev`` out (nothing is checked out here)."""
    return WORKTREES / resolve(rev)[:12]


def tree_for(rev: str | None) -> Path:
    """The code tree for ``rev``: this checkout when ``rev`` is None, else a cached detached worktree."""
    if rev is None:
        return REPO
    path = worktree_path(rev)
    sha = resolve(rev)
    if not (path / "pointrix_lite").is_dir():
        WORKTREES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=False, capture_output=True)
        out = subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(path), sha],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise SystemExit(f"error: could not check out {rev} into {path}: {out.stderr.strip().splitlines()[-1]}")
    return path


def label(rev: str | None) -> str:
    """Short printable name: ``working tree`` or ``REV (sha)``."""
    return "working tree" if rev is None else f"{rev} ({resolve(rev)[:7]})"


def compare_spec(text: str) -> tuple[str, str | None, list[str]]:
    """``CFG[@REV][+k=v...]`` -> (CFG[@REV] as given, REV or None, overrides)."""
    head, *overrides = text.split("+")
    rev = head.partition("@")[2] or None
    return head, rev, overrides


def scratch_folder(out: Path) -> Path:
    """A fresh folder under ``out`` (created) for the config files :func:`config_file` writes: one per
    invocation, so runs started side by side never read each other's."""
    out.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="configs_", dir=out))


def config_file(spec: str, tree: Path, scratch: Path) -> Path:
    """``CFG`` (a path) or ``CFG@REV`` (its contents at REV, written under ``scratch``) as a file.

    A relative CFG is looked up in ``tree`` (``--compare``: the revision's own copy)."""
    path, _, rev = spec.partition("@")
    if rev:
        sha = resolve(rev)
        rel = (Path(path).resolve().relative_to(REPO) if Path(path).is_absolute() else Path(path)).as_posix()
        out = subprocess.run(["git", "-C", str(REPO), "show", f"{sha}:{rel}"], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"error: --config/--compare: {rel} does not exist at revision {rev}")
        dest = scratch / f"{sha[:12]}_{Path(rel).name}"
        dest.write_text(out.stdout)
        return dest
    p = Path(path)
    p = p if p.is_absolute() else (tree / p if (tree / p).is_file() else REPO / p)
    if not p.is_file():
        raise SystemExit(f"error: config file {path} not found")
    return p
