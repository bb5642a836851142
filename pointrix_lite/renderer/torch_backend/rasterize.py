"""Tile-based front-to-back alpha compositing in plain torch (gsplat ``RasterizeToPixels3DGSFwd.cu``).

Per pixel, gsplat walks its tile's depth-sorted list and, for each Gaussian,
    sigma = 0.5 (a dx^2 + c dy^2) + b dx dy,   alpha = min(0.999, o exp(-sigma)),
skips it when ``sigma < 0`` or ``alpha < 1/255``, and stops *before* the Gaussian whose
``T (1 - alpha)`` would fall to 1e-4 or below. Here a batch of tiles x a segment of their
lists is evaluated at once as a [tiles, pixels, segment] block: the sequential
transmittance is an exclusive cumulative product, the stop rule a mask derived from it,
and the carried ``T``/``done`` state links consecutive segments.

Memory stays bounded by ``pair_budget`` (pixel, Gaussian) pairs per block: each block runs
under activation checkpointing, so autograd keeps only the block's small inputs and
recomputes the [tiles, pixels, segment] intermediates during backward.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .projection import ALPHA_THRESHOLD
from .tiles import TileLists

TRANSMITTANCE_STOP = 1e-4  # gsplat: a pixel is done once T would drop to this
DEFAULT_PAIR_BUDGET = 1 << 21


class _AbsGradTap(torch.autograd.Function):
    """Identity on per-pixel offsets [G, P, S, 2] whose backward also sums |grad| per Gaussian.

    Each (pixel, Gaussian) offset feeds exactly one pixel, so its gradient is that pixel's
    contribution to d loss / d means2d; summing the absolute values gives gsplat's absgrad.
    """

    @staticmethod
    def forward(ctx, delta: Tensor, gauss_ids: Tensor, sink: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(gauss_ids)
        ctx.sink = sink
        return delta.view_as(delta)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (gauss_ids,) = ctx.saved_tensors
        ctx.sink.index_add_(0, gauss_ids.reshape(-1), grad.abs().sum(dim=1).reshape(-1, 2).to(ctx.sink.dtype))
        return grad, None, None


def composite_block(
    xy: Tensor,
    conic: Tensor,
    opac: Tensor,
    color: Tensor,
    valid: Tensor,
    pix: Tensor,
    T_in: Tensor,
    done_in: Tensor,
    gauss_ids: Tensor,
    absgrad_sink: Tensor | None,
    median_of: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Composite one segment of S list entries for G tiles of P pixels.

    Args:
        xy [G, S, 2], conic [G, S, 3], opac [G, S], color [G, S, D], valid [G, S] (False = padding),
        pix [G, P, 2] pixel centres, T_in [G, P] transmittance so far, done_in [G, P] stopped pixels,
        median_of [G, S] or None: a value per entry, reported where the pixel's alpha passes one half.

    Returns:
        (colour contribution [G, P, D], T_out [G, P], done_out [G, P], and with ``median_of`` [G, P] the
        value of the entry that takes T from above one half to one half or below, 0 where no entry of this
        segment does; T only falls, so at most one entry of a pixel's whole list does).
    """
    delta = xy[:, None, :, :] - pix[:, :, None, :]  # [G, P, S, 2]
    if absgrad_sink is not None:
        delta = _AbsGradTap.apply(delta, gauss_ids, absgrad_sink)
    dx, dy = delta.unbind(-1)
    a, b, c = (v[:, None, :] for v in conic.unbind(-1))
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    alpha = torch.clamp_max(opac[:, None, :] * torch.exp(-sigma), 0.999)
    hit = (sigma >= 0) & (alpha >= ALPHA_THRESHOLD) & valid[:, None, :] & ~done_in[..., None]
    alpha = torch.where(hit, alpha, torch.zeros_like(alpha))

    # T before each entry, computed by the same running product as the sequential loop.
    T = torch.cumprod(torch.cat([T_in[..., None], 1.0 - alpha], dim=-1), dim=-1)  # [G, P, S+1]
    with torch.no_grad():
        stop = hit & (T[..., 1:] <= TRANSMITTANCE_STOP)
        before_stop = torch.cumsum(stop, dim=-1) == 0
        stopped = ~before_stop[..., -1]
        end = torch.where(stopped, before_stop.sum(dim=-1), torch.full_like(stopped, alpha.shape[-1], dtype=torch.long))
    weights = torch.where(hit & before_stop, alpha * T[..., :-1], torch.zeros_like(alpha))
    contrib = torch.bmm(weights, color)  # [G, P, D]
    T_out = T.gather(-1, end[..., None])[..., 0]
    median = None
    if median_of is not None:
        with torch.no_grad():
            # From above one half, T (1 - alpha) >= 5e-4 > TRANSMITTANCE_STOP: the crossing entry is blended.
            cross = hit & before_stop & (T[..., :-1] > 0.5) & (T[..., 1:] <= 0.5)
            median = torch.where(cross, median_of[:, None, :], torch.zeros_like(alpha)).sum(dim=-1)
    return contrib, T_out, done_in | stopped, median


