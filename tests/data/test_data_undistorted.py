"""Distorted COLMAP cameras load as they are: undistorted once into ``<data>/undistorted/`` (the warp of
``process.py``, tested against SIMPLE_RADIAL's formula in tests/process/test_undistort.py), read back from
there on later runs, made again when an input changes; masks warped alike; fisheye to a stated field of view."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pycolmap
import pytest
from PIL import Image

from pointrix_lite.errors import DataError
from pointrix_lite.io.undistort import undistort
from pointrix_lite.registry import DATASETS

W, H = 64, 48


def _scene(root: Path, model: str, params: list[float], n: int = 4) -> dict[str, np.ndarray]:
    """``n`` photos of smooth random colour fields (pycolmap writes the model), SfM-like points in front."""
    rng = np.random.default_rng(0)
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(model=model, width=W, height=H, params=params, camera_id=1))
    (root / "images").mkdir(parents=True)
    photos = {}
    for i in range(n):
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(), np.array([0.1 * i, 0.0, 0.0]))
        rec.add_image_with_trivial_frame(pycolmap.Image(name=f"im_{i}.png", camera_id=1, image_id=i + 1), pose)
        coarse = rng.integers(0, 256, (H // 8, W // 8, 3), dtype=np.uint8)
        photos[f"im_{i}"] = np.asarray(Image.fromarray(coarse).resize((W, H), Image.Resampling.BILINEAR))
        Image.fromarray(photos[f"im_{i}"]).save(root / "images" / f"im_{i}.png")
    for _ in range(30):
        rec.add_point3D(rng.normal(size=3) + [0, 0, 4], pycolmap.Track(), rng.integers(0, 256, 3).astype(np.uint8))
    (root / "sparse" / "0").mkdir(parents=True)
    rec.write_binary(str(root / "sparse" / "0"))
    return photos


def colmap(root: Path):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(root), "eval": False}, "dataset")


def test_a_simple_radial_scene_trains_on_what_process_py_would_have_written(tmp_path, capsys):
    root = tmp_path / "scene"
    _scene(root, "SIMPLE_RADIAL", [50.0, 32.0, 24.0, -0.08])
    ds = colmap(root)
    out = capsys.readouterr().out
    assert f"undistorting 4 images (SIMPLE_RADIAL cameras) into {root / 'undistorted'} (once)" in out
    assert "undistorted to PINHOLE:" in out and "field of view" in out
    # The reference: process.py's own undistortion of the same model and photos.
    undistort(pycolmap, root / "sparse" / "0", root / "images", tmp_path / "ref", 1)
    ref = pycolmap.Reconstruction(str(tmp_path / "ref" / "sparse" / "0"))
    cam = next(iter(ref.cameras.values()))
    for view in ds.train_views:
        expect = np.asarray(Image.open(tmp_path / "ref" / "images" / f"{view.name}.png"))
        np.testing.assert_array_equal(view.image.numpy(), expect)
        assert (view.camera.width, view.camera.height) == (cam.width, cam.height) != (W, H)
        np.testing.assert_allclose(
            [view.camera.fx, view.camera.fy, view.camera.cx, view.camera.cy], cam.params, rtol=1e-6
        )


def test_the_cache_is_read_back_and_made_again_when_an_input_changes(tmp_path, capsys):
    root = tmp_path / "scene"
    _scene(root, "OPENCV", [50.0, 51.0, 32.0, 24.0, -0.05, 0.01, 0.001, -0.001])
    colmap(root)
    stamp = (root / "undistorted" / "source.json").stat().st_mtime_ns
    capsys.readouterr()
    colmap(root)  # same inputs: read directly, said nothing
    assert "undistorting" not in capsys.readouterr().out
    assert (root / "undistorted" / "source.json").stat().st_mtime_ns == stamp
    Image.fromarray(np.zeros((H, W, 3), np.uint8)).save(root / "images" / "im_2.png")
    os.utime(root / "images" / "im_2.png", ns=(stamp + 10**9, stamp + 10**9))
    ds = colmap(root)
    assert "undistorting 4 images (OPENCV cameras)" in capsys.readouterr().out
    assert float(next(v for v in ds.train_views if v.name == "im_2").image.max()) == 0.0


def test_masks_are_warped_like_their_photos(tmp_path):
    root = tmp_path / "scene"
    _scene(root, "SIMPLE_RADIAL", [50.0, 32.0, 24.0, 0.1])
    keep = np.ones((H, W), bool)
    keep[:, : W // 2] = False  # the left half ignored
    (root / "masks").mkdir()
    Image.fromarray(keep.astype(np.uint8) * 255).save(root / "masks" / "im_1.png")
    ds = colmap(root)
    by_name = {v.name: v for v in ds.train_views}
    assert by_name["im_0"].mask is None  # no mask: kept whole
    mask = by_name["im_1"].mask.numpy()
    # Radial distortion keeps vertical lines through the principal point: the split stays at the centre column.
    cx = round(by_name["im_1"].camera.cx)
    assert not mask[:, : cx - 1].any() and mask[:, cx + 1 :].all()


def test_a_fisheye_capture_trains_without_a_manual_step(tmp_path, capsys):
    root = tmp_path / "scene"
    _scene(root, "OPENCV_FISHEYE", [40.0, 40.0, 32.0, 24.0, 0.05, 0.01, 0.0, 0.0])
    ds = colmap(root)
    assert "undistorted to PINHOLE" in capsys.readouterr().out
    assert all(v.image.shape[:2] == (v.camera.height, v.camera.width) for v in ds.train_views)


def test_a_model_without_a_pinhole_undistortion_is_one_line(tmp_path):
    root = tmp_path / "scene"
    _scene(root, "SIMPLE_RADIAL", [50.0, 32.0, 24.0, 0.0])
    cameras = root / "sparse" / "0"
    rec = pycolmap.Reconstruction(str(cameras))
    (cameras / "cameras.bin").unlink()
    rec.write_text(str(cameras))
    for f in ("images.bin", "points3D.bin", "rigs.bin", "frames.bin"):
        (cameras / f).unlink(missing_ok=True)
    txt = cameras / "cameras.txt"
    txt.write_text(
        "\n".join(line for line in txt.read_text().splitlines() if line.startswith("#"))
        + "\n1 EQUIRECTANGULAR 64 48 32 24\n"
    )
    with pytest.raises(DataError) as e:
        colmap(root)
    assert str(e.value).startswith(f"{txt}: camera 1 uses model EQUIRECTANGULAR, which has no pinhole undistortion")
