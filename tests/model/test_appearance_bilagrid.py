"""AppearanceCorrection's ``bilagrid`` mode: the slice against an independent trilinear reference, the
cell layout against the ``affine`` mode, gradients against finite differences, the total variation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.model.appearance import LUMA, AppearanceCorrection

GRID = (3, 4, 5)  # luminance bins, rows, columns: small and unequal, so a swapped axis shows


def _trilinear_reference(rgb: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Per pixel, by loops: ``cells [12, L, GH, GW]`` (identity included) interpolated at the pixel centre's
    place in the grid (first and last cells at the image's first and last pixel centres' ends, as
    documented) and at its luminance, then ``A @ rgb + b`` with ``[A | b]`` the 3 x 4 row-major cell."""
    H, W, _ = rgb.shape
    L, GH, GW = cells.shape[1:]
    out = np.zeros_like(rgb)
    for i in range(H):
        for j in range(W):
            pos = [
                np.clip(rgb[i, j] @ np.array(LUMA), 0, 1) * (L - 1),
                (i + 0.5) / H * (GH - 1),
                (j + 0.5) / W * (GW - 1),
            ]
            lo = [min(int(np.floor(p)), n - 2) for p, n in zip(pos, (L, GH, GW))]
            t = [p - k for p, k in zip(pos, lo)]
            value = np.zeros(12)
            for dz in (0, 1):
                for dy in (0, 1):
                    for dx in (0, 1):
                        w = (t[0] if dz else 1 - t[0]) * (t[1] if dy else 1 - t[1]) * (t[2] if dx else 1 - t[2])
                        value += w * cells[:, lo[0] + dz, lo[1] + dy, lo[2] + dx]
            m = value.reshape(3, 4)
            out[i, j] = m[:, :3] @ rgb[i, j] + m[:, 3]
    return out


def test_zero_is_the_identity_and_the_slice_matches_a_trilinear_reference():
    g = torch.Generator().manual_seed(0)
    rgb = torch.rand(2, 6, 7, 3, generator=g, dtype=torch.float64)
    corr = AppearanceCorrection(3, "bilagrid", grid=GRID).double()
    assert corr.delta.shape == (3, 12 * 3 * 4 * 5)
    assert torch.allclose(corr(rgb, torch.tensor([0, 2])), rgb, atol=1e-15)
    with torch.no_grad():
        corr.delta.normal_(0.0, 0.3, generator=g)
    ids = torch.tensor([2, 1])
    out = corr(rgb, ids).detach().numpy()
    identity = np.eye(3, 4).reshape(12, 1, 1, 1)
    for c, i in enumerate(ids.tolist()):
        cells = corr.delta[i].detach().numpy().reshape(12, *GRID) + identity
        assert np.allclose(out[c], _trilinear_reference(rgb[c].numpy(), cells), atol=1e-12)


def test_a_grid_of_equal_cells_is_that_cells_affine_map():
    g = torch.Generator().manual_seed(1)
    rgb = torch.rand(1, 5, 9, 3, generator=g)
    D, b = 0.2 * torch.randn(3, 3, generator=g), 0.1 * torch.randn(3, generator=g)
    affine = AppearanceCorrection(1, "affine")
    grid = AppearanceCorrection(1, "bilagrid", grid=GRID)
    with torch.no_grad():
        affine.delta.copy_(torch.cat([D.reshape(-1), b])[None])
        cell = torch.cat([D, b[:, None]], dim=1).reshape(12, 1, 1, 1)  # rows [D | b]
        grid.delta.copy_(cell.expand(12, *GRID).reshape(1, -1))
    ids = torch.tensor([0])
    assert torch.allclose(grid(rgb, ids), affine(rgb, ids), atol=1e-6)
    assert float(grid.total_variation().detach()) == 0.0


def test_gradients_of_cells_and_render_match_finite_differences():
    g = torch.Generator().manual_seed(2)
    corr = AppearanceCorrection(2, "bilagrid", grid=(2, 3, 3)).double()
    with torch.no_grad():
        corr.delta.normal_(0.0, 0.2, generator=g)
    rgb = (0.15 + 0.7 * torch.rand(1, 4, 5, 3, generator=g, dtype=torch.float64)).requires_grad_()
    ids = torch.tensor([1])
    # The render enters twice (through the luminance that picks the cells, and through the map): both count.
    assert torch.autograd.gradcheck(lambda d, x: corr._slice(x, d[ids]), (corr.delta, rgb))


