"""The C++ SSIM (``metrics/ssim_native.py``) against the torch reference ``ssim_map`` and its autograd."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.metrics.ssim import ssim, ssim_map
from tests.renderer.native_required import require_native

require_native(allow_module_level=True)

SHAPES = [(1, 160, 160, 3), (2, 37, 23, 3), (3, 16, 29, 1)]


def _pair(shape: tuple, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A render-like image and a noisy, partly shifted ground truth (so SSIM is not ~1 or ~0)."""
    g = torch.Generator().manual_seed(seed)
    gt = torch.rand(shape, generator=g)
    rgb = (gt.roll(1, dims=2) * 0.7 + 0.3 * torch.rand(shape, generator=g)).requires_grad_(True)
    return rgb, gt


def _reference(rgb: torch.Tensor, gt: torch.Tensor, padding: str) -> tuple[float, torch.Tensor]:
    value = ssim_map(rgb, gt, padding).mean()
    (grad,) = torch.autograd.grad(value, rgb)
    return float(value.detach()), grad


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("shape", SHAPES)
def test_value_and_gradient_match_torch_autograd(shape, padding):
    if padding == "valid" and min(shape[1:3]) < 11:
        pytest.skip("valid padding needs 11x11")
    rgb, gt = _pair(shape, seed=sum(shape))
    ref_value, ref_grad = _reference(rgb, gt, padding)
    value = ssim(rgb, gt, padding=padding, backend="native")
    (grad,) = torch.autograd.grad(value, rgb)
    assert abs(float(value.detach()) - ref_value) < 1e-5
    assert grad.shape == rgb.shape
    # gradients are ~1/(pixels); compare relative to the largest entry
    scale = float(ref_grad.abs().max())
    assert float((grad - ref_grad).abs().max()) < 1e-4 * scale
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-5 * scale)


def test_images_smaller_than_the_window_with_zero_padding():
    rgb, gt = _pair((2, 5, 7, 3), seed=3)
    ref_value, ref_grad = _reference(rgb, gt, "same")
    value = ssim(rgb, gt, padding="same", backend="native")
    (grad,) = torch.autograd.grad(value, rgb)
    assert abs(float(value.detach()) - ref_value) < 1e-5
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-9)


def test_loss_gradient_chain_with_upstream_factor():
    """The incoming gradient (here the loss weight) scales the result as autograd would."""
    rgb, gt = _pair((1, 40, 33, 3), seed=5)
    ref = 0.2 * (1.0 - ssim_map(rgb, gt, "same").mean())
    (ref_grad,) = torch.autograd.grad(ref, rgb)
    loss = 0.2 * (1.0 - ssim(rgb, gt, padding="same", backend="native"))
    (grad,) = torch.autograd.grad(loss, rgb)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-5 * float(ref_grad.abs().max()))


def _at_one_and_two_threads(fn) -> list:
    before = torch.get_num_threads()
    try:
        out = []
        for n in (1, 2):
            torch.set_num_threads(n)
            out.append(fn())
        return out
    finally:
        torch.set_num_threads(before)


def test_one_and_two_threads_agree_bit_for_bit():
    from pointrix_lite.metrics.ssim import ssim_and_l1

    rgb, gt = _pair((2, 61, 47, 3), seed=7)

    def ssim_only():
        value = ssim(rgb, gt, padding="same", backend="native")
        return (value, *torch.autograd.grad(value, rgb))

    def fused():  # the loss's two terms from one pass
        s, l1 = ssim_and_l1(rgb, gt)
        return (s, l1, *torch.autograd.grad(0.8 * l1 + 0.2 * (1 - s), rgb))

    for fn in (ssim_only, fused):
        one, two = _at_one_and_two_threads(fn)
        for a, b in zip(one, two):
            assert torch.equal(a, b), fn.__name__


def test_auto_uses_native_on_cpu_and_torch_when_gt_needs_a_gradient(monkeypatch):
    from pointrix_lite.metrics import ssim_native

    calls = []
    real = ssim_native._SsimFunction.apply
    monkeypatch.setattr(ssim_native._SsimFunction, "apply", lambda *a: calls.append(1) or real(*a))
    rgb, gt = _pair((1, 20, 20, 3), seed=9)
    ssim(rgb, gt, padding="same")
    assert calls == [1]
    gt.requires_grad_(True)
    value = ssim(rgb, gt, padding="same")
    assert calls == [1]  # torch path: the native backward gives no gradient for img2
    (g_gt,) = torch.autograd.grad(value, gt)
    assert float(g_gt.abs().sum()) > 0
    assert float(ssim(rgb, gt, padding="same", backend="torch").detach()) == pytest.approx(
        float(value.detach()), abs=1e-6
    )


