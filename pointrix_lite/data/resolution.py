"""``dataset.scale: auto``: the training resolution a data set picks for its images, by device.

A training step's cost grows with the pixels of the images it renders, and phone photos are
2 MP: at full size a 3000-step CPU run takes over 20 minutes where 1/4 of the size takes about
5 (docs/data.md). INRIA caps the long side at 1600 px, a limit made for GPUs; on a 2-core CPU a
pixel budget per image fits better. Two rules:

- **CPU** (and any device but CUDA): the smallest of the factors ``process.py`` writes ``images_N``
  folders for (1, 2, 4, 8) whose image has at most :data:`PIXEL_BUDGET` pixels and a long side of
  at most :data:`LONG_SIDE_CAP`; past 8 it keeps doubling. Integer factors keep the intrinsics exact
  (``Camera.scaled``) and let the COLMAP loader use ``images_N`` when present.
- **CUDA**: INRIA's: full size up to a long side of :data:`LONG_SIDE_CAP`, beyond it the factor
  ``long side / 1600`` (INRIA reads the width alone; the long side also caps portrait photos).
"""

from __future__ import annotations

from typing import Literal

from .cameras import scaled_size

PIXEL_BUDGET = 250_000  # pixels per training image: 1080x1920 photos train at 1/4 (270x480)
LONG_SIDE_CAP = 1600  # INRIA's rule, kept as an upper bound
FACTORS = (1, 2, 4, 8)  # process.py's images_N (1 = the images themselves)

Scale = float | Literal["auto"]


def auto_scale(width: int, height: int, device: str = "cpu") -> float:
    """Downscale factor for ``width`` x ``height`` images under ``device``'s rule above (an int on
    the CPU; on CUDA ``long side / 1600`` when that is over 1)."""
    if _device_type(device) == "cuda":
        long_side = max(width, height)
        return long_side / LONG_SIDE_CAP if long_side > LONG_SIDE_CAP else 1
    s = FACTORS[0]
    for s in FACTORS:
        if _fits(width, height, s):
            return s
    while not _fits(width, height, s):
        s *= 2
    return s


def _fits(width: int, height: int, s: int) -> bool:
    w, h = width // s, height // s
    return w * h <= PIXEL_BUDGET and max(w, h) <= LONG_SIDE_CAP


def _device_type(device: object) -> str:
    return str(device).split(":")[0]


def describe(width: int, height: int, s: float, key: str = "dataset.scale", device: str = "cpu") -> str:
    """The one line a run prints about the resolution ``auto`` chose, why, and how to override it."""
    w, h = scaled_size(width, height, s)
    where = "the images' full size" if s == 1 else f"1/{s:g} of the images' {width}x{height}"
    if _device_type(device) == "cuda":
        rule = f"at most {LONG_SIDE_CAP} px on the long side, INRIA's rule for a GPU"
    else:
        rule = f"at most {PIXEL_BUDGET / 1e6:.2f} MP and {LONG_SIDE_CAP} px per side, sized for a CPU"
    return f"{key}: auto -> {s:g}: training at {w}x{h}, {where} ({rule}); set {key}=1 (or 2, 4) to choose"
