"""COLMAP reader (vs pycolmap, the reference implementation) and ColmapDataset, including bad input."""

from __future__ import annotations

import shutil

import numpy as np
import pycolmap
import pytest
import torch
from data_helpers import make_pycolmap_scene, pycolmap_viewmat

from pointrix_lite.errors import DataError
from pointrix_lite.io.colmap import ColmapModel, read_model, write_model
from pointrix_lite.io.images import write_png
from pointrix_lite.registry import DATASETS


def load(root, **options):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(root), **options}, "dataset")


def assert_same_model(a: ColmapModel, b: ColmapModel) -> None:
    assert a.cameras.keys() == b.cameras.keys() and a.images.keys() == b.images.keys()
    for k, c in a.cameras.items():
        d = b.cameras[k]
        assert (c.model, c.width, c.height) == (d.model, d.width, d.height)
        np.testing.assert_array_equal(c.params, d.params)
    for k, im in a.images.items():
        jm = b.images[k]
        assert (im.name, im.camera_id) == (jm.name, jm.camera_id)
        np.testing.assert_array_equal(im.qvec, jm.qvec)
        np.testing.assert_array_equal(im.tvec, jm.tvec)
    np.testing.assert_array_equal(a.xyz, b.xyz)
    np.testing.assert_array_equal(a.rgb, b.rgb)


@pytest.mark.parametrize("model", ["PINHOLE", "SIMPLE_PINHOLE"])
def test_pycolmap_written_text_and_binary_read_identically(tmp_path, model):
    rec = make_pycolmap_scene(tmp_path / "bin", model=model, binary=True)
    make_pycolmap_scene(tmp_path / "txt", model=model, binary=False)
    a, b = read_model(tmp_path / "bin/sparse/0"), read_model(tmp_path / "txt/sparse/0")
    assert_same_model(a, b)  # text writes 17 significant digits: float64 round-trips exactly
    for im in a.images.values():
        ref = rec.image(im.id)
        np.testing.assert_allclose(np.r_[im.qvec[1:], im.qvec[0]], ref.cam_from_world().rotation.quat, atol=1e-15)
        np.testing.assert_allclose(im.tvec, ref.cam_from_world().translation, atol=1e-15)
    # pycolmap's point map is unordered: compare the point sets row-sorted.
    xyz = np.array([p.xyz for p in rec.points3D.values()])
    np.testing.assert_array_equal(a.xyz[np.lexsort(a.xyz.T)], xyz[np.lexsort(xyz.T)])

    da, db = load(tmp_path / "bin"), load(tmp_path / "txt")
    for va, vb in zip(da.train_views + da.test_views, db.train_views + db.test_views):
        assert torch.equal(va.camera.viewmat, vb.camera.viewmat) and torch.equal(va.camera.K, vb.camera.K)
        np.testing.assert_allclose(va.camera.viewmat.numpy(), pycolmap_viewmat(rec, va.name + ".png"), atol=1e-6)
    cam = da.train_views[0].camera
    expect = (9.0, 10.0, 4.1, 2.9) if model == "PINHOLE" else (9.0, 9.0, 4.0, 3.0)
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == pytest.approx(expect)


def test_our_writer_read_back_by_pycolmap(tmp_path):
    original = make_pycolmap_scene(tmp_path / "src")
    ours = read_model(tmp_path / "src/sparse/0")
    for binary in (True, False):
        out = tmp_path / ("bin" if binary else "txt")
        write_model(ours, out, binary=binary)
        rec = pycolmap.Reconstruction(str(out))
        assert rec.num_images() == len(ours.images) and rec.num_points3D() == len(ours.xyz)
        assert rec.camera(1).model.name == "PINHOLE" and list(rec.camera(1).params) == [9.0, 10.0, 4.1, 2.9]
        for im in ours.images.values():
            np.testing.assert_allclose(pycolmap_viewmat(rec, im.name), pycolmap_viewmat(original, im.name), atol=1e-12)
        assert_same_model(read_model(out), ours)


def test_split_every_8th_sorted_by_name(tmp_path):
    make_pycolmap_scene(tmp_path, n=17)
    ds = load(tmp_path)
    assert [v.name for v in ds.test_views] == ["im_00", "im_08", "im_16"]
    assert ds.val_views is not ds.test_views and [v.name for v in ds.val_views] == ["im_00", "im_08", "im_16"]
    assert len(ds.train_views) == 14 and ds.train_views[0].name == "im_01"
    assert [v.name for v in load(tmp_path, test_every=4).test_views] == ["im_00", "im_04", "im_08", "im_12", "im_16"]
    assert len(load(tmp_path, eval=False).train_views) == 17
    assert ds.point_cloud.xyz.shape == (20, 3) and ds.point_cloud.rgb.max() <= 1.0
    assert ds.background == (0.0, 0.0, 0.0)


