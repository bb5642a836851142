"""NeRF-W's test protocol: a test view's colour transform fitted on the left half, the right half scored."""

from __future__ import annotations

import math

import pytest
import torch

from pointrix_lite.model.appearance import fit_transform
from pointrix_lite.model.appearance_hook import half_fitted_psnr


def _render(h: int = 12, w: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.rand(h, w, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 0.6 + 0.2


def test_fit_recovers_a_known_transform() -> None:
    x = _render().reshape(-1, 3)
    M = torch.tensor([[1.1, 0.05, 0.0], [0.02, 0.9, 0.03], [0.0, -0.04, 1.2]], dtype=torch.float64)
    b = torch.tensor([0.01, -0.02, 0.03], dtype=torch.float64)
    M_fit, b_fit = fit_transform(x, x @ M.T + b, "affine")
    torch.testing.assert_close(M_fit, M, rtol=0, atol=1e-10)
    torch.testing.assert_close(b_fit, b, rtol=0, atol=1e-10)
    gain = torch.tensor([0.7, 1.0, 1.3], dtype=torch.float64)
    M_fit, b_fit = fit_transform(x, x * gain + b, "gain_bias")
    torch.testing.assert_close(M_fit, torch.diag(gain), rtol=0, atol=1e-10)
    torch.testing.assert_close(b_fit, b, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="mode"):
        fit_transform(x, x, "bilateral")


def test_right_half_is_scored_under_the_left_half_fit() -> None:
    render = _render()
    gain, bias = torch.tensor([0.8, 1.1, 0.95], dtype=torch.float64), 0.05
    photo = render * gain + bias  # the photo's own exposure, which the plain score charges the model for
    assert half_fitted_psnr(render, photo) > 100  # fitted on the left, exact on the right
    plain = -10 * math.log10(float(((render - photo) ** 2).mean()))
    assert plain < 30
    # An error on the right half only is what the protocol measures: 0.02 everywhere there -> 20 log10(1/0.02).
    off = photo.clone()
    off[:, 8:] += 0.02
    assert half_fitted_psnr(render, off) == pytest.approx(-20 * math.log10(0.02), abs=1e-6)
    # ... and an error on the left half enters only through the fit (a uniform offset moves the bias).
    left = photo.clone()
    left[:, :8] += 0.02
    assert half_fitted_psnr(render, left) == pytest.approx(-20 * math.log10(0.02), abs=1e-6)
