"""The scalar curves of a run from its JSON-lines log (``writers/jsonl.py``), resumes stitched together.

A resumed run appends to the same file from a checkpoint's step: its records replace the earlier
ones from that step on (what the model went on from), and its seconds continue where the kept
records end, so the time between the two runs is not counted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Point:
    step: int
    seconds: float  # training-run seconds since the log began, summed over resumed runs
    value: float


@dataclass
class RunLog:
    series: dict[str, list[Point]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # sentences for the page: skipped lines, clock used
    resumes: int = 0


@dataclass
class _Segment:
    """One process's records: ``elapsed`` restarts at 0 in each (wall time for logs without it)."""

    offset: float = 0.0  # seconds of the kept records before this segment
    base: float | None = None  # clock reading of the segment's start
    last_clock: float = -math.inf
    last_step: int = -1


def read_log(path: Path) -> RunLog:
    """Every finite scalar of ``path`` as ``{name: [Point, ...]}`` in step order; never raises on content.

    Unparseable lines (a cut-off last line while a run still writes) are skipped and counted in
    ``problems``. A record starts a new segment (a resumed run) when its ``elapsed`` goes back, or,
    in logs written before ``elapsed`` existed, when its step goes back.
    """
    log = RunLog()
    bad = 0
    wall_clock = False
    seg = _Segment()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if record.get("kind") != "scalar":
                continue
            name, step, value = str(record["name"]), int(record["step"]), record["value"]
            clock = float(record["elapsed"]) if "elapsed" in record else float(record.get("time", 0.0))
        except (ValueError, TypeError, KeyError, AttributeError):
            bad += 1
            continue
        wall_clock |= "elapsed" not in record
        restarted = clock < seg.last_clock if "elapsed" in record else step < seg.last_step
        if restarted:
            _drop_from(log.series, step)
            kept = [p.seconds for points in log.series.values() for p in points]
            seg = _Segment(offset=max(kept, default=0.0), base=0.0 if "elapsed" in record else clock)
            log.resumes += 1
        if seg.base is None:
            seg.base = 0.0 if "elapsed" in record else clock
        seg.last_clock, seg.last_step = clock, step
        if isinstance(value, (int, float)) and math.isfinite(value):
            log.series.setdefault(name, []).append(Point(step, seg.offset + clock - seg.base, float(value)))
    if bad:
        log.problems.append(f"{bad} line(s) of {path.name} could not be read and were skipped.")
    if wall_clock:
        log.problems.append(
            f"{path.name} predates the elapsed-seconds field: its seconds are wall time since the log "
            "began, pauses between resumed runs included."
        )
    for points in log.series.values():
        points.sort(key=lambda p: p.step)  # stable: records of one step keep their order
    return log


def _drop_from(series: dict[str, list[Point]], step: int) -> None:
    """Forget the records at ``step`` and after: the resumed run redoes them from its checkpoint."""
    for name in list(series):
        series[name] = [p for p in series[name] if p.step < step]
        if not series[name]:
            del series[name]
