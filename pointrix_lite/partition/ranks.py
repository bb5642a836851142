"""Which blocks this process trains: rank r of N takes blocks r, r + N, r + 2N, ... of the manifest.

The rank comes from, in this order: ``--rank/--world-size``; torchrun's ``RANK``/``WORLD_SIZE``; a
SLURM job array (``SLURM_ARRAY_TASK_ID`` minus ``SLURM_ARRAY_TASK_MIN``, of ``SLURM_ARRAY_TASK_COUNT``
or ``--world-size``); else 0 of 1. Only under torchrun do the ranks meet again at the end (a gloo
process group, opened for that alone): each waits for the others so that the job's exit code covers
every block, and a failed block cannot stop the others early (torchrun stops all ranks when one exits
with an error). Array tasks are independent jobs: each exits with its own blocks' outcome.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

from ..errors import ConfigError

# Blocks train for hours; the ranks wait for the slowest one at the end.
FINAL_WAIT = timedelta(days=7)


@dataclass(frozen=True)
class Placement:
    rank: int
    world: int
    local_rank: int | None  # torchrun's LOCAL_RANK (picks the GPU), None elsewhere
    local_world: int  # processes sharing this machine's cores
    source: str  # flags, torchrun, slurm array or single

    @property
    def tag(self) -> str:
        return f"[rank {self.rank}/{self.world}] " if self.world > 1 else ""


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else None
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not a whole number") from None


def find_placement(rank: int | None, world: int | None) -> Placement:
    """This process's rank and world size (see the module docstring)."""
    local_rank, local_world = _env_int("LOCAL_RANK"), _env_int("LOCAL_WORLD_SIZE") or 1
    slurm_task = _env_int("SLURM_ARRAY_TASK_ID")
    if rank is not None or (world is not None and slurm_task is None):
        if rank is None or world is None:
            raise ConfigError("--rank and --world-size go together")
        where = Placement(rank, world, None, 1, "flags")
    elif _env_int("WORLD_SIZE") is not None and _env_int("RANK") is not None:
        where = Placement(_env_int("RANK") or 0, _env_int("WORLD_SIZE") or 1, local_rank, local_world, "torchrun")
    elif slurm_task is not None:
        count = world or _env_int("SLURM_ARRAY_TASK_COUNT")
        if count is None:
            raise ConfigError("SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT: pass --world-size")
        where = Placement(slurm_task - (_env_int("SLURM_ARRAY_TASK_MIN") or 0), count, None, 1, "slurm array")
    else:
        where = Placement(0, 1, None, 1, "single")
    if not 0 <= where.rank < where.world:
        raise ConfigError(f"rank {where.rank} is not in 0..{where.world - 1} (from {where.source})")
    return where


def threads_per_process(local_world: int, asked: int | None) -> int:
    """``asked``, or this machine's cores shared out among the processes on it."""
    if asked is not None:
        return asked
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(local_world, 1))


def open_meeting(where: Placement) -> bool:
    """Under torchrun with several ranks, join the gloo group used only by :func:`all_succeeded`."""
    if where.source != "torchrun" or where.world == 1:
        return False
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=FINAL_WAIT)
    return True


def all_succeeded(ok: bool, met: bool) -> bool:
    """Whether every rank's blocks finished (waits for all ranks when they met), else this rank's."""
    if not met:
        return ok
    import torch
    import torch.distributed as dist

    failed = torch.tensor([0 if ok else 1])
    dist.all_reduce(failed)
    dist.destroy_process_group()
    return int(failed.item()) == 0


def agree(ok: bool, met: bool) -> bool:
    """Whether every rank is ``ok`` (without a meeting: this rank's own); the group stays open."""
    if not met:
        return ok
    import torch
    import torch.distributed as dist

    failed = torch.tensor([0 if ok else 1])
    dist.all_reduce(failed)
    return int(failed.item()) == 0