def rasterize_tiles(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    tiles: TileLists,
    width: int,
    height: int,
    tile_size: int,
    backgrounds: Tensor | None = None,
    absgrad_sink: Tensor | None = None,
    pair_budget: int = DEFAULT_PAIR_BUDGET,
) -> tuple[Tensor, Tensor]:
    """Composite projected Gaussians into images.

    Args:
        means2d [C, N, 2], conics [C, N, 3], colors [C, N, D], opacities [C, N] (per camera).
        tiles: lists from :func:`~.tiles.intersect_tiles`.
        backgrounds: [C, D] or None.
        absgrad_sink: [C * N, 2] buffer that backward fills with summed per-pixel |d/d means2d|.

    Returns:
        render_colors [C, H, W, D], render_alphas [C, H, W, 1].
    """
    C, N, D = colors.shape
    device, dtype = means2d.device, means2d.dtype
    tw, th, ts = tiles.tile_width, tiles.tile_height, tile_size
    n_tiles, P = C * th * tw, ts * ts
    xy_f, conic_f = means2d.reshape(C * N, 2), conics.reshape(C * N, 3)
    opac_f, color_f = opacities.reshape(C * N), colors.reshape(C * N, D)

    lengths = tiles.offsets[1:] - tiles.offsets[:-1]  # [n_tiles]

    tile_order = torch.argsort(lengths, descending=True, stable=True)
    lengths_sorted = lengths[tile_order].tolist()
    n_busy = sum(1 for n in lengths_sorted if n > 0)
    track = torch.is_grad_enabled() and any(t.requires_grad for t in (means2d, conics, colors, opacities))

    contribs: list[Tensor] = []
    transmittances: list[Tensor] = []
    start = 0
    while start < n_busy:
        # Tiles are sorted by list length, so a group of similar tiles wastes little padding.
        seg = max(1, min(lengths_sorted[start], pair_budget // P))
        group = max(1, pair_budget // (P * seg))
        end = min(n_busy, start + group)
        ids = tile_order[start:end]
        G = end - start
        pix = tile_pixels(ids, tiles, ts, dtype)  # [G, P, 2]
        T = torch.ones(G, P, dtype=dtype, device=device)
        # Pixels past the right/bottom border start "done": they are cropped anyway.
        done = (pix[..., 0] >= width) | (pix[..., 1] >= height)
        acc = torch.zeros(G, P, D, dtype=dtype, device=device)
        first, length = tiles.offsets[ids], lengths[ids]
        for s0 in range(0, lengths_sorted[start], seg):
            if bool(done.all()):
                break
            pos = s0 + torch.arange(seg, device=device)
            valid = pos[None, :] < length[:, None]  # [G, S]
            entry = torch.where(valid, first[:, None] + pos[None, :], torch.zeros_like(valid, dtype=torch.long))
            gid = tiles.flat_ids[entry]  # padding reads entry 0; masked out by `valid`
            args = (xy_f[gid], conic_f[gid], opac_f[gid], color_f[gid], valid, pix, T, done, gid, absgrad_sink)
            if track:
                out = checkpoint(composite_block, *args, use_reentrant=False)
            else:
                out = composite_block(*args)
            acc = acc + out[0]
            T, done = out[1], out[2]
        contribs.append(acc)
        transmittances.append(T)
        start = end

    if n_busy < n_tiles:  # tiles no Gaussian touches: nothing composited, T = 1
        contribs.append(torch.zeros(n_tiles - n_busy, P, D, dtype=dtype, device=device))
        transmittances.append(torch.ones(n_tiles - n_busy, P, dtype=dtype, device=device))
    inverse = torch.empty_like(tile_order)
    inverse[tile_order] = torch.arange(n_tiles, device=device)
    acc = torch.cat(contribs)[inverse]  # [n_tiles, P, D] in tile order
    T = torch.cat(transmittances)[inverse]

    render_colors, T_img = tiles_to_image(acc, C, tiles, height, width), tiles_to_image(T, C, tiles, height, width)
    if backgrounds is not None:
        render_colors = render_colors + T_img * backgrounds[:, None, None, :]
    return render_colors, 1.0 - T_img


def tile_pixels(ids: Tensor, tiles: TileLists, tile_size: int, dtype: torch.dtype) -> Tensor:
    """``[G, P, 2]``: the pixel centres (at +0.5, as gsplat's) of the tiles ``ids [G]`` (indices over all
    cameras' tiles, camera-major), row by row."""
    local = torch.arange(tile_size * tile_size, device=ids.device)
    local_xy = torch.stack([local % tile_size, local // tile_size], dim=-1).to(dtype) + 0.5
    cam_tile = ids % (tiles.tile_height * tiles.tile_width)
    origin = torch.stack([cam_tile % tiles.tile_width, cam_tile // tiles.tile_width], dim=-1).to(dtype) * tile_size
    return origin[:, None, :] + local_xy[None]


def tiles_to_image(values: Tensor, C: int, tiles: TileLists, height: int, width: int) -> Tensor:
    """``[C * tiles, P, ...]`` per-tile pixel values (tile-major, rows of ``tile_size``) -> ``[C, H, W, -1]``."""
    th, tw = tiles.tile_height, tiles.tile_width
    ts = math.isqrt(values.shape[1])
    v = values.reshape(C, th, tw, ts, ts, -1).permute(0, 1, 3, 2, 4, 5)
    return v.reshape(C, th * ts, tw * ts, -1)[:, :height, :width]
