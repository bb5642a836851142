"""Train one block: an ordinary ``scripts/train.py`` run in a child process, watched from outside.

The child must not join the torchrun job that started its parent: with RANK/WORLD_SIZE/MASTER_* in its
environment ``train.py`` would open a process group and all-reduce gradients with whatever the other
ranks train. So those variables are removed (``train.py`` then runs as a plain single process), the
child gets ``OMP_NUM_THREADS = cores / local ranks`` (torchrun sets 1) and, on a GPU node, the GPU of
its parent's local rank. Its peak RSS comes from ``wait4``: the child's, or a larger one of a process it
waited for (the compiler of a first native-rasterizer build).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .status import BlockStatus, write_status

# What torchrun (torch.distributed.run) puts in a worker's environment to make it a rank of the job.
RANK_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
)
# Every block trains on its training views only (the scene's test views are in no block folder), in
# COLMAP's world frame: no held-out split of its own, no per-block test or validation, no turning.
BLOCK_OVERRIDES = (
    "dataset.type=ColmapDataset",
    "dataset.eval=false",
    "dataset.orientation=none",
    "trainer.test_at_end=false",
    "trainer.val_interval=0",
)
TRAIN_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train.py"
EXPORT_SCRIPT = TRAIN_SCRIPT.with_name("export.py")
PLY_NAME = "point_cloud.ply"


@dataclass
class BlockJob:
    name: str
    data: Path  # the block's COLMAP folder
    exp_dir: Path  # its experiment folder
    runs: Path  # where status/ and logs/ are
    partition: str = ""  # manifest.block_digest: written into the block's status

    @property
    def log(self) -> Path:
        return self.runs / "logs" / f"{self.name}.log"

    @property
    def ply(self) -> Path:
        return self.exp_dir / PLY_NAME


def child_env(threads: int, local_rank: int | None) -> dict[str, str]:
    """This process's environment without the torchrun rank variables, with ``threads`` OpenMP threads."""
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES and not k.startswith("TORCHELASTIC_")}
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"  # the log shows progress as it happens
    if local_rank is not None:  # one GPU per local rank, as torchrun's data-parallel ranks get
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices = visible.split(",") if visible else [str(i) for i in range(local_rank + 1)]
        env["CUDA_VISIBLE_DEVICES"] = devices[local_rank % len(devices)]
    return env


def train_command(
    job: BlockJob, config: Path, overrides: list[str], plugins: list[str], resume: bool, fixed: Sequence[str] = ()
) -> list[str]:
    """``python scripts/train.py --config X [overrides] [fixed] dataset.data_path=<block> name=<block>
    exp_dir=<run>``: ``fixed`` (the coarse stage's split and steps, a block's context) wins over the user's."""
    placed = [
        *fixed,
        f"dataset.data_path={job.data}",
        f"name={job.name}",
        f"exp_dir={job.exp_dir}",
    ]  # after the user's: they decide
    extra = [arg for p in plugins for arg in ("--plugin", p)] + (["--resume"] if resume else [])
    return [sys.executable, str(TRAIN_SCRIPT), "--config", str(config), *BLOCK_OVERRIDES, *overrides, *placed, *extra]


def has_checkpoint(exp_dir: Path) -> bool:
    """Whether ``train.py --resume`` has a checkpoint to continue (its ``checkpoints/latest.txt``)."""
    return (exp_dir / "checkpoints" / "latest.txt").is_file()


def _wait(proc: subprocess.Popen) -> tuple[int, int]:
    """Exit code (negative: killed by that signal) and peak RSS in bytes of the finished child."""
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:  # Ctrl-C reached us too: let the child save its checkpoint, then stop
        proc.send_signal(signal.SIGINT)
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    return proc.returncode, usage.ru_maxrss * 1024  # kilobytes on Linux


def measured_run(command: list[str], log, env: dict[str, str] | None = None) -> tuple[int, int]:
    """Run ``command`` with its output into the open file ``log``; its exit code and peak RSS (bytes)."""
    log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
    log.flush()
    return _wait(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env))


def run_block(job: BlockJob, command: list[str], env: dict[str, str], rank: int) -> BlockStatus:
    """Run ``command`` for ``job`` with its output in the block's log; the status file follows it."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    status = BlockStatus(
        job.name, "running", str(job.log), str(job.exp_dir), command, rank, socket.gethostname(), time.time()
    )
    status.partition = job.partition
    write_status(job.runs, status)
    start = time.perf_counter()
    with open(job.log, "a", encoding="utf-8") as log:
        try:
            code, rss = measured_run(command, log, env)
        except KeyboardInterrupt:
            status.state, status.message, status.seconds = "failed", "interrupted (Ctrl-C)", time.perf_counter() - start
            write_status(job.runs, status)
            raise
        if code == 0 and not job.ply.is_file():  # a config without PlyExportHook: export the last checkpoint
            export = [
                sys.executable,
                str(EXPORT_SCRIPT),
                "--exp-dir",
                str(job.exp_dir),
                "--format",
                "ply",
                "--out",
                str(job.ply),
            ]
            code = measured_run(export, log, env)[0]
    status.seconds, status.peak_rss_bytes, status.returncode = time.perf_counter() - start, rss, code
    status.state = "done" if code == 0 else "failed"
    status.message = "" if code == 0 else failure_reason(code, job.log)
    write_status(job.runs, status)
    return status


def failure_reason(code: int, log: Path) -> str:
    """One line: the signal that killed the run, or the last ``error:`` line of its log."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    errors = [line.strip() for line in lines if line.lstrip().startswith("error")]
    return errors[-1] if errors else f"exit code {code} (see {log})"
