"""``dataset.scale: auto``: the training resolution a data set picks for its images.

A training step's cost grows with the pixels of the images it renders, and phone photos are
2 MP: at full size a 3000-step CPU run takes over 20 minutes where 1/4 of the size takes about
5 (docs/data.md). INRIA caps the long side at 1600 px, a limit made for GPUs; on a 2-core CPU a
pixel budget per image fits better. The rule: the smallest of the factors ``process.py`` writes
``images_N`` folders for (1, 2, 4, 8) whose image has at most :data:`PIXEL_BUDGET` pixels and a long
side of at most :data:`LONG_SIDE_CAP`; past 8 it keeps doubling. Integer factors keep the
intrinsics exact (``Camera.scaled``) and let the COLMAP loader use ``images_N`` when present.
"""

from __future__ import annotations

from typing import Literal, Union

PIXEL_BUDGET = 250_000  # pixels per training image: 1080x1920 photos train at 1/4 (270x480)
LONG_SIDE_CAP = 1600  # INRIA's rule, kept as an upper bound
FACTORS = (1, 2, 4, 8)  # process.py's images_N (1 = the images themselves)

Scale = Union[float, Literal["auto"]]


def auto_scale(width: int, height: int) -> int:
    """Downscale factor for ``width`` x ``height`` images under the rule above."""
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


def describe(width: int, height: int, s: int, key: str = "dataset.scale") -> str:
    """The one line a run prints about the resolution ``auto`` chose, why, and how to override it."""
    where = "the images' full size" if s == 1 else f"1/{s} of the images' {width}x{height}"
    return (
        f"{key}: auto -> {s}: training at {width // s}x{height // s}, {where} (at most "
        f"{PIXEL_BUDGET / 1e6:.2f} MP and {LONG_SIDE_CAP} px per side, sized for a CPU); "
        f"set {key}=1 (or 2, 4) to choose"
    )
