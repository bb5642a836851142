"""CUDA backend: a thin call into ``gsplat.rasterization`` with the same argument subset.

It only forwards arguments, already validated by :func:`pointrix_lite.renderer.rasterization`, to
gsplat's documented entry point. CI has no GPU: tests/renderer/gsplat_on_cpu.py runs this very
code on the CPU with gsplat's CUDA stages replaced by torch stand-ins (docs/rasterizer.md says
what is verified where).
"""

from __future__ import annotations

from typing import Optional

from torch import Tensor

from .. import device_policy
from ..errors import ConfigError
from .options import RasterOptions, Result, gsplat_call


def rasterize_gsplat(
    means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor, viewmats: Tensor, Ks: Tensor,
    backgrounds: Optional[Tensor], options: RasterOptions,
) -> Result:  # fmt: skip
    """Same results as :func:`pointrix_lite.renderer.rasterization`; CUDA tensors only.

    The options carry gsplat's own names and defaults, so they pass through unchanged.
    """
    if not device_policy.gsplat_runs_on(means.device):
        raise ConfigError(f"backend 'gsplat' needs CUDA tensors, got tensors on {means.device}; use backend 'auto'")
    try:
        from gsplat import rasterization as gsplat_rasterization
    except ImportError as exc:  # pragma: no cover - gsplat is a dependency
        raise ConfigError(f"backend 'gsplat' is unavailable: {exc}") from exc
    return gsplat_rasterization(
        means, quats, scales, opacities, colors, viewmats, Ks, options.width, options.height,
        backgrounds=backgrounds,
        packed=False,  # dense [C, N] meta, the layout the rest of pointrix_lite reads
        **options.keywords(),
    )  # fmt: skip


rasterization_gsplat = gsplat_call(rasterize_gsplat)
