"""The Triton kernels (pointrix_lite/kernels) against their torch references, on one device.

Each check returns the largest differences it found; tests/kernels/test_kernels.py runs them on
CUDA in-process (compiled) and on the CPU in a subprocess under Triton's interpreter, which must
be switched on before triton is first imported (``python tests/kernels/checks.py`` prints them).
"""

from __future__ import annotations

import json
import sys

import torch


def _images(device: str, shape: tuple[int, int, int, int], uint8_gt: bool, seed: int, layout: str):
    g = torch.Generator().manual_seed(seed)
    B, H, W, C = shape
    x = torch.rand(B, H, W, C + (1 if layout == "sliced" else 0), generator=g)
    if layout == "sliced":  # a 4-channel render's first three channels: rows of stride 4
        x = x.to(device)[..., :C]
    elif layout == "planes":  # channels-first storage seen as [B,H,W,C]
        x = x.permute(0, 3, 1, 2).contiguous().to(device).permute(0, 2, 3, 1)
    else:
        x = x.to(device)
    gt_u8 = (torch.rand(B, H, W, C, generator=g) * 255).round().to(torch.uint8).to(device)
    y = gt_u8 if uint8_gt else gt_u8.float() / 255.0
    x = x.detach()
    with torch.no_grad():  # a few exact ties: sign(0) = 0 in the L1 gradient, as torch's abs
        x[0, 0, :3] = gt_u8[0, 0, :3].float() / 255.0
    return x.requires_grad_(True), y


def check_ssim(device: str) -> dict[str, float]:
    """Fused SSIM + L1 (value and gradient) against metrics.ssim's torch code and (x - y).abs().mean()."""
    from pointrix_lite.kernels.ssim import ssim_l1
    from pointrix_lite.metrics.ssim import as_float_image, gaussian_window_1d, ssim

    worst = {"ssim": 0.0, "l1": 0.0, "grad_rel": 0.0}
    cases = [
        ((2, 23, 37, 3), True, "plain"),
        ((1, 40, 9, 3), False, "sliced"),
        ((1, 7, 50, 3), True, "planes"),
        ((3, 12, 12, 1), False, "plain"),
    ]
    for i, (shape, u8, layout) in enumerate(cases):
        x, y = _images(device, shape, u8, i, layout)
        taps = gaussian_window_1d(11, 1.5)
        s, l1 = ssim_l1(x, y, taps, 0.01**2, 0.03**2)
        (0.8 * l1 + 0.2 * (1.0 - s)).backward()
        grad, x.grad = x.grad.clone(), None
        yf = as_float_image(y)
        s_ref = ssim(x, yf, padding="same", backend="torch")
        l1_ref = (x - yf).abs().mean()
        (0.8 * l1_ref + 0.2 * (1.0 - s_ref)).backward()
        worst["ssim"] = max(worst["ssim"], abs(float(s) - float(s_ref)))
        worst["l1"] = max(worst["l1"], abs(float(l1) - float(l1_ref)))
        rel = float((grad - x.grad).abs().max() / x.grad.abs().max())
        worst["grad_rel"] = max(worst["grad_rel"], rel)
    return worst


def check_ssim_without_grad(device: str) -> dict[str, float]:
    """The forward alone (no derivative planes written) gives the same value."""
    from pointrix_lite.kernels.ssim import ssim_l1
    from pointrix_lite.metrics.ssim import gaussian_window_1d

    x, y = _images(device, (1, 19, 21, 3), True, 7, "plain")
    taps = gaussian_window_1d(11, 1.5)
    s_grad, l1_grad = ssim_l1(x, y, taps, 0.01**2, 0.03**2)
    with torch.no_grad():
        s, l1 = ssim_l1(x, y, taps, 0.01**2, 0.03**2)
    return {"ssim": abs(float(s) - float(s_grad)), "l1": abs(float(l1) - float(l1_grad))}


