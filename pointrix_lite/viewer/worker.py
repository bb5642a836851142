"""One render thread per browser tab that always renders the newest camera.

Camera messages arrive far faster than a CPU renders (every mouse move sends one). Rendering each
would build a queue of stale frames, so the worker keeps a single slot: a new request replaces the
pending one, and after a frame it takes whatever is newest. A moving camera gets a quick preview
frame; once no new request came for ``settle_s`` the same camera is rendered at full resolution.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FrameStats:
    """What the worker rendered: counts and the last frame's size and render time (seconds)."""

    previews: int = 0
    full: int = 0
    errors: int = 0
    last_size: tuple[int, int] = (0, 0)
    last_seconds: float = 0.0
    history: list[tuple[Any, bool]] = field(default_factory=list)  # (request, full?), newest last


class RenderWorker:
    """Renders requests on its own thread, newest first, never more than one pending.

    Args:
        render: ``render(request, full) -> image`` (full: final resolution, else a preview).
        deliver: ``deliver(image, request, full)``, called on the worker thread after each render.
        on_error: called with the exception when ``render`` or ``deliver`` raises; the worker keeps
            running (a bad frame must not end the viewer).
        settle_s: quiet time after which a preview is replaced by a full-resolution frame.
        keep_history: record every rendered request in ``stats.history`` (tests).
    """

    def __init__(
        self,
        render: Callable[[Any, bool], Any],
        deliver: Callable[[Any, Any, bool], None],
        on_error: Callable[[Exception], None],
        settle_s: float = 0.2,
        keep_history: bool = False,
        name: str = "viewer-render",
    ) -> None:
        self._render, self._deliver, self._on_error = render, deliver, on_error
        self.settle_s = settle_s
        self.keep_history = keep_history
        self.stats = FrameStats()
        self._cond = threading.Condition()
        self._pending: tuple[Any, bool] | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: Any, full: bool = False) -> None:
        """Queue ``request``, replacing any not yet started. ``full`` skips the preview (e.g. a GUI change)."""
        with self._cond:
            self._pending = (request, full)
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the frame in progress (if any) and end the thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _next(self, last: Any, last_full: bool) -> tuple[Any, bool] | None:
        """Block until there is work: the newest request, or the full frame a settled preview owes."""
        with self._cond:
            while True:
                if self._stopped:
                    return None
                if self._pending is not None:
                    job, self._pending = self._pending, None
                    return job
                if last is not None and not last_full:
                    if not self._cond.wait(timeout=self.settle_s) and self._pending is None and not self._stopped:
                        return last, True  # the camera stopped moving
                else:
                    self._cond.wait()

    def _run(self) -> None:
        last, last_full = None, True
        while True:
            job = self._next(last, last_full)
            if job is None:
                return
            request, full = job
            start = time.perf_counter()
            try:
                image = self._render(request, full)
                if image is not None:
                    self._deliver(image, request, full)
            except Exception as exc:  # noqa: BLE001 - reported, then the next frame is tried
                self.stats.errors += 1
                self._on_error(exc)
            else:
                if image is not None:
                    self.stats.last_seconds = time.perf_counter() - start
                    self.stats.last_size = tuple(image.shape[1::-1])  # (width, height)
                    if full:
                        self.stats.full += 1
                    else:
                        self.stats.previews += 1
            if self.keep_history:
                self.stats.history.append((request, full))
            last, last_full = request, full
