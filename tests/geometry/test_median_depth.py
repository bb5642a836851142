"""Median depth (torch_backend.median_depth, geometry/maps.py) against the dense reference and at a depth edge."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.data.cameras import Camera
from pointrix_lite.geometry.maps import normals_from_depth, view_maps
from pointrix_lite.renderer import GaussianRenderer
from pointrix_lite.renderer.options import RasterOptions
from pointrix_lite.renderer.torch_backend import median_depth
from tests.geometry.test_maps import SIZE
from tests.renderer.dense_reference import dense_render, random_scene


@pytest.mark.parametrize("rasterize_mode", ["classic", "antialiased"])
@pytest.mark.parametrize("pair_budget", [1 << 21, 600])  # 600: a tile's list walked a few entries at a time
def test_median_depth_matches_the_sequential_reference(rasterize_mode: str, pair_budget: int) -> None:
    s = random_scene(seed=11, n=300, dtype=torch.float64)
    s["opacities"] = s["opacities"].sqrt()  # more pixels past one half, and a few that stay below it
    args = [s[k] for k in ("means", "quats", "scales", "opacities")]
    options = RasterOptions(s["width"], s["height"], rasterize_mode=rasterize_mode)
    got = median_depth(*args, s["viewmats"], s["Ks"], options, pair_budget=pair_budget)
    _, alphas, meta = dense_render(
        *args, s["colors"], s["viewmats"], s["Ks"], s["width"], s["height"], rasterize_mode=rasterize_mode,
        return_meta=True,
    )  # fmt: skip
    want = meta["median_depth"]
    assert got.shape == want.shape == (3, s["height"], s["width"])
    past_half = alphas[..., 0] > 0.5
    assert past_half.float().mean() > 0.3 and (~past_half).any(), "the scene must test both cases"
    assert ((want > 0) == past_half).all()  # the reference's own rule, so the comparison below means something
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    # with the render's alphas the pixels that stay below one half are not walked: the same map
    spared = median_depth(*args, s["viewmats"], s["Ks"], options, alphas[..., 0], pair_budget=pair_budget)
    torch.testing.assert_close(spared, want, rtol=1e-10, atol=1e-10)


class TwoSquares:
    """Opaque flat Gaussians on two planes facing the camera: a square at z = 0 in front of one at z = -2,
    so a depth edge runs round the near square."""

    def __init__(self) -> None:
        parts = []
        for half, z, step in ((0.7, 0.0, 0.05), (3.6, -2.0, 0.1)):
            xs = torch.arange(-half, half + 1e-6, step)
            gx, gy = torch.meshgrid(xs, xs, indexing="ij")
            parts.append(torch.stack([gx.ravel(), gy.ravel(), torch.full((gx.numel(),), z)], -1))
        self.means = torch.cat(parts)
        n = len(self.means)
        self.quats = torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(n, 4).clone()
        self.scales = torch.where(self.means[:, 2:] == 0, 0.03, 0.06).expand(n, 2)
        self.scales = torch.cat([self.scales, torch.full((n, 1), 1e-3)], -1)

    def render_params(self) -> dict:
        n = len(self.means)
        return {"means": self.means, "quats": self.quats, "scales": self.scales,
                "opacities": torch.full((n,), 0.99), "colors": torch.full((n, 1, 3), 0.5), "sh_degree": 0}  # fmt: skip


def test_median_depth_keeps_a_depth_edge_that_expected_depth_ramps() -> None:
    # 4 above the near square looking down -z, head on: every centre of a plane at one depth
    viewmat = torch.tensor([[1.0, 0, 0, 0], [0, -1, 0, 0], [0, 0, -1, 4], [0, 0, 0, 1]])
    cam = Camera(60.0, 60.0, SIZE / 2, SIZE / 2, SIZE, SIZE, viewmat, "above")
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="torch"))
    maps = view_maps(TwoSquares(), renderer, cam, (1.0, 1.0, 1.0), gaussian_normals=False, median=True)
    assert maps["median_depth"].shape == (SIZE, SIZE)
    near, far = 4.0, 6.0
    covered = maps["alpha"] > 0.99
    assert covered.float().mean() > 0.9
    median, expected = maps["median_depth"][covered], maps["depth"][covered]
    on_a_plane = ((median - near).abs() < 1e-4) | ((median - far).abs() < 1e-4)
    assert on_a_plane.all()
    assert (median == near).sum() > 50 and (median == far).sum() > 50
    between = (expected > near + 0.05) & (expected < far - 0.05)
    assert between.sum() >= 20, "expected depth should ramp across the edge"
    # mesh.py --depth median: the depth normals are the median depth's (the same map, not a second walk)
    with_median = view_maps(TwoSquares(), renderer, cam, (1.0, 1.0, 1.0), gaussian_normals=False, normals_of="median")
    torch.testing.assert_close(with_median["median_depth"], maps["median_depth"], rtol=0, atol=0)
    K = cam.K.to(maps["depth"])
    torch.testing.assert_close(with_median["normal_depth"], normals_from_depth(maps["median_depth"], K))
    assert not torch.allclose(with_median["normal_depth"], maps["normal_depth"])
