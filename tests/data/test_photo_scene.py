"""The photo benchmark scene: COLMAP files, cameras, texture detail, split, determinism, atomic generation.

Generated small (160 x 120, 10 views); the benchmark's 400 x 300 x 56 differs only in the size arguments.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from data_helpers import tree_hash
from scipy.spatial.transform import Rotation

from pointrix_lite.data.demo import photo
from pointrix_lite.data.demo.photo import build_photo_scene, ensure_photo_scene, generate_photo_scene, photo_cameras
from pointrix_lite.data.demo.photo_texture import Mip, bilinear, photo_path
from pointrix_lite.data.demo.raycast import Room, trace
from pointrix_lite.data.demo.scene import build_scene, camera_rays, render
from pointrix_lite.errors import DataError
from pointrix_lite.io.colmap import read_model
from pointrix_lite.io.images import read_image
from pointrix_lite.registry import DATASETS

W, H, N = 160, 120, 10


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("photo") / "scene"
    generate_photo_scene(out, n_views=N, width=W, height=H)
    return out


def expected_eye(i: int) -> np.ndarray:
    """Where the scene's docs put camera ``i``: 3.6 from (0, 0, 0.35), azimuth 0.3 + 2 pi i / n,
    elevation 24 + 14 sin(2.4 i) degrees (written out here, not taken from the generator)."""
    az, el = 0.3 + 2 * math.pi * i / N, math.radians(24 + 14 * math.sin(2.4 * i))
    direction = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    return np.array([0, 0, 0.35]) + 3.6 * direction


def project(model, image, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pinhole projection [N, 3] -> pixels [N, 2], depth [N], with the quaternion read by scipy."""
    qw, qx, qy, qz = image.qvec
    R = Rotation.from_quat([qx, qy, qz, qw]).as_matrix()
    pc = xyz @ R.T + image.tvec
    fx, fy, cx, cy = model.cameras[image.camera_id].params
    return np.stack([fx * pc[:, 0] / pc[:, 2] + cx, fy * pc[:, 1] / pc[:, 2] + cy], axis=1), pc[:, 2]


def test_colmap_model_holds_the_intended_cameras(small):
    model = read_model(small / "colmap" / "sparse" / "0")
    (cam,) = model.cameras.values()
    assert (cam.model, cam.width, cam.height) == ("PINHOLE", W, H)
    np.testing.assert_allclose(cam.params, [160.0, 160.0, 80.0, 60.0])  # 53 deg wide at any size; centre (W/2, H/2)
    images = sorted(model.images.values(), key=lambda im: im.name)
    assert [im.name for im in images] == [f"r_{i:03d}.png" for i in range(N)]
    target = np.array([[0.0, 0.0, 0.35], [0.0, 0.0, 1.35], [1.0, 0.0, 0.35]])
    for i, im in enumerate(images):
        R = Rotation.from_quat([*im.qvec[1:], im.qvec[0]]).as_matrix()
        np.testing.assert_allclose(-R.T @ im.tvec, expected_eye(i), atol=1e-9)
        uv, depth = project(model, im, target)
        np.testing.assert_allclose(uv[0], [80.0, 60.0], atol=1e-9)  # looks at the target
        assert uv[1, 1] < 60.0 and abs(uv[1, 0] - 80.0) < 1e-9  # world up is up in the image, no roll
        assert (depth > 0).all()


def test_ray_cast_hits_project_back_onto_their_pixels(small):
    """The rays that rendered the images and the written K and pose agree (non-square: cx/cy, fx/fy)."""
    model = read_model(small / "colmap" / "sparse" / "0")
    prims = [d.prim for d in build_photo_scene().decals]
    rng = np.random.default_rng(3)
    for cam, im in zip(photo_cameras(N, W, H), sorted(model.images.values(), key=lambda im: im.name), strict=True):
        u, v = rng.random(200) * W, rng.random(200) * H
        hits = trace(prims, *camera_rays(cam, u, v))
        assert (hits.index >= 0).all()  # walls and floor fill every view: no background
        uv, _ = project(model, im, hits.points)
        np.testing.assert_allclose(uv, np.stack([u, v], axis=1), atol=1e-6)


