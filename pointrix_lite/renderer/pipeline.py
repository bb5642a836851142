"""The rasterization pipeline, written once over each CPU backend's stage functions.

gsplat's ``rendering.py`` runs projection, SH, tile binning and compositing through the CUDA
wrappers of ``cuda/_wrapper.py``; here :func:`render` runs the same sequence through a
:class:`Stages`, which the native (``native/api.py``) and pure-torch (``torch_backend``) backends fill
with their own functions. What the backends share -- compensated opacities, SH camera centres, the
depth channels, the expected-depth divide, the meta dict -- is written only here, so both blend the
same floats in the same order. The gsplat backend (``gsplat_backend.py``) is not a ``Stages``: it
hands the whole call to gsplat, whose own ``rendering.py`` is this sequence on CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .options import RasterOptions, Result


class Inputs(NamedTuple):
    """``rasterization()``'s tensors, already checked against each other."""

    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4]
    scales: Tensor  # [N, 3]
    opacities: Tensor  # [N]
    colors: Tensor  # [N, D] / [C, N, D], or SH [N, K, 3] / [C, N, K, 3]
    viewmats: Tensor  # [C, 4, 4]
    Ks: Tensor  # [C, 3, 3]
    backgrounds: Tensor | None  # [C, D] or None


class Projection(NamedTuple):
    """The projection stage's output; culled (camera, Gaussian) pairs have radii 0 and zeros elsewhere."""

    radii: Tensor  # [C, N, 2] int32, 0 = culled
    means2d: Tensor  # [C, N, 2]
    depths: Tensor  # [C, N]  camera-space z
    conics: Tensor  # [C, N, 3]  inverse blurred 2D covariance (a, b, c) of [[a, b], [b, c]]
    compensations: Tensor | None  # [C, N] antialiased mode, else None


@dataclass(frozen=True)
class Stages:
    """One backend's stage functions; calling it runs :func:`render` over them.

    Attributes:
        name: The backend's name ("native", "torch").
        inputs: ``(Inputs) -> Inputs``: the backend's own input rules (device, dtype, layout).
        project: ``(means, quats, scales, opacities, viewmats, Ks, options) -> Projection``, with
            compensations exactly when ``options.antialiased``.
        sh: ``(means [N, 3], campos [C, 3], coeffs [N, K, 3] or [C, N, K, 3], radii, degree) -> [C, N, 3]``.
        bin: ``(projection, opacities [C, N], options) -> (tile lists, tiles_per_gauss [C, N])``; the
            lists are the backend's own, read only by its ``rasterize``.
        rasterize: ``(projection, features [C, N, D], opacities [C, N], backgrounds [C, D] or None,
            tile lists, options) -> (colors [C, H, W, D], alphas [C, H, W, 1], extra meta)``.
    """

    name: str
    inputs: Callable[[Inputs], Inputs]
    project: Callable[[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, RasterOptions], Projection]
    sh: Callable[[Tensor, Tensor, Tensor, Tensor, int], Tensor]
    bin: Callable[[Projection, Tensor, RasterOptions], tuple[Any, Tensor]]
    rasterize: Callable[
        [Projection, Tensor, Tensor, Tensor | None, Any, RasterOptions], tuple[Tensor, Tensor, dict[str, Any]]
    ]

    def __call__(
        self,
        means: Tensor,
        quats: Tensor,
        scales: Tensor,
        opacities: Tensor,
        colors: Tensor,
        viewmats: Tensor,
        Ks: Tensor,
        backgrounds: Tensor | None,
        options: RasterOptions,
    ) -> Result:
        return render(self, Inputs(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds), options)


def render(stages: Stages, inputs: Inputs, options: RasterOptions) -> Result:
    """Rasterize N Gaussians into C pinhole images with ``stages`` (gsplat 1.5.3 semantics, packed=False).

    Args:
        stages: The backend's stage functions.
        inputs: The tensors, as :func:`pointrix_lite.renderer.rasterization` documents them.
        options: Everything else, as ``rasterization()``.

    Returns:
        render_colors [C, H, W, D'], render_alphas [C, H, W, 1], meta with ``means2d`` [C, N, 2]
        (non-leaf, call ``retain_grad()``), ``radii`` [C, N, 2] int32, ``depths`` [C, N], ``conics``
        [C, N, 3], ``opacities`` [C, N], ``compensations`` [C, N] or None, ``tiles_per_gauss`` [C, N]
        (tiles the Gaussian was binned into), ``tile_width``, ``tile_height``, ``width``, ``height``,
        ``n_cameras``, ``tile_size``, and what the backend's ``rasterize`` adds (native:
        ``n_evaluations``, the Gaussian-pixel alpha evaluations of the forward).
    """
    o = options
    x = stages.inputs(inputs)
    C = x.viewmats.shape[0]
    proj, opacities, tiles, tiles_per_gauss = project_and_bin(stages, x, o)
    features, backgrounds = _features(stages, x, proj, o)
    colors, alphas, extra = stages.rasterize(proj, features, opacities, backgrounds, tiles, o)
    if o.expected_depth:
        colors = torch.cat([colors[..., :-1], colors[..., -1:] / alphas.clamp(min=1e-10)], dim=-1)
    meta = {
        "means2d": proj.means2d,
        "radii": proj.radii,
        "depths": proj.depths,
        "conics": proj.conics,
        "opacities": opacities,
        "compensations": proj.compensations,
        "tiles_per_gauss": tiles_per_gauss,
        "tile_width": (o.width + o.tile_size - 1) // o.tile_size,
        "tile_height": (o.height + o.tile_size - 1) // o.tile_size,
        "width": o.width,
        "height": o.height,
        "n_cameras": C,
        "tile_size": o.tile_size,
    }
    return colors, alphas, {**meta, **extra}


def project_and_bin(stages: Stages, x: Inputs, o: RasterOptions) -> tuple[Projection, Tensor, Any, Tensor]:
    """The geometry half of :func:`render`, which colours do not enter: ``(projection, opacities [C, N]``
    (compensated in antialiased mode), ``tile lists, tiles_per_gauss [C, N])``. Also what the torch backend's
    median depth walks, so its lists and alphas are the renders'."""
    C, N = x.viewmats.shape[0], x.means.shape[0]
    proj = stages.project(x.means, x.quats, x.scales, x.opacities, x.viewmats, x.Ks, o)
    opacities = x.opacities[None].expand(C, N)
    if proj.compensations is not None:
        opacities = opacities * proj.compensations
    tiles, tiles_per_gauss = stages.bin(proj, opacities, o)
    return proj, opacities, tiles, tiles_per_gauss


def _features(stages: Stages, x: Inputs, proj: Projection, o: RasterOptions) -> tuple[Tensor, Tensor | None]:
    """The blended channels [C, N, D'] and their backgrounds [C, D'] (or None) for ``o.render_mode``."""
    C, N = proj.depths.shape
    if o.sh_degree is None:
        features = x.colors if x.colors.dim() == 3 else x.colors[None].expand(C, N, x.colors.shape[-1])
    else:
        campos = torch.linalg.inv(x.viewmats)[:, :3, 3]  # camera centres [C, 3]: the view directions' origin
        features = stages.sh(x.means, campos, x.colors, proj.radii, o.sh_degree)
    backgrounds = x.backgrounds
    if o.appends_depth:
        features = torch.cat([features, proj.depths[..., None]], dim=-1)
        if backgrounds is not None:
            backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(C, 1)], dim=-1)
    elif o.depth_only:
        features = proj.depths[..., None]
        if backgrounds is not None:
            backgrounds = backgrounds.new_zeros(C, 1)
    return features, backgrounds
