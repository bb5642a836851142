"""Autograd Functions around the native kernels (hand-written backward passes).

Split in two (projection, rasterization) so that ``means2d`` is a real
intermediate tensor: autograd fills its ``.grad`` for densification.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..options import RasterOptions
from ._build import load_extension


def _ext() -> Any:
    ext = load_extension()
    if ext is None:  # callers check is_available() first; this is a programming error
        from ._build import unavailable_reason

        raise RuntimeError(f"native rasterizer unavailable: {unavailable_reason()}")
    return ext


_EMPTY = torch.empty(0)


class ProjectGaussians(torch.autograd.Function):
    """EWA projection: (means, quats, scales, viewmats) -> radii, means2d, depths, conics, compensations.

    Opacities only pick the culling threshold and box size (no gradient), as in gsplat. Compensations
    are computed (and opacities scaled by them for culling) when ``options.antialiased``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        means: Tensor,
        quats: Tensor,
        scales: Tensor,
        opacities: Tensor,
        viewmats: Tensor,
        Ks: Tensor,
        options: RasterOptions,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        o = options
        radii, means2d, depths, conics, comps = _ext().project_fwd(
            means,
            quats,
            scales,
            opacities,
            viewmats,
            Ks,
            o.width,
            o.height,
            o.eps2d,
            o.near_plane,
            o.far_plane,
            o.radius_clip,
            o.antialiased,
        )
        ctx.save_for_backward(means, quats, scales, viewmats, Ks, radii, conics, comps)
        ctx.options = o
        ctx.mark_non_differentiable(radii)
        return radii, means2d, depths, conics, comps

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, v_radii: Tensor, v_means2d: Tensor, v_depths: Tensor, v_conics: Tensor, v_comps: Tensor
    ) -> tuple[Tensor | None, ...]:
        means, quats, scales, viewmats, Ks, radii, conics, comps = ctx.saved_tensors
        o = ctx.options
        v_means, v_quats, v_scales, v_viewmats = _ext().project_bwd(
            means,
            quats,
            scales,
            viewmats,
            Ks,
            o.width,
            o.height,
            o.eps2d,
            radii,
            conics,
            comps,
            v_means2d.contiguous(),
            v_depths.contiguous(),
            v_conics.contiguous(),
            v_comps.contiguous() if o.antialiased else _EMPTY,
            o.antialiased,
            ctx.needs_input_grad[4],
        )
        return (
            v_means if ctx.needs_input_grad[0] else None,
            v_quats if ctx.needs_input_grad[1] else None,
            v_scales if ctx.needs_input_grad[2] else None,
            None,
            v_viewmats if ctx.needs_input_grad[4] else None,
            None,
            None,
        )


class RasterizePixels(torch.autograd.Function):
    """Front-to-back alpha compositing of binned 2D Gaussians -> colors [C,H,W,D], alphas [C,H,W,1].

    ``bins`` = (tile_offsets, flatten_ids, gauss_offsets, slot_by_pos) from ``bin_tiles``; ``options``
    gives the image and tile size and ``absgrad`` (then ``means2d.absgrad`` [C, N, 2] is set in backward).
    ``stats`` (a dict) receives ``n_evaluations``: (Gaussian, pixel) alpha evaluations done.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        means2d: Tensor,
        conics: Tensor,
        colors: Tensor,
        opacities: Tensor,
        backgrounds: Tensor | None,
        bins: tuple[Tensor, ...],
        options: RasterOptions,
        stats: dict,
    ) -> tuple[Tensor, Tensor]:
        o = options
        tile_offsets, flatten_ids = bins[0], bins[1]
        bg = _EMPTY if backgrounds is None else backgrounds
        out_c, out_a, T_final, last_ids, contrib, n_evals = _ext().raster_fwd(
            means2d, conics, colors, opacities, bg, o.width, o.height, o.tile_size, tile_offsets, flatten_ids
        )
        stats["n_evaluations"] = n_evals
        ctx.save_for_backward(means2d, conics, colors, opacities, bg, *bins, T_final, last_ids, contrib)
        ctx.options = o
        return out_c, out_a

    @staticmethod
    def backward(ctx: Any, v_colors: Tensor, v_alphas: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        means2d, conics, colors, opacities, bg, t_off, f_ids, g_off, pos, T_final, last_ids, contrib = ctx.saved_tensors
        o = ctx.options
        v_m2d, v_con, v_col, v_op, v_abs = _ext().raster_bwd(
            means2d,
            conics,
            colors,
            opacities,
            bg,
            o.width,
            o.height,
            o.tile_size,
            t_off,
            f_ids,
            g_off,
            pos,
            T_final,
            last_ids,
            contrib,
            v_colors.float(),
            v_alphas.float(),
            o.absgrad,  # strided reads, no copy
        )
        if o.absgrad:
            means2d.absgrad = v_abs  # read by densification, as gsplat does
        v_bg = None
        if ctx.needs_input_grad[4]:
            v_bg = (v_colors * T_final[..., None]).sum(dim=(1, 2))
        return v_m2d, v_con, v_col, v_op, v_bg, None, None, None


class SHColors(torch.autograd.Function):
    """``max(SH(mean - campos) + 0.5, 0)`` per camera -> [C, N, 3]; culled (radii 0) entries are 0.

    ``coeffs`` is shared [N, K, 3] or per camera [C, N, K, 3]; gradients reach means, camera
    centres (hence viewmats, through torch) and coefficients.
    """

    @staticmethod
    def forward(ctx: Any, means: Tensor, campos: Tensor, coeffs: Tensor, radii: Tensor, degree: int) -> Tensor:  # type: ignore[override]
        if coeffs.dim() == 3:
            # camera stride 0 for every C (expand keeps a size-1 dim's stride), so the kernel sees
            # shared coefficients and returns their gradient as [N,K,3], summed over cameras
            coeffs4 = coeffs.as_strided((campos.shape[0], *coeffs.shape), (0, *coeffs.stride()))
        else:
            coeffs4 = coeffs
        colors = _ext().sh_fwd(degree, means, campos, coeffs4, radii)
        ctx.save_for_backward(means, campos, coeffs4, radii, colors)
        ctx.degree = degree
        return colors

    @staticmethod
    def backward(ctx: Any, v_colors: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        means, campos, coeffs4, radii, colors = ctx.saved_tensors
        v_coeffs, v_means, v_campos = _ext().sh_bwd(
            ctx.degree, means, campos, coeffs4, radii, colors, v_colors.contiguous()
        )
        return v_means, v_campos, v_coeffs, None, None
