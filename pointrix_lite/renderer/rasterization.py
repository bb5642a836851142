"""The one rasterization entry point: gsplat's ``rasterization()`` signature, three backends.

``backend="auto"`` picks gsplat for CUDA tensors, the native C++ extension for CPU tensors when it
built, else the pure-torch reference (on the CPU with one warning per process, since that is slow);
``pointrix_lite.device_policy.rasterizer_backend`` is that rule. The native and torch backends are
:class:`~.pipeline.Stages` run by the one pipeline in ``pipeline.py``; gsplat takes the whole call.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from torch import Tensor

from .. import device_policy
from .options import BACKENDS, Backend, RasterizeMode, RasterOptions, RenderMode, Result, check_choice

_warned_torch_fallback = False


def _check_tensors(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    backgrounds: Tensor | None,
    sh_degree: int | None,
) -> None:
    def bad(msg: str) -> None:
        raise ValueError(f"rasterization: {msg}")

    if means.dim() != 2 or means.shape[-1] != 3:
        bad(f"means must be [N, 3], got {list(means.shape)}")
    N = means.shape[0]
    if viewmats.dim() != 3 or viewmats.shape[1:] != (4, 4):
        bad(f"viewmats must be [C, 4, 4], got {list(viewmats.shape)}")
    C = viewmats.shape[0]
    expected = {
        "quats": (quats, (N, 4)),
        "scales": (scales, (N, 3)),
        "opacities": (opacities, (N,)),
        "Ks": (Ks, (C, 3, 3)),
    }
    for name, (t, shape) in expected.items():
        if tuple(t.shape) != shape:
            bad(f"{name} must be {list(shape)}, got {list(t.shape)}")
    if sh_degree is None:
        if not ((colors.dim() == 2 and colors.shape[0] == N) or (colors.dim() == 3 and colors.shape[:2] == (C, N))):
            bad(f"colors must be [N, D] or [C, N, D] without sh_degree, got {list(colors.shape)}")
    else:
        lead = colors.shape[:-2]
        if colors.dim() not in (3, 4) or colors.shape[-1] != 3 or lead not in ((N,), (C, N)):
            bad(f"SH colors must be [N, K, 3] or [C, N, K, 3], got {list(colors.shape)}")
        if colors.shape[-2] < (sh_degree + 1) ** 2:
            bad(f"sh_degree {sh_degree} needs K >= {(sh_degree + 1) ** 2} SH bases, got {colors.shape[-2]}")
    if backgrounds is not None:
        D = 3 if sh_degree is not None else colors.shape[-1]
        if tuple(backgrounds.shape) != (C, D):
            bad(f"backgrounds must be [C, D] = {[C, D]}, got {list(backgrounds.shape)}")


def _native_available() -> bool:
    try:
        from . import native
    except ImportError:
        return False
    try:
        return bool(native.is_available())
    except Exception:  # a broken build must not stop training: fall back to torch
        return False


def _resolve_backend(backend: str, means: Tensor) -> str:
    global _warned_torch_fallback
    if backend != "auto":
        return backend
    chosen = device_policy.rasterizer_backend(means.device, _native_available)
    if chosen != "torch" or not device_policy.native_kernels_run_on(means.device):
        return chosen
    if not _warned_torch_fallback:
        _warned_torch_fallback = True
        from .native import FALLBACK_LINE, unavailable_reason

        warnings.warn(
            f"pointrix_lite: native rasterizer unavailable ({unavailable_reason()}); {FALLBACK_LINE}",
            RuntimeWarning,
            stacklevel=3,
        )
    return "torch"


def fallback_announced() -> None:
    """The trainer said it in its own line (``GaussianRenderer.prepare``): no warning on top of it."""
    global _warned_torch_fallback
    _warned_torch_fallback = True


def rasterization(
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
    sh_degree: int | None = None,
    backgrounds: Tensor | None = None,
    render_mode: RenderMode = "RGB",
    rasterize_mode: RasterizeMode = "classic",
    tile_size: int = 16,
    absgrad: bool = False,
    backend: Backend = "auto",
) -> tuple[Tensor, Tensor, dict[str, Any]]:
    """Rasterize N 3D Gaussians into C pinhole images (gsplat ``rasterization`` semantics, packed=False).

    Args:
        means: Gaussian centres, world space. [N, 3]
        quats: Rotations, wxyz, need not be normalised. [N, 4]
        scales: Activated (not log) scales. [N, 3]
        opacities: Activated opacities in [0, 1]. [N]
        colors: Per-Gaussian features [N, D] or [C, N, D]; with ``sh_degree``, SH coefficients
            [N, K, 3] or [C, N, K, 3] with K >= (sh_degree + 1)^2.
        viewmats: World-to-camera matrices, OpenCV axes (x right, y down, z forward). [C, 4, 4]
        Ks: Pinhole intrinsics; pixel centres sit at integer + 0.5. [C, 3, 3]
        width, height: Image size in pixels.
        near_plane, far_plane: Gaussians with camera z outside [near, far] are culled.
        radius_clip: Gaussians whose 2D radius is <= this on both axes are culled.
        eps2d: Added to the 2D covariance diagonal (low-pass filter).
        sh_degree: Evaluate SH up to this degree (view direction = centre - camera centre);
            colours are ``max(SH + 0.5, 0)``. None: ``colors`` are used as they are.
        backgrounds: Composited behind with the final transmittance. [C, D]
        render_mode: "RGB"; "D" accumulated depth sum(w z); "ED" expected depth D / alpha;
            "RGB+D" / "RGB+ED" append the depth channel.
        rasterize_mode: "antialiased" multiplies opacities by sqrt(det(S) / det(S + eps2d I)).
        tile_size: Tile edge in pixels.
        absgrad: Also accumulate per-pixel absolute gradients into ``meta["means2d"].absgrad``.
        backend: "auto", "torch", "gsplat" (CUDA) or "native" (CPU C++ extension).

    Returns:
        ``(render_colors [C, H, W, D'], render_alphas [C, H, W, 1], meta)``; meta holds
        ``means2d`` [C, N, 2] (non-leaf; call ``retain_grad()`` to read its gradient), ``radii``
        [C, N, 2] int32 (0 = culled), ``depths`` [C, N], ``conics`` [C, N, 3], ``opacities``
        [C, N] (compensated in antialiased mode), ``width``, ``height``, ``n_cameras``, ``tile_size``.
    """
    options = RasterOptions(
        width,
        height,
        near_plane=near_plane,
        far_plane=far_plane,
        radius_clip=radius_clip,
        eps2d=eps2d,
        sh_degree=sh_degree,
        render_mode=render_mode,
        rasterize_mode=rasterize_mode,
        tile_size=tile_size,
        absgrad=absgrad,
    )
    return rasterize(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options, backend)


def rasterize(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    backgrounds: Tensor | None,
    options: RasterOptions,
    backend: Backend = "auto",
) -> Result:
    """:func:`rasterization` for a caller that holds its options already (``GaussianRenderer``):
    the same tensor checks, backend choice and results, with ``options`` handed on as they are."""
    check_choice("backend", backend, BACKENDS)
    _check_tensors(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options.sh_degree)
    return _backend(_resolve_backend(backend, means))(
        means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options
    )


def _backend(chosen: str) -> Callable[..., Result]:
    """What runs ``(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options)`` for ``chosen``."""
    if chosen == "gsplat":
        from .gsplat_backend import rasterize_gsplat

        return rasterize_gsplat
    if chosen == "native":
        try:
            from .native import STAGES
        except ImportError as exc:
            from ..errors import ConfigError

            raise ConfigError(f"backend 'native' is unavailable ({exc}); use backend 'torch' or 'auto'") from exc
        return STAGES
    from .torch_backend import STAGES

    return STAGES
