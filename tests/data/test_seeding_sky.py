"""model.seeding.sky: shell points at the radius, only where the training views look, coloured by them."""

from __future__ import annotations

import numpy as np
import torch

from pointrix_lite.data.cameras import Camera, View, look_at
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.data.seeding import SeedingConfig, seed_points
from pointrix_lite.data.seeding.sky import open_map, project, sky_points
from pointrix_lite.progress import PHASES

W, H, F = 64, 48, 50.0  # 65 x 51 degree field of view: the +x and +y views below do not overlap


def _view(eye, target, image: torch.Tensor, index: int) -> View:
    viewmat = torch.from_numpy(look_at(np.asarray(eye, float), np.asarray(target, float))).float()
    return View(Camera(F, F, W / 2, H / 2, W, H, viewmat), image, f"v{index}", index)


def _flat(rgb) -> torch.Tensor:
    return torch.tensor(rgb, dtype=torch.uint8).expand(H, W, 3).clone()


def _views() -> list[View]:
    """Two cameras near the origin, one looking along +x (all red), one along +y (all green)."""
    red, green = _flat((200, 10, 10)), _flat((10, 200, 10))
    return [_view((0.1, 0, 0), (5, 0, 0), red, 0), _view((0, 0.1, 0), (0, 5, 0), green, 1)]


def _sky(views, n=600, radius=10.0, extent=2.0, seed=0, lines=None):
    """The shell without the colour-agreement test (these views do not overlap: one view per point)."""
    cfg = SeedingConfig(sky=n, sky_radius=radius, sky_max_spread=1.0)
    return sky_points(views, extent, cfg, seed, (lines if lines is not None else []).append)


def test_points_lie_on_the_shell_in_the_views_and_nowhere_else():
    views = _views()
    lines: list[str] = []
    cloud = _sky(views, lines=lines)
    assert len(cloud) == 600 and cloud.xyz.dtype == torch.float32 and cloud.rgb.shape == (600, 3)
    centre = torch.stack([v.camera.camera_center for v in views]).mean(0)
    assert torch.allclose((cloud.xyz - centre).norm(dim=1), torch.tensor(20.0), rtol=1e-5)  # 10 x extent 2
    seen = torch.stack([project(v, cloud.xyz.double())[2] for v in views])
    assert seen.any(0).all()  # every point is in some view ...
    assert not (seen.all(0)).any()  # ... and these two views share none
    d = cloud.xyz - centre
    assert not ((d[:, 0] < 0) & (d[:, 1] < 0)).any()  # nothing behind both cameras
    # Both views get a share of the points in proportion to the solid angle they see (equal here).
    assert abs(int(seen[0].sum()) - int(seen[1].sum())) < 0.1 * len(cloud)
    assert lines == ["seeding: sky shell, 600 points at radius 20.0 (10 x extent)"]


def test_colours_come_from_the_views_that_see_the_point():
    views = _views()
    cloud = _sky(views)
    seen_by_x = project(views[0], cloud.xyz.double())[2]
    assert torch.allclose(cloud.rgb[seen_by_x], torch.tensor([200, 10, 10]) / 255.0)
    assert torch.allclose(cloud.rgb[~seen_by_x], torch.tensor([10, 200, 10]) / 255.0)
    # A gradient: each point gets the pixel it projects to (one view: the median is that pixel).
    u, v = torch.meshgrid(torch.arange(W), torch.arange(H), indexing="xy")
    grad = torch.stack([u * 4, v * 5, 255 - u * 4], dim=-1).to(torch.uint8)
    gview = _view((0, 0, 0), (5, 0, -5), grad, 0)
    cloud = _sky([gview], n=300)
    col, row, inside = project(gview, cloud.xyz.double())
    assert inside.all()
    assert torch.allclose(cloud.rgb, grad[row, col].float() / 255.0)


def test_deterministic_and_added_after_the_cloud():
    views = _views()
    a, b = _sky(views, seed=3), _sky(views, seed=3)
    assert torch.equal(a.xyz, b.xyz) and torch.equal(a.rgb, b.rgb)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    _sky(views, seed=3)
    assert torch.equal(torch.rand(1), before)  # the global generator is untouched

    class Data:
        train_views, scene_extent = views, 2.0

    cloud = PointCloud(torch.zeros(5, 3), torch.full((5, 3), 0.5))
    lines: list[str] = []
    before = PHASES.seconds.get("seeding", 0.0)
    out = seed_points(cloud, Data(), SeedingConfig(sky=250, sky_max_spread=1.0), seed=1, log=lines.append)
    assert len(out) == 255 and torch.equal(out.xyz[:5], cloud.xyz) and len(lines) == 1
    assert PHASES.seconds["seeding"] > before  # timed with the sweep: runs compared at equal time pay for it


