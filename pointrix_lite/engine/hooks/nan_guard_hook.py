"""NaNGuardHook: stop at the first non-finite loss, before anything saves the broken state."""

from __future__ import annotations

import math

import torch

from ...errors import PointrixError
from ...registry import HOOKS
from ..checkpoint import find_latest
from ..priority import Priority
from .base import Hook


class NonFiniteLossError(PointrixError):
    """The loss became NaN/inf; training stopped."""


@HOOKS.register()
class NaNGuardHook(Hook):
    """Raises :class:`NonFiniteLossError` naming the step and the bad loss terms.

    VERY_HIGH priority so it runs before CheckPointHook (VERY_LOW) in ``after_train_iter``: the
    step whose loss is NaN never reaches a checkpoint, and the newest checkpoint on disk stays the
    last good one. The exception also skips ``after_train``, so no final checkpoint is written.
    """

    priority = Priority.VERY_HIGH

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        bad = []
        for name, value in self.trainer.loss_dict.items():
            v = float(value.detach()) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if isinstance(v, (int, float)) and not math.isfinite(v):
                bad.append(f"{name}={v}")
        if bad:
            latest = find_latest(self.trainer.exp_dir)
            raise NonFiniteLossError(
                f"step {self.trainer.global_step}: non-finite loss ({', '.join(bad)}); training stopped; "
                f"last good checkpoint: {latest if latest else 'none saved yet'}"
            )
