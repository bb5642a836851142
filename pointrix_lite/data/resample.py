"""Training views at a lower resolution: box-filtered images with exactly matching intrinsics.

Used by the coarse-to-fine resolution schedule (``ResolutionScheduleHook``). An integer factor
``s`` keeps the math exact: the image is cropped to a multiple of ``s`` on the right/bottom (so
the pixel grid's origin does not move) and each ``s x s`` block is averaged; ``Camera.scaled``
then divides ``fx, fy, cx, cy`` by exactly ``s`` (see the convention in ``cameras.py``).

A training mask keeps a low-resolution pixel only if it keeps all ``s x s`` pixels of its block:
the low-resolution target is the block's mean, so one ignored pixel (a passer-by, a sky the
model should not learn) would leak into it; nearest neighbour would keep many such mixed pixels.
A downscaled view may thus keep no pixel at all; its loss then has no gradient (``model/loss.py``).
"""

from __future__ import annotations

from dataclasses import replace

import torch.nn.functional as F

from .cameras import View


def downscale_view(view: View, factor: int) -> View:
    """``view`` seen by the same camera at ``1/factor`` resolution.

    The returned image is ``[H//s, W//s, 3]`` float32 holding the exact block means of the uint8
    values (0..255, not re-quantised), so ``float_image()`` is the area average of the original's.
    ``factor == 1`` returns ``view`` itself.
    """
    s = int(factor)
    if s != factor or s < 1:
        raise ValueError(f"downscale factor must be a positive integer, got {factor}")
    if s == 1:
        return view
    cam = view.camera
    w, h = cam.width // s, cam.height // s
    if w < 1 or h < 1:
        raise ValueError(f"{view.name}: {cam.width}x{cam.height} image is smaller than the downscale factor {s}")
    cropped = replace(cam, width=w * s, height=h * s)  # same intrinsics: only pixels past the edge go
    img = view.image[: h * s, : w * s].float().permute(2, 0, 1)[None]  # [1, 3, H', W']
    small = F.avg_pool2d(img, s)[0].permute(1, 2, 0).contiguous()  # [h, w, 3]
    mask = None
    if view.mask is not None:
        mask = view.mask[: h * s, : w * s].reshape(h, s, w, s).all(dim=3).all(dim=1)
    return replace(view, camera=cropped.scaled(s), image=small, mask=mask)


def downscale_views(views: list[View], factor: int, cache: dict[int, View] | None = None) -> list[View]:
    """:func:`downscale_view` of each view; ``cache`` (keyed by ``id(view)``) avoids resampling again."""
    if factor == 1:
        return list(views)
    if cache is None:
        return [downscale_view(v, factor) for v in views]
    out = []
    for v in views:
        if id(v) not in cache:
            cache[id(v)] = downscale_view(v, factor)
        out.append(cache[id(v)])
    return out