@pytest.mark.parametrize("shape", [(1, 40, 33, 3), (2, 9, 13, 1)])
def test_fused_l1_term_matches_torch_in_value_and_gradient(shape):
    """``ssim_and_l1``: the 3DGS loss's two terms from one native pass, against the torch terms and
    autograd, with ties (rgb == gt) where abs has no slope (torch's gradient there is 0)."""
    from pointrix_lite.metrics.ssim import ssim_and_l1

    rgb, gt = _pair(shape, seed=11)
    with torch.no_grad():
        rgb[..., :2, :] = gt[..., :2, :]  # exact ties in two columns
    lam = 0.2
    ref_l1 = (rgb - gt).abs().mean()
    ref_s = ssim_map(rgb, gt, "same").mean()
    (ref_grad,) = torch.autograd.grad((1 - lam) * ref_l1 + lam * (1 - ref_s), rgb)
    s, l1 = ssim_and_l1(rgb, gt)
    assert abs(float(l1.detach()) - float(ref_l1.detach())) < 1e-6
    assert abs(float(s.detach()) - float(ref_s.detach())) < 1e-5
    (grad,) = torch.autograd.grad((1 - lam) * l1 + lam * (1 - s), rgb)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-5 * float(ref_grad.abs().max()))
    # each term alone: the other output's unused gradient adds nothing
    (g_l1,) = torch.autograd.grad(ssim_and_l1(rgb, gt)[1], rgb)
    torch.testing.assert_close(g_l1, torch.autograd.grad((rgb - gt).abs().mean(), rgb)[0], rtol=0, atol=1e-9)
    (g_s,) = torch.autograd.grad(ssim_and_l1(rgb, gt)[0], rgb)
    (ref_g_s,) = torch.autograd.grad(ssim_map(rgb, gt, "same").mean(), rgb)
    torch.testing.assert_close(g_s, ref_g_s, rtol=1e-3, atol=1e-5 * float(ref_g_s.abs().max()))


def test_fused_terms_fall_back_to_torch_when_gt_needs_a_gradient():
    from pointrix_lite.metrics.ssim import ssim_and_l1

    rgb, gt = _pair((1, 20, 20, 3), seed=13)
    gt.requires_grad_(True)
    s, l1 = ssim_and_l1(rgb, gt)
    (g_gt,) = torch.autograd.grad(l1 + s, gt)
    assert float(g_gt.abs().sum()) > 0  # the torch terms: the native kernel has no gradient for gt


def test_uint8_ground_truth_is_read_as_value_over_255():
    """Views keep photos as uint8; the loss hands them to the kernel as they are (no float copy):
    the same bits as with ``View.float_image``'s ``float() / 255``, value and gradient, natively
    and on the torch path."""
    from pointrix_lite.metrics.ssim import ssim_and_l1

    rgb, _ = _pair((2, 37, 41, 3), seed=17)
    g = torch.Generator().manual_seed(17)
    gt8 = torch.randint(0, 256, rgb.shape, generator=g, dtype=torch.uint8)
    gt = gt8.float() / 255.0
    (s8, l8), (s, l1) = ssim_and_l1(rgb, gt8), ssim_and_l1(rgb, gt)
    assert torch.equal(s8, s) and torch.equal(l8, l1)
    assert torch.equal(
        torch.autograd.grad(0.8 * l8 + 0.2 * s8, rgb)[0], torch.autograd.grad(0.8 * l1 + 0.2 * s, rgb)[0]
    )
    t8 = ssim(rgb, gt8, padding="same", backend="torch")
    assert float(t8.detach()) == pytest.approx(float(s.detach()), abs=1e-5)


def test_gradient_lands_in_the_channels_of_a_strided_render():
    """A render with a fourth (depth) channel: SSIM of its RGB slice reads the strided view and
    writes the gradient channels-last, which autograd places in the first three channels only."""
    g = torch.Generator().manual_seed(19)
    full = torch.rand(2, 30, 45, 4, generator=g).requires_grad_(True)
    gt = torch.rand(2, 30, 45, 3, generator=g)
    value = ssim(full[..., :3], gt, padding="same", backend="native")
    (grad,) = torch.autograd.grad(value, full)
    _, ref_grad = _reference(full[..., :3].detach().clone().requires_grad_(True), gt, "same")
    assert float(grad[..., 3].abs().max()) == 0.0
    scale = float(ref_grad.abs().max())
    torch.testing.assert_close(grad[..., :3], ref_grad, rtol=1e-3, atol=1e-5 * scale)
