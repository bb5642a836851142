"""The native backend's stages: :class:`~pointrix_lite.renderer.pipeline.Stages` on the CPU extension.

The pipeline (``renderer/pipeline.py``) runs them; ``rasterization_native`` is that pipeline in
``rasterization()``'s calling form. Inputs of any float dtype are computed in float32 and the
outputs are float32; ``tile_size`` 16 is the SIMD-specialised fast path.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ...errors import ConfigError
from ..options import RasterOptions, gsplat_call
from ..pipeline import Inputs, Projection, Stages
from ._build import load_extension, unavailable_reason
from ._functions import ProjectGaussians, RasterizePixels, SHColors


def _f32(t: Tensor) -> Tensor:
    # float64 (or other) inputs are computed in float32; .float() is differentiable,
    # so gradients still reach the caller's tensors in their own dtype.
    return t.float().contiguous()


def _inputs(x: Inputs) -> Inputs:
    if load_extension() is None:
        raise RuntimeError(f"native rasterizer unavailable: {unavailable_reason()}")
    for name, t in (("means", x.means), ("viewmats", x.viewmats)):
        if t.device.type != "cpu":
            # A user's `renderer.backend: native` beside `device: cuda` lands here: say which keys clash.
            raise ConfigError(
                f"backend 'native' needs CPU tensors, got {name} on {t.device}; use device: cpu or renderer.backend: auto"
            )
    return Inputs(*(None if t is None else _f32(t) for t in x))


def _project(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    options: RasterOptions,
) -> Projection:
    radii, means2d, depths, conics, comps = ProjectGaussians.apply(
        means, quats, scales, opacities, viewmats, Ks, options
    )
    return Projection(radii, means2d, depths, conics, comps if options.antialiased else None)


def _sh(means: Tensor, campos: Tensor, coeffs: Tensor, radii: Tensor, degree: int) -> Tensor:
    return SHColors.apply(means, campos.contiguous(), coeffs, radii, degree)


def _bin(proj: Projection, opacities: Tensor, options: RasterOptions) -> tuple[tuple[Tensor, ...], Tensor]:
    o = options
    bins = tuple(
        load_extension().bin_tiles(
            proj.means2d.detach(),
            proj.radii,
            proj.depths.detach(),
            proj.conics.detach(),
            opacities.detach(),
            o.width,
            o.height,
            o.tile_size,
        )
    )
    gauss_offsets = bins[2]  # [C * N + 1]: where each Gaussian's tiles start in the binned lists
    return bins, (gauss_offsets[1:] - gauss_offsets[:-1]).view(proj.depths.shape)


def _rasterize(
    proj: Projection,
    features: Tensor,
    opacities: Tensor,
    backgrounds: Tensor | None,
    bins: tuple[Tensor, ...],
    options: RasterOptions,
) -> tuple[Tensor, Tensor, dict[str, Any]]:
    if features.stride(2) != 1 or features.stride(1) != features.shape[2]:
        features = features.contiguous()  # the kernel reads [N, D] rows; camera stride may be 0
    stats: dict[str, Any] = {}
    colors, alphas = RasterizePixels.apply(
        proj.means2d, proj.conics, features, opacities, backgrounds, bins, options, stats
    )
    return colors, alphas, {"n_evaluations": stats.get("n_evaluations", 0)}


STAGES = Stages("native", inputs=_inputs, project=_project, sh=_sh, bin=_bin, rasterize=_rasterize)

rasterization_native = gsplat_call(STAGES, "rasterization_native")