def check_ssim_masked(device: str) -> dict[str, float]:
    """Fused SSIM + L1 with a training mask (value and gradient) against model/loss.py's torch
    definition (``masked_l1``, ``masked_ssim``); a mask keeping nothing scores SSIM 1, L1 0 and no
    gradient; an all-kept mask gives the unmasked terms."""
    from pointrix_lite.kernels.ssim import ssim_l1
    from pointrix_lite.metrics.ssim import as_float_image, gaussian_window_1d
    from pointrix_lite.model.loss import masked_l1, masked_ssim

    worst = {"ssim": 0.0, "l1": 0.0, "grad_rel": 0.0, "ignored_grad": 0.0, "full_vs_plain": 0.0}
    taps = gaussian_window_1d(11, 1.5)
    cases = [((2, 23, 37, 3), True, "plain"), ((1, 40, 9, 3), False, "sliced"), ((1, 7, 50, 3), True, "planes")]
    for i, (shape, u8, layout) in enumerate(cases):
        x, y = _images(device, shape, u8, 10 + i, layout)
        g = torch.Generator().manual_seed(20 + i)
        mask = (torch.rand(shape[:3], generator=g) > 0.3).to(device)
        mask[0, :, : shape[2] // 3] = False  # a whole occluded band, as an occluder's mask
        s, l1 = ssim_l1(x, y, taps, 0.01**2, 0.03**2, mask=mask)
        (0.8 * l1 + 0.2 * (1.0 - s)).backward()
        grad, x.grad = x.grad.clone(), None
        yf = as_float_image(y)
        s_ref, l1_ref = masked_ssim(x, yf, mask), masked_l1(x, yf, mask)
        (0.8 * l1_ref + 0.2 * (1.0 - s_ref)).backward()
        worst["ssim"] = max(worst["ssim"], abs(float(s) - float(s_ref)))
        worst["l1"] = max(worst["l1"], abs(float(l1) - float(l1_ref)))
        worst["grad_rel"] = max(worst["grad_rel"], float((grad - x.grad).abs().max() / x.grad.abs().max()))
        worst["ignored_grad"] = max(worst["ignored_grad"], float(grad[~mask].abs().max()))
        x.grad = None
        full = torch.ones(shape[:3], dtype=torch.bool, device=device)
        masked_full, plain = ssim_l1(x, y, taps, 0.01**2, 0.03**2, mask=full), ssim_l1(x, y, taps, 0.01**2, 0.03**2)
        worst["full_vs_plain"] = max(
            worst["full_vs_plain"], *(abs(float(a) - float(b)) for a, b in zip(masked_full, plain))
        )
    x, y = _images(device, (1, 12, 14, 3), True, 30, "plain")
    s, l1 = ssim_l1(x, y, taps, 0.01**2, 0.03**2, mask=torch.zeros(1, 12, 14, dtype=torch.bool, device=device))
    (0.8 * l1 + 0.2 * (1.0 - s)).backward()
    worst["empty"] = [float(s), float(l1), float(x.grad.abs().max())]
    return worst


def masked_loss_route(device: str) -> str:
    """The autograd node behind the training loss's masked terms (``model/loss.py``) on ``device``:
    which implementation a masked training step runs there."""
    from pointrix_lite.model.loss import masked_l1_and_ssim

    x, y = _images(device, (1, 16, 16, 3), True, 40, "plain")
    mask = torch.ones(1, 16, 16, dtype=torch.bool, device=device)
    mask[:, 4:9, 2:12] = False
    _, s = masked_l1_and_ssim(x, y, mask)
    return type(s.grad_fn).__name__


def check_noise(device: str) -> dict[str, float]:
    """MCMC's position noise kernel against strategy/ops.py's torch code on the same draws."""
    from pointrix_lite.kernels.mcmc_noise import add_position_noise
    from pointrix_lite.strategy.ops import covariance

    g = torch.Generator().manual_seed(0)
    n = 3000
    means = torch.randn(n, 3, generator=g) * 2
    quats = torch.randn(n, 4, generator=g)
    log_scales = torch.randn(n, 3, generator=g) * 0.5 - 2
    logits = torch.randn(n, 1, generator=g) * 3 - 4  # many nearly transparent: the gate opens
    eps = torch.randn(n, 3, generator=g)
    gate = torch.sigmoid(100.0 * ((1.0 - torch.sigmoid(logits.flatten())) - 0.995))
    ref = means + torch.einsum("bij,bj->bi", covariance(quats, torch.exp(log_scales)), eps * gate[:, None] * 7.0)
    out = means.clone().to(device)
    add_position_noise(out, quats.to(device), log_scales.to(device), logits.to(device), eps.to(device), 7.0)
    moved = float((ref - means).abs().max())
    return {"abs": float((out.cpu() - ref).abs().max()), "moved": moved}


CHECKS = {
    "ssim": check_ssim,
    "ssim_without_grad": check_ssim_without_grad,
    "ssim_masked": check_ssim_masked,
    "noise": check_noise,
}

if __name__ == "__main__":
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    print(json.dumps({name: fn(device) for name, fn in CHECKS.items()}))
