"""Depths on the scene's dominant planes, where the sweep's own minimum is unreliable (``model.seeding.mvs``).

A floor seen at a grazing angle defeats the plane sweep at its reduced size: far from the camera its
texture is at the pixel scale, and among 64 depth planes some wrong one matches a 5 x 5 patch better
than the right one (the clutter scene's floor beyond 2 units of its centre: 87-98% of the pixels got a
depth, with a median error of 30-49%, and 2-3% one that two neighbours confirm). SfM's cloud is sparse
there too, and MCMC grows Gaussians where the initial points are: that floor ends 2.0 dB below the
same run given the true points on it (docs/model.md, "The floor SfM saw only near the centre"). The
cloud does give the plane itself: the near part of a floor is well matched, so a large share of the
points lies at one height along one of the cloud's dominant directions. Each such plane is tested as
a single depth per pixel, with no other depth to compete against, and kept where the neighbours'
images agree with it (the sweep's NCC, a stricter threshold). The fusion runs this test at twice the
sweep's size (``fusion.PLANE_SCALE``) and keeps its points within the cloud's extent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .plane_sweep import MIN_STD, SweepView, _box, _cost_volume, _patch_var

BINS = 200  # a plane is a bin of this share of the cloud's extent along a dominant direction
MIN_SHARE = 0.1  # of the cloud's points in one bin (and its neighbours) for it to count as a plane
MAX_COST = 0.4  # 1 - NCC at the plane's depth (the sweep's 0.5: no competing depths here to rank against)


@dataclass
class Plane:
    """The plane ``normal . x = offset`` (world frame) and the share of the cloud on it."""

    normal: Tensor  # [3] unit
    offset: float
    share: float


def dominant_planes(xyz: Tensor, axes: Tensor) -> list[Plane]:
    """The planes along ``axes [A, 3]`` holding at least ``MIN_SHARE`` of the points ``xyz [M, 3]``:
    peaks of the points' histogram along each axis (bins of 1/``BINS`` of the 1st-99th percentile span),
    each at the median of the points within a bin of its peak."""
    planes = []
    for normal in axes:
        x = xyz @ normal
        lo, hi = torch.quantile(x, torch.tensor([0.01, 0.99])).tolist()
        width = max(hi - lo, 1e-9) / BINS
        idx = torch.floor((x - lo) / width).long()
        counts = torch.bincount(idx.clamp(-1, BINS + 1) + 1, minlength=BINS + 3).float()
        around = counts + torch.cat([counts[1:], counts[:1] * 0]) + torch.cat([counts[:1] * 0, counts[:-1]])
        for b in torch.nonzero(around >= MIN_SHARE * len(x)).ravel().tolist():
            left = around[b - 1] if b > 0 else -1.0
            right = around[b + 1] if b + 1 < len(around) else -1.0
            if around[b] < left or around[b] <= right:
                continue  # not the peak of its run of bins (the first of equal ones)
            on = (idx + 1 - b).abs() <= 1
            planes.append(Plane(normal.contiguous(), float(x[on].median()), float(on.float().mean())))
    return planes


def plane_depths(ref: SweepView, sources: list[SweepView], planes: list[Plane], near: float, far: float) -> Tensor:
    """[H, W] depth of ``ref``'s pixels on the one of ``planes`` (at a depth between ``near`` and ``far``)
    that the ``sources``' images agree with best, where they agree well enough (best half's 1 - NCC
    below ``MAX_COST``); 0 elsewhere."""
    _, h, w = ref.image.shape
    image = ref.image[None]
    mr, var_r = _box(image.mean(1, keepdim=True)), _patch_var(image)
    rays = ref.rays()
    world_rays = rays @ ref.R
    out, best = torch.zeros(h * w), torch.full((h * w,), MAX_COST)
    for plane in planes:
        depth = (plane.offset - torch.dot(plane.normal, ref.center)) / (world_rays @ plane.normal)  # [P]
        usable = torch.isfinite(depth) & (depth >= near) & (depth <= far)
        if not usable.any():
            continue
        depth = depth.where(usable, torch.ones_like(depth))
        cost = _cost_volume(ref, sources, rays, depth[None], usable[None], mr, var_r).reshape(-1)
        ok = usable & (cost < best)
        out, best = torch.where(ok, depth, out), torch.where(ok, cost, best)
    textured = (var_r[0, 0] > MIN_STD**2) & ref.valid
    return out.reshape(h, w) * textured
