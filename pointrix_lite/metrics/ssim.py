"""Structural similarity (SSIM) with a separable Gaussian window.

Two border conventions, because the two references we match disagree:

- ``padding="valid"`` keeps only the SSIM-map pixels whose whole window lies inside the image.
  This equals scikit-image's ``structural_similarity(gaussian_weights=True, sigma=1.5,
  use_sample_covariance=False, data_range=1)``: skimage filters with a reflected border but
  then crops ``(win_size - 1) // 2`` pixels from every side, which removes exactly the pixels
  the reflection touched (its window radius is ``int(3.5 * sigma + 0.5) = 5``, win_size 11).
  Use it for reported metrics.
- ``padding="same"`` zero-pads by ``window_size // 2`` like INRIA 3DGS's training loss, so
  every pixel (borders included) gets a gradient. Use it for the loss.

``ssim()`` runs on the native C++ extension (``metrics/ssim_native.py``, forward and backward in
``renderer/native/ssim.cpp``) for CPU tensors when it is available, else on the torch code below,
which stays the reference it is tested against.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

_C1_FACTOR = 0.01
_C2_FACTOR = 0.03


def gaussian_window_1d(window_size: int, sigma: float, device: torch.device | None = None) -> Tensor:
    """Normalised 1-D Gaussian taps ``[window_size]`` centred on the middle tap (float32)."""
    x = torch.arange(window_size, dtype=torch.float64, device=device) - (window_size - 1) / 2.0
    g = torch.exp(-(x**2) / (2.0 * sigma**2))
    return (g / g.sum()).float()


def separable_blur(x: Tensor, g: Tensor, pad: int) -> Tensor:
    """Depthwise separable blur of ``x [B,M,H,W]`` with 1-D taps ``g`` (zero padding ``pad``)."""
    m = x.shape[1]
    k = g.numel()
    x = F.conv2d(x, g.view(1, 1, k, 1).expand(m, 1, k, 1), padding=(pad, 0), groups=m)
    return F.conv2d(x, g.view(1, 1, 1, k).expand(m, 1, 1, k), padding=(0, pad), groups=m)


def _check_inputs(img1: Tensor, img2: Tensor, padding: str, window_size: int) -> None:
    """ValueError unless both images are [B,H,W,C] of one shape and fit a "valid" window."""
    if img1.shape != img2.shape or img1.dim() != 4:
        raise ValueError(
            f"ssim expects two [B,H,W,C] images of equal shape, got {tuple(img1.shape)} and {tuple(img2.shape)}"
        )
    if padding == "valid" and min(img1.shape[1:3]) < window_size:
        raise ValueError(
            f"ssim padding='valid' needs images of at least {window_size}x{window_size}, got {tuple(img1.shape[1:3])}"
        )


def _stability_constants(data_range: float) -> tuple[float, float]:
    """SSIM's C1, C2 = (0.01 L)^2, (0.03 L)^2 for data range L."""
    return (_C1_FACTOR * data_range) ** 2, (_C2_FACTOR * data_range) ** 2


def ssim_map(
    img1: Tensor,
    img2: Tensor,
    padding: Literal["valid", "same"] = "valid",
    window_size: int = 11,
    sigma: float = 1.5,
    data_range: float = 1.0,
) -> Tensor:
    """Per-pixel SSIM.

    Args:
        img1, img2: Images ``[B,H,W,C]`` (channels last, as the renderer outputs).
        padding: ``"valid"`` (skimage-compatible) or ``"same"`` (INRIA 3DGS loss), see module doc.
        window_size: Gaussian window taps per axis.
        sigma: Gaussian standard deviation in pixels.
        data_range: Value range of the images (1 for [0,1] images).

    Returns:
        SSIM map ``[B,C,H',W']`` with ``H' = H - window_size + 1`` for "valid", ``H`` for "same".
    """
    _check_inputs(img1, img2, padding, window_size)
    x = img1.permute(0, 3, 1, 2).float()
    y = img2.permute(0, 3, 1, 2).float()
    c = x.shape[1]
    g = gaussian_window_1d(window_size, sigma, x.device)
    pad = window_size // 2 if padding == "same" else 0
    # One grouped conv for all five moments: the blur dominates the cost of a training step's loss.
    moments = separable_blur(torch.cat([x, y, x * x, y * y, x * y], dim=1), g, pad)
    mu_x, mu_y, e_xx, e_yy, e_xy = moments.split(c, dim=1)
    mu_xx, mu_yy, mu_xy = mu_x * mu_x, mu_y * mu_y, mu_x * mu_y
    var_x, var_y, cov_xy = e_xx - mu_xx, e_yy - mu_yy, e_xy - mu_xy
    c1, c2 = _stability_constants(data_range)
    return ((2 * mu_xy + c1) * (2 * cov_xy + c2)) / ((mu_xx + mu_yy + c1) * (var_x + var_y + c2))


