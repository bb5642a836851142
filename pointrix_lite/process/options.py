"""What ``scripts/process.py`` was asked to do, as one typed record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CAMERA_MODELS = ("SIMPLE_RADIAL", "OPENCV", "PINHOLE", "SIMPLE_PINHOLE")
EXHAUSTIVE_MAX_IMAGES = 60  # --matcher auto: exhaustive up to this many images, sequential above (and for video)


@dataclass
class ProcessOptions:
    out: Path
    images: Path | None = None
    video: Path | None = None
    camera_model: str = "SIMPLE_RADIAL"
    matcher: Literal["auto", "exhaustive", "sequential", "vocab_tree"] = "auto"
    vocab_tree: Path | None = None  # only with an explicit file: COLMAP would download one (and abort offline)
    mapper: Literal["incremental", "global"] = "incremental"
    max_image_size: int = 3200  # feature extraction downsizes larger images to this side length
    max_features: int = 8192
    num_frames: int = 100  # video: evenly spaced windows, one frame each
    sharp_frames: bool = False  # video: the sharpest frame of each window instead of its middle one
    downscales: int = 0  # write images_2 .. images_{2^K}
    threads: int = -1  # -1: all cores
    overwrite: bool = False
    masks: Path | None = None  # DIR/<photo stem>.png, 0 = ignore: no features there, undistorted into out/masks
    min_registered: int = 3

    def resolved_matcher(self, n_images: int) -> str:
        """``auto`` -> exhaustive for a small photo set, sequential for video or many images."""
        if self.vocab_tree is not None and self.matcher == "auto":
            return "vocab_tree"
        if self.matcher != "auto":
            return self.matcher
        if self.video is not None or n_images > EXHAUSTIVE_MAX_IMAGES:
            return "sequential"
        return "exhaustive"
