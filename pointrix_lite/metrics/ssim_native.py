"""SSIM on the native C++ extension (``renderer/native/ssim.cpp``) as an autograd Function.

The forward keeps the SSIM map's partial derivatives w.r.t. the blurred moments, the backward
blurs them back (fused-ssim's scheme); ``metrics/ssim.py``'s torch code is the reference.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _extension():
    from ..renderer.native._build import load_extension

    return load_extension()


def native_applies(img1: Tensor, img2: Tensor, window_size: int) -> bool:
    """True when ``ssim(backend="auto")`` runs natively: an odd window, no gradient wanted for
    ``img2`` (the ground truth), and ``device_policy.ssim_backend`` choosing the native kernel for
    the images' device (the CPU, with the extension already loaded in this process by the native
    rasterizer or the trainer's setup: a loss never starts a ~1 min compile, and a run on the
    torch rasterizer backend stays pure torch)."""
    from .. import device_policy
    from ..renderer.native._build import is_loaded

    if img1.device != img2.device or window_size % 2 == 0:
        return False
    if img2.requires_grad and torch.is_grad_enabled():
        return False
    return device_policy.ssim_backend(img1.device, is_loaded) == "native"


class _SsimFunction(torch.autograd.Function):
    """(mean SSIM, mean |x - y|) of planes ``x``, ``y``. With ``with_l1`` the L1 term is summed in
    SSIM's forward pass and its gradient added in SSIM's backward pass, so the photometric loss
    reads the images once instead of once per torch op of its L1 term (~3.5 ms of a step at
    800x800); without it the second output is 0."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor, taps: Tensor, c1: float, c2: float, valid: bool, with_l1: bool):
        ext = _extension()
        with_grad = bool(ctx.needs_input_grad[0])
        total, d_mu, d_xx, d_xy, l1_total = ext.ssim_fwd(x, y, taps, c1, c2, valid, with_grad, with_l1)
        k = taps.numel()
        h, w = (x.shape[1] - k + 1, x.shape[2] - k + 1) if valid else x.shape[1:]
        count = x.shape[0] * h * w
        ctx.args = (c1, c2, valid, count, x.numel(), with_l1)
        if with_grad:
            ctx.save_for_backward(x, y, taps, d_mu, d_xx, d_xy)
        return torch.tensor(total / count, dtype=torch.float32), torch.tensor(l1_total / x.numel(), dtype=torch.float32)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor, grad_l1: Tensor):
        x, y, taps, d_mu, d_xx, d_xy = ctx.saved_tensors
        c1, c2, valid, count, n, with_l1 = ctx.args
        l1_scale = float(grad_l1) / n if with_l1 else 0.0
        v_x = _extension().ssim_bwd(x, y, taps, c1, c2, valid, float(grad) / count, d_mu, d_xx, d_xy, l1_scale)
        return v_x, None, None, None, None, None, None


def _planes(t: Tensor) -> Tensor:
    """``[B,H,W,C]`` -> ``[B*C,H,W]`` contiguous float32, the kernel's layout."""
    b, h, w, c = t.shape
    return t.float().permute(0, 3, 1, 2).reshape(b * c, h, w).contiguous()


def _check_available() -> None:
    if _extension() is None:
        from ..renderer.native._build import unavailable_reason

        raise RuntimeError(f"native SSIM unavailable: {unavailable_reason()}")


def ssim_native(img1: Tensor, img2: Tensor, taps: Tensor, c1: float, c2: float, valid: bool) -> Tensor:
    """Mean SSIM of ``img1``/``img2`` ``[B,H,W,C]`` (gradient for ``img1`` only); ``taps [K]``
    the normalised 1-D window. Raises RuntimeError when the extension is unavailable."""
    _check_available()
    s, _ = _SsimFunction.apply(_planes(img1), _planes(img2.detach()), taps.float().contiguous(), c1, c2, valid, False)
    return s


def ssim_l1_native(img1: Tensor, img2: Tensor, taps: Tensor, c1: float, c2: float, valid: bool) -> tuple[Tensor, Tensor]:
    """``(mean SSIM, mean |img1 - img2|)`` of ``[B,H,W,C]`` images in one pass (gradients for
    ``img1`` only), as :func:`ssim_native` plus the L1 term. Raises RuntimeError when the
    extension is unavailable."""
    _check_available()
    return _SsimFunction.apply(_planes(img1), _planes(img2.detach()), taps.float().contiguous(), c1, c2, valid, True)
