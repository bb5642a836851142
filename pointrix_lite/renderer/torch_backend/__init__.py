"""Pure-PyTorch reference backend: :class:`~pointrix_lite.renderer.pipeline.Stages` in plain torch.

Runs on any device and dtype (float64 end to end for gradcheck); differentiable through
autograd w.r.t. means, quats, scales, opacities, colours/SH and viewmats.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor

from ..options import RasterOptions, Result, gsplat_call
from ..pipeline import Inputs, Projection, Stages, project_and_bin
from .median import median_tiles
from .projection import project_gaussians
from .rasterize import DEFAULT_PAIR_BUDGET, rasterize_tiles
from .sh import sh_to_color
from .tiles import TileLists, intersect_tiles


def _as_given(x: Inputs) -> Inputs:
    return x


def _project(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    options: RasterOptions,
) -> Projection:
    o = options
    return project_gaussians(
        means,
        quats,
        scales,
        opacities,
        viewmats,
        Ks,
        o.width,
        o.height,
        eps2d=o.eps2d,
        near_plane=o.near_plane,
        far_plane=o.far_plane,
        radius_clip=o.radius_clip,
        calc_compensations=o.antialiased,
    )


def _sh(means: Tensor, campos: Tensor, coeffs: Tensor, radii: Tensor, degree: int) -> Tensor:
    # radii unused: culled pairs get colours here, but binning hands no culled pair to compositing
    C = campos.shape[0]
    coeffs = coeffs if coeffs.dim() == 4 else coeffs[None].expand((C,) + coeffs.shape)
    return sh_to_color(degree, means[None] - campos[:, None], coeffs)


def _bin(proj: Projection, opacities: Tensor, options: RasterOptions) -> tuple[TileLists, Tensor]:
    tiles = intersect_tiles(proj.means2d, proj.radii, proj.depths, options.width, options.height, options.tile_size)
    return tiles, tiles.tiles_per_gauss


def _rasterize(
    proj: Projection,
    features: Tensor,
    opacities: Tensor,
    backgrounds: Tensor | None,
    tiles: TileLists,
    options: RasterOptions,
    pair_budget: int = DEFAULT_PAIR_BUDGET,
) -> tuple[Tensor, Tensor, dict[str, Any]]:
    C, N = opacities.shape
    sink = None
    if options.absgrad:
        sink = proj.means2d.new_zeros(C * N, 2)
        proj.means2d.absgrad = sink.view(C, N, 2)  # filled in place by backward, like gsplat's attribute
    colors, alphas = rasterize_tiles(
        proj.means2d,
        proj.conics,
        features,
        opacities,
        tiles,
        options.width,
        options.height,
        options.tile_size,
        backgrounds=backgrounds,
        absgrad_sink=sink,
        pair_budget=pair_budget,
    )
    if torch.is_grad_enabled() and features.requires_grad and not colors.requires_grad:
        # Every Gaussian was culled: the image is pure background and autograd would see no path
        # to the inputs, so loss.backward() would fail. The native and gsplat backends return
        # zero gradients in that case; a zero-weighted link does the same here.
        link = (proj.means2d.sum() + proj.conics.sum() + features.sum() + opacities.sum()) * 0.0
        colors, alphas = colors + link, alphas + link
    return colors, alphas, {}


def torch_stages(pair_budget: int = DEFAULT_PAIR_BUDGET) -> Stages:
    """The torch stages, compositing at most ``pair_budget`` (pixel, Gaussian) pairs per block."""
    rasterize = _rasterize if pair_budget == DEFAULT_PAIR_BUDGET else partial(_rasterize, pair_budget=pair_budget)
    return Stages("torch", inputs=_as_given, project=_project, sh=_sh, bin=_bin, rasterize=rasterize)


STAGES = torch_stages()


def rasterization_torch(*args: Any, pair_budget: int = DEFAULT_PAIR_BUDGET, **kwargs: Any) -> Result:
    """``rasterization()`` on the torch backend (width, height and keyword options); ``pair_budget``
    bounds one compositing block's memory (tests shrink it to walk long tile lists in segments)."""
    return gsplat_call(torch_stages(pair_budget), "rasterization_torch")(*args, **kwargs)


@torch.no_grad()
def median_depth(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    options: RasterOptions,
    alphas: Tensor | None = None,
    pair_budget: int = DEFAULT_PAIR_BUDGET,
) -> Tensor:
    """``[C, H, W]`` median depth: per pixel, the camera-space depth of the Gaussian whose alpha takes the
    accumulated alpha past one half (2DGS's and GOF's median depth), 0 where it never gets there.

    Projects, bins and composites as :func:`rasterization_torch` with ``options`` (``means [N, 3]``,
    ``quats [N, 4]``, ``scales [N, 3]``, ``opacities [N]`` activated, ``viewmats [C, 4, 4]``, ``Ks [C, 3,
    3]``), so the order and the alphas are the renders' (:mod:`.median`). ``alphas [C, H, W]``, the render's
    alpha where the caller has it, spares walking the pixels that never get past one half. Not differentiated.
    """
    no_colour = means.new_zeros(means.shape[0], 0)
    x = Inputs(means, quats, scales, opacities, no_colour, viewmats, Ks, None)
    proj, opac, tiles, _ = project_and_bin(STAGES, x, options)
    o = options
    return median_tiles(
        proj.means2d, proj.conics, opac, proj.depths, tiles, o.width, o.height, o.tile_size, alphas, pair_budget
    )
