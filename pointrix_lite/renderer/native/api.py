"""``rasterization_native``: gsplat ``rasterization()`` semantics on the CPU extension."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ...errors import ConfigError
from ..options import RasterOptions, Result, gsplat_call
from ._build import load_extension, unavailable_reason
from ._functions import ProjectGaussians, RasterizePixels, SHColors


def _f32(t: Tensor) -> Tensor:
    # float64 (or other) inputs are computed in float32; .float() is differentiable,
    # so gradients still reach the caller's tensors in their own dtype.
    return t.float().contiguous()


def rasterize_native(
    means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor, viewmats: Tensor, Ks: Tensor,
    backgrounds: Optional[Tensor], options: RasterOptions,
) -> Result:  # fmt: skip
    """Rasterize N Gaussians into C pinhole images on the CPU (gsplat 1.5.3 semantics, packed=False).

    Args:
        means: [N, 3]; quats: [N, 4] wxyz, unnormalised; scales: [N, 3] activated;
        opacities: [N] activated.
        colors: [N, D] or [C, N, D]; with ``sh_degree``: SH coefficients [N, K, 3] or [C, N, K, 3].
        viewmats: World-to-camera, OpenCV axes. [C, 4, 4]
        Ks: Pinhole intrinsics. [C, 3, 3]
        backgrounds: [C, D] composited with the final transmittance, or None.
        options: Everything else, as ``rasterization()`` (``tile_size`` 16 is the SIMD-specialised
            fast path; ``absgrad`` sets ``meta["means2d"].absgrad`` [C, N, 2] during backward).

    Returns:
        render_colors [C, H, W, D'], render_alphas [C, H, W, 1], meta with ``means2d`` [C, N, 2]
        (non-leaf, call ``retain_grad()``), ``radii`` [C, N, 2] int32, ``depths`` [C, N], ``conics``
        [C, N, 3], ``opacities`` [C, N], ``compensations`` [C, N] or None,
        ``tiles_per_gauss`` [C, N] (tiles the Gaussian was binned into: those of its radius box
        where its alpha can reach 1/255), ``tile_width``, ``tile_height``, ``width``, ``height``,
        ``n_cameras``, ``tile_size`` and ``n_evaluations`` (Gaussian-pixel alpha evaluations the
        forward performed).
        Inputs of any float dtype are computed in float32; outputs are float32.
        Culled Gaussians (radii 0) have zero means2d/depths/conics.
    """
    if load_extension() is None:
        raise RuntimeError(f"native rasterizer unavailable: {unavailable_reason()}")
    for name, t in (("means", means), ("viewmats", viewmats)):
        if t.device.type != "cpu":
            # A user's `renderer.backend: native` beside `device: cuda` lands here: say which keys clash.
            raise ConfigError(
                f"backend 'native' needs CPU tensors, got {name} on {t.device}; use device: cpu or renderer.backend: auto"
            )
    o = options
    width, height, tile_size, sh_degree = o.width, o.height, o.tile_size, o.sh_degree
    C, N = viewmats.shape[0], means.shape[0]
    means, quats, scales, opacities = _f32(means), _f32(quats), _f32(scales), _f32(opacities)
    viewmats, Ks = _f32(viewmats), _f32(Ks)
    antialiased = o.antialiased

    radii, means2d, depths, conics, comps = ProjectGaussians.apply(
        means, quats, scales, opacities, viewmats, Ks, width, height, o.eps2d, o.near_plane, o.far_plane,
        o.radius_clip, antialiased,
    )  # fmt: skip
    opac = opacities[None, :].expand(C, N)
    if antialiased:
        opac = opac * comps

    if sh_degree is None:
        feats = _f32(colors)
        feats = feats[None].expand(C, -1, -1) if feats.dim() == 2 else feats
    else:
        campos = torch.linalg.inv(viewmats)[:, :3, 3].contiguous()
        feats = SHColors.apply(means, campos, _f32(colors), radii, sh_degree)
    bg = None if backgrounds is None else _f32(backgrounds)
    if o.appends_depth:
        feats = torch.cat([feats.expand(C, N, -1), depths[..., None]], dim=-1)
        if bg is not None:
            bg = torch.cat([bg, bg.new_zeros(C, 1)], dim=-1)
    elif o.depth_only:
        feats = depths[..., None]
        if bg is not None:
            bg = bg.new_zeros(C, 1)

    if feats.stride(2) != 1 or feats.stride(1) != feats.shape[2]:
        feats = feats.contiguous()  # the kernel reads [N, D] rows; camera stride may be 0
    bins = tuple(load_extension().bin_tiles(
        means2d.detach(), radii, depths.detach(), conics.detach(), opac.detach(), width, height, tile_size
    ))
    stats: dict = {}
    render_colors, render_alphas = RasterizePixels.apply(
        means2d, conics, feats, opac, bg, bins, width, height, tile_size, o.absgrad, stats
    )
    if o.expected_depth:
        render_colors = torch.cat(
            [render_colors[..., :-1], render_colors[..., -1:] / render_alphas.clamp(min=1e-10)], dim=-1
        )
    meta = {
        "means2d": means2d,
        "radii": radii,
        "depths": depths,
        "conics": conics,
        "opacities": opac,
        "compensations": comps if antialiased else None,
        "tiles_per_gauss": (bins[2][1:] - bins[2][:-1]).view(C, N),
        "tile_width": (width + tile_size - 1) // tile_size,
        "tile_height": (height + tile_size - 1) // tile_size,
        "width": width,
        "height": height,
        "n_cameras": C,
        "tile_size": tile_size,
        "n_evaluations": stats.get("n_evaluations", 0),
    }
    return render_colors, render_alphas, meta


rasterization_native = gsplat_call(rasterize_native)
