"""Masked training loss: ignored pixels add nothing to L1, SSIM, the gradients of the Gaussians or
the 2D-mean gradients densification reads; the unmasked loss is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.model.loss import masked_l1, masked_ssim
from pointrix_lite.renderer import GaussianRenderer

from .helpers import inria_ssim, make_model

H, W = 24, 32
LAM = 0.2


def scene(seed: int = 0):
    """A model whose 60 Gaussians sit 3..5 in front of a camera, and a random target image."""
    model = make_model(60, sh_degree=1, extent=1.0, ssim_lambda=LAM, seed=seed)
    with torch.no_grad():
        model.params["scales"].fill_(-2.5)  # small splats: some lie wholly on one side of a mask edge
        model.params["opacities"].fill_(1.0)
    viewmat = torch.eye(4)
    viewmat[2, 3] = 4.0
    cam = Camera(fx=28.0, fy=28.0, cx=W / 2, cy=H / 2, width=W, height=H, viewmat=viewmat, name="v")
    g = torch.Generator().manual_seed(seed + 1)
    image = torch.randint(0, 256, (H, W, 3), generator=g, dtype=torch.uint8)
    return model, View(cam, image, "v", 0)


def loss_and_grads(model, view, background=(0.0, 0.0, 0.0), loss_fn=None):
    """The loss, its gradient per parameter and the 2D-mean gradient, from a fresh render (torch
    rasterizer: the loss is under test here, and it needs no native build)."""
    model.zero_grad(set_to_none=True)
    out = GaussianRenderer(GaussianRenderer.Config(backend="torch"))(model, [view.camera], background)
    loss = model.get_loss_dict(out, [view])["loss"] if loss_fn is None else loss_fn(out["rgb"])
    loss.backward()
    grads = {k: p.grad.clone() for k, p in model.params.items() if p.grad is not None}
    return loss.detach(), grads, out["means2d"].grad[0].clone(), out


def test_rectangle_mask_equals_the_loss_of_the_cropped_images():
    """A rectangular mask's loss is the plain loss of the crop: SSIM treats ignored pixels like
    the zero padding past the border, so the crop with INRIA's SSIM is an independent reference."""
    model, view = scene()
    r0, r1, c0, c1 = 5, 19, 3, 21
    mask = torch.zeros(H, W, dtype=torch.bool)
    mask[r0:r1, c0:c1] = True
    masked = replace(view, mask=mask)
    gt = view.float_image()[None, r0:r1, c0:c1]

    def reference(rgb):
        crop = rgb[:, r0:r1, c0:c1]
        return (1 - LAM) * (crop - gt).abs().mean() + LAM * (1 - inria_ssim(crop, gt).float())

    loss, grads, g2d, _ = loss_and_grads(model, masked)
    ref_loss, ref_grads, ref_g2d, _ = loss_and_grads(model, view, loss_fn=reference)
    assert float(loss) == pytest.approx(float(ref_loss), rel=1e-5)
    assert grads.keys() == ref_grads.keys() and {"means", "sh0"} <= grads.keys()
    for k in grads:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=1e-4, atol=1e-9, msg=k)
    torch.testing.assert_close(g2d, ref_g2d, rtol=1e-4, atol=1e-9)
    _, plain, _, _ = loss_and_grads(model, view)  # the test can fail: the mask changes the gradient
    assert not torch.allclose(plain["means"], grads["means"], rtol=1e-2)


@pytest.mark.parametrize("background", [(0.0, 0.0, 0.0), (1.0, 1.0, 1.0)])
def test_pixels_under_a_mask_pull_nothing(background):
    model, view = scene(seed=3)
    mask = torch.ones(H, W, dtype=torch.bool)
    mask[:, W // 2 :] = False  # the right half is ignored
    g = torch.Generator().manual_seed(7)
    mask[torch.rand(H, W, generator=g) < 0.2] = False  # and scattered pixels on the left
    masked = replace(view, mask=mask)
    other = view.image.clone()
    other[~mask] = torch.randint(0, 256, (int((~mask).sum()), 3), generator=g, dtype=torch.uint8)
    loss, grads, g2d, out = loss_and_grads(model, masked, background)
    loss2, grads2, g2d2, _ = loss_and_grads(model, replace(masked, image=other), background)
    assert torch.equal(loss, loss2)  # the target under the mask is never read
    for k in grads:
        assert torch.equal(grads[k], grads2[k]), k
    assert torch.equal(g2d, g2d2)

    # The render under the mask gets no gradient either.
    rgb = out["rgb"].detach().requires_grad_(True)
    model.get_loss_dict({"rgb": rgb}, [masked])["loss"].backward()
    assert rgb.grad[0][~mask].abs().max() == 0 and rgb.grad[0][mask].abs().max() > 0

    # Densification: Gaussians drawn only on ignored pixels get no 2D-mean gradient.
    x, radius = out["means2d"][0, :, 0].detach(), out["radii"][0].max(dim=-1).values.float()
    hidden = (out["radii"][0] > 0).all(dim=-1) & (x - radius > W // 2 + 1)
    assert hidden.sum() >= 3
    assert g2d[hidden].abs().max() == 0 and g2d[~hidden].abs().max() > 0
    _, _, plain_g2d, _ = loss_and_grads(model, view, background)
    assert plain_g2d[hidden].abs().max() > 0  # without the mask they would have moved


def test_no_mask_is_the_plain_loss_and_an_empty_batch_scores_no_gradient():
    g = torch.Generator().manual_seed(0)
    rgb = torch.rand(2, 16, 20, 3, generator=g, requires_grad=True)
    gt = torch.rand(2, 16, 20, 3, generator=g)
    assert torch.equal(masked_l1(rgb, gt, None), (rgb - gt).abs().mean())
    full = torch.ones(2, 16, 20, dtype=torch.bool)
    torch.testing.assert_close(masked_l1(rgb, gt, full), (rgb - gt).abs().mean())
    torch.testing.assert_close(masked_ssim(rgb, gt, full), inria_ssim(rgb, gt).float())
    empty = torch.zeros_like(full)
    l1, s = masked_l1(rgb, gt, empty), masked_ssim(rgb, gt, empty)
    assert float(l1.detach()) == 0.0 and float(s.detach()) == 1.0
    (l1 + s).backward()
    assert rgb.grad.abs().max() == 0


def test_a_batch_mixing_masked_and_unmasked_views_counts_every_pixel_of_the_unmasked():
    model = make_model(10, ssim_lambda=0.0)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (2, 8, 10, 3), generator=g, dtype=torch.uint8)
    cam = Camera(fx=10.0, fy=10.0, cx=5.0, cy=4.0, width=10, height=8, viewmat=torch.eye(4))
    mask = torch.zeros(8, 10, dtype=torch.bool)
    mask[2:5, 1:4] = True
    views = [View(cam, images[0], "a", 0, mask=mask), View(cam, images[1], "b", 1)]
    rgb = torch.rand(2, 8, 10, 3, generator=g)
    diff = (rgb - images.float() / 255).abs()
    expected = (diff[0][mask].sum() + diff[1].sum()) / ((9 + 80) * 3)
    torch.testing.assert_close(model.get_loss_dict({"rgb": rgb}, views)["l1"], expected)