def test_directions_whose_views_disagree_on_the_colour_are_dropped():
    """Five cameras side by side, looking along +x: the top half of every image is the same flat sky,
    the bottom half independent noise per view (the scene, seen with parallax). Only the sky keeps points."""
    g = torch.Generator().manual_seed(0)
    views = []
    for i in range(5):
        image = _flat((120, 160, 230))
        image[H // 2 :] = torch.randint(0, 256, (H - H // 2, W, 3), generator=g, dtype=torch.uint8)
        views.append(_view((0, 0.05 * i, 0), (5, 0.05 * i, 0), image, i))
    lines: list[str] = []
    cloud = sky_points(views, 2.0, SeedingConfig(sky=300), 0, lines.append)
    assert len(cloud) == 300 and lines == ["seeding: sky shell, 300 points at radius 20.0 (10 x extent)"]
    for view in views:
        _, row, inside = project(view, cloud.xyz.double())
        assert (row[inside] < H // 2 + 1).all()  # none where the views see noise
    assert torch.allclose(cloud.rgb, torch.tensor([120, 160, 230]) / 255.0)
    everything = sky_points(views, 2.0, SeedingConfig(sky=300, sky_max_spread=1.0), 0, lines.append)
    _, row, _ = project(views[2], everything.xyz.double())
    assert (row >= H // 2 + 1).float().mean() > 0.3  # without the test, the noisy half gets its share
    # Fewer agreeing directions than asked for: the shell gets those, and the line says so.
    noise = [_view((0, 0.05 * i, 0), (5, 0.05 * i, 0), torch.randint(0, 256, (H, W, 3), generator=g,
                   dtype=torch.uint8), i) for i in range(5)]  # fmt: skip
    lines.clear()
    assert len(sky_points(noise, 2.0, SeedingConfig(sky=300), 0, lines.append)) < 300
    assert "directions are open to the views and have colours they agree on within sky_max_spread=0.02" in lines[0]


def test_directions_where_the_views_see_the_cloud_are_dropped():
    """Flat colour everywhere (every direction agrees), but the initial cloud fills the lower half of
    the views: a wall in front of the shell there. Only the open upper half keeps shell points."""
    views = [_view((0, 0.05 * i, 0), (5, 0.05 * i, 0), _flat((120, 160, 230)), i) for i in range(5)]
    y, z = torch.meshgrid(torch.linspace(-3, 3, 120), torch.linspace(-2.5, -0.05, 50), indexing="ij")
    wall = torch.stack([torch.full_like(y, 3.0), y, z], dim=-1).reshape(-1, 3)  # x = 3, below the horizon
    cloud = sky_points(views, 2.0, SeedingConfig(sky=300), 0, [].append, cloud=wall)
    assert len(cloud) == 300
    for view in views:
        _, row, inside = project(view, cloud.xyz.double())
        assert (row[inside] < H // 2).all()  # nothing behind the wall (image rows >= H/2 look below z = 0)
    everywhere = sky_points(views, 2.0, SeedingConfig(sky=300), 0, [].append)  # no cloud given: colours only
    _, row, inside = project(views[2], everywhere.xyz.double())
    assert (row[inside] >= H // 2 + 2).float().mean() > 0.3
    # The map itself: a point's cell and its neighbours are closed, the rest open.
    view = views[0]
    point = torch.tensor([[5.0, 0.0, 0.0]], dtype=torch.float64)  # on the optical axis: pixel (32, 24)
    col, row, _ = project(view, point)
    assert (int(col), int(row)) == (W // 2, H // 2)
    open_ = open_map(view, point)
    cell = 2  # ceil(64 / 32)
    assert not open_[H // 2 - cell : H // 2 + 2 * cell, W // 2 - cell : W // 2 + 2 * cell].any()
    assert int((~open_).sum()) == (3 * cell) ** 2 and bool(open_[0, 0])


def test_no_shell_in_the_background_colour():
    """An object capture on white: the renderer draws the white already, so the shell adds nothing there."""
    views = [_view((0, 0.05 * i, 0), (5, 0.05 * i, 0), _flat((255, 255, 255)), i) for i in range(5)]
    lines: list[str] = []
    assert len(sky_points(views, 2.0, SeedingConfig(sky=100), 0, lines.append, background=(1.0, 1.0, 1.0))) == 0
    assert "sky shell, 0 points" in lines[0]
    assert len(sky_points(views, 2.0, SeedingConfig(sky=100), 0, lines.append, background=(0.0, 0.0, 0.0))) == 100
