"""NaNGuardHook: stop at the first non-finite loss or parameter, before anything saves the broken state."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...errors import PointrixError
from ...registry import HOOKS
from ..checkpoint import find_latest
from ..priority import Priority
from .base import Hook


class NonFiniteLossError(PointrixError):
    """The loss (or a model parameter) became NaN/inf; training stopped."""


@HOOKS.register()
class NaNGuardHook(Hook):
    """Raises :class:`NonFiniteLossError` naming the step, the bad terms and the last good checkpoint.

    VERY_HIGH priority so it runs before CheckPointHook (VERY_LOW) in ``after_train_iter``: the
    step whose loss is NaN never reaches a checkpoint, and the newest checkpoint on disk stays the
    last good one. The exception also skips ``after_train``, so no final checkpoint is written.

    The parameters are checked too (``check_params``): a rasterizer culls a Gaussian whose mean is
    NaN, so a corrupted model can keep producing a finite loss while every checkpoint after it
    carries the NaN -- a silent wrong result. The check is one ``isfinite`` pass over the
    parameters per step, small next to rendering.
    """

    priority = Priority.VERY_HIGH

    @dataclass
    class Config:
        check_params: bool = True  # also stop when a model parameter holds NaN/inf

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config or self.Config())

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        bad = []
        for name, value in self.trainer.loss_dict.items():
            v = float(value.detach()) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if isinstance(v, (int, float)) and not math.isfinite(v):
                bad.append(f"{name}={v}")
        what = "non-finite loss"
        if not bad and self.config.check_params:
            for name, param in self.trainer.model.named_parameters():
                n_bad = int((~torch.isfinite(param.detach())).sum())
                if n_bad:
                    bad.append(f"{name}: {n_bad} of {param.numel()} values")
            what = "non-finite model parameters"
        if bad:
            latest = find_latest(self.trainer.exp_dir)
            raise NonFiniteLossError(
                f"step {self.trainer.global_step}: {what} ({', '.join(bad)}); training stopped; "
                f"last good checkpoint: {latest if latest else 'none saved yet'}"
            )
