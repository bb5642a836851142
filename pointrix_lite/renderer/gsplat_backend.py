"""CUDA backend: a thin call into ``gsplat.rasterization`` with the same argument subset.

It only forwards arguments, already validated by :func:`pointrix_lite.renderer.rasterization`, to
gsplat's documented entry point. It is a whole-call delegation, not a ``pipeline.Stages``: gsplat's
``rendering.py`` already is that stage sequence over its CUDA wrappers, and the CPU backends are
written to reproduce it, so on CUDA the reference itself runs rather than our re-wiring of its parts.
CI has no GPU: tests/renderer/gsplat_on_cpu.py runs this very code on the CPU with gsplat's CUDA
stages replaced by torch stand-ins (docs/rasterizer.md says what is verified where).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from torch import Tensor

from .. import device_policy
from ..errors import ConfigError
from .options import RasterOptions, Result, gsplat_call


def rasterize_gsplat(
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
        means,
        quats,
        scales,
        opacities,
        colors,
        viewmats,
        Ks,
        options.width,
        options.height,
        backgrounds=backgrounds,
        packed=False,  # dense [C, N] meta, the layout the rest of pointrix_lite reads
        **options.keywords(),
    )


rasterization_gsplat = gsplat_call(rasterize_gsplat, "rasterization_gsplat")


def prepare_gsplat(announce: Callable[[str], object] | None = None) -> None:
    """Load gsplat's CUDA kernels before training, building them first if this machine has no build.

    gsplat compiles its extension on first import (1-2 minutes, cached by torch in
    ``~/.cache/torch_extensions``); inside the first training step that looked like a hang, since
    its spinner shows only on a terminal. ``announce`` gets one line before a build, and one after.

    Raises:
        ConfigError: gsplat's kernels neither load nor build (e.g. no CUDA toolkit for its JIT build).
    """
    build_dir = _pending_gsplat_build()
    if build_dir is not None and announce is not None:
        jobs = os.environ.get("MAX_JOBS", "10")
        announce(
            f"building gsplat's CUDA kernels (first run on this machine, 1-2 minutes with MAX_JOBS={jobs}; "
            f"cached in {build_dir})"
        )
    start = time.perf_counter()
    try:
        from gsplat.cuda._backend import _C
    except Exception as exc:  # a failed nvcc run surfaces as various errors; name the cause in one line
        raise ConfigError(
            f"renderer.backend: gsplat's CUDA kernels failed to build: {' '.join(str(exc).split())[:300]}"
        ) from None
    if _C is None:
        raise ConfigError(
            "renderer.backend: gsplat's CUDA kernels are not built and no CUDA toolkit (nvcc) was found to build "
            "them; install one (CUDA_HOME) or a gsplat wheel with prebuilt kernels"
        )
    if build_dir is not None and announce is not None:
        announce(f"built gsplat's CUDA kernels in {time.perf_counter() - start:.0f} s")


def _pending_gsplat_build() -> str | None:
    """The folder gsplat's first import will compile into, or None when it will load a build."""
    import importlib.util
    import sys

    if "gsplat.cuda._backend" in sys.modules or importlib.util.find_spec("gsplat.csrc") is not None:
        return None
    try:
        from torch.utils.cpp_extension import _get_build_directory  # what gsplat itself calls
    except ImportError:  # pragma: no cover - a torch without it: say nothing rather than guess
        return None
    build_dir = _get_build_directory("gsplat_cuda", verbose=False)
    return None if os.path.exists(os.path.join(build_dir, "gsplat_cuda.so")) else build_dir
