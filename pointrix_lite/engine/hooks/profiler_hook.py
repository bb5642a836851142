"""ProfilerHook: torch.profiler over a range of training steps, Chrome trace into exp_dir."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ...config import OptionError, check_relative_path
from ...hook import Hook, Priority
from ...registry import HOOKS


@HOOKS.register()
class ProfilerHook(Hook):
    """Profiles steps ``start_step .. start_step + num_steps - 1`` (1-based step numbers).

    Writes ``<exp_dir>/<out_dir>/trace_steps_<a>-<b>.json``; open it in chrome://tracing or
    https://ui.perfetto.dev. HIGHEST priority so it starts before every other hook's
    ``before_train_iter``: the trace then shows what those hooks cost next to the step itself.
    """

    priority = Priority.HIGHEST

    @dataclass
    class Config:
        start_step: int = 10
        num_steps: int = 5
        record_shapes: bool = False
        with_stack: bool = False
        profile_memory: bool = False
        out_dir: str = "profile"

        def __post_init__(self) -> None:
            if self.start_step < 1 or self.num_steps < 1:
                raise OptionError(
                    "start_step / num_steps",
                    f"must be >= 1 (1-based steps), got {self.start_step} / {self.num_steps}",
                    "hooks.ProfilerHook",
                )
            check_relative_path("out_dir", self.out_dir, "hooks.ProfilerHook")

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._prof: torch.profiler.profile | None = None
        self._first = 0
        self.trace_path: Path | None = None

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        # Rank 0 only: every rank would write the same trace file name.
        if (
            self._prof is None
            and self.trainer.is_main_process
            and self.trainer.global_step + 1 == self.config.start_step
        ):
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.trainer.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._prof = torch.profiler.profile(
                activities=activities,
                record_shapes=self.config.record_shapes,
                with_stack=self.config.with_stack,
                profile_memory=self.config.profile_memory,
            )
            self._first = self.config.start_step
            self._prof.__enter__()

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        # Stopping here, at HIGHEST priority, leaves the other after_train_iter hooks of the last
        # profiled step out of the trace; that is acceptable, their cost shows on earlier steps.
        if self._prof is not None and self.trainer.global_step >= self._first + self.config.num_steps - 1:
            self._stop()

    def after_train(self) -> None:
        if self._prof is not None:  # training ended inside the range
            self._stop()

    def _stop(self) -> None:
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        out = Path(self.trainer.exp_dir) / self.config.out_dir
        out.mkdir(parents=True, exist_ok=True)
        self.trace_path = out / f"trace_steps_{self._first}-{self.trainer.global_step}.json"
        prof.export_chrome_trace(str(self.trace_path))
        self.trainer.console.print(f"profiler: Chrome trace written to {self.trace_path}")
