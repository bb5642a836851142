"""IterTimerHook: wall time per training iteration and the part spent waiting for data."""

from __future__ import annotations

import time

from ...hook import Hook, Priority
from ...registry import HOOKS


@HOOKS.register()
class IterTimerHook(Hook):
    """Puts ``time/iter`` and ``time/data`` (seconds) into ``trainer.log_vars`` every step.

    NORMAL priority, i.e. before LogHook (BELOW_NORMAL) in ``after_train_iter``, so the times of
    the step that just finished are there when LogHook writes them.
    """

    priority = Priority.NORMAL

    def __init__(self, config: None = None) -> None:
        super().__init__(config)
        self._last = 0.0

    def before_train_epoch(self) -> None:
        self._last = time.perf_counter()

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        # Time since the previous step ended = time the pipeline took to hand over this batch.
        self.trainer.log_vars["time/data"] = time.perf_counter() - self._last

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        now = time.perf_counter()
        self.trainer.log_vars["time/iter"] = now - self._last
        self._last = now
