"""Many ``scripts/train.py`` command lines at the cost of one interpreter start: each runs in a forked child.

A fresh ``python scripts/train.py`` spends ~3 s importing torch and the project before it reads its
arguments; the error table runs 41 of them. Here one process (started clean, so no thread pool exists
yet to be broken by ``fork``) imports what ``scripts/train.py`` imports and forks a child per command
line: the child sets its environment variables, sends file descriptors 1 and 2 to files, calls the
same ``main()`` and exits with its return value. Module state a command changes (plugins registered,
the native build tried under ``POINTRIX_NATIVE_ARCH``) dies with its child.

Used as ``python fork_runner.py JOBS.json PARALLEL``; :func:`run_forked` is the caller's side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _child(job: dict) -> int:
    os.chdir(REPO)
    os.environ.update(job["env"])
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    sys.argv = [str(REPO / "scripts" / "train.py"), *job["argv"]]
    from pointrix_lite.cli.train import main

    try:
        code = main(job["argv"])
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    return code


def serve(jobs: list[dict], parallel: int) -> dict[int, int]:
    """Run every job in a forked child, ``parallel`` at a time; job index -> exit code."""
    running: dict[int, int] = {}
    codes: dict[int, int] = {}
    pending = list(enumerate(jobs))
    while pending or running:
        while pending and len(running) < parallel:
            index, job = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = _child(job)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = index
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    return codes


def run_forked(commands: list[tuple[list[str], dict[str, str]]], parallel: int = 4, timeout: float = 900) -> list:
    """``scripts/train.py ARGS`` for each ``(args, env)``, as ``subprocess.CompletedProcess`` (exit code,
    stdout and stderr as text), run by one fork runner process."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [
            {"argv": args, "env": env, "stdout": f"{tmp}/{i}.out", "stderr": f"{tmp}/{i}.err"}
            for i, (args, env) in enumerate(commands)
        ]
        spec = Path(tmp) / "jobs.json"
        spec.write_text(json.dumps(jobs))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        runner = subprocess.run(
            [sys.executable, __file__, str(spec), str(parallel)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        if runner.returncode != 0:
            raise RuntimeError(f"fork runner failed: {runner.stderr[-2000:]}")
        codes = json.loads(runner.stdout.strip().splitlines()[-1])
        return [
            subprocess.CompletedProcess(
                job["argv"], codes[str(i)], Path(job["stdout"]).read_text(), Path(job["stderr"]).read_text()
            )
            for i, job in enumerate(jobs)
        ]


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    # what scripts/train.py imports before it reads its arguments, once for every child
    import pointrix_lite.cli.train  # noqa: F401
    import pointrix_lite.engine.trainer  # noqa: F401

    all_jobs = json.loads(Path(sys.argv[1]).read_text())
    result = serve(all_jobs, int(sys.argv[2]))
    print(json.dumps(result))
