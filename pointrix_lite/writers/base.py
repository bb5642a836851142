"""The :class:`Writer` interface and the fan-out group the trainer writes through.

Writers are built from the ``writers:`` list in YAML as ``cls(config, exp_dir=...)`` (or
``cls(exp_dir=...)`` for a writer without a ``Config``). The trainer holds one
:class:`WriterGroup` as ``trainer.writer``; hooks write to it and every record reaches every writer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch


def image_to_uint8(image: Any) -> np.ndarray:
    """HxWx3 float in [0, 1] or uint8, numpy or torch -> contiguous numpy uint8 [H,W,3].

    Floats are clipped to [0, 1] first (renders overshoot slightly) and rounded, not truncated.
    """
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] not in (1, 3, 4):
        raise ValueError(f"expected an HxWx3 image, got shape {image.shape}")
    if image.dtype == np.uint8:
        return np.ascontiguousarray(image)
    return np.ascontiguousarray((np.clip(image.astype(np.float32), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8))


def scalar_value(value: Any) -> float:
    """Python float from a float, int, numpy scalar or one-element tensor."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().item())
    return float(value)


class Writer:
    """Base class: override the methods your backend supports; the rest are no-ops."""

    def __init__(self, config: Any = None, exp_dir: str | Path = ".") -> None:
        self.config = config
        self.exp_dir = Path(exp_dir)

    def write_scalar(self, name: str, value: float, step: int) -> None:
        """One scalar (``train/loss``) at ``step``."""

    def write_image(self, name: str, image: Any, step: int) -> None:
        """``image``: HxWx3 float in [0,1] or uint8, numpy or torch (see :func:`image_to_uint8`)."""

    def write_config(self, config: dict[str, Any]) -> None:
        """The resolved experiment config as plain data."""

    def flush(self) -> None: ...

    def close(self) -> None:
        self.flush()


class WriterGroup(Writer):
    """Fans every record out to all writers; the trainer's ``writer`` attribute."""

    def __init__(self, writers: Iterable[Writer]) -> None:
        super().__init__()
        self.writers = list(writers)

    def write_scalar(self, name: str, value: Any, step: int) -> None:
        value = scalar_value(value)  # convert once: a GPU tensor would sync once per writer otherwise
        for w in self.writers:
            w.write_scalar(name, value, step)

    def write_scalars(self, values: dict[str, Any], step: int, prefix: str = "") -> None:
        """Every entry of ``values`` whose value is a number; ``None`` entries are skipped."""
        for name, value in values.items():
            if value is not None:
                self.write_scalar(f"{prefix}{name}", value, step)

    def write_image(self, name: str, image: Any, step: int) -> None:
        image = image_to_uint8(image)
        for w in self.writers:
            w.write_image(name, image, step)

    def write_config(self, config: dict[str, Any]) -> None:
        for w in self.writers:
            w.write_config(config)

    def flush(self) -> None:
        for w in self.writers:
            w.flush()

    def close(self) -> None:
        # Close every writer even if one fails, so a broken custom writer can't lose the others' data.
        errors = []
        for w in self.writers:
            try:
                w.close()
            except Exception as exc:  # noqa: BLE001 - re-raised below after the others closed
                errors.append(exc)
        if errors:
            raise errors[0]
