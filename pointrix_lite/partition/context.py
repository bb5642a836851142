"""Context for the blocks: a coarse model of the whole scene, and per block the part of it the block renders
but does not train (CityGaussian's coarse global prior).

A block's training views see across its border: a facade's neighbour, the street behind, the sky. Without
context the block can only explain those pixels with its own Gaussians, which it then puts in front of the
border (floaters the merge keeps, since they sit in the block's cell). So ``train_blocks.py --context coarse``
first trains a coarse model of the whole scene, cheaply (``--coarse-steps``, on the training views of every
block; the scene's test views stay held out), then gives each block the coarse Gaussians outside the block's
margin region as ``model.context``: rendered with the block's own in every step, frozen, never densified and
never written to the block's PLY, so the merge (which reads those PLYs) cannot keep them.

The context is cut to what the block's views can show: Gaussians in front of at least one of its cameras whose
3-sigma footprint (bounded from above, so nothing that reaches the image is dropped) overlaps the image, and
opacity at least gsplat's 1/255 (below it a Gaussian never passes the rasterizer's alpha threshold). A block's
context therefore grows with what its views see, not with the scene.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .manifest import Block, Manifest
from .visibility import PinholeView

COARSE = "coarse"  # the coarse run's folder in <runs>, and its status name
CONTEXT_DIR = "context"  # <runs>/context/<block>.ply
ALPHA_MIN = 1.0 / 255.0  # gsplat's ALPHA_THRESHOLD: a Gaussian below it draws nothing anywhere
NEAR = 0.01  # GaussianRenderer's near_plane: centres nearer than this are culled by the rasterizer
EPS2D = 0.3  # the rasterizer's screen-space dilation, added to the footprint's variance
CLAMP = 1.3  # gsplat clamps x/z, y/z to 1.3 x the image's half-extent when projecting the covariance


def coarse_overrides(manifest: Manifest, steps: int) -> list[str]:
    """What makes a ``train.py`` run of the whole scene the coarse stage: the manifest's test views held out
    (ColmapDataset's every ``test_every``-th name, as ``partition.py`` chose them), ``steps`` steps."""
    held_out = manifest.test_every > 0
    return [
        f"dataset.eval={str(held_out).lower()}",
        f"dataset.test_every={max(manifest.test_every, 1)}",
        f"trainer.max_steps={steps}",
    ]


def seen(views: Sequence[PinholeView], means: np.ndarray, max_scale: np.ndarray) -> np.ndarray:
    """[M] whether each Gaussian (centre ``means``, largest axis ``max_scale``) can draw a pixel of a view.

    The footprint radius is bounded with the Frobenius norm of the projection's Jacobian at the clamped
    angle, which is at least its spectral norm: an upper bound of the rasterizer's 3-sigma radius."""
    hit = np.zeros(len(means), dtype=bool)
    for view in views:
        (fx, fy), (cx, cy), (w, h) = view.focal, view.center, view.size
        pc = means @ view.R.T + view.t
        z = pc[:, 2]
        front = z > NEAR
        zs = np.where(front, z, 1.0)
        lx, ly = CLAMP * max(cx, w - cx) / fx, CLAMP * max(cy, h - cy) / fy
        jacobian = max(fx, fy) / zs * math.sqrt(2.0 + lx * lx + ly * ly)
        radius = 3.0 * np.sqrt((jacobian * max_scale) ** 2 + EPS2D) + 1.0
        u, v = fx * pc[:, 0] / zs + cx, fy * pc[:, 1] / zs + cy
        hit |= front & (u > -radius) & (u < w + radius) & (v > -radius) & (v < h + radius)
    return hit


def block_context(
    coarse: dict[str, Tensor], block: Block, rotation: np.ndarray, views: Sequence[PinholeView]
) -> dict[str, Tensor]:
    """The rows of the coarse model's raw parameters ``coarse`` (``load_ply``) that are ``block``'s context:
    outside its margin region, visible in one of ``views`` (its training views) and not transparent."""
    means = coarse["means"].double().numpy()
    keep = ~block.margin.contains(means @ rotation[:2].T)
    keep &= torch.sigmoid(coarse["opacities"]).numpy() >= ALPHA_MIN
    keep[keep] = seen(views, means[keep], np.exp(coarse["scales"][torch.from_numpy(keep)].double().numpy()).max(1))
    mask = torch.from_numpy(keep)
    return {k: v[mask] for k, v in coarse.items()}


def context_path(runs: Path, block: Block) -> Path:
    return runs / CONTEXT_DIR / f"{block.name}.ply"


def block_start(coarse: dict[str, Tensor], block: Block, rotation: np.ndarray) -> dict[str, Tensor]:
    """The rows of the coarse model inside ``block``'s margin region: what the block starts from with
    ``--start coarse`` (CityGaussian's fine-tuning of the coarse prior), the complement of its context."""
    from .merge import keep_in

    return keep_in(coarse, block.margin, rotation)
