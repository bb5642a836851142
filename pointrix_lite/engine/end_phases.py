"""Which phases after training finished, so ``--resume`` of a finished run redoes only the rest.

A run that has trained to ``max_steps`` still has work left: the export in ``after_train``
(PlyExportHook, the last checkpoint), the test split (with PoseOptHook's alignment) and the
report. Each can be interrupted (Ctrl-C, a full disk) and each is slow on a large scene, so
``<exp_dir>/end_phases.json`` records, per phase, the step it ran at and the files it wrote.
A resumed run at that step skips a phase whose record is there and whose files still exist;
deleting a file (say ``metrics.json``) and resuming writes it again.

The files of a phase are those that appeared under ``exp_dir`` while it ran (new paths, or
paths replaced by a rename: every output is written via a temp file and ``os.replace``), so a
custom hook's outputs count without the hook declaring them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from ..io.atomic import atomic_write_text

LEDGER = "end_phases.json"


def _files(root: Path) -> dict[str, int]:
    """Relative path -> inode of every file under ``root`` (a rename gives a path a new inode)."""
    found: dict[str, int] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            with contextlib.suppress(OSError):  # gone between listing and stat: not an output
                found[path.relative_to(root).as_posix()] = path.stat().st_ino
    return found


class EndPhases:
    """The record of finished end phases in ``<exp_dir>/end_phases.json``.

    Args:
        exp_dir: The run's folder.
        write: Whether this process writes the record (rank 0 under torchrun; the others read it).
    """

    def __init__(self, exp_dir: str | Path, write: bool = True) -> None:
        self.exp_dir = Path(exp_dir)
        self.path = self.exp_dir / LEDGER
        self.write = write
        self._record = self._read()

    def _read(self) -> dict:
        try:
            record = json.loads(self.path.read_text())
        except (OSError, ValueError):  # none yet, or unreadable: every phase runs again
            return {}
        return record if isinstance(record, dict) and isinstance(record.get("phases"), dict) else {}

    def forget(self) -> None:
        """A run that trains (or starts afresh) makes any earlier record describe another model."""
        self._record = {}
        if self.write:
            self.path.unlink(missing_ok=True)

    def done(self, name: str, step: int) -> bool:
        """``name`` finished at ``step`` and every file it wrote is still there."""
        if self._record.get("step") != step:
            return False
        entry = self._record["phases"].get(name)
        if not isinstance(entry, dict):
            return False
        return all((self.exp_dir / rel).is_file() for rel in entry.get("files", []))

    def files(self, name: str) -> list[str]:
        entry = self._record.get("phases", {}).get(name) or {}
        return list(entry.get("files", []))

    @contextlib.contextmanager
    def record(self, name: str, step: int) -> Iterator[None]:
        """Run the body as phase ``name`` at ``step``; recorded only when the body returns."""
        before = _files(self.exp_dir) if self.write else {}
        yield
        if not self.write:
            return
        after = _files(self.exp_dir)
        new = sorted(rel for rel, inode in after.items() if before.get(rel) != inode and rel != LEDGER)
        if self._record.get("step") != step:
            self._record = {"step": step, "phases": {}}
        self._record["phases"][name] = {"files": new}
        atomic_write_text(self.path, json.dumps(self._record, indent=2) + "\n")
