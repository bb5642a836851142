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
    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor, taps: Tensor, c1: float, c2: float, valid: bool) -> Tensor:
        ext = _extension()
        with_grad = bool(ctx.needs_input_grad[0])
        total, d_mu, d_xx, d_xy = ext.ssim_fwd(x, y, taps, c1, c2, valid, with_grad)
        k = taps.numel()
        h, w = (x.shape[1] - k + 1, x.shape[2] - k + 1) if valid else x.shape[1:]
        count = x.shape[0] * h * w
        ctx.args = (c1, c2, valid, count)
        if with_grad:
            ctx.save_for_backward(x, y, taps, d_mu, d_xx, d_xy)
        return torch.tensor(total / count, dtype=torch.float32)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        x, y, taps, d_mu, d_xx, d_xy = ctx.saved_tensors
        c1, c2, valid, count = ctx.args
        v_x = _extension().ssim_bwd(x, y, taps, c1, c2, valid, float(grad) / count, d_mu, d_xx, d_xy)
        return v_x, None, None, None, None, None


def ssim_native(img1: Tensor, img2: Tensor, taps: Tensor, c1: float, c2: float, valid: bool) -> Tensor:
    """Mean SSIM of ``img1``/``img2`` ``[B,H,W,C]`` (gradient for ``img1`` only); ``taps [K]``
    the normalised 1-D window. Raises RuntimeError when the extension is unavailable."""
    if _extension() is None:
        from ..renderer.native._build import unavailable_reason

        raise RuntimeError(f"native SSIM unavailable: {unavailable_reason()}")
    b, h, w, c = img1.shape

    def planes(t: Tensor) -> Tensor:
        return t.float().permute(0, 3, 1, 2).reshape(b * c, h, w).contiguous()

    return _SsimFunction.apply(planes(img1), planes(img2.detach()), taps.float().contiguous(), c1, c2, valid)