def test_total_variation_of_one_raised_cell():
    corr = AppearanceCorrection(1, "bilagrid", grid=GRID)
    with torch.no_grad():
        corr.delta.view(12, *GRID)[5, 1, 2, 3] = 1.0  # an interior cell: two neighbours along each axis
    L, GH, GW = GRID
    pairs = [(L - 1) * GH * GW, L * (GH - 1) * GW, L * GH * (GW - 1)]  # neighbour pairs per axis, per channel
    expected = sum(2.0 / (12 * n) for n in pairs)
    assert float(corr.total_variation().detach()) == pytest.approx(expected, rel=1e-6)
    assert float(AppearanceCorrection(1, "affine").total_variation().detach()) == 0.0
    with pytest.raises(ValueError, match="colour matrix per pixel"):
        corr.matrices(torch.tensor([0]))


def _grid_sample_3d(rgb: torch.Tensor, d: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """The slice as one trilinear 3-D ``grid_sample`` (x, y: pixel centres; z: clamped luminance)."""
    C, H, W, _ = rgb.shape
    cells = d.reshape(C, 12, *grid) + torch.eye(3, 4, dtype=rgb.dtype).reshape(1, 12, 1, 1, 1)
    x = (torch.arange(W, dtype=rgb.dtype) + 0.5) / W * 2 - 1
    y = (torch.arange(H, dtype=rgb.dtype) + 0.5) / H * 2 - 1
    luma = (rgb @ torch.tensor(LUMA, dtype=rgb.dtype)).clamp(0.0, 1.0) * 2 - 1
    coords = torch.stack([x.expand(C, H, W), y[:, None].expand(C, H, W), luma], dim=-1)
    A = torch.nn.functional.grid_sample(
        cells, coords[:, None], mode="bilinear", padding_mode="border", align_corners=True
    ).view(C, 3, 4, H, W)
    return ((A[:, :, :3] * rgb.permute(0, 3, 1, 2)[:, None]).sum(dim=2) + A[:, :, 3]).permute(0, 2, 3, 1)


@pytest.mark.parametrize("grid", [(8, 16, 16), GRID])
def test_slice_equals_a_3d_grid_sample_in_value_and_gradients(grid):
    """The row-then-2-D lookup (appearance.py) against one 3-D grid_sample, float32, at a size where
    grid rows and image rows do not line up; pixels at luminance exactly 0 and 1 (clamped: no slope
    through the luminance there) and beyond 1 included."""
    g = torch.Generator().manual_seed(3)
    corr = AppearanceCorrection(3, "bilagrid", grid=grid)
    with torch.no_grad():
        corr.delta.normal_(0.0, 0.2, generator=g)
    rgb0 = torch.rand(2, 29, 47, 3, generator=g)
    rgb0[0, 0, :4] = 0.0
    rgb0[0, 1, :4] = 1.0
    rgb0[1, 2, :4] = 1.3
    upstream = torch.randn(2, 29, 47, 3, generator=g)
    ids = torch.tensor([2, 0])
    found = []
    for fn in (lambda x: corr(x, ids), lambda x: _grid_sample_3d(x, corr.delta[ids], grid)):
        rgb = rgb0.clone().requires_grad_()
        corr.delta.grad = None
        out = fn(rgb)
        (out * upstream).sum().backward()
        found.append((out.detach(), rgb.grad, corr.delta.grad.clone()))
    (out, d_rgb, d_delta), (ref, ref_rgb, ref_delta) = found
    assert torch.allclose(out, ref, atol=2e-6)
    assert torch.allclose(d_rgb, ref_rgb, atol=1e-5 * float(ref_rgb.abs().max()))
    assert torch.allclose(d_delta, ref_delta, atol=1e-5 * float(ref_delta.abs().max()))
    assert float(d_delta.abs().max()) > 0.1  # the comparison saw real gradients
