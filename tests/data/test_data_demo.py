"""The procedural demo scene: both layouts agree, generation is deterministic, geometry is consistent."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import tree_hash

from pointrix_lite.data.demo import ensure_demo, generate_demo
from pointrix_lite.data.demo.raycast import Box, Cone, Cylinder, Sphere, trace
from pointrix_lite.registry import DATASETS


@pytest.fixture(scope="module")
def both(demo_root):
    nerf = DATASETS.build({"type": "NerfSyntheticDataset", "data_path": str(demo_root / "nerf_synthetic")})
    colmap = DATASETS.build({"type": "ColmapDataset", "data_path": str(demo_root / "colmap"), "white_background": True})
    return nerf, colmap


def test_layouts_load_to_same_views_and_points(both):
    nerf, colmap = both
    assert (len(nerf.train_views), len(nerf.test_views), len(nerf.val_views)) == (42, 6, 6)
    for split in ("train_views", "val_views", "test_views"):
        for a, b in zip(getattr(nerf, split), getattr(colmap, split), strict=True):
            assert a.name == b.name and a.index == b.index
            assert torch.allclose(a.camera.viewmat, b.camera.viewmat, atol=1e-5)
            assert torch.allclose(a.camera.K, b.camera.K, atol=1e-5)
            assert (a.camera.width, a.camera.height) == (b.camera.width, b.camera.height) == (160, 160)
            assert torch.equal(a.image, b.image)
    assert [v.name for v in nerf.test_views] == [f"r_{i:03d}" for i in range(0, 48, 8)]
    assert torch.equal(nerf.point_cloud.xyz, colmap.point_cloud.xyz)
    assert torch.equal(nerf.point_cloud.rgb, colmap.point_cloud.rgb)
    assert 2000 <= len(nerf.point_cloud) <= 6000
    assert nerf.scene_extent == pytest.approx(colmap.scene_extent, rel=1e-6)
    assert nerf.background == colmap.background == (1.0, 1.0, 1.0)


def test_images_have_detail(both):
    nerf, _ = both
    img = nerf.train_views[0].image.numpy()
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 2000  # textured, shaded: many distinct colours
    assert 0.1 < (img.min(-1) < 250).mean() < 0.95  # the scene fills part, not all, of the frame


def test_points_reproject_onto_their_colours(both):
    """End-to-end check of camera conventions: SfM points land on pixels of their own colour."""
    nerf, _ = both
    xyz = torch.cat([nerf.point_cloud.xyz.double(), torch.ones(len(nerf.point_cloud), 1, dtype=torch.float64)], 1)
    errs = []
    for view in nerf.test_views:
        cam = view.camera
        pc = (cam.viewmat.double() @ xyz.T)[:3]
        uv = (cam.K.double() @ pc)[:2] / pc[2]
        j, i = uv[0].floor().long(), uv[1].floor().long()
        ok = (pc[2] > 0) & (j >= 0) & (j < cam.width) & (i >= 0) & (i < cam.height)
        pix = view.float_image()[i[ok], j[ok]].double()
        errs.append((pix - nerf.point_cloud.rgb[ok].double()).abs().mean(-1))
    err = torch.cat(errs)
    # Occluded points and edges miss, but most must match; a flipped axis or wrong K gives ~0.3 median.
    assert err.median() < 0.06, float(err.median())


def test_generation_is_deterministic(demo_root, tmp_path):
    generate_demo(tmp_path / "again")
    assert tree_hash(tmp_path / "again") == tree_hash(demo_root)


def test_ensure_demo_keeps_existing_and_leaves_no_temp(tmp_path):
    (tmp_path / "demo").mkdir()
    ensure_demo(tmp_path / "demo")  # exists: must not regenerate (it would take seconds and fail on mkdir)
    assert list((tmp_path / "demo").iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


def test_ray_caster_primitives_by_hand():
    o = np.array([[0.0, 0.0, 5.0], [3.0, 0.0, 0.5], [0.0, 0.0, 5.0], [2.0, 2.0, 5.0]])
    d = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 0.0, -1.0]])
    tex = lambda p: p  # noqa: E731
    np.testing.assert_allclose(Sphere(tex, center=(0, 0, 1.2), radius=0.5).intersect(o, d)[:3], [3.3, np.inf, 3.3])
    cyl = Cylinder(tex, base=(0.0, 0.0), radius=0.5, height=1.0)
    np.testing.assert_allclose(cyl.intersect(o, d)[:2], [4.0, 2.5])  # top cap, then side
    cone = Cone(tex, base=(0.0, 0.0), radius=1.0, height=1.0)
    np.testing.assert_allclose(cone.intersect(o, d)[:2], [4.0, 2.5])  # apex; side at z=0.5 has radius 0.5
    box = Box(tex, center=(0, 0, 0.5), half=(0.5, 0.5, 0.5), yaw=np.pi / 4)
    np.testing.assert_allclose(box.intersect(o, d)[:2], [4.0, 3.0 - 0.5 * np.sqrt(2)])
    np.testing.assert_allclose(box.normal(np.array([[0.0, 0.0, 1.0]])), [[0.0, 0.0, 1.0]], atol=1e-12)
    hits = trace([cyl, Sphere(tex, center=(0, 0, 1.2), radius=0.3)], o, d)
    assert hits.index.tolist() == [1, 0, 1, -1]
