"""Progress read from COLMAP's own log, for the calls that take minutes and report nothing to Python.

pycolmap's matchers and its hierarchical mapper take no progress callback, but COLMAP logs as it goes
(``Processing block [3/10]``, ``Cluster 2 with 180 images``, ...) and the worker sends that log to
``OUT/colmap/colmap.log`` (:mod:`pointrix_lite.cli.process`). :func:`follow` reads the lines written
while a call runs, in a thread (pycolmap releases the GIL), and a reader turns them into a status
line. A log format that changes, or a run without the log file (the stages called from Python), only
loses the status text: nothing here can fail a run.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

LOG_NAME = "colmap.log"  # under OUT/colmap: COLMAP's log (fd 2 of the worker)
POLL_SECONDS = 0.5

_BLOCK = re.compile(r"Processing block \[(\d+)/(\d+)(?:, (\d+)/(\d+))?\]")
_IMAGE = re.compile(r"Processing image \[(\d+)/(\d+)\]")
_CLUSTER = re.compile(r"Cluster (\d+) with (\d+) images")
_REGISTERING = re.compile(r"Registering image #\d+ \(num_reg_frames=(\d+)\)")
_MERGED = re.compile(r"Merged clusters with (\d+) and (\d+) images into (\d+) images")


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """fd 2, where COLMAP logs, appended to ``path`` while the block runs (the worker does it for good)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def follow(log: Path, reader: Callable[[str], str | None], status: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, feed each line appended to ``log`` to ``reader``; its non-``None`` answers go to ``status``.

    Lines already in the file (earlier stages) are skipped.
    """
    stop = threading.Event()
    start = log.stat().st_size if log.is_file() else 0

    def poll() -> None:
        offset, partial = start, ""
        while True:
            stopping = stop.wait(POLL_SECONDS)
            with contextlib.suppress(OSError):
                with log.open("rb") as f:  # bytes: the offset is a file position (glog writes ASCII)
                    f.seek(offset)
                    data = f.read()
                offset += len(data)
                *lines, partial = (partial + data.decode(errors="replace")).split("\n")
                for line in lines:
                    answer = reader(line)
                    if answer is not None:
                        status(answer)
            if stopping:
                return

    thread = threading.Thread(target=poll, name="colmap-log", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _thread(line: str) -> str:
    """The thread id of a glog line (``I20261126 23:25:46.828 140337980892864 file.cc:620] ...``)."""
    fields = line.split(maxsplit=3)
    return fields[2] if len(fields) > 2 else ""


class MatchingReader:
    """COLMAP's matching blocks -> ``"block 3/10 (~2,450 of 12,250 pairs done)"``.

    A block's line comes when it starts, so the blocks before it are done. ``pairs``/``block_pairs``:
    the total and the pairs per block when known (imported pairs), else only blocks or images are named.
    """

    def __init__(self, pairs: int | None = None, block_pairs: int | None = None) -> None:
        self.pairs, self.block_pairs = pairs, block_pairs

    def __call__(self, line: str) -> str | None:
        if m := _IMAGE.search(line):  # sequential: one line per image
            return f"image {m[1]}/{m[2]}"
        if not (m := _BLOCK.search(line)):
            return None
        if m[3] is not None:  # exhaustive: blocks of images, [row/rows, column/columns]
            return f"block [{m[1]}/{m[2]}, {m[3]}/{m[4]}]"
        text = f"block {m[1]}/{m[2]}"
        if self.pairs and self.block_pairs:
            done = min(self.pairs, (int(m[1]) - 1) * self.block_pairs)
            text += f" ({done:,} of {self.pairs:,} pairs done)"
        return text


class HierarchicalReader:
    """COLMAP's hierarchical mapper -> ``"cluster 2/4 done, 310/720 cluster images registered"``.

    The clusters are listed first (``Cluster k with m images``); each is then mapped incrementally,
    its worker logging ``Registering image #id (num_reg_frames=r)`` (``r`` registered before it),
    ``Keeping`` or ``Discarding reconstruction`` for each model and its timer's ``Elapsed time`` when
    the cluster is over; merging comes last (none for a single cluster). An image in two clusters (their overlap) counts in both.
    """

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.phase = "partitioning"
        self.done = 0
        self.finished_registered = 0  # images registered in the models that are over
        self.current: dict[str, int] = {}  # worker thread -> images registered in its model so far
        self.merges = 0
        self.main = ""  # the thread that partitions and merges; the clusters are mapped in others

    def _registered(self) -> int:
        return self.finished_registered + sum(self.current.values())

    def __call__(self, line: str) -> str | None:
        if m := _CLUSTER.search(line):
            self.sizes[int(m[1])] = int(m[2])
            return f"partitioning: cluster {m[1]} of {m[2]} images"
        if "Reconstructing clusters" in line:
            self.phase, self.main = "clusters", _thread(line)
        elif "Merging clusters" in line:
            self.phase = "merging"
        elif self.phase == "clusters" and (m := _REGISTERING.search(line)):
            self.current[_thread(line)] = max(self.current.get(_thread(line), 0), int(m[1]))
        elif self.phase == "clusters" and "Keeping successful reconstruction" in line:
            self.finished_registered += self.current.pop(_thread(line), 0)
        elif self.phase == "clusters" and "Discarding reconstruction" in line:  # too small: its images are free again
            self.current.pop(_thread(line), None)
        elif self.phase == "clusters" and "Elapsed time" in line and _thread(line) != self.main:
            self.done += 1  # a worker's timer: its cluster is over (the main thread's: the whole run)
        elif self.phase == "merging" and _MERGED.search(line):
            self.merges += 1
        else:
            return None
        total = sum(self.sizes.values())
        if self.phase == "merging":
            return f"merging {len(self.sizes)} clusters ({self.merges} merges done)"
        registered = min(self._registered(), total)
        return f"cluster {self.done}/{len(self.sizes)} done, ~{registered}/{total} cluster images registered"
