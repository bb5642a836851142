"""Per-Gaussian native stages (SH, projection) on 16-lane blocks against the torch backend.

The sizes reach what the equivalence scenes do not: N not a multiple of the lane width, whole
blocks culled next to partly culled ones, several cameras, and SH gradients large enough to take
the huge-page allocation path in bindings.cpp (>= 2 MB) and the streaming stores of sh.cpp
(>= 16 MB, lanes.h kStreamBytes), shared and per camera.
"""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.renderer.options import RasterOptions
from pointrix_lite.renderer.torch_backend.projection import project_gaussians
from pointrix_lite.renderer.torch_backend.sh import sh_to_color

from .native_required import require_native
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)  # compiles on first use

from pointrix_lite.renderer.native._functions import ProjectGaussians, SHColors  # noqa: E402

N = 45_013  # 2813 blocks of 16 and a tail of 5; SH 3 gradient 8.6 MB; the others stay below 2 MB
N_STREAMED = 91_013  # shared SH 3 gradient 17.5 MB; per camera (2 cameras) at N, 17.3 MB


def _radii(C: int, n: int, gen: torch.Generator) -> torch.Tensor:
    keep = torch.rand(C, n, generator=gen) < 0.7
    keep[:, 160:480] = False  # whole blocks culled
    keep[0, -3:] = False  # culled lanes in the tail
    return (keep[..., None].expand(C, n, 2) * 2).to(torch.int32).contiguous()


@pytest.mark.parametrize(
    "per_camera,degree,n", [(False, 3, N), (False, 3, N_STREAMED), (True, 3, N), (True, 4, 1_037), (False, 0, 517)]
)
def test_sh_matches_torch(per_camera: bool, degree: int, n: int) -> None:
    gen = torch.Generator().manual_seed(degree)
    C, K = 2, (degree + 1) ** 2
    means = torch.randn(n, 3, generator=gen).requires_grad_(True)
    campos = (torch.randn(C, 3, generator=gen) * 3).requires_grad_(True)
    shape = (C, n, K, 3) if per_camera else (n, K, 3)
    coeffs = (torch.randn(*shape, generator=gen) * 0.4).requires_grad_(True)
    radii = _radii(C, n, gen)
    v = torch.randn(C, n, 3, generator=gen)

    ours = SHColors.apply(means, campos, coeffs, radii, degree)
    g_ours = torch.autograd.grad((ours * v).sum(), (means, campos, coeffs))
    dirs = means[None] - campos[:, None]
    ref = sh_to_color(degree, dirs, coeffs if per_camera else coeffs[None].expand(C, -1, -1, -1))
    ref = ref * (radii[..., :1] > 0)
    g_ref = torch.autograd.grad((ref * v).sum(), (means, campos, coeffs), allow_unused=True)
    g_ref = [torch.zeros_like(x) if g is None else g for g, x in zip(g_ref, (means, campos, coeffs))]  # degree 0

    assert torch.equal(ours[radii[..., 0] == 0], torch.zeros_like(ours[radii[..., 0] == 0]))
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    for name, a, b in zip(("means", "campos", "coeffs"), g_ours, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * max(1.0, b.abs().max().item()), msg=name)
    if not per_camera:  # Gaussians no camera sees get exact zeros
        unseen = (radii[..., 0] == 0).all(0)
        assert unseen.any() and g_ours[2][unseen].abs().max() == 0


@pytest.mark.parametrize("aa", [False, True])
def test_projection_matches_torch(aa: bool) -> None:
    gen = torch.Generator().manual_seed(int(aa))
    n, W, H = 20_005, 120, 90
    means = ((torch.rand(n, 3, generator=gen) * 2 - 1) * torch.tensor([2.0, 2.0, 3.0])).requires_grad_(True)
    quats = torch.randn(n, 4, generator=gen).requires_grad_(True)
    scales = (torch.rand(n, 3, generator=gen) * 0.05 + 0.005).requires_grad_(True)
    opac = torch.rand(n, generator=gen)
    view = torch.eye(4).repeat(2, 1, 1)
    view[:, 2, 3] = torch.tensor([3.0, 2.5])
    view[1, 0, 3] = 0.4
    view.requires_grad_(True)
    Ks = torch.tensor([[100.0, 0, 60], [0, 100.0, 45], [0, 0, 1]]).repeat(2, 1, 1)
    args = (W, H, 0.3, 0.01, 1e10, 0.0, aa)

    options = RasterOptions(W, H, rasterize_mode="antialiased" if aa else "classic")  # the same values as args
    radii, m2d, depths, conics, comps = ProjectGaussians.apply(means, quats, scales, opac, view, Ks, options)
    ref = project_gaussians(means, quats, scales, opac, view, Ks, *args)
    assert torch.equal(radii, ref.radii)
    seen = radii[..., 0] > 0
    assert 0 < seen.sum() < seen.numel()
    outs = [m2d, depths, conics] + ([comps] if aa else [])
    refs = [ref.means2d, ref.depths, ref.conics] + ([ref.compensations] if aa else [])
    for a, b in zip(outs, refs):
        torch.testing.assert_close(a[seen], b[seen], rtol=1e-4, atol=1e-5)

    gen_v = torch.Generator().manual_seed(7)
    loss_w = [torch.randn(o.shape, generator=gen_v) * seen.reshape(*seen.shape, *[1] * (o.dim() - 2)) for o in outs]
    params = (means, quats, scales, view)
    g_ours = torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, loss_w)), params)
    g_ref = torch.autograd.grad(sum((torch.where(w != 0, o, 0) * w).sum() for o, w in zip(refs, loss_w)), params)
    for name, a, b in zip(("means", "quats", "scales", "viewmats"), g_ours, g_ref):
        torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-3 * b.abs().max().item(), msg=name)
