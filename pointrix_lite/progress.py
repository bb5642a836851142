"""Progress and seconds of a run's phases outside the training steps (loading, validation, test, export).

A phase can take minutes on real captures (loading 300 photos, rendering and aligning 40 test views)
and must show that it is alive: a rich bar on a terminal, a plain line every few seconds when the
output is piped to a log, and one closing line with its time. Every phase's seconds are summed under
its name in :data:`PHASES`, which the trainer resets when it is built and writes into
``metrics.json`` (``phase_seconds``) and the final summary.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

QUIET_SECONDS = 2.0  # a phase shorter than this closes without a line: short runs stay readable
PLAIN_EVERY = 5.0  # seconds between two progress lines in piped output


class PhaseTimes:
    """Seconds per phase name, summed over repeats (validation runs several times), in first-seen order.

    Seconds are exclusive between phases: one opened inside another (test-time alignment inside the
    test phase) counts only under its own name. ``setup`` is added by the trainer as one span and
    so includes ``loading images``.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def reset(self) -> None:
        self.seconds = {}

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        return {k: round(v, digits) for k, v in self.seconds.items()}


PHASES = PhaseTimes()  # the current run's (one training run per process at a time)
_nested: list[float] = []  # per open phase, innermost last: seconds of the phases inside it

_console: Console | None = None


def console() -> Console:
    """The console phases print to (stdout; a TTY gets bars)."""
    global _console
    if _console is None:
        _console = Console(highlight=False, soft_wrap=True)  # a log line is one line, whatever the width
    return _console


@contextlib.contextmanager
def phase(name: str, total: int | None = None, unit: str = "", show: bool = True) -> Iterator[Callable[[int], None]]:
    """Time ``name`` into :data:`PHASES` and show its progress; yields ``advance(n=1)``.

    Args:
        name: Phase name, as it appears in ``phase_seconds`` and on screen.
        total: Number of items (views, images, files), if known.
        unit: What an item is, for the lines ("views").
        show: False: time it only (e.g. on a process other than rank 0).
    """
    out = console()
    start = last_line = time.perf_counter()
    done = 0
    bar: Progress | None = None
    task = None
    if show and out.is_terminal:
        bar = Progress(
            TextColumn(f"[bold]{name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=out,
            transient=True,
        )
        task = bar.add_task(name, total=total)
        bar.start()

    def advance(n: int = 1) -> None:
        nonlocal done, last_line
        done += n
        if bar is not None:
            bar.update(task, completed=done)
            return
        now = time.perf_counter()
        if show and now - last_line >= PLAIN_EVERY:
            last_line = now
            of = f"/{total}" if total is not None else ""
            print(f"{name}: {done}{of} {unit} ({now - start:.0f} s)".replace("  ", " "), flush=True)

    _nested.append(0.0)
    try:
        yield advance
    finally:
        if bar is not None:
            bar.stop()
        elapsed = time.perf_counter() - start
        PHASES.add(name, elapsed - _nested.pop())
        if _nested:
            _nested[-1] += elapsed
        if show and elapsed >= QUIET_SECONDS:
            count = f"{done} {unit} " if unit else ""
            out.print(f"{name}: {count}in {elapsed:.1f} s", markup=False)


def format_phase_seconds(seconds: dict[str, float]) -> str:
    """``"setup 2.1 s, validation 1.2 s, ..."`` for the summary."""
    return ", ".join(f"{name} {value:.1f} s" for name, value in seconds.items())
