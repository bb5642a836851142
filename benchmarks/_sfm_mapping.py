"""One mapping run of ``python -m benchmarks sfm``, timed and scored, and what COLMAP's log says of it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REGISTRATION_EVERY = 10  # the incremental mapper's rows keep the time of every 10th registration
_STAMP = re.compile(r"^[IWEF]\d{8} (\d\d):(\d\d):(\d\d\.\d+) ")
_CLUSTER = re.compile(r"Cluster \d+ with (\d+) images")
_ELAPSED = re.compile(r"Elapsed time: ([\d.]+) \[minutes\]")


def _seconds(line: str) -> float | None:
    m = _STAMP.match(line)
    return None if m is None else int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])


def hierarchical_log(lines: list[str]) -> dict:
    """Cluster sizes, each cluster's minutes (its mapper's timer) and the merge's seconds, from COLMAP's log."""
    sizes, minutes, phase, merge_start, last, main = [], [], "", None, None, ""
    for line in lines:
        last = _seconds(line) if _seconds(line) is not None else last
        if m := _CLUSTER.search(line):
            sizes.append(int(m[1]))
        elif "Reconstructing clusters" in line:
            phase, main = "clusters", line.split(maxsplit=3)[2]  # the clusters are mapped in other threads
        elif "Merging clusters" in line:
            phase, merge_start = "merging", _seconds(line)
        elif phase == "clusters" and (m := _ELAPSED.search(line)) and line.split(maxsplit=3)[2] != main:
            minutes.append(float(m[1]))
    merge = None if merge_start is None or last is None else round((last - merge_start) % 86400, 2)
    return dict(cluster_sizes=sizes, cluster_minutes=minutes, merge_seconds=merge)


def map_once(
    pycolmap: ModuleType, database: Path, image_dir: Path, sparse: Path, opts: Any, mapper: str, log: Path
) -> tuple[dict[int, Any], dict]:
    """Map with ``mapper``; returns the models and the row: wall and CPU seconds, and (incremental) the
    times of every 10th registration or (hierarchical) what :func:`hierarchical_log` reads."""
    from pointrix_lite.process.mapping import map_scene

    registrations: list[tuple[int, float, float]] = []  # (images registered, wall s, CPU s)
    registered = [2]  # the callback fires after the initial pair
    start, cpu = time.perf_counter(), time.process_time()

    def on_image() -> None:
        registered[0] += 1
        if registered[0] % REGISTRATION_EVERY == 0:
            registrations.append(
                (registered[0], round(time.perf_counter() - start, 2), round(time.process_time() - cpu, 2))
            )

    offset = log.stat().st_size if log.is_file() else 0
    recs = map_scene(pycolmap, database, image_dir, sparse, opts, on_image, mapper)
    row: dict = dict(seconds=round(time.perf_counter() - start, 2), cpu_seconds=round(time.process_time() - cpu, 2))
    if mapper == "incremental":
        row["registrations"] = registrations
    if mapper == "hierarchical":
        with log.open(errors="replace") as f:
            f.seek(offset)
            row.update(hierarchical_log(f.read().splitlines()))
        row["cluster_images"] = opts.cluster_images
    return recs, row
