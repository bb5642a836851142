"""ResolutionScheduleHook: coarse-to-fine training resolution (DashGaussian, CVPR 2025)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import OptionError
from ..errors import ConfigError
from ..hook import Hook, Priority
from ..registry import HOOKS
from .resample import downscale_views

HOME = "hooks.ResolutionScheduleHook"  # where a config built in Python says its errors are


@HOOKS.register()
class ResolutionScheduleHook(Hook):
    """Trains on views downscaled by an integer factor that falls from ``start_factor`` to 1.

    The factor at step ``t`` is ``max(1, round(start_factor ** (1 - t / T)))`` with
    ``T = full_res_at * trainer.max_steps``: early steps are cheap (``1/s^2`` of the pixels) and
    fit the low frequencies, the last ``1 - full_res_at`` of the run is at full resolution. The
    schedule depends on the step alone, so a resumed run sees the same views; it has no state.

    Each training batch is replaced in place (``batch[:] = ...``) in ``before_train_iter``, before
    ``train_step`` renders it, with box-filtered images and exactly scaled intrinsics
    (``data/resample.py``). Validation and test views are never touched: they stay at full
    resolution. Only the current factor's downscaled views are cached.

    With ``hold_means_lr`` the model's position learning rate stays at its start value until the
    first full-resolution step and decays over the remaining steps (DashGaussian), so positions are
    not frozen before they have seen the full-resolution images.
    """

    priority = Priority.VERY_HIGH  # other hooks' before_train_iter see the batch actually trained on

    @dataclass
    class Config:
        start_factor: int = 4  # downscale factor at step 0 (DashGaussian starts at 4-8)
        full_res_at: float = 0.5  # fraction of trainer.max_steps from which training is at full resolution
        hold_means_lr: bool = False  # means lr decay starts at the first full-resolution step

        def __post_init__(self) -> None:
            if int(self.start_factor) != self.start_factor or self.start_factor < 1:
                raise OptionError("start_factor", f"must be an integer >= 1, got {self.start_factor}", HOME)
            if not 0.0 < self.full_res_at <= 1.0:
                raise OptionError("full_res_at", f"must be in (0, 1], got {self.full_res_at}", HOME)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._cache: dict[int, object] = {}
        self._cached_factor = 1

    def factor(self, step: int, max_steps: int) -> int:
        """Integer downscale factor used for (0-based) training step ``step``."""
        ramp = self.config.full_res_at * max(max_steps, 1)
        t = min(max(step, 0) / ramp, 1.0)
        return max(1, round(self.config.start_factor ** (1.0 - t)))

    def full_res_step(self, max_steps: int) -> int:
        """First step trained at full resolution (the factor never rises again after it)."""
        lo, hi = 0, max(max_steps, 1)
        while lo < hi:  # the factor is non-increasing in the step: bisect for the first 1
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self.factor(mid, max_steps) == 1 else (mid + 1, hi)
        return lo

    def before_train(self) -> None:
        if not self.config.hold_means_lr:
            return
        model = self.trainer.model
        if not hasattr(model, "hold_means_lr"):
            raise ConfigError(
                f"hooks.ResolutionScheduleHook.hold_means_lr: the model {type(model).__name__} has no hold_means_lr()"
            )
        model.hold_means_lr(self.full_res_step(self.trainer.cfg.trainer.max_steps))

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        trainer = self.trainer
        s = self.factor(trainer.global_step, trainer.cfg.trainer.max_steps)
        if s != self._cached_factor:
            self._cache, self._cached_factor = {}, s
        if s > 1:
            batch[:] = downscale_views(batch, s, self._cache)
