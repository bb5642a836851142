"""Console writer: prints records with rich, one compact line per step.

Scalars of the same step are gathered and printed together when the step changes or on
``flush()``, so a step with ten loss terms is one line, not ten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from ..config import OptionError
from ..registry import WRITERS
from .base import Writer, image_to_uint8


@WRITERS.register()
class ConsoleWriter(Writer):
    @dataclass
    class Config:
        show_config: bool = False  # print the whole resolved config at the start
        precision: int = 5  # significant digits of printed scalars

        def __post_init__(self) -> None:
            if self.precision < 1:
                raise OptionError("precision", f"must be >= 1, got {self.precision}", "writers.ConsoleWriter")

    def __init__(self, config: Config, exp_dir: str | Path = ".") -> None:
        super().__init__(config, exp_dir)
        self.console = Console(highlight=False)
        self._step: int | None = None
        self._pending: dict[str, float] = {}

    def write_scalar(self, name: str, value: float, step: int) -> None:
        if self._step is not None and step != self._step:
            self.flush()
        self._step = step
        self._pending[name] = float(value)

    def write_image(self, name: str, image: Any, step: int) -> None:
        h, w = image_to_uint8(image).shape[:2]
        self.console.print(f"[dim]step {step}[/dim] image {escape(name)} ({w}x{h})")

    def write_config(self, config: dict[str, Any]) -> None:
        if self.config.show_config:
            self.console.print(yaml.safe_dump(config, sort_keys=False), markup=False)

    def flush(self) -> None:
        if self._pending:
            p = self.config.precision
            body = "  ".join(f"{k}={v:.{p}g}" for k, v in self._pending.items())
            self.console.print(f"[dim]step {self._step}[/dim] {escape(body)}")
            self._pending = {}
