"""CUDA backend: a thin call into ``gsplat.rasterization`` with the same argument subset."""

from __future__ import annotations

from typing import Any, Optional

from torch import Tensor

from ..errors import ConfigError


def rasterization_gsplat(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    radius_clip: float = 0.0,
    eps2d: float = 0.3,
    sh_degree: Optional[int] = None,
    backgrounds: Optional[Tensor] = None,
    render_mode: str = "RGB",
    rasterize_mode: str = "classic",
    tile_size: int = 16,
    absgrad: bool = False,
) -> tuple[Tensor, Tensor, dict[str, Any]]:
    """Same arguments and results as :func:`pointrix_lite.renderer.rasterization`; CUDA tensors only."""
    if not means.is_cuda:
        raise ConfigError(f"backend 'gsplat' needs CUDA tensors, got tensors on {means.device}; use backend 'auto'")
    try:
        from gsplat import rasterization as gsplat_rasterization
    except ImportError as exc:  # pragma: no cover - gsplat is a dependency
        raise ConfigError(f"backend 'gsplat' is unavailable: {exc}") from exc
    render_colors, render_alphas, meta = gsplat_rasterization(
        means, quats, scales, opacities, colors, viewmats, Ks, width, height,
        near_plane=near_plane, far_plane=far_plane, radius_clip=radius_clip, eps2d=eps2d,
        sh_degree=sh_degree, backgrounds=backgrounds, render_mode=render_mode,
        rasterize_mode=rasterize_mode, tile_size=tile_size, absgrad=absgrad,
        packed=False,  # dense [C, N] meta, the layout the rest of pointrix_lite reads
    )  # fmt: skip
    return render_colors, render_alphas, meta
