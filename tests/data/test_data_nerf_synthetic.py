"""NeRF-synthetic loader: compositing, extensions, intrinsics, splits, init cloud and every bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from data_helpers import make_nerf_scene

from pointrix_lite.data.cameras import viewmat_from_blender_c2w
from pointrix_lite.data.pointcloud import PointCloud, write_ply_points
from pointrix_lite.errors import DataError
from pointrix_lite.io.images import write_png
from pointrix_lite.registry import DATASETS


def load(root, **options):
    return DATASETS.build({"type": "NerfSyntheticDataset", "data_path": str(root), **options}, "dataset")


def reference_composite(rgba: np.ndarray, bg: float) -> np.ndarray:
    a = rgba[..., 3:4].astype(np.float64) / 255
    return np.rint((rgba[..., :3] / 255 * a + bg * (1 - a)) * 255).astype(np.uint8)


@pytest.mark.parametrize("white", [True, False])
def test_rgba_composited_on_background(tmp_path, white):
    raw = make_nerf_scene(tmp_path, rgba=True)
    ds = load(tmp_path, white_background=white)
    assert ds.background == ((1.0,) * 3 if white else (0.0,) * 3)
    for view, img in zip(ds.train_views, raw["train"]):
        assert view.image.dtype == torch.uint8 and view.image.shape == (6, 8, 3)
        np.testing.assert_array_equal(view.image.numpy(), reference_composite(img, 1.0 if white else 0.0))
    f = ds.train_views[0].float_image()
    assert f.dtype == torch.float32 and torch.allclose(f * 255, ds.train_views[0].image.float())


def test_rgb_images_and_explicit_extension_accepted(tmp_path):
    raw = make_nerf_scene(tmp_path, rgba=False, extension=True)
    ds = load(tmp_path)
    np.testing.assert_array_equal(ds.test_views[1].image.numpy(), raw["test"][1])


def test_extension_discovered_for_jpg(tmp_path):
    make_nerf_scene(tmp_path, rgba=False)
    # Replace one PNG by a JPEG: "./train/r_1" must now resolve to r_1.jpg.
    img = np.full((6, 8, 3), 100, np.uint8)
    (tmp_path / "train" / "r_1.png").unlink()
    from PIL import Image

    Image.fromarray(img).save(tmp_path / "train" / "r_1.jpg", quality=100)
    ds = load(tmp_path)
    assert np.abs(ds.train_views[1].image.numpy().astype(int) - 100).max() <= 2


def test_intrinsics_from_camera_angle_and_pose(tmp_path):
    make_nerf_scene(tmp_path)
    ds = load(tmp_path)
    meta = json.loads((tmp_path / "transforms_train.json").read_text())
    cam = ds.train_views[2].camera
    assert cam.fx == pytest.approx(4 / math.tan(0.4)) and cam.fy == cam.fx
    assert (cam.cx, cam.cy, cam.width, cam.height, cam.name) == (4.0, 3.0, 8, 6, "r_2")
    expected = viewmat_from_blender_c2w(np.array(meta["frames"][2]["transform_matrix"]))
    np.testing.assert_allclose(cam.viewmat.numpy(), expected, atol=1e-6)
    assert cam.viewmat.dtype == torch.float32
    assert [v.index for v in ds.train_views] == [0, 1, 2]


def test_fl_and_principal_point_keys_top_level_and_per_frame(tmp_path):
    make_nerf_scene(tmp_path, extra={"fl_x": 11.0, "fl_y": 12.0, "cx": 3.5, "cy": 2.5, "w": 8, "h": 6})
    meta = json.loads((tmp_path / "transforms_train.json").read_text())
    meta["frames"][0]["fl_x"] = 20.0  # a per-frame value wins over the top-level one
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    ds = load(tmp_path)
    c0, c1 = ds.train_views[0].camera, ds.train_views[1].camera
    assert (c0.fx, c0.fy, c0.cx, c0.cy) == (20.0, 12.0, 3.5, 2.5)
    assert (c1.fx, c1.fy) == (11.0, 12.0)


def test_val_falls_back_to_test_and_eval_off_merges(tmp_path):
    make_nerf_scene(tmp_path, n_train=3, n_test=2)
    ds = load(tmp_path)
    assert [v.name for v in ds.val_views] == [v.name for v in ds.test_views] == ["r_0", "r_1"]
    merged = load(tmp_path, eval=False)
    assert len(merged.train_views) == 5 and merged.test_views == [] and merged.val_views == []


def test_scale_downscales_image_and_camera(tmp_path):
    make_nerf_scene(tmp_path, size=(8, 6), rgba=False)
    full, half = load(tmp_path), load(tmp_path, scale=2.0)
    img = full.train_views[0].image.numpy().astype(np.float64)
    box = img.reshape(3, 2, 4, 2, 3).mean(axis=(1, 3))  # independent 2x2 area average
    np.testing.assert_array_equal(half.train_views[0].image.numpy(), np.rint(box).astype(np.uint8))
    c, h = full.train_views[0].camera, half.train_views[0].camera
    assert (h.width, h.height, h.fx, h.cx) == (4, 3, c.fx / 2, c.cx / 2)


def test_random_init_and_points3d_ply(tmp_path):
    make_nerf_scene(tmp_path)
    ds = load(tmp_path, random_init_points=500)
    xyz = ds.point_cloud.xyz
    assert xyz.shape == (500, 3) and xyz.dtype == torch.float32
    assert xyz.abs().max() <= 1.3 and xyz.abs().max() > 1.2  # fills the cube of side 2.6
    assert 0 <= ds.point_cloud.rgb.min() and ds.point_cloud.rgb.max() <= 1
    assert torch.equal(load(tmp_path, random_init_points=500).point_cloud.xyz, xyz)  # seeded

    cloud = PointCloud.from_numpy(np.arange(12.0).reshape(4, 3), np.array([[0, 0.5, 1]] * 4))
    write_ply_points(tmp_path / "points3d.ply", cloud)
    ply = load(tmp_path).point_cloud
    assert torch.equal(ply.xyz, cloud.xyz)
    assert torch.allclose(ply.rgb, torch.tensor([[0, 128 / 255, 1.0]] * 4))
    assert len(load(tmp_path, max_points=2).point_cloud) == 2


# ------------------------------------------------------------------------------------- bad input


def expect_error(match: str, root, **options) -> str:
    with pytest.raises(DataError, match=match) as info:
        load(root, **options)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_missing_folder(tmp_path):
    expect_error(r"dataset.data_path: folder not found: .*nowhere", tmp_path / "nowhere")


def test_missing_transforms(tmp_path):
    make_nerf_scene(tmp_path)
    (tmp_path / "transforms_test.json").unlink()
    expect_error(r"transforms_test.json: transforms file not found", tmp_path)


def test_invalid_json_and_missing_keys(tmp_path):
    make_nerf_scene(tmp_path)
    (tmp_path / "transforms_train.json").write_text("{not json")
    expect_error(r"transforms_train.json: invalid JSON", tmp_path)
    (tmp_path / "transforms_train.json").write_text(json.dumps({"frames": [{"file_path": "./train/r_0"}]}))
    expect_error(r"transforms_train.json frames\[0\]: missing key 'transform_matrix'", tmp_path)
    meta = {"frames": [{"file_path": "./train/r_0", "transform_matrix": np.eye(4).tolist()}]}
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect_error(r"frames\[0\]: missing key 'camera_angle_x'", tmp_path)


def test_missing_image(tmp_path):
    make_nerf_scene(tmp_path)
    (tmp_path / "train" / "r_1.png").unlink()
    expect_error(r"train/r_1: image not found", tmp_path)


def test_corrupt_image(tmp_path):
    make_nerf_scene(tmp_path)
    (tmp_path / "train" / "r_0.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    expect_error(r"train/r_0.png: cannot decode image", tmp_path)


def test_image_size_differs_from_camera(tmp_path):
    make_nerf_scene(tmp_path, extra={"w": 8, "h": 6})
    write_png(tmp_path / "test" / "r_1.png", np.zeros((5, 8, 3), np.uint8))
    expect_error(r"test/r_1.png: image is 8x5 but the camera says 8x6", tmp_path)


def test_non_finite_pose(tmp_path):
    make_nerf_scene(tmp_path)
    meta = json.loads((tmp_path / "transforms_train.json").read_text())
    meta["frames"][1]["transform_matrix"][0][3] = float("nan")
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))  # json writes NaN, Python reads it
    expect_error(r"transforms_train.json frames\[1\]: pose contains non-finite values", tmp_path)


def test_empty_split(tmp_path):
    make_nerf_scene(tmp_path, n_test=0)
    expect_error(r"test split is empty", tmp_path)
    make_nerf_scene(tmp_path / "b", n_train=0)
    expect_error(r"training split is empty", tmp_path / "b")


def test_empty_point_cloud(tmp_path):
    make_nerf_scene(tmp_path)
    write_ply_points(tmp_path / "points3d.ply", PointCloud(torch.zeros(0, 3), torch.zeros(0, 3)))
    expect_error(r"points3d.ply: point cloud is empty", tmp_path)
