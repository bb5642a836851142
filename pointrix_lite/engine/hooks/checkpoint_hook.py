"""CheckPointHook: periodic and final checkpoints, keep-last-K, optional keep-best."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...config import OptionError
from ...errors import ConfigError
from ...hook import Hook, Priority
from ...registry import HOOKS
from ..checkpoint import CHECKPOINT_DIR, checkpoint_name

BEST_NAME = "best.pth"
HOME = "hooks.CheckPointHook"  # where a config built in Python says its errors are


@HOOKS.register()
class CheckPointHook(Hook):
    """Saves through ``trainer.save_checkpoint`` so file names and contents have one definition.

    Files: ``<exp_dir>/checkpoints/step_XXXXXX.pth`` (the newest named in ``latest.txt``) and,
    with ``best_metric`` set, ``best.pth`` (the step with the best validation value).

    VERY_LOW priority: it runs after every other hook in ``after_train_iter`` / ``after_val_epoch``,
    so the hook states it stores already include this step's updates, and after NaNGuardHook has
    had the chance to stop a diverged step from being saved.
    """

    priority = Priority.VERY_LOW

    @dataclass
    class Config:
        interval: int = 5_000  # save every N steps; 0 saves only at the end
        save_last: bool = True  # save when training ends
        max_keep: int | None = 3  # keep the newest K periodic checkpoints; null keeps all
        best_metric: str | None = None  # e.g. psnr: keep best.pth by this validation metric
        best_mode: Literal["max", "min"] = "max"

        def __post_init__(self) -> None:
            if self.interval < 0:
                raise OptionError("interval", f"must be >= 0 (0: only at the end), got {self.interval}", HOME)
            if self.max_keep is not None and self.max_keep < 1:
                raise OptionError("max_keep", f"must be >= 1 or null, got {self.max_keep}", HOME)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.saved: list[str] = []  # periodic checkpoint file names, oldest first
        self.best_value: float | None = None
        self.best_step: int | None = None

    def _save(self) -> None:
        step = self.trainer.global_step
        name = checkpoint_name(step)
        if name in self.saved:
            return
        # Recorded before saving so the stored hook state already lists this file: after a resume
        # it is then pruned like the others.
        self.saved.append(name)
        self.trainer.save_checkpoint(name)
        self._prune()

    def _prune(self) -> None:
        if self.config.max_keep is None or not self.trainer.is_main_process:  # rank 0 owns the files
            return
        ckpt_dir = Path(self.trainer.exp_dir) / CHECKPOINT_DIR
        while len(self.saved) > self.config.max_keep:
            (ckpt_dir / self.saved.pop(0)).unlink(missing_ok=True)

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        if self.config.interval > 0 and self.trainer.global_step % self.config.interval == 0:
            self._save()

    def after_val_epoch(self, metrics: dict) -> None:
        if self.config.best_metric is None:
            return
        if self.config.best_metric not in metrics:
            raise ConfigError(
                f"hooks.CheckPointHook.best_metric: {self.config.best_metric!r} is not a validation metric; "
                f"metrics: {', '.join(metrics) or '(none)'}"
            )
        value = metrics[self.config.best_metric]
        if value is None:
            return
        better = self.best_value is None or (
            value > self.best_value if self.config.best_mode == "max" else value < self.best_value
        )
        if better:
            self.best_value, self.best_step = float(value), self.trainer.global_step
            self.trainer.save_checkpoint(BEST_NAME, update_latest=False)

    def after_train(self) -> None:
        if self.config.save_last:
            self._save()

    def state_dict(self) -> dict[str, Any]:
        return {"saved": list(self.saved), "best_value": self.best_value, "best_step": self.best_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.saved = list(state.get("saved", []))
        self.best_value = state.get("best_value")
        self.best_step = state.get("best_step")
