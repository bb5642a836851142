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
    """(mean SSIM, mean |x - y|) of images ``x``, ``y`` ``[B,H,W,C]`` (``y`` float32 or uint8
    holding value * 255, as views store photos). The kernel works on planes ``[B*C,H,W]``: the
    extension converts both in parallel (torch's permute-copies, the ground truth's float() / 255
    and the gradient's way back cost ~6 ms of a step at 800x800) and the backward writes the
    gradient in ``x``'s layout. With ``with_l1`` the L1 term is summed in SSIM's forward pass and
    its gradient added in SSIM's backward pass, so the photometric loss reads the images once
    instead of once per torch op of its L1 term (~3.5 ms of a step at 800x800); without it the
    second output is 0.

    With a training mask ``[B,H,W]`` (bool, False = ignore the pixel) both terms are
    ``model/loss.py``'s masked ones: the images are zeroed under the mask before the windows, the
    means run over the kept pixels (the kernel counts them), and a batch that keeps none scores
    SSIM 1 and L1 0 with no gradient."""

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        y: Tensor,
        taps: Tensor,
        c1: float,
        c2: float,
        valid: bool,
        with_l1: bool,
        mask: Tensor | None = None,
    ):
        ext = _extension()
        with_grad = bool(ctx.needs_input_grad[0])
        xp, yp = ext.ssim_planes(x.detach(), mask), ext.ssim_planes(y, mask)
        # count, n: the map values and the L1 values summed (all, or the kept ones)
        total, d_mu, d_xx, d_xy, l1_total, count, n = ext.ssim_fwd(
            xp, yp, taps, c1, c2, valid, with_grad, with_l1, mask
        )
        ctx.args = (c1, c2, valid, count, n, with_l1, x.shape[-1])
        if with_grad:
            ctx.save_for_backward(xp, yp, taps, d_mu, d_xx, d_xy, mask)
        s = total / count if count else 1.0  # nothing kept: nothing to be dissimilar (the torch path's 1)
        return torch.tensor(s, dtype=torch.float32), torch.tensor(l1_total / max(n, 1), dtype=torch.float32)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor, grad_l1: Tensor):
        xp, yp, taps, d_mu, d_xx, d_xy, mask = ctx.saved_tensors
        c1, c2, valid, count, n, with_l1, channels = ctx.args
        l1_scale = float(grad_l1) / max(n, 1) if with_l1 else 0.0
        scale = float(grad) / count if count else 0.0
        v_x = _extension().ssim_bwd(xp, yp, taps, c1, c2, valid, scale, d_mu, d_xx, d_xy, l1_scale, channels, mask)
        return v_x, None, None, None, None, None, None, None


def _as_float32(t: Tensor) -> Tensor:
    return t if t.dtype == torch.float32 else t.float()


def _target(t: Tensor) -> Tensor:
    """The ground truth as the kernel takes it: uint8 (value * 255) as it is, else float32."""
    t = t.detach()
    return t if t.dtype == torch.uint8 else _as_float32(t)


def _check_available() -> None:
    if _extension() is None:
        from ..renderer.native._build import unavailable_reason

        raise RuntimeError(f"native SSIM unavailable: {unavailable_reason()}")


def ssim_native(img1: Tensor, img2: Tensor, taps: Tensor, c1: float, c2: float, valid: bool) -> Tensor:
    """Mean SSIM of ``img1``/``img2`` ``[B,H,W,C]`` (gradient for ``img1`` only; ``img2`` float32
    or uint8 holding value * 255); ``taps [K]`` the normalised 1-D window. Raises RuntimeError
    when the extension is unavailable."""
    _check_available()
    s, _ = _SsimFunction.apply(_as_float32(img1), _target(img2), taps.float().contiguous(), c1, c2, valid, False, None)
    return s


def ssim_l1_native(
    img1: Tensor, img2: Tensor, taps: Tensor, c1: float, c2: float, valid: bool, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``(mean SSIM, mean |img1 - img2|)`` of ``[B,H,W,C]`` images in one pass (gradients for
    ``img1`` only), as :func:`ssim_native` plus the L1 term; with ``mask [B,H,W]`` (bool, False =
    ignore) ``model/loss.py``'s masked terms. Raises RuntimeError when the extension is unavailable."""
    _check_available()
    keep = None if mask is None else mask.to(torch.bool).contiguous()
    return _SsimFunction.apply(_as_float32(img1), _target(img2), taps.float().contiguous(), c1, c2, valid, True, keep)
