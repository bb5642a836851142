"""PSNR / SSIM against independent references (formula, scikit-image, INRIA's 2-D conv)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from pointrix_lite.metrics import psnr, ssim
from tests.model.helpers import inria_ssim


def _skimage_ssim(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(
        np.mean(
            [
                structural_similarity(
                    a[i].double().numpy(),
                    b[i].double().numpy(),
                    gaussian_weights=True,
                    sigma=1.5,
                    use_sample_covariance=False,
                    data_range=1.0,
                    channel_axis=-1,
                )
                for i in range(a.shape[0])
            ]
        )
    )


def _structured(h: int, w: int) -> torch.Tensor:
    """Edges, ramps and a sinusoid: SSIM's structure term matters here, unlike on white noise."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    checker = ((torch.arange(h)[:, None] // 4 + torch.arange(w)[None, :] // 4) % 2).float()
    return torch.stack([xx, checker, 0.5 + 0.5 * torch.sin(12 * xx + 7 * yy)], dim=-1)


@pytest.mark.parametrize("size", [(11, 11), (32, 32), (37, 53), (64, 29), (100, 75)])
def test_ssim_matches_skimage_on_random_images(size: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(sum(size))
    a = torch.rand(2, *size, 3, generator=g)
    b = (a + 0.2 * torch.randn(a.shape, generator=g)).clamp(0, 1)
    assert float(ssim(a, b)) == pytest.approx(_skimage_ssim(a, b), abs=1e-4)


@pytest.mark.parametrize("size", [(24, 40), (47, 31)])
def test_ssim_matches_skimage_on_structured_images(size: tuple[int, int]) -> None:
    a = _structured(*size)[None]
    blurred = torch.nn.functional.avg_pool2d(a.permute(0, 3, 1, 2), 3, stride=1, padding=1).permute(0, 2, 3, 1)
    shifted = torch.roll(a, shifts=(1, 2), dims=(1, 2)) * 0.9 + 0.05
    for b in (blurred, shifted):
        ref = _skimage_ssim(a, b)
        assert ref < 0.98  # the pair really differs, so this checks more than the identity
        assert float(ssim(a, b)) == pytest.approx(ref, abs=1e-4)


def test_ssim_identical_is_one_and_same_padding_matches_inria() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.rand(3, 29, 41, 3, generator=g)
    b = (a * 0.7 + 0.3 * torch.rand(a.shape, generator=g)).clamp(0, 1)
    assert float(ssim(a, a)) == pytest.approx(1.0, abs=1e-6)
    assert float(ssim(a, b, padding="same")) == pytest.approx(float(inria_ssim(a, b)), abs=1e-5)
    # The two conventions differ at the borders, so the "valid" metric is not the training SSIM.
    assert abs(float(ssim(a, b, padding="same")) - float(ssim(a, b))) > 1e-4


def test_ssim_gradient_matches_float64_autograd_reference() -> None:
    g = torch.Generator().manual_seed(2)
    a = torch.rand(1, 16, 18, 3, generator=g, requires_grad=True)
    b = torch.rand(1, 16, 18, 3, generator=g)
    ssim(a, b, padding="same").backward()
    a64 = a.detach().double().requires_grad_(True)
    inria_ssim(a64, b.double()).backward()
    torch.testing.assert_close(a.grad.double(), a64.grad, atol=1e-6, rtol=1e-3)


def test_psnr_by_formula() -> None:
    g = torch.Generator().manual_seed(3)
    a = torch.rand(2, 8, 9, 3, generator=g)
    b = a.clone()
    b[0] += 0.1  # MSE 0.01 before clamping; clamping to [0,1] changes some pixels
    b[1] -= 0.05
    expected = []
    for i in range(2):
        mse = float(((a[i] - b[i].clamp(0, 1)) ** 2).mean())
        expected.append(10 * math.log10(1.0 / mse))
    assert float(psnr(a, b)) == pytest.approx(sum(expected) / 2, rel=1e-5)
    c = a.clone()
    c[..., 0] = 0.5
    single = float(((a[0, ..., 0] - 0.5) ** 2).mean()) / 3
    assert float(psnr(a[0], c[0])) == pytest.approx(-10 * math.log10(single), rel=1e-5)
    assert math.isinf(float(psnr(a, a)))
