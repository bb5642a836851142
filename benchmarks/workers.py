"""Benchmark code in a fresh process that imports ``pointrix_lite`` from a chosen code tree.

Only ratios measured in one run count on these noisy machines, so a benchmark times this checkout
and another code tree (a revision's worktree, :mod:`benchmarks.revision`, or any checkout)
alternately within one invocation, each measurement in a fresh process (its own peak memory, its own
native extension build, per source hash, so the trees do not clobber each other's).

A worker is a function ``f(spec: dict) -> dict | None`` of a module in this package, named
``"benchmarks.MODULE:function"``. :func:`command` runs it as ``python -c BOOT``: BOOT puts this
checkout's root on ``sys.path``, so ``benchmarks`` imports whatever the caller's working folder (the
worker keeps that folder: relative paths in a spec mean what the user meant), and calls
:func:`serve`, which puts the tree named by ``$POINTRIX_LITE_ROOT`` in front of ``sys.path`` before
anything imports ``pointrix_lite``. So the measuring code is always this checkout's and only the
measured package comes from the tree: a revision from before this package (its benchmarks were
``scripts/bench_*.py``) needs nothing of its own.

A worker's results are tagged JSON lines on stdout (:data:`TAG`, :func:`emit`; a returned dict is
emitted for it); anything else it prints passes through.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import REPO, fresh_run

ROOT_ENV = "POINTRIX_LITE_ROOT"
TAG = "@@bench "


def use_root() -> Path:
    """Put the tree named by ``$POINTRIX_LITE_ROOT`` (default: this checkout) first on ``sys.path``.

    Call before the first ``import pointrix_lite``. Returns the tree in use.
    """
    root = Path(os.environ.get(ROOT_ENV, REPO)).resolve()
    sys.path.insert(0, str(root))
    return root


def emit(payload: dict) -> None:
    """Report one result line to the driver."""
    print(TAG + json.dumps(payload), flush=True)


def results(stdout: str) -> list[dict]:
    """The result lines in a worker's stdout, in order."""
    return [json.loads(line[len(TAG) :]) for line in stdout.splitlines() if line.startswith(TAG)]


def stderr_tail(proc: subprocess.CompletedProcess, lines: int = 1) -> str:
    """The last ``lines`` lines a failed process wrote to stderr: the error, not the traceback."""
    return "\n".join((proc.stderr.strip().splitlines() or ["(no output)"])[-lines:])


def environment(tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus ``extra``, naming ``tree`` as the code under test.

    PYTHONPATH entries naming this checkout go: they must not shadow an older tree. Others stay
    (a GPU machine may put its gsplat wheel there)."""
    env = dict(os.environ, **(extra or {}), **{ROOT_ENV: str(tree)})
    here = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    if here:
        env["PYTHONPATH"] = os.pathsep.join(here)
    else:
        env.pop("PYTHONPATH", None)
    return env


def command(worker: str, spec: dict) -> list[str]:
    """The command line of worker ``"benchmarks.MODULE:function"`` on ``spec`` (see the module docstring)."""
    boot = f"import sys; sys.path.insert(0, {str(REPO)!r}); from benchmarks.workers import serve; serve()"
    return [sys.executable, "-c", boot, worker, json.dumps(spec)]


def run(
    worker: str, spec: dict, tree: Path = REPO, env: dict[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Run a worker to its end, importing ``pointrix_lite`` from ``tree``, with ``env`` added; output captured.

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout`` seconds (it is killed, with whatever it started:
            a worker that runs another program would otherwise leave it running, loading the next measurement).
    """
    with subprocess.Popen(
        command(worker, spec),
        env=environment(tree, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed as one
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def serve() -> None:
    """A worker process's main (``sys.argv``: ``-c``, the worker's name, its spec as JSON)."""
    use_root()  # before the worker's module is imported: it may import pointrix_lite at its top
    module, _, function = sys.argv[1].partition(":")
    result = getattr(importlib.import_module(module), function)(json.loads(sys.argv[2]))
    if result is not None:
        emit(result)


def build_native(spec: dict) -> None:
    """Worker: build (or load) the tree's native extension."""
    from pointrix_lite.renderer import native

    native.prepare(print)


def prebuild(tree: Path) -> None:
    """Build ``tree``'s native extension before its runs, so no run's start-up includes a compile."""
    proc = run("benchmarks.workers:build_native", {}, tree)
    if proc.returncode != 0:
        raise SystemExit(f"error: building the native extension of {tree} failed:\n{proc.stderr.strip()[-2000:]}")


def train_script(tree: Path, config: Path, overrides: list[str], exp_dir: Path) -> dict:
    """Train in a fresh process of ``tree``'s own ``scripts/train.py``, as a user starts a run (every
    revision has that script); its metrics.json plus ``wall_seconds``."""
    exp_dir = fresh_run(exp_dir.resolve())  # the run's working folder is the tree
    cmd = [
        sys.executable,
        str(tree / "scripts" / "train.py"),
        "--config",
        str(config.resolve()),
        f"exp_dir={exp_dir}",
        *overrides,
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=environment(tree), cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"error: run in {tree} failed (exit {proc.returncode}):\n{tail}")
    report = json.loads((exp_dir / "metrics.json").read_text())
    report["wall_seconds"] = wall
    return report
