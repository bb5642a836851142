"""TensorBoard writer: event files under ``<exp_dir>/<subdir>``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..config import OptionError, check_relative_path
from ..registry import WRITERS
from .base import Writer, image_to_uint8


@WRITERS.register()
class TensorboardWriter(Writer):
    @dataclass
    class Config:
        subdir: str = "tensorboard"  # relative to exp_dir
        flush_secs: int = 30

        def __post_init__(self) -> None:
            check_relative_path("subdir", self.subdir, "writers.TensorboardWriter")
            if self.flush_secs < 1:
                raise OptionError("flush_secs", f"must be >= 1, got {self.flush_secs}", "writers.TensorboardWriter")

    def __init__(self, config: Config, exp_dir: str | Path = ".") -> None:
        super().__init__(config, exp_dir)
        from torch.utils.tensorboard import SummaryWriter  # import cost only when used

        self.log_dir = self.exp_dir / config.subdir
        self._tb = SummaryWriter(log_dir=str(self.log_dir), flush_secs=config.flush_secs)

    def write_scalar(self, name: str, value: float, step: int) -> None:
        self._tb.add_scalar(name, float(value), step)

    def write_image(self, name: str, image: Any, step: int) -> None:
        self._tb.add_image(name, image_to_uint8(image), step, dataformats="HWC")

    def write_config(self, config: dict[str, Any]) -> None:
        # Indented by four spaces: TensorBoard renders text as markdown, this keeps it a code block.
        text = "\n".join("    " + line for line in yaml.safe_dump(config, sort_keys=False).splitlines())
        self._tb.add_text("config", text, 0)

    def flush(self) -> None:
        self._tb.flush()

    def close(self) -> None:
        self._tb.close()