def ssim(
    img1: Tensor,
    img2: Tensor,
    padding: Literal["valid", "same"] = "valid",
    window_size: int = 11,
    sigma: float = 1.5,
    data_range: float = 1.0,
    backend: Literal["auto", "torch", "native"] = "auto",
) -> Tensor:
    """Mean SSIM over images of the per-image mean SSIM (all images have the same size, so this
    is the mean of the whole map). Inputs ``[B,H,W,C]`` or ``[H,W,C]``, ``img2`` also as uint8
    holding value * 255 (a view's stored photo); returns a scalar tensor.

    ``backend``: "native" (C++, CPU, gradients for ``img1`` only; builds the extension if
    needed), "torch", or "auto" (native for CPU images when the extension is already loaded in
    this process, see ``ssim_native.native_applies``; else torch)."""
    if img1.dim() == 3:
        img1, img2 = img1[None], img2[None]
    if backend != "torch":
        from .ssim_native import native_applies, ssim_native

        if backend == "native" or native_applies(img1, img2, window_size):
            return ssim_native(img1, img2, *_native_args(img1, img2, padding, window_size, sigma, data_range))
    return ssim_map(img1, as_float_image(img2), padding, window_size, sigma, data_range).mean()


def ssim_and_l1(img1: Tensor, img2: Tensor, padding: Literal["valid", "same"] = "same") -> tuple[Tensor, Tensor]:
    """``(ssim(img1, img2, padding), (img1 - img2).abs().mean())``, the two terms of the 3DGS loss
    (default window; ``img2`` may be uint8 holding value * 255, read as such by the native kernel). Where :func:`ssim` runs natively (``backend="auto"``) both come from one pass
    of the native kernel, the L1 term's gradient added in SSIM's backward; else from the torch code."""
    if img1.dim() == 3:
        img1, img2 = img1[None], img2[None]
    from .ssim_native import native_applies, ssim_l1_native

    if native_applies(img1, img2, 11):
        return ssim_l1_native(img1, img2, *_native_args(img1, img2, padding, 11, 1.5, 1.0))
    if padding == "same" and _fused_applies(img1, img2):
        from ..kernels.ssim import ssim_l1

        taps, c1, c2, _ = _native_args(img1, img2, padding, 11, 1.5, 1.0)
        return ssim_l1(img1, img2, taps, c1, c2)
    img2 = as_float_image(img2)
    return ssim(img1, img2, padding, backend="torch"), (img1 - img2).abs().mean()


def ssim_l1_masked(img1: Tensor, img2: Tensor, mask: Tensor) -> tuple[Tensor, Tensor] | None:
    """:func:`ssim_and_l1`'s two terms over the pixels ``mask [B,H,W]`` keeps (``model/loss.py``'s
    masked SSIM and L1, "same" padding) from one pass of the native kernel (CPU,
    ``ssim_native.native_applies``) or of the fused Triton kernels (CUDA), else None: the caller
    then runs the torch definition."""
    if mask.device != img1.device:
        return None
    from .ssim_native import native_applies, ssim_l1_native

    if native_applies(img1, img2, 11):
        return ssim_l1_native(img1, img2, *_native_args(img1, img2, "same", 11, 1.5, 1.0), mask=mask)
    if _fused_applies(img1, img2):
        from ..kernels.ssim import ssim_l1

        taps, c1, c2, _ = _native_args(img1, img2, "same", 11, 1.5, 1.0)
        return ssim_l1(img1, img2, taps, c1, c2, mask=mask)
    return None


def _fused_applies(img1: Tensor, img2: Tensor) -> bool:
    """The fused Triton kernels take the loss on CUDA (``device_policy.ssim_backend``), with no
    gradient wanted for the ground truth."""
    from .. import device_policy

    if img1.device != img2.device or (img2.requires_grad and torch.is_grad_enabled()):
        return False
    return device_policy.ssim_backend(img1.device, lambda: False) == "triton"


def as_float_image(img: Tensor) -> Tensor:
    """uint8 images hold value * 255 (a view's stored photo): as floats, ``View.float_image``'s numbers;
    float images as they are."""
    return img.float() / 255.0 if img.dtype == torch.uint8 else img


def _native_args(img1: Tensor, img2: Tensor, padding: str, window_size: int, sigma: float, data_range: float) -> tuple:
    """The native kernel's (taps, c1, c2, valid) after the input checks."""
    _check_inputs(img1, img2, padding, window_size)
    c1, c2 = _stability_constants(data_range)
    return gaussian_window_1d(window_size, sigma), c1, c2, padding == "valid"
