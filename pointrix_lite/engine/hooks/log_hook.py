"""LogHook: progress bar, loss terms to the writers, metric tables and images after val/test."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ...config import OptionError
from ...hook import Hook, Priority
from ...registry import HOOKS


def _float(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.detach()) if value.numel() == 1 else None
    return float(value) if isinstance(value, (int, float)) else None


def _format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@HOOKS.register()
class LogHook(Hook):
    """Shows training progress and writes what the run produces to ``trainer.writer``.

    - every step: a rich progress bar (step/max, it/s, ETA, EMA loss, #Gaussians, position lr).
      When stdout is not a terminal (CI, ``> log.txt``) there is no bar; one plain line is printed
      every ``interval`` steps instead, so logs stay readable and small.
    - every ``interval`` steps: all loss terms as ``train/<term>`` plus ``trainer.log_vars``
      (e.g. IterTimerHook's times), ``train/num_gaussians`` and ``train/lr_means`` when known.
    - after validation / test: a table of the metrics, ``val/<metric>`` / ``test/<metric>``
      scalars and the images the trainer put in ``trainer.image_dict``.

    BELOW_NORMAL priority: in ``after_train_iter`` it runs after NORMAL hooks (IterTimerHook, most
    user hooks) so their values for this step are in ``log_vars`` before they are written, and
    before CheckPointHook (VERY_LOW), so the bar shows the step before a slow save starts.
    """

    priority = Priority.BELOW_NORMAL

    @dataclass
    class Config:
        interval: int = 50  # write loss terms (and print a plain line without a TTY) every N steps
        ema: float = 0.9  # smoothing of the loss shown in the bar: ema = a * ema + (1 - a) * loss
        progress_bar: bool = True  # False: plain lines even on a terminal
        force_terminal: bool | None = None  # None: detect whether stdout is a TTY

        def __post_init__(self) -> None:
            if self.interval < 0:
                raise OptionError(
                    "interval", f"must be >= 0 (0: no periodic lines), got {self.interval}", "hooks.LogHook"
                )
            if not 0.0 <= self.ema < 1.0:
                raise OptionError("ema", f"must be in [0, 1), got {self.ema}", "hooks.LogHook")

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        # A float, or on a GPU a tensor there: the EMA is updated on the device and read back only
        # when shown (reading every step would make the CPU wait for each step's kernels).
        self._ema: float | torch.Tensor | None = None
        self._bar_info = ("", "")  # (speed, info) last shown on a GPU run's bar
        self._bar_time = 0.0
        self._progress: Progress | None = None
        self._task: Any = None
        self._start_time = 0.0
        self._start_step = 0
        self._console: Console | None = None

    @property
    def ema_loss(self) -> float | None:
        """The smoothed training loss shown in the bar."""
        return float(self._ema) if isinstance(self._ema, torch.Tensor) else self._ema

    @ema_loss.setter
    def ema_loss(self, value: float | None) -> None:
        self._ema = value

    def _update_ema(self, loss: Any) -> None:
        a = self.config.ema
        if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.device.type != "cpu":
            value = loss.detach().float().reshape(())
            self._ema = value if self._ema is None else a * self._ema + (1 - a) * value
            return
        value = _float(loss)
        if value is not None:
            self._ema = value if self._ema is None else a * float(self._ema) + (1 - a) * value

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = Console(force_terminal=self.config.force_terminal, highlight=False)
        return self._console

    def _use_bar(self) -> bool:
        # rich's is_terminal honours force_terminal and otherwise checks that stdout is a TTY.
        return self.config.progress_bar and self.console.is_terminal

    # --- training ---------------------------------------------------------------------------
    def before_train(self) -> None:
        t = self.trainer
        self._start_time = time.perf_counter()
        self._start_step = t.global_step
        if self._use_bar() and t.is_main_process:  # one bar per job, not one per process
            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[speed]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                console=self.console,
            )
            self._task = self._progress.add_task(
                "train", total=t.cfg.trainer.max_steps, completed=t.global_step, speed="", info=""
            )
            self._progress.start()

    def _summary(self) -> tuple[str, str, str]:
        """(speed, eta, info) texts of the current step."""
        t = self.trainer
        done = t.global_step - self._start_step
        elapsed = time.perf_counter() - self._start_time
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (t.cfg.trainer.max_steps - t.global_step) / rate if rate > 0 else 0.0
        ema = self.ema_loss
        parts = [f"loss {ema:.4g}" if ema is not None else ""]
        n = getattr(t.model, "num_gaussians", None)
        if n is not None:
            parts.append(f"GS {int(n)}")
        lr = self._means_lr()
        if lr is not None:
            parts.append(f"lr {lr:.2e}")
        return f"{rate:.1f} it/s", _format_duration(eta), "  ".join(p for p in parts if p)

    def _means_lr(self) -> float | None:
        # Read defensively: a model without a "means" group (or without an optimizer) still logs.
        optimizer = getattr(self.trainer, "optimizer", None)
        for group in getattr(optimizer, "param_groups", []):
            if group.get("name") == "means":
                return float(group["lr"])
        return None

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        t = self.trainer
        self._update_ema(t.loss_dict.get("loss"))
        at_interval = self.config.interval > 0 and t.global_step % self.config.interval == 0
        if at_interval:
            self._write_train_scalars()
        if self._progress is not None:
            now = time.perf_counter()
            # On a GPU the loss is read for the bar twice a second, not every step (each read waits).
            if not isinstance(self._ema, torch.Tensor) or now - self._bar_time >= 0.5 or at_interval:
                speed, _, info = self._summary()
                self._bar_info, self._bar_time = (speed, info), now
            speed, info = self._bar_info
            self._progress.update(self._task, completed=t.global_step, speed=speed, info=info)
        elif at_interval and t.is_main_process:
            speed, eta, info = self._summary()
            print(f"step {t.global_step}/{t.cfg.trainer.max_steps} | {speed} | ETA {eta} | {info}", flush=True)

    def _write_train_scalars(self) -> None:
        t = self.trainer
        values = {k: _float(v) for k, v in t.loss_dict.items()}
        t.writer.write_scalars(values, t.global_step, prefix="train/")
        t.writer.write_scalars(dict(t.log_vars), t.global_step)
        n = getattr(t.model, "num_gaussians", None)
        if n is not None:
            t.writer.write_scalar("train/num_gaussians", int(n), t.global_step)
        lr = self._means_lr()
        if lr is not None:
            t.writer.write_scalar("train/lr_means", lr, t.global_step)

    def after_train(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self.trainer.writer.flush()

    # --- evaluation -------------------------------------------------------------------------
    def _report(self, split: str, metrics: dict[str, Any]) -> None:
        t = self.trainer
        table = Table(title=f"{split} @ step {t.global_step}")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in metrics.items():
            table.add_row(name, "n/a" if value is None else f"{value:.4f}")
        self.console.print(table)
        t.writer.write_scalars(metrics, t.global_step, prefix=f"{split}/")
        for name, image in t.image_dict.items():
            t.writer.write_image(f"{split}/{name}", image, t.global_step)
        t.writer.flush()

    def after_val_epoch(self, metrics: dict) -> None:
        self._report("val", metrics)

    def after_test_epoch(self, metrics: dict) -> None:
        self._report("test", metrics)

    # --- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"ema_loss": self.ema_loss}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema_loss = state.get("ema_loss")
