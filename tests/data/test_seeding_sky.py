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
    noise = [
        _view((0, 0.05 * i, 0), (5, 0.05 * i, 0), torch.randint(0, 256, (H, W, 3), generator=g, dtype=torch.uint8), i)
        for i in range(5)
    ]
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


def test_mvs_auto_sweeps_enclosed_scenes_and_shells_open_ones(monkeypatch):
    """``mvs: auto``: views that look past the cloud into one flat sky get the shell and no sweep; the
    same views with the cloud filling them (a room) get the sweep and no shell."""
    import pointrix_lite.data.seeding.fusion as fusion

    views = [_view((0, 0.05 * i, 0), (5, 0.05 * i, 0), _flat((120, 160, 230)), i) for i in range(5)]
    swept = PointCloud(torch.full((7, 3), 2.0), torch.full((7, 3), 0.25))
    calls: list[int] = []

    def fake_sweep(cloud, train_views, cfg, seed, say):
        calls.append(len(cloud))
        return swept

    monkeypatch.setattr(fusion, "mvs_points", fake_sweep)

    class Data:
        train_views, scene_extent = views, 2.0

    below = torch.tensor([[3.0, 0.0, -1.0]])  # one point under the horizon: the sky above stays open
    y, z = torch.meshgrid(torch.linspace(-4, 4, 160), torch.linspace(-3, 3, 120), indexing="ij")
    room = torch.stack([torch.full_like(y, 3.0), y, z], dim=-1).reshape(-1, 3)  # a wall filling every view
    for cloud_xyz, enclosed in ((below, False), (room, True)):
        cloud = PointCloud(cloud_xyz, torch.full_like(cloud_xyz, 0.5))
        for sky in (200, 0):
            calls.clear()
            lines: list[str] = []
            out = seed_points(cloud, Data(), SeedingConfig(mvs="auto", sky=sky), seed=0, log=lines.append)
            assert torch.equal(out.xyz[: len(cloud)], cloud.xyz)
            if enclosed:
                assert calls == [len(cloud)] and len(out) == len(cloud) + len(swept)  # the sweep, no shell
                assert torch.equal(out.xyz[len(cloud) :], swept.xyz)
                assert "an enclosed scene: plane sweep, no shell" in lines[0]
            else:
                assert calls == [] and len(out) == len(cloud) + sky  # the shell (when asked for), no sweep
                asked = sky or 20_000  # with no shell asked for, auto judges a 20,000-point one
                assert lines[0].startswith(f"seeding: mvs auto: {asked:,} of {asked:,} shell directions are open")
                assert "an open scene: no plane sweep" in lines[0]
                if sky:  # the same shell as asked for without auto
                    alone = seed_points(cloud, Data(), SeedingConfig(sky=sky), seed=0, log=[].append)
                    assert (
                        torch.equal(out.xyz, alone.xyz)
                        and lines[1] == f"seeding: sky shell, {sky} points at radius 20.0 (10 x extent)"
                    )


def test_mvs_takes_true_false_or_auto():
    import pytest

    from pointrix_lite.config import from_dict
    from pointrix_lite.errors import ConfigError

    assert from_dict(SeedingConfig, {"mvs": "auto"}, "model.seeding").mvs == "auto"
    assert from_dict(SeedingConfig, {"mvs": True}, "model.seeding").mvs is True
    with pytest.raises(ConfigError, match=r"^model\.seeding\.mvs: expected .*got 'sometimes'$"):
        from_dict(SeedingConfig, {"mvs": "sometimes"}, "model.seeding")
    with pytest.raises(ConfigError, match=r"^model\.seeding\.mvs: auto tells open scenes by the sky shell's tests"):
        from_dict(SeedingConfig, {"mvs": "auto", "sky_max_spread": 1.0}, "model.seeding")
    with pytest.raises(ConfigError, match=r"^model\.seeding\.mvs: must be true, false or auto, got 'Auto'$"):
        SeedingConfig(mvs="Auto")  # built in Python, past the YAML's type check
