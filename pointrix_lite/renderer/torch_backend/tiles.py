"""Gaussian/tile intersection lists in gsplat's order (``IntersectTile.cu`` + radix sort).

gsplat sorts 64-bit keys ``camera | tile | depth`` with a stable radix sort over
intersections emitted in Gaussian-index order. The equivalent here: per camera, order the
Gaussians by depth (stable, so equal depths keep index order), emit their tiles in that
order, then stable-sort the intersections by global tile id.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor


class TileLists(NamedTuple):
    tile_width: int
    tile_height: int
    offsets: Tensor  # [C * tile_height * tile_width + 1] int64: list of tile t is flat_ids[offsets[t]:offsets[t+1]]
    flat_ids: Tensor  # [n_isects] int64 index into the flattened [C * N] Gaussians, front to back per tile
    tiles_per_gauss: Tensor  # [C, N] int64


def tile_bounds(
    means2d: Tensor, radii: Tensor, tile_size: int, tile_width: int, tile_height: int
) -> tuple[Tensor, Tensor]:
    """Tile box [min, max) of each projected Gaussian. means2d [..., 2], radii [..., 2] -> 2 x [..., 2] int64"""
    tile_xy = means2d.detach() / tile_size
    tile_r = radii.to(means2d.dtype) / tile_size
    hi = torch.tensor([tile_width, tile_height], device=means2d.device)
    tmin = torch.minimum(torch.floor(tile_xy - tile_r).clamp(min=0).long(), hi)
    tmax = torch.minimum(torch.ceil(tile_xy + tile_r).clamp(min=0).long(), hi)
    return tmin, tmax


@torch.no_grad()
def intersect_tiles(
    means2d: Tensor, radii: Tensor, depths: Tensor, width: int, height: int, tile_size: int
) -> TileLists:
    """Front-to-back Gaussian lists for every tile of every camera.

    Args:
        means2d: [C, N, 2].  radii: [C, N, 2] int (0 = culled).  depths: [C, N].
    """
    C, N = depths.shape
    device = depths.device
    tw, th = math.ceil(width / tile_size), math.ceil(height / tile_size)
    tmin, tmax = tile_bounds(means2d, radii, tile_size, tw, th)
    visible = (radii > 0).all(dim=-1)
    extent = (tmax - tmin).clamp(min=0)
    counts = extent[..., 0] * extent[..., 1] * visible  # [C, N]

    order = torch.sort(depths, dim=-1, stable=True).indices  # [C, N]
    cam = torch.arange(C, device=device)[:, None].expand(C, N)
    flat = (cam * N + order).reshape(-1)  # Gaussians camera-major, front to back
    counts_sorted = counts.reshape(-1)[flat]
    n_isects = int(counts_sorted.sum())
    gauss = torch.repeat_interleave(flat, counts_sorted, output_size=n_isects)
    start = torch.cumsum(counts_sorted, 0) - counts_sorted
    k = torch.arange(n_isects, device=device) - torch.repeat_interleave(start, counts_sorted, output_size=n_isects)
    box_w = extent[..., 0].reshape(-1)[gauss]
    tx = tmin[..., 0].reshape(-1)[gauss] + k % box_w.clamp(min=1)
    ty = tmin[..., 1].reshape(-1)[gauss] + k // box_w.clamp(min=1)
    tile = (gauss // N) * (tw * th) + ty * tw + tx

    tile_sorted, perm = torch.sort(tile, stable=True)
    n_tiles = C * tw * th
    per_tile = torch.bincount(tile_sorted, minlength=n_tiles)
    offsets = torch.zeros(n_tiles + 1, dtype=torch.int64, device=device)
    offsets[1:] = torch.cumsum(per_tile, 0)
    return TileLists(tw, th, offsets, gauss[perm], counts)
