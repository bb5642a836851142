"""One status file per block, ``<runs>/status/<block>.json``: what ``train_blocks.py`` did with it.

``state`` is ``running`` (written before the training starts), ``done`` or ``failed``; with the log's
path, the command, wall seconds, the training process's peak RSS and its exit code. The files are the
only thing ranks share (no process group is needed to know which blocks finished): ``merge_blocks.py``
reads them to refuse a merge with a missing block, and ``--resume`` to skip finished blocks.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..io.atomic import atomic_write_text as write_text

STATES = ("running", "done", "failed")


@dataclass
class BlockStatus:
    block: str
    state: str
    log: str
    exp_dir: str
    command: list[str] = field(default_factory=list)
    rank: int = 0
    host: str = ""
    started: float = 0.0  # time.time() when the (last) training process started
    seconds: float = 0.0  # its wall time
    peak_rss_bytes: int = 0
    returncode: int | None = None
    message: str = ""  # why it failed, one line
    partition: str = ""  # manifest.block_digest of the block it trained ("" from builds before it was kept)


def status_path(runs: Path, block: str) -> Path:
    return runs / "status" / f"{block}.json"


def write_status(runs: Path, status: BlockStatus) -> None:
    write_text(status_path(runs, status.block), json.dumps(asdict(status), indent=1) + "\n")


def stale_reason(status: BlockStatus | None, digest: str, exp_dir: Path, block: str, manifest: Path) -> str | None:
    """Why ``block``'s earlier run cannot be taken as a run of the partition whose block digest is ``digest``
    (re-partitioned since), naming the fix; None when it matches or there was no run."""
    if status is None or status.partition == digest:
        return None
    return (
        f"{block}: its run in {exp_dir} was trained on another partition of the scene (re-partitioned since); "
        f"train it again: scripts/train_blocks.py --manifest {manifest} --config X --only {block} --overwrite"
    )


def read_status(runs: Path, block: str) -> BlockStatus | None:
    """The block's status, or None when it was never started (or the file is unreadable)."""
    try:
        data = json.loads(status_path(runs, block).read_text())
        return BlockStatus(**data) if data.get("state") in STATES else None
    except (OSError, ValueError, TypeError):
        return None