def test_sparse_without_0_subfolder(tmp_path):
    make_pycolmap_scene(tmp_path)
    for f in (tmp_path / "sparse/0").iterdir():
        f.rename(tmp_path / "sparse" / f.name)
    (tmp_path / "sparse/0").rmdir()
    assert len(load(tmp_path).train_views) == 8


def test_scale_uses_images_n_folder_else_resizes(tmp_path):
    make_pycolmap_scene(tmp_path, size=(8, 6))
    resized = load(tmp_path, scale=2.0)
    cam = resized.train_views[0].camera
    assert (cam.width, cam.height, cam.fx, cam.cx) == (4, 3, 4.5, 2.05)
    assert resized.train_views[0].image.shape == (3, 4, 3)

    (tmp_path / "images_2").mkdir()
    for i in range(10):
        write_png(tmp_path / "images_2" / f"im_{i:02d}.png", np.full((3, 4, 3), 7, np.uint8))
    pre = load(tmp_path, scale=2.0)
    assert int(pre.train_views[0].image.max()) == 7  # taken from images_2, not resized from images
    assert pre.train_views[0].camera.fx == cam.fx


def test_demo_model_read_matches_pycolmap_text_conversion(demo_root, tmp_path):
    """Binary (our writer) vs text written by pycolmap from it: same model through our reader."""
    rec = pycolmap.Reconstruction(str(demo_root / "colmap/sparse/0"))
    rec.write_text(str(tmp_path))
    assert_same_model(read_model(demo_root / "colmap/sparse/0"), read_model(tmp_path))


# ------------------------------------------------------------------------------------- bad input


def expect_error(match: str, root, **options) -> None:
    with pytest.raises(DataError, match=match) as info:
        load(root, **options)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", ["SIMPLE_RADIAL", "OPENCV", "RADIAL", "FULL_OPENCV"])
def test_distorted_model_loads_undistorted(tmp_path, model):
    """Distorted cameras are undistorted at load (tests/data/test_data_undistorted.py has the details)."""
    params = {
        "SIMPLE_RADIAL": [9, 4, 3, 0.1],
        "RADIAL": [9, 4, 3, 0.1, 0.0],
        "OPENCV": [9, 9, 4, 3, 0.1, 0, 0, 0],
        "FULL_OPENCV": [9, 9, 4, 3, 0.1, 0, 0, 0, 0, 0, 0, 0],
    }
    make_pycolmap_scene(tmp_path, model=model, params=[float(p) for p in params[model]])
    ds = load(tmp_path)
    assert (tmp_path / "undistorted" / "sparse" / "0").is_dir()
    assert all(v.image.shape[:2] == (v.camera.height, v.camera.width) for v in ds.train_views + ds.test_views)


def test_missing_folders(tmp_path):
    expect_error(r"dataset.data_path: folder not found", tmp_path / "nope")
    make_pycolmap_scene(tmp_path)
    shutil.rmtree(tmp_path / "images")
    expect_error(r"images: image folder not found", tmp_path)
    shutil.rmtree(tmp_path / "sparse")
    expect_error(r"sparse: no COLMAP model", tmp_path)


def test_missing_corrupt_and_wrong_size_images(tmp_path):
    make_pycolmap_scene(tmp_path)
    (tmp_path / "images/im_03.png").unlink()
    expect_error(r"images/im_03.png: image not found", tmp_path)
    (tmp_path / "images/im_03.png").write_bytes(b"not an image at all")
    expect_error(r"images/im_03.png: cannot decode image", tmp_path)
    write_png(tmp_path / "images/im_03.png", np.zeros((6, 9, 3), np.uint8))
    expect_error(r"images/im_03.png: image is 9x6 but camera 1 is 8x6", tmp_path)


def test_non_finite_pose_and_empty_points(tmp_path):
    make_pycolmap_scene(tmp_path)
    model = read_model(tmp_path / "sparse/0")
    model.images[4].tvec[1] = np.inf
    write_model(model, tmp_path / "sparse/0")
    expect_error(r"images.bin image im_03.png: pose contains non-finite values", tmp_path)

    model.images[4].tvec[1] = 0.0
    model.xyz, model.rgb = np.zeros((0, 3)), np.zeros((0, 3), np.uint8)
    write_model(model, tmp_path / "sparse/0")
    expect_error(r"points3D.bin: point cloud is empty", tmp_path)


def test_truncated_binary(tmp_path):
    make_pycolmap_scene(tmp_path)
    data = (tmp_path / "sparse/0/images.bin").read_bytes()
    (tmp_path / "sparse/0/images.bin").write_bytes(data[:50])
    expect_error(r"images.bin: truncated COLMAP binary file", tmp_path)
