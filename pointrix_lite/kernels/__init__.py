"""Triton kernels for the CUDA training step (fused SSIM + L1 loss, MCMC position noise).

On a GPU a training step should be gsplat's kernels and little else; these replace the torch ops
that cost the most around them (docs/rasterizer.md, "The GPU step"). Triton comes with every
CUDA build of torch on Linux, so a GPU user builds nothing: each kernel compiles on its first
launch in about a second and is cached (``~/.triton/cache``). In a process started with
``TRITON_INTERPRET=1`` Triton's interpreter runs the same kernel source on CPU tensors: that is how
CI, which has no GPU, checks these kernels against the torch reference (``tests/kernels``).

Nothing here imports triton at module level: on a machine without it, :func:`available` is False
and every caller keeps its torch path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether triton imports (a CUDA build of torch on Linux ships it)."""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a triton that fails to load beside this torch
        return False
    return True


_failed: str | None = None  # why the kernels did not compile on this machine (warm_up), if they did not


def runs_on(device: torch.device) -> bool:
    """Whether the compiled kernels take tensors on ``device``: CUDA, with triton present and the
    kernels compiling there."""
    return device.type == "cuda" and available() and _failed is None


_JITTED: dict[Callable, Any] = {}


def jit(fn: Callable) -> Any:
    """``triton.jit(fn)``, made on first use (so importing a kernel module compiles nothing).

    With ``TRITON_INTERPRET=1`` in the environment before triton is first imported, Triton's
    interpreter runs the same source on CPU tensors (numpy semantics; slow, for tests): Triton's
    own library functions are decorated when it is imported, so the switch is per process."""
    if fn not in _JITTED:
        import inspect

        import triton

        # Sizes and strides are not specialised on (Triton would compile a variant per divisibility
        # by 16 of each): one compile serves every image size, which the warm-up can then cover.
        params = inspect.signature(fn).parameters.values()
        scalars = [p.name for p in params if p.annotation is inspect.Parameter.empty and not p.name.endswith("_ptr")]
        _JITTED[fn] = triton.jit(fn, do_not_specialize=scalars)
    return _JITTED[fn]


def warm_up(device: torch.device, announce: Callable[[str], object] | None = None) -> None:
    """Compile (or load from Triton's cache) the kernels a CUDA training step launches, on tiny
    inputs, so the first step does not; ``announce`` hears of it when that took over a second.
    Nothing happens for a device the kernels do not run on."""
    if not runs_on(device):
        return
    import time

    from .mcmc_noise import add_position_noise
    from .ssim import ssim_l1

    global _failed
    start = time.perf_counter()
    try:
        x = torch.rand(1, 16, 16, 3, device=device, requires_grad=True)
        taps = torch.full((11,), 1.0 / 11.0)
        # the photos as views store them (uint8) and downscaled ones (float block means), with a gradient
        for y in (
            torch.zeros(1, 16, 16, 3, device=device, dtype=torch.uint8),
            torch.zeros(1, 16, 16, 3, device=device),
        ):
            s, l1 = ssim_l1(x, y, taps, 1e-4, 9e-4)
            (s + l1).backward()
        rows = torch.zeros(4, 4, device=device)
        add_position_noise(rows[:, :3], rows, rows[:, :3], rows[:, 0], rows[:, :3], 0.0)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:  # a triton that cannot compile here: the step keeps torch's SSIM and noise
        _failed = " ".join(str(exc).split())[:200] or type(exc).__name__
        if announce is not None:
            announce(f"Triton kernels unavailable ({_failed}); the CUDA step uses torch's SSIM and MCMC noise instead")
        return
    seconds = time.perf_counter() - start
    if seconds > 1.0 and announce is not None:
        announce(
            f"compiled the CUDA step's Triton kernels (fused SSIM + L1, MCMC noise) in {seconds:.0f} s; cached for later runs"
        )