def test_points_reproject_onto_their_colours(small):
    ds = DATASETS.build({"type": "ColmapDataset", "data_path": str(small / "colmap")}, "dataset")
    cloud = ds.point_cloud
    assert len(cloud) == N * photo.POINTS_PER_VIEW  # every sampled ray hits a surface
    xyz = torch.cat([cloud.xyz.double(), torch.ones(len(cloud), 1, dtype=torch.float64)], 1)
    errs = []
    for view in ds.train_views + ds.test_views:
        cam = view.camera
        pc = (cam.viewmat.double() @ xyz.T)[:3]
        uv = (cam.K.double() @ pc)[:2] / pc[2]
        j, i = uv[0].floor().long(), uv[1].floor().long()
        ok = (pc[2] > 0) & (j >= 0) & (j < cam.width) & (i >= 0) & (i < cam.height)
        errs.append((view.float_image()[i[ok], j[ok]].double() - cloud.rgb[ok].double()).abs().mean(-1))
    err = torch.cat(errs)
    # Occluded points miss and photos vary within a pixel; a flipped axis or swapped cx/cy gives ~0.2.
    assert err.median() < 0.06, float(err.median())


def test_dataset_loads_with_the_test_split(small):
    ds = DATASETS.build({"type": "ColmapDataset", "data_path": str(small / "colmap")}, "dataset")
    assert [v.name for v in ds.test_views] == ["r_000", "r_008"]
    assert len(ds.train_views) == 8 and [v.name for v in ds.val_views] == ["r_000", "r_008"]
    view = ds.train_views[0]
    assert view.image.shape == (H, W, 3) and (view.camera.width, view.camera.height) == (W, H)
    assert (view.camera.cx, view.camera.cy) == (80.0, 60.0)
    assert ds.background == (0.0, 0.0, 0.0)


def typical_detail(img: np.ndarray) -> float:
    """Median |4-neighbour Laplacian| of the grey image in [0, 1]: detail in the typical pixel.

    The median, not the mean square, which a few strong silhouette edges on a plain background dominate.
    """
    g = img.astype(np.float64).mean(-1) / 255.0
    lap = 4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:]
    return float(np.median(np.abs(lap)))


def test_images_are_photo_textured(small):
    cams = photo_cameras(N, W, H)
    demo = build_scene()
    photo_detail, demo_detail = [], []
    for i in (1, 4):
        img = read_image(small / "colmap" / "images" / f"r_{i:03d}.png")
        assert img.shape == (H, W, 3)
        photo_detail.append(typical_detail(img))
        # The demo's objects seen by the same camera at the same size.
        demo_img = np.clip(np.rint(render(demo, cams[i]) * 255.0), 0, 255).astype(np.uint8)
        demo_detail.append(typical_detail(demo_img))
    assert np.mean(photo_detail) > 4 * np.mean(demo_detail), (photo_detail, demo_detail)


def test_full_size_views_see_one_to_two_texels_per_pixel():
    """At 400 x 300 the surfaces in view carry about 1-2 photo pixels per image pixel (sparse rays)."""
    scene = build_photo_scene()
    prims = [d.prim for d in scene.decals]
    rng = np.random.default_rng(0)
    medians = []
    for cam in photo_cameras()[::4]:
        o, d = camera_rays(cam, rng.random(500) * cam.width, rng.random(500) * cam.height)
        hits = trace(prims, o, d)
        ratio = np.empty(len(o))
        for k, decal in enumerate(scene.decals):
            sel = hits.index == k
            if sel.any():
                face, _, _ = decal.uv(hits.points[sel])
                texel = np.array([f.texel for f in decal.faces])[face]
                cos = np.abs((decal.prim.normal(hits.points[sel]) * d[sel]).sum(1))
                ratio[sel] = hits.t[sel] / cam.fx / np.sqrt(np.maximum(cos, 0.05)) / texel
        medians.append(np.median(ratio))
    assert 1.0 < np.median(medians) < 2.5 and 0.8 < min(medians) and max(medians) < 3.5, medians


