"""The native forward's transmittance at gsplat's exclusive stop, decided to the last bit.

The 16px forward lets each pixel's running transmittance take the Gaussian that ends the pixel
too (``rasterize_fwd.cpp``, ``Blend``): a pixel is alive while that T exceeds 1e-4, and the T it
reports is kept apart, as of its last blended Gaussian. These scenes put a stack of Gaussians on
the optical axis, so at the pixel they are centred on sigma is exactly 0 and each alpha is exactly
its opacity; the opacities are chosen so that the second Gaussian's ``next_T`` is exactly 1e-4 in
float32 (gsplat stops there: that Gaussian is not blended) or one ulp above it (blended). A
float32 replay of gsplat's loop gives the expected T bit for bit. Behind them, 150 near-opaque
Gaussians drive a done pixel's running T towards underflow (held at a floor far above subnormals).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .native_required import require_native
from .test_native import compare
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)

from pointrix_lite.renderer.native import rasterization_native  # noqa: E402

EPS = np.float32(1e-4)  # gsplat's transmittance threshold
F, C = 40.0, 16.5  # focal and principal point: the axis meets pixel (16, 16) at its centre
# (first opacity, second opacity): the second Gaussian's next_T = fl(fl(1 - o1) * fl(1 - o2))
BORDER = {
    "at_eps": (0.9208509922027588, 0.998736560344696),  # == 1e-4: the pixel stops before it
    "above_eps": (0.9209740161895752, 0.9987345933914185),  # one ulp above: blended
}


def axis_stack(o1: float, o2: float, n_behind: int = 150) -> dict:
    """Gaussians on the optical axis at increasing depth: opacities o1, o2, then n_behind at 0.99."""
    n = 2 + n_behind
    z = 2.0 + 0.01 * torch.arange(n, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    return dict(
        means=torch.stack([torch.zeros(n), torch.zeros(n), z], 1),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1),
        scales=torch.full((n, 3), 0.1),  # ~2 px wide: the neighbours see smaller alphas
        opacities=torch.cat([torch.tensor([o1, o2]), torch.full((n_behind,), 0.99)]),
        colors=torch.rand(n, 3, generator=g),
        viewmats=torch.eye(4)[None],
        Ks=torch.tensor([[[F, 0.0, C], [0.0, F, C], [0.0, 0.0, 1.0]]]),
        width=32,
        height=32,
    )


def gsplat_replay(opacities: np.ndarray) -> tuple[np.float32, int]:
    """gsplat's per-pixel loop at sigma = 0 in float32: (final T, index of the last blended Gaussian)."""
    T, last = np.float32(1.0), -1
    for i, o in enumerate(opacities.astype(np.float32)):
        alpha = min(np.float32(0.999), o)
        if alpha < np.float32(1.0 / 255.0):
            continue
        next_T = np.float32(T * np.float32(np.float32(1.0) - alpha))
        if next_T <= EPS:
            break
        T, last = next_T, i
    return T, last


@pytest.mark.parametrize("case", sorted(BORDER))
def test_stop_at_exactly_the_threshold_is_decided_as_gsplat(case: str) -> None:
    o1, o2 = BORDER[case]
    t1 = np.float32(np.float32(1.0) - np.float32(o1))
    next_T = np.float32(t1 * np.float32(np.float32(1.0) - np.float32(o2)))
    assert (next_T == EPS) == (case == "at_eps") and next_T >= EPS, "the scene must sit on the threshold"
    scene = axis_stack(o1, o2)
    want_T, want_last = gsplat_replay(scene["opacities"].numpy())
    assert want_last == (0 if case == "at_eps" else 1)

    colors, alphas, meta = rasterization_native(
        *(scene[k] for k in ("means", "quats", "scales", "opacities", "colors", "viewmats", "Ks")),
        scene["width"],
        scene["height"],
    )
    assert torch.isfinite(colors).all() and torch.isfinite(alphas).all()
    # alphas are 1 - T: the pixel's T bit for bit, that of its last blended Gaussian
    assert alphas[0, 16, 16, 0].item() == np.float32(np.float32(1.0) - want_T)
    # and its colour is the blend of exactly those Gaussians
    ops = scene["opacities"].double()[: want_last + 1]
    T_before = torch.cumprod(torch.cat([torch.ones(1, dtype=torch.float64), 1.0 - ops[:-1]]), 0)
    want_rgb = ((ops * T_before)[:, None] * scene["colors"].double()[: want_last + 1]).sum(0)
    torch.testing.assert_close(colors[0, 16, 16].double(), want_rgb, rtol=0, atol=1e-6)


def test_pixels_spent_long_before_their_lists_end_match_the_reference() -> None:
    """The whole image (pixels around the axis stop at other Gaussians of the stack, some right
    after the first) and every gradient against the torch backend."""
    compare(axis_stack(*BORDER["above_eps"]), "colors")
