"""What ``scripts/process.py`` was asked to do, as one typed record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CAMERA_MODELS = ("SIMPLE_RADIAL", "OPENCV", "PINHOLE", "SIMPLE_PINHOLE")
# --matcher auto: every pair up to this many images (1770 pairs), retrieval above it (~10 n pairs; docs/data.md)
EXHAUSTIVE_MAX_IMAGES = 60
RETRIEVAL_NEIGHBORS = 10  # retrieval: each image is matched with its 10 most similar images
RETRIEVAL_OVERLAP = 5  # ... and with the next 5 in name order
MATCHERS = ("auto", "exhaustive", "retrieval", "sequential", "vocab_tree")
MAPPERS = ("auto", "incremental", "global", "hierarchical")
# hierarchical: images per cluster before its overlap (COLMAP's leaf_max_num_images). --mapper auto maps a set
# that fits one cluster incrementally (what one cluster would do anyway) and splits larger ones: measured and
# extrapolated, the first split already maps faster (docs/data.md, "Large photo sets").
CLUSTER_IMAGES = 500
CLUSTER_OVERLAP = 50  # hierarchical: images two neighbouring clusters share, where they are merged (COLMAP's default)


@dataclass
class ProcessOptions:
    out: Path
    images: Path | None = None
    video: Path | None = None
    camera_model: str = "SIMPLE_RADIAL"
    principal_point: Literal["refine", "centre"] = "centre"  # refine: freed in a last bundle adjustment
    matcher: Literal["auto", "exhaustive", "retrieval", "sequential", "vocab_tree"] = "auto"
    retrieval_neighbors: int = RETRIEVAL_NEIGHBORS
    vocab_tree: Path | None = None  # only with an explicit file: COLMAP would download one (and abort offline)
    mapper: Literal["auto", "incremental", "global", "hierarchical"] = "auto"
    cluster_images: int = CLUSTER_IMAGES  # hierarchical: images per cluster
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
        """``auto`` -> every pair of a small set, retrieval (own vocabulary + name order) above; a given tree wins."""
        if self.matcher != "auto":
            return self.matcher
        if self.vocab_tree is not None:
            return "vocab_tree"
        return "exhaustive" if n_images <= EXHAUSTIVE_MAX_IMAGES else "retrieval"

    def resolved_mapper(self, n_images: int) -> str:
        """``auto`` -> incremental up to ``cluster_images`` images (500: the models of such sets are unchanged),
        hierarchical above."""
        if self.mapper != "auto":
            return self.mapper
        return "incremental" if n_images <= self.cluster_images else "hierarchical"
