"""Median depth: per pixel, the depth of the Gaussian that takes the accumulated alpha past one half.

2DGS and GOF fuse this depth rather than the expected one: it is one surface's depth, where expected depth
averages the surfaces a pixel sees through (a depth edge becomes a ramp). gsplat's kernels have no such
output, so it is composited here, by the same walk as :mod:`.rasterize` (the same lists, alphas and
transmittance; ``composite_block`` marks the crossing), on any device.

Only the front of each list matters: once every pixel of a tile is past one half (or stopped), nothing
behind can change its median. So the walk goes segment by segment, doubling the segment each round, over
the tiles that still have a pixel below one half. A pixel that never gets past one half (sky, an edge)
would keep its tile walking to the end of its list; given the render's alphas, such pixels are left out
from the start, and on an opaque scene most tiles leave after their first few dozen entries, where a
colour render walks the whole list.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .rasterize import DEFAULT_PAIR_BUDGET, composite_block, tile_pixels, tiles_to_image
from .tiles import TileLists

FIRST_SEGMENT = 32  # entries per tile in the first round; each round doubles it


@torch.no_grad()
def median_tiles(
    means2d: Tensor,
    conics: Tensor,
    opacities: Tensor,
    values: Tensor,
    tiles: TileLists,
    width: int,
    height: int,
    tile_size: int,
    alphas: Tensor | None = None,
    pair_budget: int = DEFAULT_PAIR_BUDGET,
) -> Tensor:
    """``[C, H, W]``: per pixel, ``values`` of the Gaussian whose alpha takes the pixel's accumulated alpha
    from above one half to one half or below (0 where alpha never gets there).

    Args:
        means2d [C, N, 2], conics [C, N, 3], opacities [C, N] (compensated), values [C, N] (depths).
        tiles: lists from :func:`~.tiles.intersect_tiles`.
        alphas: [C, H, W] or None: the render's alphas, when at hand; a pixel at one half or below has no
            median and is not walked (a pixel whose float rounding differs from this walk's at exactly one
            half may lose its median).
        pair_budget: (pixel, Gaussian) pairs evaluated at once, as :func:`~.rasterize.rasterize_tiles`.
    """
    C, N = opacities.shape
    device, dtype = means2d.device, means2d.dtype
    tw, ts = tiles.tile_width, tile_size
    n_tiles, P = C * tiles.tile_height * tw, ts * ts
    xy, conic = means2d.reshape(C * N, 2), conics.reshape(C * N, 3)
    opac, value = opacities.reshape(C * N), values.reshape(C * N).to(dtype)
    no_colour = means2d.new_zeros(C * N, 0)

    lengths = tiles.offsets[1:] - tiles.offsets[:-1]
    pix = tile_pixels(torch.arange(n_tiles, device=device), tiles, ts, dtype)  # [tiles, P, 2]
    T = torch.ones(n_tiles, P, dtype=dtype, device=device)
    done = (pix[..., 0] >= width) | (pix[..., 1] >= height)  # cropped pixels start done
    if alphas is not None:
        done |= image_to_tiles(alphas.to(dtype), tiles, ts, fill=0.0) <= 0.5
    median = torch.zeros(n_tiles, P, dtype=dtype, device=device)

    start, segment = 0, FIRST_SEGMENT
    while True:
        waiting = ~(done | (T <= 0.5)).all(dim=1) & (lengths > start)
        ids = waiting.nonzero()[:, 0]
        if len(ids) == 0:
            break
        pos = start + torch.arange(segment, device=device)
        for chunk in ids.split(max(1, pair_budget // (P * segment))):
            valid = pos[None, :] < lengths[chunk, None]
            entry = torch.where(valid, tiles.offsets[chunk, None] + pos[None, :], torch.zeros_like(pos[None, :]))
            gid = tiles.flat_ids[entry]  # padding reads entry 0; masked out by `valid`
            _, T_c, done_c, median_c = composite_block(
                xy[gid], conic[gid], opac[gid], no_colour[gid], valid, pix[chunk], T[chunk], done[chunk], gid,
                None, value[gid],
            )  # fmt: skip
            T[chunk], done[chunk] = T_c, done_c
            median[chunk] += median_c
        start, segment = start + segment, 2 * segment
    return tiles_to_image(median, C, tiles, height, width)[..., 0]


def image_to_tiles(image: Tensor, tiles: TileLists, tile_size: int, fill: float) -> Tensor:
    """``[C, H, W]`` -> ``[C * tiles, P]`` in the walk's tile-major order (the inverse of ``tiles_to_image``),
    the pixels past the image's right and bottom edges set to ``fill``."""
    C, H, W = image.shape
    th, tw, ts = tiles.tile_height, tiles.tile_width, tile_size
    padded = image.new_full((C, th * ts, tw * ts), fill)
    padded[:, :H, :W] = image
    return padded.reshape(C, th, ts, tw, ts).permute(0, 1, 3, 2, 4).reshape(C * th * tw, ts * ts)
