"""AppearanceCorrection's ``vignetting``: the falloff against a per-pixel formula, gradients against
finite differences, and a photo darkened towards its corners fitted back to the darkening."""

from __future__ import annotations

import torch

from pointrix_lite.model.appearance import AppearanceCorrection


def test_falloff_is_one_at_the_centre_and_the_formula_elsewhere():
    H, W = 5, 7  # odd: pixel (2, 3) sits on the centre
    corr = AppearanceCorrection(3, "affine", vignetting=True).double()
    rgb = torch.rand(2, H, W, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([2, 0])
    assert torch.equal(corr(rgb, ids), rgb)  # zeros: the identity
    with torch.no_grad():
        corr.falloff.copy_(torch.tensor([[0.0, 0.0], [0.0, 0.0], [-0.3, 0.1]], dtype=torch.float64))
        corr.delta[2, 9:] = 0.05  # the colour map's bias comes after the falloff
    out = corr(rgb, ids)
    for i in range(H):
        for j in range(W):
            r2 = ((j + 0.5 - W / 2) ** 2 + (i + 0.5 - H / 2) ** 2) / ((W / 2) ** 2 + (H / 2) ** 2)
            f = 1 - 0.3 * r2 + 0.1 * r2**2
            torch.testing.assert_close(out[0, i, j], rgb[0, i, j] * f + 0.05, rtol=0, atol=1e-12)
    torch.testing.assert_close(out[0, 2, 3], rgb[0, 2, 3] + 0.05, rtol=0, atol=1e-15)
    torch.testing.assert_close(out[1], rgb[1], rtol=0, atol=0)  # view 0 untouched


def test_gradients_of_falloff_and_render():
    corr = AppearanceCorrection(2, "gain_bias", vignetting=True).double()
    with torch.no_grad():
        corr.falloff.normal_(0.0, 0.2, generator=torch.Generator().manual_seed(1))
        corr.delta.normal_(0.0, 0.2, generator=torch.Generator().manual_seed(2))
    rgb = torch.rand(1, 4, 6, 3, dtype=torch.float64, requires_grad=True)

    def f(falloff: torch.Tensor, render: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(corr, {"falloff": falloff, "delta": corr.delta}, (render, torch.tensor([1])))

    assert torch.autograd.gradcheck(f, (corr.falloff.detach().clone().requires_grad_(), rgb))


def test_a_vignetted_photo_is_fitted_back_to_its_falloff():
    """A render and its photo darkened by 1 - 0.35 r^2 with a gain of 1.2: Adam on the view's falloff
    and gain finds both (the centre pins the falloff; the gain alone cannot darken corners)."""
    g = torch.Generator().manual_seed(3)
    H, W = 24, 32
    render = torch.rand(1, H, W, 3, generator=g)
    y = torch.arange(H) + 0.5 - H / 2
    x = torch.arange(W) + 0.5 - W / 2
    r2 = (y[:, None] ** 2 + x[None, :] ** 2) / ((W / 2) ** 2 + (H / 2) ** 2)
    photo = render * (1 - 0.35 * r2)[..., None] * 1.2
    corr = AppearanceCorrection(1, "gain_bias", vignetting=True)
    opt = torch.optim.Adam(corr.parameters(), lr=0.01)
    for _ in range(1500):
        opt.zero_grad()
        ((corr(render, torch.tensor([0])) - photo) ** 2).mean().backward()
        opt.step()
    k1, k2 = corr.falloff[0].tolist()
    assert abs(k1 + 0.35) < 0.02 and abs(k2) < 0.02, (k1, k2)
    torch.testing.assert_close(corr.delta[0, :3].exp(), torch.full((3,), 1.2), rtol=0, atol=0.01)
