"""The training loss's SSIM and L1 terms in four Triton kernels (forward two, backward two).

Same numbers as ``metrics.ssim.ssim(padding="same")`` and ``(x - y).abs().mean()``, the torch
reference (zero-padded 11-tap Gaussian window, INRIA's loss), up to float summation order. torch
spends ~3.7 ms of a 1.5 MP step in cuDNN's depthwise convolutions for the five blurred moments and
their gradients, plus a dozen elementwise passes; here each pass reads its inputs once:

1. ``_blur_rows``: the five moments ``x, y, x², y², xy`` blurred along rows -> 5 planes
2. ``_ssim_cols``: blurred along columns, the SSIM map, its partial derivatives w.r.t. ``mu_x``,
   ``E[x²]`` and ``E[xy]`` (3 planes, only when a gradient is wanted) and per-block sums of the
   map and of ``|x - y|``
3. ``_blur_rows3``: the three derivative planes blurred along rows
4. ``_grad_cols``: blurred along columns and combined into ``dL/dx = g_s (Gd_mu + 2x Gd_xx + y Gd_xy)
   + g_l1 sign(x - y)``, written in ``x``'s own layout

The window is symmetric, so the adjoint of each zero-padded blur is the same blur (fused-ssim's
scheme; ``renderer/native/ssim.cpp`` does the same on the CPU). Images are ``[B, H, W, C]`` with
any strides (the renderer's output as it is); the ground truth may be uint8 holding value * 255
(a view's stored photo), read as ``float / 255`` like ``View.float_image``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import jit

BLOCK = 1024  # pixels per program: contiguous along rows, so the loads of a tap coalesce


def _blur_rows(
    x_ptr,
    y_ptr,
    keep_ptr,
    taps_ptr,
    mom_ptr,
    H,
    W,
    C,
    P,
    sxb,
    sxh,
    sxw,
    sxc,
    syb,
    syh,
    syw,
    syc,
    K: tl.constexpr,
    Y_U8: tl.constexpr,
    MASKED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    plane = tl.program_id(1)  # b * C + c
    b, c = plane // C, plane % C
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < H * W
    h, w = offs // W, offs % W
    ax = tl.zeros([BLOCK], dtype=tl.float32)
    ay = tl.zeros([BLOCK], dtype=tl.float32)
    axx = tl.zeros([BLOCK], dtype=tl.float32)
    ayy = tl.zeros([BLOCK], dtype=tl.float32)
    axy = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(K):
        ww = w + (k - K // 2)
        m = inside & (ww >= 0) & (ww < W)  # zero padding past the border
        xv = tl.load(x_ptr + b * sxb + h * sxh + ww * sxw + c * sxc, mask=m, other=0.0).to(tl.float32)
        yv = tl.load(y_ptr + b * syb + h * syh + ww * syw + c * syc, mask=m, other=0).to(tl.float32)
        if Y_U8:
            yv = yv / 255.0
        if MASKED:  # an ignored pixel is 0 in both images, like the padding past the border
            kv = tl.load(keep_ptr + (b * H + h) * W + ww, mask=m, other=0)
            xv = tl.where(kv != 0, xv, 0.0)
            yv = tl.where(kv != 0, yv, 0.0)
        g = tl.load(taps_ptr + k)
        ax += g * xv
        ay += g * yv
        axx += g * (xv * xv)
        ayy += g * (yv * yv)
        axy += g * (xv * yv)
    n = P * H * W
    out = mom_ptr + plane * H * W + offs
    tl.store(out, ax, mask=inside)
    tl.store(out + n, ay, mask=inside)
    tl.store(out + 2 * n, axx, mask=inside)
    tl.store(out + 3 * n, ayy, mask=inside)
    tl.store(out + 4 * n, axy, mask=inside)


def _ssim_cols(
    mom_ptr,
    taps_ptr,
    x_ptr,
    y_ptr,
    keep_ptr,
    der_ptr,
    ssim_part_ptr,
    l1_part_ptr,
    H,
    W,
    C,
    P,
    c1,
    c2,
    sxb,
    sxh,
    sxw,
    sxc,
    syb,
    syh,
    syw,
    syc,
    K: tl.constexpr,
    Y_U8: tl.constexpr,
    MASKED: tl.constexpr,
    WITH_GRAD: tl.constexpr,
    BLOCK: tl.constexpr,
):
    plane = tl.program_id(1)
    b, c = plane // C, plane % C
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < H * W
    h, w = offs // W, offs % W
    n = P * H * W
    mu_x = tl.zeros([BLOCK], dtype=tl.float32)
    mu_y = tl.zeros([BLOCK], dtype=tl.float32)
    e_xx = tl.zeros([BLOCK], dtype=tl.float32)
    e_yy = tl.zeros([BLOCK], dtype=tl.float32)
    e_xy = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(K):
        hh = h + (k - K // 2)
        m = inside & (hh >= 0) & (hh < H)
        src = mom_ptr + plane * H * W + hh * W + w
        g = tl.load(taps_ptr + k)
        mu_x += g * tl.load(src, mask=m, other=0.0)
        mu_y += g * tl.load(src + n, mask=m, other=0.0)
        e_xx += g * tl.load(src + 2 * n, mask=m, other=0.0)
        e_yy += g * tl.load(src + 3 * n, mask=m, other=0.0)
        e_xy += g * tl.load(src + 4 * n, mask=m, other=0.0)
    mu_xx, mu_yy, mu_xy = mu_x * mu_x, mu_y * mu_y, mu_x * mu_y
    a1 = 2.0 * mu_xy + c1
    a2 = 2.0 * (e_xy - mu_xy) + c2
    b1 = mu_xx + mu_yy + c1
    b2 = (e_xx - mu_xx) + (e_yy - mu_yy) + c2
    s = (a1 * a2) / (b1 * b2)
    xv = tl.load(x_ptr + b * sxb + h * sxh + w * sxw + c * sxc, mask=inside, other=0.0).to(tl.float32)
    yv = tl.load(y_ptr + b * syb + h * syh + w * syw + c * syc, mask=inside, other=0).to(tl.float32)
    if Y_U8:
        yv = yv / 255.0
    kept = inside
    if MASKED:  # the means run over the kept pixels only, and an ignored one sends no gradient
        kept = inside & (tl.load(keep_ptr + (b * H + h) * W + w, mask=inside, other=0) != 0)
    part = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
    tl.store(ssim_part_ptr + part, tl.sum(tl.where(kept, s, 0.0), axis=0))
    tl.store(l1_part_ptr + part, tl.sum(tl.where(kept, tl.abs(xv - yv), 0.0), axis=0))
    if WITH_GRAD:
        # S = a1 a2 / (b1 b2) with var_x = E[x²] - mu_x², cov = E[xy] - mu_x mu_y; derivatives w.r.t.
        # mu_x (through a1, b1, var_x and cov), E[x²] and E[xy] at fixed mu_x.
        d_exx = -s / b2
        d_exy = 2.0 * a1 / (b1 * b2)
        d_mu = (2.0 * mu_y * a2 - 2.0 * mu_x * s * b2) / (b1 * b2) - 2.0 * mu_x * d_exx - mu_y * d_exy
        if MASKED:
            d_mu = tl.where(kept, d_mu, 0.0)
            d_exx = tl.where(kept, d_exx, 0.0)
            d_exy = tl.where(kept, d_exy, 0.0)
        out = der_ptr + plane * H * W + offs
        tl.store(out, d_mu, mask=inside)
        tl.store(out + n, d_exx, mask=inside)
        tl.store(out + 2 * n, d_exy, mask=inside)


def _blur_rows3(der_ptr, taps_ptr, tmp_ptr, H, W, P, K: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < H * W
    h, w = offs // W, offs % W
    n = P * H * W
    a0 = tl.zeros([BLOCK], dtype=tl.float32)
    a1 = tl.zeros([BLOCK], dtype=tl.float32)
    a2 = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(K):
        ww = w + (k - K // 2)
        m = inside & (ww >= 0) & (ww < W)
        src = der_ptr + plane * H * W + h * W + ww
        g = tl.load(taps_ptr + k)
        a0 += g * tl.load(src, mask=m, other=0.0)
        a1 += g * tl.load(src + n, mask=m, other=0.0)
        a2 += g * tl.load(src + 2 * n, mask=m, other=0.0)
    out = tmp_ptr + plane * H * W + offs
    tl.store(out, a0, mask=inside)
    tl.store(out + n, a1, mask=inside)
    tl.store(out + 2 * n, a2, mask=inside)


def _grad_cols(
    tmp_ptr,
    taps_ptr,
    x_ptr,
    y_ptr,
    keep_ptr,
    gx_ptr,
    g_ssim_ptr,
    g_l1_ptr,
    inv_count,
    inv_n,
    H,
    W,
    C,
    P,
    sxb,
    sxh,
    sxw,
    sxc,
    syb,
    syh,
    syw,
    syc,
    sgb,
    sgh,
    sgw,
    sgc,
    K: tl.constexpr,
    Y_U8: tl.constexpr,
    MASKED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    plane = tl.program_id(1)
    b, c = plane // C, plane % C
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < H * W
    h, w = offs // W, offs % W
    n = P * H * W
    g_mu = tl.zeros([BLOCK], dtype=tl.float32)
    g_xx = tl.zeros([BLOCK], dtype=tl.float32)
    g_xy = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(K):
        hh = h + (k - K // 2)
        m = inside & (hh >= 0) & (hh < H)
        src = tmp_ptr + plane * H * W + hh * W + w
        g = tl.load(taps_ptr + k)
        g_mu += g * tl.load(src, mask=m, other=0.0)
        g_xx += g * tl.load(src + n, mask=m, other=0.0)
        g_xy += g * tl.load(src + 2 * n, mask=m, other=0.0)
    xv = tl.load(x_ptr + b * sxb + h * sxh + w * sxw + c * sxc, mask=inside, other=0.0).to(tl.float32)
    yv = tl.load(y_ptr + b * syb + h * syh + w * syw + c * syc, mask=inside, other=0).to(tl.float32)
    if Y_U8:
        yv = yv / 255.0
    # The upstream gradients are read on the device: no host sync for the loss's weights.
    g_s = tl.load(g_ssim_ptr) * inv_count
    g_l = tl.load(g_l1_ptr) * inv_n
    d = xv - yv
    sign = tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
    grad = g_s * (g_mu + 2.0 * xv * g_xx + yv * g_xy) + g_l * sign
    if MASKED:  # torch.where(mask, rgb, 0) passes no gradient to an ignored pixel
        grad = tl.where(tl.load(keep_ptr + (b * H + h) * W + w, mask=inside, other=0) != 0, grad, 0.0)
    tl.store(gx_ptr + b * sgb + h * sgh + w * sgw + c * sgc, grad, mask=inside)


def _strides(t: Tensor) -> tuple[int, int, int, int]:
    return tuple(int(s) for s in t.stride())  # type: ignore[return-value]


def _grid(t: Tensor) -> tuple[int, int]:
    B, H, W, C = t.shape
    return triton.cdiv(H * W, BLOCK), B * C


class FusedSsimL1(torch.autograd.Function):
    """``(mean SSIM, mean |x - y|)`` of ``x [B,H,W,C]`` float32 and ``y`` (float32, or uint8 holding
    value * 255), "same" zero padding, the window ``taps [K]``; gradient for ``x`` only.

    With ``keep [B,H,W]`` (uint8, 0 = ignore the pixel) both are ``model/loss.py``'s masked terms:
    the images are zeroed under the mask before the windows, the means run over the kept pixels,
    and a batch that keeps none scores SSIM 1 and L1 0 with no gradient. The count of kept pixels
    stays on the device (no host sync), so the means are divided there."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor, taps: Tensor, c1: float, c2: float, keep: Tensor | None):  # type: ignore[override]
        B, H, W, C = x.shape
        P, K = B * C, taps.numel()
        y_u8 = y.dtype == torch.uint8
        masked = keep is not None
        keep_arg = keep if masked else x  # never read without MASKED
        with_grad = bool(ctx.needs_input_grad[0])
        grid = _grid(x)
        moments = torch.empty(5, P, H, W, device=x.device, dtype=torch.float32)
        jit(_blur_rows)[grid](
            x,
            y,
            keep_arg,
            taps,
            moments,
            H,
            W,
            C,
            P,
            *_strides(x),
            *_strides(y),
            K=K,
            Y_U8=y_u8,
            MASKED=masked,
            BLOCK=BLOCK,
        )
        derivs = torch.empty(3, P, H, W, device=x.device, dtype=torch.float32) if with_grad else moments
        ssim_part = torch.empty(grid[0] * grid[1], device=x.device, dtype=torch.float32)
        l1_part = torch.empty_like(ssim_part)
        jit(_ssim_cols)[grid](
            moments,
            taps,
            x,
            y,
            keep_arg,
            derivs,
            ssim_part,
            l1_part,
            H,
            W,
            C,
            P,
            c1,
            c2,
            *_strides(x),
            *_strides(y),
            K=K,
            Y_U8=y_u8,
            MASKED=masked,
            WITH_GRAD=with_grad,
            BLOCK=BLOCK,
        )
        if masked:
            kept = keep.sum(dtype=torch.float32) * C  # the kept values of either term
            some, count = kept > 0, kept.clamp(min=1.0)
            s = torch.where(some, ssim_part.sum() / count, 1.0)  # nothing kept: nothing to be dissimilar
            l1 = l1_part.sum() / count
            inv = torch.where(some, 1.0 / count, 0.0)  # the means' slope; none when nothing is kept
        else:
            count = P * H * W
            s, l1 = ssim_part.sum() / count, l1_part.sum() / count
            inv = 1.0 / count
        if with_grad:
            ctx.save_for_backward(x, y, taps, derivs, keep_arg, inv if masked else None)
            ctx.masked, ctx.inv = masked, None if masked else inv
        return s, l1

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_ssim: Tensor, g_l1: Tensor):  # type: ignore[override]
        x, y, taps, derivs, keep_arg, inv_kept = ctx.saved_tensors
        B, H, W, C = x.shape
        P, K = B * C, taps.numel()
        grid = _grid(x)
        blurred = torch.empty_like(derivs)
        jit(_blur_rows3)[grid](derivs, taps, blurred, H, W, P, K=K, BLOCK=BLOCK)
        grad = torch.empty_like(x, dtype=torch.float32)
        g_ssim = g_ssim.to(torch.float32).reshape(1)
        g_l1 = g_l1.to(torch.float32).reshape(1)
        if ctx.masked:  # 1 / kept count is a device tensor: fold it into the upstream gradients there
            g_ssim, g_l1, inv = g_ssim * inv_kept, g_l1 * inv_kept, 1.0
        else:
            inv = ctx.inv
        jit(_grad_cols)[grid](
            blurred,
            taps,
            x,
            y,
            keep_arg,
            grad,
            g_ssim.contiguous(),
            g_l1.contiguous(),
            inv,
            inv,
            H,
            W,
            C,
            P,
            *_strides(x),
            *_strides(y),
            *_strides(grad),
            K=K,
            Y_U8=y.dtype == torch.uint8,
            MASKED=ctx.masked,
            BLOCK=BLOCK,
        )
        return grad, None, None, None, None, None


