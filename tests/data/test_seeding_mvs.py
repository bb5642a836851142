"""model.seeding.mvs: plane-sweep points land on the true surfaces of a known scene, where the cloud had none."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pointrix_lite.config import ConfigError, from_dict
from pointrix_lite.data.demo.raycast import trace
from pointrix_lite.data.demo.scene import build_scene
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.data.seeding import SeedingConfig, plane_sweep, seed_points
from pointrix_lite.registry import DATASETS

SIZE = 96  # the sweep's long side: 160 px demo views at 0.6x


@pytest.fixture(scope="module")
def demo(demo_root):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(demo_root / "colmap")}, "dataset")


class _Scene:
    """The data set's training views (every third) and its cloud cut to the table: the five objects
    have no point, as untextured or thin objects have none after SfM."""

    def __init__(self, dataset, keep_cloud=lambda xyz: xyz[:, 2] < 0.02):
        self.train_views = dataset.train_views[::3]
        self.scene_extent = dataset.scene_extent
        cloud = dataset.point_cloud
        keep = keep_cloud(cloud.xyz)
        self.point_cloud = PointCloud(cloud.xyz[keep], cloud.rgb[keep])


def _surface_error(xyz: np.ndarray, views) -> tuple[np.ndarray, np.ndarray]:
    """Distance of each point from the demo scene's surface along the rays of its 4 nearest cameras
    (the smallest: a camera may see the point's surface behind something else), and the point's distance
    to its nearest camera."""
    prims = build_scene()
    centres = np.stack([v.camera.camera_center.double().numpy() for v in views])
    d2 = ((xyz[:, None] - centres[None]) ** 2).sum(-1)
    err = np.full(len(xyz), np.inf)
    for j in range(4):
        c = centres[np.argsort(d2, 1)[:, j]]
        ray = xyz - c
        dist = np.linalg.norm(ray, axis=1)
        err = np.minimum(err, np.abs(dist - trace(prims, c, ray / dist[:, None]).t))
    return err, np.sqrt(d2.min(1))


@pytest.mark.parametrize("views", [0, 7], ids=["all views", "7 views spread"])
def test_points_land_on_the_surfaces_the_cloud_missed(demo, views):
    scene = _Scene(demo)
    cfg = SeedingConfig(mvs=True, mvs_size=SIZE, mvs_max_points=0, mvs_views=views)
    lines = []
    out = seed_points(scene.point_cloud, scene, cfg, seed=0, log=lines.append)
    n_cloud = len(scene.point_cloud)
    assert torch.equal(out.xyz[:n_cloud], scene.point_cloud.xyz)  # the cloud comes first, unchanged
    added = out.xyz[n_cloud:].double().numpy()
    assert f"{len(added):,} points added" in lines[-1]
    assert len(lines) == 1 if views == 0 else lines[0].startswith(f"seeding: {views} of {len(scene.train_views)}")
    err, dist = _surface_error(added, scene.train_views)
    fx = scene.train_views[0].camera.fx * SIZE / scene.train_views[0].camera.width
    footprint = dist / fx  # one reduced pixel at the point's distance
    on_surface = err < 2 * footprint
    # Window matching on fronto-parallel planes: most points within a pixel or two of the surface, a tail
    # at depth edges (where a patch holds both sides); training moves a seed that far in a few steps.
    assert on_surface.mean() > 0.75 and (err < 4 * footprint).mean() > 0.9, np.quantile(err / footprint, [0.5, 0.9])
    on_objects = on_surface & (added[:, 2] > 0.05)  # the table top is z = 0
    # the objects were seeded, not only the table around the cloud's points; with half the views fewer
    # depths agree in a voxel (the reason mvs_views: auto keeps every view of a sparse capture)
    assert on_objects.sum() > (500 if views == 0 else 50)
    assert ((out.rgb >= 0) & (out.rgb <= 1)).all()


def test_flat_images_give_no_points(demo):
    """A patch without texture matches at every depth: nothing is seeded from it."""
    scene = _Scene(demo)
    scene.train_views = [replace(v, image=torch.full_like(v.image, 128)) for v in scene.train_views]
    out = seed_points(scene.point_cloud, scene, SeedingConfig(mvs=True, mvs_size=SIZE), seed=0)
    assert len(out) == len(scene.point_cloud)


def test_max_points_and_determinism(demo):
    scene = _Scene(demo)
    cfg = SeedingConfig(mvs=True, mvs_size=64, mvs_max_points=300)
    a = seed_points(scene.point_cloud, scene, cfg, seed=3)
    b = seed_points(scene.point_cloud, scene, cfg, seed=3)
    assert len(a) == len(scene.point_cloud) + 300
    assert torch.equal(a.xyz, b.xyz) and torch.equal(a.rgb, b.rgb)


def test_box_filter_equals_avg_pool():
    """The running-sum box filter against torch's pooling with the border's patches cut."""
    g = torch.Generator().manual_seed(0)
    for h, w in ((40, 57), (5, 9), (3, 30)):
        x = torch.rand(2, 1, h, w, generator=g, dtype=torch.float64)
        ref = F.avg_pool2d(x, plane_sweep.WINDOW, 1, plane_sweep.WINDOW // 2, count_include_pad=False)
        torch.testing.assert_close(plane_sweep._box(x), ref, rtol=0, atol=1e-12)


def test_options_are_checked():
    with pytest.raises(ConfigError, match=r"^model\.seeding\.mvs_depths: must be >= 2, got 1$"):
        from_dict(SeedingConfig, {"mvs": True, "mvs_depths": 1}, "model.seeding")
    with pytest.raises(ConfigError, match=r"^model\.seeding\.sky_radius"):
        from_dict(SeedingConfig, {"sky": 10, "sky_radius": 0.5}, "model.seeding")


def test_far_depths_are_merged_in_voxels_of_their_own_footprint():
    """A far surface's depths (each covering 4 median footprints) land one per median-sized voxel; merged
    in voxels of their own size they reach ``MIN_HITS`` and seed it. Near depths keep the median grid."""
    from pointrix_lite.data.seeding import fusion

    g = torch.Generator().manual_seed(0)
    f = 0.01  # the median footprint: most depths are near
    near = torch.rand(6000, 3, generator=g, dtype=torch.float64) * torch.tensor([0.2, 0.2, 0.0])
    far = torch.rand(900, 3, generator=g, dtype=torch.float64) * torch.tensor([0.96, 0.96, 0.0])
    far[:, 2] = 5.0
    xyz = torch.cat([near, far])
    footprint = torch.cat([torch.full((6000,), f), torch.full((900,), 4 * f)]).double()
    cloud = PointCloud(torch.tensor([[50.0, 50.0, 50.0]]), torch.zeros(1, 3))
    rgb = torch.rand(len(xyz), 3, generator=g, dtype=torch.float64)
    out = fusion._thin(xyz, rgb, footprint, torch.ones(len(xyz)), torch.ones(len(xyz), dtype=torch.bool), cloud, 0, 0)
    out_far = out.xyz[out.xyz[:, 2] > 1]
    # One median-sized voxel per far depth on average (900 depths over 96 x 96 cells): almost none reach 3.
    cells = torch.unique(torch.floor(far / f).long(), dim=0, return_counts=True)[1]
    assert int((cells >= fusion.MIN_HITS).sum()) < 10
    # In 4f voxels: 24 x 24 cells, ~1.6 depths each, Poisson: about a fifth reach 3.
    big = torch.unique(torch.floor(far / (4 * f)).long(), dim=0, return_counts=True)[1]
    assert len(out_far) == int((big >= fusion.MIN_HITS).sum()) > 50
    # The near patch: exactly the median grid's voxels with 3 or more depths.
    cells, counts = torch.unique(torch.floor(near / f).long(), dim=0, return_counts=True)
    assert int((out.xyz[:, 2] < 1).sum()) == int((counts >= fusion.MIN_HITS).sum())
    # Depths on a dominant plane count 1.5 (confirmed twice already): two of them make a voxel.
    on_plane = torch.zeros(900, dtype=torch.bool)
    plane = fusion._thin(far, rgb[6000:], footprint[6000:], torch.full((900,), fusion.PLANE_HIT), on_plane, cloud, 0, 0)
    assert len(plane) == int((big >= 2).sum()) > len(out_far)


def test_the_point_budget_goes_to_the_sweeps_voxels_first():
    """Over ``mvs_max_points``, voxels holding a sweep depth are all kept and the planes' fill the rest: a
    floor seeded densely by a plane must not crowd out the few points a pole got from the sweep."""
    from pointrix_lite.data.seeding import fusion

    g = torch.Generator().manual_seed(0)
    f = 0.01
    cells = torch.stack(torch.meshgrid(torch.arange(40.0), torch.arange(40.0), indexing="ij"), -1).reshape(-1, 2)
    xyz = torch.cat([(cells + 0.5) * f, torch.zeros(1600, 1)], 1).double().repeat_interleave(3, 0)  # 3 depths a voxel
    swept = torch.zeros(len(cells), dtype=torch.bool)
    swept[torch.randperm(len(cells), generator=g)[:100]] = True  # 100 voxels the sweep saw, 1,500 only a plane
    swept = swept.repeat_interleave(3)
    cloud = PointCloud(torch.tensor([[50.0, 50.0, 50.0]]), torch.zeros(1, 3))
    rgb = torch.rand(len(xyz), 3, generator=g, dtype=torch.float64)
    footprint = torch.full((len(xyz),), f, dtype=torch.float64)
    out = fusion._thin(xyz, rgb, footprint, torch.ones(len(xyz)), swept, cloud, 300, 0)
    assert len(out) == 300
    kept = {tuple(c) for c in torch.floor(out.xyz.double() / f).long()[:, :2].tolist()}
    wanted = {tuple(c) for c in torch.floor(xyz[swept] / f).long()[:, :2].tolist()}
    assert len(wanted) == 100 and wanted <= kept
    # Under the budget nothing is dropped, with or without sweep depths.
    assert len(fusion._thin(xyz, rgb, footprint, torch.ones(len(xyz)), swept, cloud, 0, 0)) == 1600
