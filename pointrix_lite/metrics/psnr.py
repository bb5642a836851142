"""Peak signal-to-noise ratio on [0,1] images."""

from __future__ import annotations

import torch
from torch import Tensor


def psnr(img1: Tensor, img2: Tensor) -> Tensor:
    """Mean over images of the per-image PSNR in dB.

    Both images are clamped to [0,1] first: a renderer can overshoot 1 with SH colours, and the
    saved PNG (what a user compares) would be clamped too.

    Args:
        img1, img2: Images ``[B,H,W,C]`` or ``[H,W,C]`` in [0,1].

    Returns:
        Scalar tensor; ``inf`` for identical images.
    """
    if img1.shape != img2.shape:
        raise ValueError(f"psnr expects images of equal shape, got {tuple(img1.shape)} and {tuple(img2.shape)}")
    if img1.dim() == 3:
        img1, img2 = img1[None], img2[None]
    diff = img1.float().clamp(0, 1) - img2.float().clamp(0, 1)
    mse = diff.pow(2).flatten(1).mean(dim=1)  # [B]
    return (-10.0 * torch.log10(mse)).mean()