def test_generation_is_deterministic(small, tmp_path):
    generate_photo_scene(tmp_path / "again", n_views=N, width=W, height=H)
    assert tree_hash(tmp_path / "again") == tree_hash(small)


def test_interrupted_generation_leaves_no_folder(tmp_path, monkeypatch, capsys):
    seen = []

    def interrupt(*args, **kwargs):
        seen.extend(p.name for p in tmp_path.rglob("*"))  # what generation had written by the first render
        raise KeyboardInterrupt

    monkeypatch.setattr(photo, "render", interrupt)
    with pytest.raises(KeyboardInterrupt):
        ensure_photo_scene(tmp_path / "bench_photo")
    assert "scene" in seen  # it was interrupted mid-way, with its (temporary) output folder begun
    assert list(tmp_path.iterdir()) == []  # neither the scene nor its temporary sibling is left
    where = tmp_path / "bench_photo"
    said = capsys.readouterr().out
    assert (
        said == f"generating the 400x300 photo benchmark scene (56 views) in {where} (only once: later runs reuse it)\n"
    )


def test_without_scikit_image_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "skimage", None)
    monkeypatch.setitem(sys.modules, "skimage.data", None)
    with pytest.raises(DataError, match="pip install scikit-image"):
        photo_path("astronaut")


def test_mip_levels_and_trilinear_lookup():
    rng = np.random.default_rng(0)
    img = rng.random((6, 5, 3))
    mip = Mip(img)
    assert [lv.shape[:2] for lv in mip.levels] == [(6, 5), (3, 3), (2, 2), (1, 1)]
    np.testing.assert_allclose(mip.levels[1][0, 0], img[:2, :2].reshape(-1, 3).mean(0))
    edge = np.concatenate([img[:2, 4], img[:2, 4]])  # odd width: last column repeated
    np.testing.assert_allclose(mip.levels[1][0, 2], edge.mean(0))
    # Texel centres read texels exactly; between two centres, the average; past the edge, the mirror image.
    x, y = np.array([0.5, 3.5, 1.0, -0.5, 5.5]), np.array([0.5, 2.5, 0.5, 0.5, 0.5])
    got = bilinear(img, x, y)
    np.testing.assert_allclose(got[:2], [img[0, 0], img[2, 3]])
    np.testing.assert_allclose(got[2], (img[0, 0] + img[0, 1]) / 2)
    np.testing.assert_allclose(got[3:], [img[0, 0], img[0, 4]])
    # lod 0.25 blends level 0 and level 1 (coordinates halved) 3:1.
    lvl1 = bilinear(mip.levels[1], x[:1] / 2, y[:1] / 2)
    np.testing.assert_allclose(mip.sample(x[:1], y[:1], np.array([0.25])), 0.75 * img[:1, 0] + 0.25 * lvl1)


def test_room_primitive_by_hand():
    room = Room(lambda p: p, half=2.0, height=3.0)
    o = np.array([[0.0, 0.0, 1.0], [0.5, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    d = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.6, 0.8], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    # +x wall at 2; -x wall at 2.5; up-slanted ray reaches y = 2 at z = 1 + 2/0.6*0.8 > 3: over the top.
    np.testing.assert_allclose(room.intersect(o, d), [2.0, 2.5, np.inf, np.inf, np.inf])
    np.testing.assert_allclose(room.intersect(o[:1], np.array([[0.0, 0.8, 0.6]])), [2.5])
    walls = np.array([[2.0, 0.3, 1.0], [-2.0, 0.3, 1.0], [0.5, 2.0, 1.0], [0.5, -2.0, 1.0]])
    np.testing.assert_allclose(room.normal(walls), [[-1, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0]])
