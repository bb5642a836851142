"""Which implementation each device-dependent operation uses: the one place that decides.

pointrix_lite is fast on the CPU because some operations have CPU-only implementations (the native
C++ rasterizer and SSIM, torch's fused CPU Adam). Each such choice is one function here, made from
the device of the tensors involved, so that a CUDA run takes the gsplat/torch path everywhere
instead of failing on a CPU kernel, and a CPU run takes the fast one. The functions take a
``torch.device`` (not a tensor), so tests check the CUDA decisions on machines without a GPU.

``tests/renderer/gsplat_on_cpu.py`` replaces :func:`gsplat_runs_on` to run gsplat's code path on
CPU tensors (gsplat's CUDA stages swapped for torch stand-ins); nothing else changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import torch

from . import kernels

DeviceLike = str | torch.device
Rasterizer = Literal["gsplat", "native", "torch"]


def _device(device: DeviceLike) -> torch.device:
    return device if isinstance(device, torch.device) else torch.device(device)


def gsplat_runs_on(device: DeviceLike) -> bool:
    """Whether gsplat's rasterization kernels accept tensors on ``device`` (CUDA only)."""
    return _device(device).type == "cuda"


def native_kernels_run_on(device: DeviceLike) -> bool:
    """Whether the native C++ extension (rasterizer, SSIM) accepts tensors on ``device``: it reads
    raw host pointers, so the CPU only (an MPS or XPU tensor must take the torch path)."""
    return _device(device).type == "cpu"


def rasterizer_backend(device: DeviceLike, native_available: Callable[[], bool]) -> Rasterizer:
    """The backend ``backend="auto"`` picks for tensors on ``device``.

    gsplat where its kernels run (CUDA); on the CPU the native extension when it builds
    (``native_available()`` is only called there: it may compile); else the pure-torch reference,
    which runs on any device.
    """
    if gsplat_runs_on(device):
        return "gsplat"
    if native_kernels_run_on(device) and native_available():
        return "native"
    return "torch"


def ssim_backend(device: DeviceLike, native_loaded: Callable[[], bool]) -> Literal["native", "triton", "torch"]:
    """SSIM of images on ``device``: the native kernel on the CPU when the extension is already
    loaded in this process (a loss never starts a compile), the fused Triton kernels on CUDA
    (``kernels/ssim.py``; torch's convolutions where triton is missing), else torch."""
    if native_kernels_run_on(device) and native_loaded():
        return "native"
    if kernels.runs_on(_device(device)):
        return "triton"
    return "torch"


def position_noise_backend(
    device: DeviceLike, native_loaded: Callable[[], bool]
) -> Literal["triton", "native", "torch"]:
    """Where MCMC's position noise runs for Gaussians on ``device``: one Triton kernel on CUDA
    (``kernels/mcmc_noise.py``; torch's covariances and batched 3x3 products cost ~3 ms of a step
    at 1M Gaussians there), the native extension's one pass on the CPU when it is already loaded
    (21-22 ms -> ~3 ms at 200k Gaussians on 2 cores; a strategy never starts a compile), else torch."""
    if kernels.runs_on(_device(device)):
        return "triton"
    if native_kernels_run_on(device) and native_loaded():
        return "native"
    return "torch"


def fused_adam(devices: Iterable[DeviceLike]) -> bool | None:
    """The ``fused`` argument of ``torch.optim.Adam`` for parameters on ``devices``.

    True when all are on the CPU or all on CUDA: torch's fused CPU Adam is one multithreaded pass per
    tensor, 6-10x faster than its default per-tensor loop there (docs/native.md "Adam"); on CUDA the
    fused kernel reads each parameter, gradient and moment once where the default (foreach) makes a
    pass per arithmetic op. None elsewhere (MPS, mixed): torch's default.
    """
    kinds = {_device(d).type for d in devices}
    return True if kinds in ({"cpu"}, {"cuda"}) else None


def pin_host_images(device: DeviceLike) -> bool:
    """Whether training images kept in host memory are page-locked for training on ``device``:
    on CUDA, so each step's upload is an asynchronous copy; on the CPU there is nothing to upload
    (and pinning needs a CUDA runtime)."""
    return _device(device).type == "cuda"


def upload(t: torch.Tensor, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A small per-step host tensor (camera matrices, a background) on ``device`` without waiting for
    the GPU: a blocking host-to-device copy synchronises the stream, so the CPU could not queue the
    next step's kernels while this one's run. A small pageable tensor is staged by the driver at
    once, so the host tensor may be freed after the call."""
    if dtype is not None:
        t = t.to(dtype=dtype)
    return t.to(_device(device), non_blocking=True)
