"""Training and viewer renders take turns on the model: never at the same time, viewer time capped.

The trainer brackets each optimizer step with :meth:`RenderGate.training_step`; a viewer frame runs
inside :meth:`RenderGate.render`. A waiting render goes before the next training step (a plain
lock would let the training loop re-take it at once and starve the viewer), and while training
runs, a render that took ``d`` seconds makes the viewer wait ``d * (1 - share) / share`` before its
next one, so renders use at most ``share`` of the wall time. While training is paused or done the
viewer renders freely.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class RenderGate:
    """Mutual exclusion of training steps and renders, with the viewer's share of wall time capped.

    Args:
        share: largest fraction of wall time renders may take while training runs, in (0, 1].
        clock: monotonic seconds (tests may pass a fake).
    """

    def __init__(self, share: float = 0.1, clock: Callable[[], float] = time.perf_counter) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self.clock = clock
        self.training = False  # the time share applies only while this is set and not paused
        self._cond = threading.Condition()
        self._train_busy = False
        self._render_busy = False
        self._renders_waiting = 0
        self._next_render_at = 0.0
        self._paused = threading.Event()
        self.render_seconds = 0.0  # total time spent inside render(), for reports and tests

    # --- trainer side -----------------------------------------------------------------------
    @contextlib.contextmanager
    def training_step(self) -> Iterator[None]:
        self.begin_training_step()
        try:
            yield
        finally:
            self.end_training_step()

    def begin_training_step(self) -> None:
        """Wait for a running or waiting render, then hold the model for one step."""
        with self._cond:
            while self._render_busy or self._renders_waiting:
                self._cond.wait()
            self._train_busy = True

    def end_training_step(self) -> None:
        with self._cond:
            self._train_busy = False
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def set_paused(self, paused: bool) -> None:
        if paused:
            self._paused.set()
        else:
            self._paused.clear()

    def wait_while_paused(self, should_stop: Callable[[], bool] = lambda: False, poll_s: float = 0.1) -> None:
        """Block the training loop while paused; returns early once ``should_stop()`` (e.g. Ctrl-C)."""
        while self._paused.is_set() and not should_stop():
            time.sleep(poll_s)

    # --- viewer side ------------------------------------------------------------------------
    def _throttled(self) -> bool:
        return self.training and not self._paused.is_set()

    @contextlib.contextmanager
    def render(self) -> Iterator[None]:
        """Hold the model for one frame, after the time-share wait and any running training step."""
        while self._throttled():
            delay = self._next_render_at - self.clock()
            if delay <= 0:
                break
            time.sleep(min(delay, 0.05))  # re-check: a pause lifts the cap at once
        with self._cond:
            self._renders_waiting += 1
            try:
                while self._train_busy or self._render_busy:
                    self._cond.wait()
            finally:
                self._renders_waiting -= 1
            self._render_busy = True
        start = self.clock()
        try:
            yield
        finally:
            end = self.clock()
            with self._cond:
                self._render_busy = False
                self.render_seconds += end - start
                self._next_render_at = end + (end - start) * (1.0 - self.share) / self.share
                self._cond.notify_all()
