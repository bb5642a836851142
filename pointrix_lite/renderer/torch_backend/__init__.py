"""Pure-PyTorch reference backend: projection -> SH colours -> tile lists -> compositing.

Runs on any device and dtype (float64 end to end for gradcheck); differentiable through
autograd w.r.t. means, quats, scales, opacities, colours/SH and viewmats.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..options import RasterOptions, Result, gsplat_call
from .projection import project_gaussians
from .rasterize import DEFAULT_PAIR_BUDGET, rasterize_tiles
from .sh import sh_to_color
from .tiles import intersect_tiles


def rasterize_torch(
    means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor, viewmats: Tensor, Ks: Tensor,
    backgrounds: Optional[Tensor], options: RasterOptions, pair_budget: int = DEFAULT_PAIR_BUDGET,
) -> Result:  # fmt: skip
    """Same results as :func:`pointrix_lite.renderer.rasterization` (tensors already validated)."""
    o = options
    width, height, tile_size = o.width, o.height, o.tile_size
    C, N = viewmats.shape[0], means.shape[0]
    proj = project_gaussians(
        means, quats, scales, opacities, viewmats, Ks, width, height,
        eps2d=o.eps2d, near_plane=o.near_plane, far_plane=o.far_plane, radius_clip=o.radius_clip,
        calc_compensations=o.antialiased,
    )  # fmt: skip
    opac = opacities[None].expand(C, N)
    if proj.compensations is not None:
        opac = opac * proj.compensations

    if o.sh_degree is None:
        feats = colors if colors.dim() == 3 else colors[None].expand(C, N, colors.shape[-1])
    else:
        campos = torch.linalg.inv(viewmats)[:, :3, 3]  # [C, 3]
        coeffs = colors if colors.dim() == 4 else colors[None].expand((C,) + colors.shape)
        feats = sh_to_color(o.sh_degree, means[None] - campos[:, None], coeffs)  # [C, N, 3]

    if o.appends_depth:
        feats = torch.cat([feats, proj.depths[..., None]], dim=-1)
        if backgrounds is not None:
            backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(C, 1)], dim=-1)
    elif o.depth_only:
        feats = proj.depths[..., None]
        if backgrounds is not None:
            backgrounds = backgrounds.new_zeros(C, 1)

    means2d = proj.means2d
    sink = None
    if o.absgrad:
        sink = means2d.new_zeros(C * N, 2)
        means2d.absgrad = sink.view(C, N, 2)  # filled in place by backward, like gsplat's attribute

    tiles = intersect_tiles(means2d, proj.radii, proj.depths, width, height, tile_size)
    render_colors, render_alphas = rasterize_tiles(
        means2d, proj.conics, feats, opac, tiles, width, height, tile_size,
        backgrounds=backgrounds, absgrad_sink=sink, pair_budget=pair_budget,
    )  # fmt: skip
    if torch.is_grad_enabled() and feats.requires_grad and not render_colors.requires_grad:
        # Every Gaussian was culled: the image is pure background and autograd would see no path
        # to the inputs, so loss.backward() would fail. The native and gsplat backends return
        # zero gradients in that case; a zero-weighted link does the same here.
        link = (means2d.sum() + proj.conics.sum() + feats.sum() + opac.sum()) * 0.0
        render_colors = render_colors + link
        render_alphas = render_alphas + link
    if o.expected_depth:
        expected = render_colors[..., -1:] / render_alphas.clamp(min=1e-10)
        render_colors = torch.cat([render_colors[..., :-1], expected], dim=-1)

    meta = {
        "radii": proj.radii,
        "means2d": means2d,
        "depths": proj.depths,
        "conics": proj.conics,
        "opacities": opac,
        "compensations": proj.compensations,
        "tiles_per_gauss": tiles.tiles_per_gauss,
        "tile_width": tiles.tile_width,
        "tile_height": tiles.tile_height,
        "tile_size": tile_size,
        "width": width,
        "height": height,
        "n_cameras": C,
    }
    return render_colors, render_alphas, meta


rasterization_torch = gsplat_call(rasterize_torch)
