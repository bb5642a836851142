"""The native SSIM with a training mask against the torch definition of the masked loss terms
(``model/loss.py``'s ``masked_l1`` and ``masked_ssim``), value and gradient; the mask's edge cases
(all kept, none kept, what lies under it) and the loss's choice of path."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.metrics import ssim_native
from pointrix_lite.metrics.ssim import gaussian_window_1d, ssim_map
from pointrix_lite.model.loss import masked_l1, masked_l1_and_ssim, masked_ssim
from tests.renderer.native_required import require_native

require_native(allow_module_level=True)
ssim_native._extension()  # loaded, so the loss's "auto" path is the native one (native_applies)

LAM = 0.2  # the loss's SSIM weight: both terms' gradients are compared in one sum, as training sees them


def _case(shape: tuple, seed: int, uint8: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A render, its photo (uint8 as views keep it, or float) and a mask with a hole and scattered pixels."""
    g = torch.Generator().manual_seed(seed)
    gt = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    rgb = (gt.float() / 255 * 0.7 + 0.3 * torch.rand(shape, generator=g)).requires_grad_(True)
    b, h, w = shape[:3]
    mask = torch.rand(b, h, w, generator=g) > 0.25
    mask[0, h // 4 : 3 * h // 4, w // 3 : 2 * w // 3] = False  # an occluder's rectangle
    return rgb, gt if uint8 else gt.float() / 255, mask


def _loss_and_grad(terms: tuple[torch.Tensor, torch.Tensor], rgb: torch.Tensor) -> tuple[float, float, torch.Tensor]:
    l1, s = terms
    (grad,) = torch.autograd.grad((1 - LAM) * l1 + LAM * (1 - s), rgb)
    return float(l1.detach()), float(s.detach()), grad


def _reference(rgb: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor) -> tuple[float, float, torch.Tensor]:
    gt = gt.float() / 255 if gt.dtype == torch.uint8 else gt
    return _loss_and_grad((masked_l1(rgb, gt, mask), masked_ssim(rgb, gt, mask)), rgb)


@pytest.mark.parametrize("uint8", [True, False])
@pytest.mark.parametrize("shape", [(1, 64, 80, 3), (2, 37, 23, 3), (3, 16, 29, 1), (2, 5, 7, 3)])
def test_masked_terms_match_the_torch_definition(shape, uint8):
    rgb, gt, mask = _case(shape, seed=sum(shape), uint8=uint8)
    l1, s, grad = _loss_and_grad(masked_l1_and_ssim(rgb, gt, mask), rgb)
    ref_l1, ref_s, ref_grad = _reference(rgb, gt, mask)
    assert l1 == pytest.approx(ref_l1, rel=1e-6) and s == pytest.approx(ref_s, rel=1e-6)
    scale = float(ref_grad.abs().max())
    assert float((grad - ref_grad).abs().max()) <= 1e-5 * scale
    assert float(grad[~mask].abs().max()) == 0.0  # exactly: the kernel zeroes it, as autograd's where does


def test_an_all_ones_mask_is_the_unmasked_kernel_bit_for_bit():
    rgb, gt, _ = _case((2, 41, 37, 3), seed=1)
    full = torch.ones(rgb.shape[:3], dtype=torch.bool)
    masked, plain = masked_l1_and_ssim(rgb, gt, full), masked_l1_and_ssim(rgb, gt, None)
    assert torch.equal(masked[0], plain[0]) and torch.equal(masked[1], plain[1])
    assert torch.equal(_loss_and_grad(masked, rgb)[2], _loss_and_grad(plain, rgb)[2])


def test_what_lies_under_the_mask_changes_nothing_and_an_empty_mask_scores_no_gradient():
    rgb, gt, mask = _case((2, 33, 40, 3), seed=2)
    first = _loss_and_grad(masked_l1_and_ssim(rgb, gt, mask), rgb)
    g = torch.Generator().manual_seed(3)
    other_rgb = torch.where(mask[..., None], rgb.detach(), torch.rand(rgb.shape, generator=g)).requires_grad_(True)
    other_gt = torch.where(mask[..., None], gt, torch.randint(0, 256, gt.shape, generator=g, dtype=torch.uint8))
    second = _loss_and_grad(masked_l1_and_ssim(other_rgb, other_gt, mask), other_rgb)
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])

    empty = torch.zeros_like(mask)
    l1, s, grad = _loss_and_grad(masked_l1_and_ssim(rgb, gt, empty), rgb)
    assert (l1, s) == (0.0, 1.0) and float(grad.abs().max()) == 0.0  # the torch definition's values


def test_valid_padding_with_a_mask_averages_the_kept_interior():
    """The kernel takes a mask with either padding; "valid" (not used by the loss) against torch."""
    rgb, gt, mask = _case((2, 30, 34, 3), seed=4, uint8=False)
    taps = gaussian_window_1d(11, 1.5)
    value, _ = ssim_native.ssim_l1_native(rgb, gt, taps, 0.01**2, 0.03**2, True, mask=mask)
    keep = mask[..., None]
    smap = ssim_map(torch.where(keep, rgb, 0.0), torch.where(keep, gt, 0.0), "valid")
    kept = mask[:, None, 5:-5, 5:-5].expand_as(smap)
    ref = smap[kept].mean()
    assert float(value.detach()) == pytest.approx(float(ref.detach()), rel=1e-6)
    (grad,) = torch.autograd.grad(value, rgb)
    (ref_grad,) = torch.autograd.grad(ref, rgb)
    assert float((grad - ref_grad).abs().max()) <= 1e-5 * float(ref_grad.abs().max())


def test_one_and_two_threads_agree_bit_for_bit_with_a_mask():
    rgb, gt, mask = _case((2, 61, 47, 3), seed=5)
    before = torch.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            l1, s = masked_l1_and_ssim(rgb, gt, mask)
            runs.append((l1, s, *torch.autograd.grad(l1 + s, rgb)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_the_loss_runs_the_kernel_and_falls_back_to_torch_when_gt_needs_a_gradient(monkeypatch):
    calls = []
    real = ssim_native._SsimFunction.apply
    monkeypatch.setattr(ssim_native._SsimFunction, "apply", lambda *a: calls.append(a[-1]) or real(*a))
    rgb, gt, mask = _case((1, 20, 24, 3), seed=6, uint8=False)
    masked_l1_and_ssim(rgb, gt, mask)
    assert len(calls) == 1 and torch.equal(calls[0], mask)  # the mask went to the kernel
    gt.requires_grad_(True)
    l1, s = masked_l1_and_ssim(rgb, gt, mask)
    assert len(calls) == 1  # torch: the kernel gives no gradient for the photo
    (g_gt,) = torch.autograd.grad(l1 + s, gt)
    assert float(g_gt[~mask].abs().max()) == 0.0 and float(g_gt.abs().max()) > 0.0
