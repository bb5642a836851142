"""NaNGuardHook: stop at the first non-finite loss or parameter, before anything saves the broken state."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...config import OptionError
from ...errors import PointrixError
from ...hook import Hook, Priority
from ...registry import HOOKS
from ..checkpoint import find_latest


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
    carries the NaN -- a silent wrong result. The check is one sum per parameter per step, small
    next to rendering; on a GPU it runs when the flags are read.
    """

    priority = Priority.VERY_HIGH

    @dataclass
    class Config:
        check_params: bool = True  # also stop when a model parameter holds NaN/inf
        # On a GPU, reading a flag back waits for every queued kernel, so the checks are queued on the
        # device each step and read every this many steps, before every checkpoint and at the end of
        # training (the step of the first non-finite loss is still reported exactly). CPU: every step.
        gpu_read_every: int = 100

        def __post_init__(self) -> None:
            if self.gpu_read_every < 1:
                raise OptionError("gpu_read_every", f"must be >= 1, got {self.gpu_read_every}", "hooks.NaNGuardHook")

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config or self.Config())
        self._first_bad: torch.Tensor | None = None  # [terms] int64 on the device: first bad step, -1 if none
        self._terms: list[str] = []

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        terms = {k: v for k, v in self.trainer.loss_dict.items() if isinstance(v, torch.Tensor) and v.numel() == 1}
        if not self._deferred(terms):
            self._check_now()
            return
        names = list(terms)
        bad = ~torch.isfinite(torch.stack([v.detach().float().reshape(()) for v in terms.values()]))
        if self._first_bad is None or names != self._terms:
            self._read_device_flags()  # the terms changed: settle what the old flags hold first
            self._terms, self._first_bad = names, torch.full_like(bad, -1, dtype=torch.int64)
        step = self.trainer.global_step
        self._first_bad = torch.where(bad & (self._first_bad < 0), step, self._first_bad)
        if step % self.config.gpu_read_every == 0:
            self._read_device_flags()

    @staticmethod
    def _deferred(terms: dict[str, torch.Tensor]) -> bool:
        """Whether the loss lives on an accelerator, where reading it every step would stall the queue."""
        return any(v.device.type != "cpu" for v in terms.values())

    def before_save_checkpoint(self, checkpoint: dict) -> None:
        self._read_device_flags()  # a checkpoint is never written after a non-finite step

    def after_train(self) -> None:
        self._read_device_flags()

    def _read_device_flags(self) -> None:
        if self._first_bad is None:
            return
        first = self._first_bad.tolist()  # the one read-back (waits for the GPU)
        bad = [f"{name} first at step {s}" for name, s in zip(self._terms, first) if s >= 0]
        if bad:
            self._stop("non-finite loss", bad)
        self._check_params()

    def _check_now(self) -> None:
        bad = []
        for name, value in self.trainer.loss_dict.items():
            v = float(value.detach()) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if isinstance(v, (int, float)) and not math.isfinite(v):
                bad.append(f"{name}={v}")
        if bad:
            self._stop("non-finite loss", bad)
        self._check_params()

    def _check_params(self) -> None:
        if not self.config.check_params:
            return
        named = list(self.trainer.model.named_parameters())
        if not named:
            return
        device = named[0][1].device
        # A sum is non-finite whenever one of its terms is (NaN or inf propagates; inf - inf is NaN), and
        # it is one vectorised pass where isfinite's count is three (== , abs != inf, sum of a bool
        # tensor): 0.45 ms against 7-9.5 ms per step for 200k Gaussians at SH degree 1 on 2 cores,
        # ~8% of a step. The exact count runs only when a sum is non-finite, so a finite sum that
        # overflowed (values ~1e32, itself a broken model) costs a count but never a false stop.
        # One read-back for all parameters: one wait on a GPU, not one per tensor.
        sums = torch.stack([p.detach().sum().to(device, torch.float32) for _, p in named])
        if bool(torch.isfinite(sums).all()):
            return
        counts = torch.stack([(~torch.isfinite(p.detach())).sum().to(device) for _, p in named]).tolist()
        bad = [f"{name}: {n} of {p.numel()} values" for (name, p), n in zip(named, counts) if n]
        if bad:
            self._stop("non-finite model parameters", bad)

    def _stop(self, what: str, bad: list[str]) -> None:
        latest = find_latest(self.trainer.exp_dir)
        raise NonFiniteLossError(
            f"step {self.trainer.global_step}: {what} ({', '.join(bad)}); training stopped; "
            f"last good checkpoint: {latest if latest else 'none saved yet'}"
        )
