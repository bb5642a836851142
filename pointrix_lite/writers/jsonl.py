"""JSON-lines writer: one JSON object per record in ``<exp_dir>/<filename>``.

Records: ``{"kind": "scalar", "step", "name", "value", "time", "elapsed"}``; images are saved as
PNG under ``<exp_dir>/<image_dir>/`` and recorded as ``{"kind": "image", "step", "name", "path",
"elapsed"}`` (path relative to exp_dir); the config as ``{"kind": "config", "config": {...}}``.
``time`` is the wall clock (Unix seconds); ``elapsed`` is seconds since this writer opened the file,
from a monotonic clock, so it restarts at 0 when a resumed run appends (logs before it lack the key).
Easy to read back with ``json.loads`` per line, or pandas ``read_json(lines=True)``.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import check_relative_path
from ..io.file_names import name_hash
from ..registry import WRITERS
from .base import Writer, image_to_uint8


@WRITERS.register()
class JsonlWriter(Writer):
    @dataclass
    class Config:
        filename: str = "log.jsonl"  # relative to exp_dir
        image_dir: str = "images"  # relative to exp_dir; PNGs of write_image
        save_images: bool = True

        def __post_init__(self) -> None:
            check_relative_path("filename", self.filename, "writers.JsonlWriter")
            check_relative_path("image_dir", self.image_dir, "writers.JsonlWriter")

    def __init__(self, config: Config, exp_dir: str | Path = ".") -> None:
        super().__init__(config, exp_dir)
        self.path = self.exp_dir / config.filename
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Append: a resumed run continues the same log instead of erasing the first part.
        self._file = open(self.path, "a", encoding="utf-8")
        # Monotonic: the run report plots against it, and a wall-clock jump (NTP) would bend the curve.
        self._opened = time.perf_counter()

    def _elapsed(self) -> float:
        return round(time.perf_counter() - self._opened, 4)

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")

    def write_scalar(self, name: str, value: float, step: int) -> None:
        value = float(value)
        # JSON has no NaN/Infinity; write null so every line stays valid JSON for strict readers.
        self._write(
            {
                "kind": "scalar",
                "step": step,
                "name": name,
                "value": value if math.isfinite(value) else None,
                "time": time.time(),
                "elapsed": self._elapsed(),
            }
        )

    def write_image(self, name: str, image: Any, step: int) -> None:
        if not self.config.save_images:
            return
        import imageio.v3 as iio

        flat = name.replace("/", "_")  # "val/r_000" -> val_r_000: the split prefix, as intended
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", flat)
        if safe != flat:  # "val/a b" and "val/a?b" must not share a file: a stable hash of the name tells them apart
            safe += f"-{name_hash(name)}"
        rel = Path(self.config.image_dir) / f"{safe}_{step:06d}.png"
        (self.exp_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        iio.imwrite(self.exp_dir / rel, image_to_uint8(image))
        self._write({"kind": "image", "step": step, "name": name, "path": rel.as_posix(), "elapsed": self._elapsed()})

    def write_config(self, config: dict[str, Any]) -> None:
        self._write({"kind": "config", "config": config})

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