def ssim_l1(
    x: Tensor, y: Tensor, taps: Tensor, c1: float, c2: float, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``(mean SSIM, mean |x - y|)`` of ``[B,H,W,C]`` images through the fused kernels (see
    :class:`FusedSsimL1`); ``x`` float32 on the kernels' device, ``y`` float32 or uint8 there;
    ``mask [B,H,W]`` (bool, False = ignore the pixel) for the masked terms."""
    x = x if x.dtype == torch.float32 else x.float()
    y = y.detach()
    if y.dtype not in (torch.uint8, torch.float32):
        y = y.float()
    keep = None
    if mask is not None:  # bool and uint8 share one byte: a view, not a conversion kernel
        keep = mask.detach().contiguous()
        keep = keep.view(torch.uint8) if keep.dtype == torch.bool else (keep != 0).view(torch.uint8)
    return FusedSsimL1.apply(x, y, _device_taps(taps, x.device), c1, c2, keep)


_TAPS: dict[tuple[str, bytes], Tensor] = {}


def _device_taps(taps: Tensor, device: torch.device) -> Tensor:
    """The window on ``device``, copied there once (a host-to-device copy per step would wait for
    the GPU to finish the step's work before the CPU could queue more)."""
    if taps.device == device:
        return taps.to(torch.float32).contiguous()
    key = (str(device), taps.detach().cpu().to(torch.float32).numpy().tobytes())
    if key not in _TAPS:
        _TAPS[key] = taps.detach().to(device=device, dtype=torch.float32).contiguous()
    return _TAPS[key]
