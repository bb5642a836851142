"""The photometric loss terms over the pixels training masks keep (``View.mask``, ``data/masks.py``).

Without masks these are exactly the unmasked terms (the same calls, so the native SSIM still runs).
With masks, an ignored pixel is treated like the zero padding beyond the image border that the
training SSIM already uses: both images are zeroed there before the SSIM windows are taken, and
the L1 and SSIM means run over the kept pixels only. The loss then depends neither on the target
nor on the render under the mask, so those pixels send no gradient to the Gaussians -- nor to the
2D means the densification statistics are read from.

:func:`masked_l1` and :func:`masked_ssim` are the torch definition; where the native SSIM runs
(CPU, ``metrics.ssim_native.native_applies``) or the fused Triton kernels do (CUDA,
``kernels/ssim.py``) :func:`masked_l1_and_ssim` computes the same two terms in one pass of them
(the mask is an input of the kernels), so masked views train as fast as unmasked ones.

:func:`bound_clipped` (``model.bound_clipped``) handles the pixels a camera clipped: where a photo's
channel is at 255 the scene was at least that bright there, so the photo bounds the render from
below instead of fixing it (and at 0 from above).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ..metrics.ssim import as_float_image, ssim, ssim_and_l1, ssim_l1_masked, ssim_map


def batch_mask(batch: Sequence[Any], device: torch.device) -> Tensor | None:
    """``[B, H, W]`` bool of the views' masks on ``device`` (all-True for a view without one), or
    None when no view has a mask (the unmasked loss then runs unchanged)."""
    masks = [getattr(view, "mask", None) for view in batch]
    if all(m is None for m in masks):
        return None
    shape = next(m for m in masks if m is not None).shape
    full = torch.ones(shape, dtype=torch.bool, device=device)
    return torch.stack([full if m is None else view.mask_on(device) for m, view in zip(masks, batch)])


def bound_clipped(rgb: Tensor, gt: Tensor) -> Tensor:
    """``rgb [B, H, W, C]`` clamped to at most 1 where ``gt`` (same shape) is 255, to at least 0 where it
    is 0, untouched elsewhere.

    A photo's channel at 255 (uint8 ``gt``; float ``gt`` in [0, 1]: within half a level of 1, so a
    downscaled view's block mean counts when all or nearly all of the pixels under it were 255) says
    only that the light was at least white: a render brighter than that matches it, so its value is
    clamped to 1 there, which makes its loss and its gradient zero; a render darker still gets the full
    gradient towards 1. The same at 0 from the other side. Elsewhere the render is compared as it is,
    brighter than 1 included (a clamp everywhere would stop a render above 1 from ever coming down to a
    photo's 0.9). The loss then never pulls the scene towards a value the camera clipped, e.g. the flat
    white of a highlight that one over-exposed photo shows and the others resolve.
    """
    if gt.dtype == torch.uint8:
        top, bottom = gt == 255, gt == 0
    else:
        half_level = 0.5 / 255.0
        top, bottom = gt >= 1.0 - half_level, gt <= half_level
    inf = torch.full((), float("inf"), dtype=rgb.dtype, device=rgb.device)
    return rgb.clamp(min=torch.where(bottom, 0.0, -inf), max=torch.where(top, 1.0, inf))


def bounds_clipped(model: Any) -> bool:
    """Whether ``model``'s loss bounds clipped pixels (its config's ``bound_clipped``; False for a model
    without one): what the appearance hook and the densification's error scores follow."""
    return bool(getattr(getattr(model, "config", None), "bound_clipped", False))


def masked_l1(rgb: Tensor, gt: Tensor, mask: Tensor | None) -> Tensor:
    """Mean absolute error of ``[B, H, W, C]`` images over the pixels ``mask [B, H, W]`` keeps (all if None)."""
    if mask is None:
        return (rgb - gt).abs().mean()
    _check(rgb, mask)
    kept = (rgb - gt).abs()[mask]  # [K, C]: indexing, so the ignored pixels are not even read
    return kept.sum() / max(kept.numel(), 1)


def masked_ssim(rgb: Tensor, gt: Tensor, mask: Tensor | None) -> Tensor:
    """Training SSIM (zero-padded "same" window) averaged over the pixels ``mask`` keeps.

    Ignored pixels are zero in both images, like the padding past the border; a batch that keeps
    no pixel scores 1 (nothing to be dissimilar), so its SSIM term carries no gradient.
    """
    if mask is None:
        return ssim(rgb, gt, padding="same")
    _check(rgb, mask)
    keep = mask[..., None]
    smap = ssim_map(torch.where(keep, rgb, 0.0), torch.where(keep, gt, 0.0), padding="same")  # [B, C, H, W]
    kept = mask[:, None].expand_as(smap)
    count = kept.sum()
    total = torch.where(kept, smap, 0.0).sum()
    return torch.where(count > 0, total / count.clamp(min=1), torch.ones_like(total))


def masked_l1_and_ssim(rgb: Tensor, gt: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(masked_l1(...), masked_ssim(...))``; both terms come from one pass of the native SSIM
    kernel or the fused Triton kernels where they run (``metrics.ssim.ssim_and_l1``; with masks
    ``ssim_l1_masked``).
    ``gt`` may be the views' uint8 photos (value * 255): the native kernel reads them as they are,
    the other paths convert them as ``View.float_image`` does."""
    if mask is None:
        s, l1 = ssim_and_l1(rgb, gt, padding="same")
        return l1, s
    _check(rgb, mask)
    fused = ssim_l1_masked(rgb, gt, mask)
    if fused is not None:
        s, l1 = fused
        return l1, s
    gt = as_float_image(gt)
    return masked_l1(rgb, gt, mask), masked_ssim(rgb, gt, mask)


def _check(rgb: Tensor, mask: Tensor) -> None:
    if mask.shape != rgb.shape[:-1]:
        raise ValueError(f"masks {tuple(mask.shape)} do not match rendered images {tuple(rgb.shape)}")
