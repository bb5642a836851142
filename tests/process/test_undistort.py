"""process.py's undistortion keeps the photos' pixel grid: a lens with (almost) no distortion gives the
photos back unchanged, and a distorting one samples each photo exactly where SIMPLE_RADIAL says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pointrix_lite.io.colmap import read_model
from pointrix_lite.io.undistort import undistort
from pointrix_lite.process.colmap_import import import_pycolmap

W, H, F, CX, CY = 96, 72, 80.0, 48.0, 36.0


def _scene(root: Path, k: float) -> np.ndarray:
    """One SIMPLE_RADIAL photo of random pixels (every pixel differs from its neighbours), its model in ``root/distorted``."""
    pycolmap = import_pycolmap()
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(
        pycolmap.Camera(model="SIMPLE_RADIAL", width=W, height=H, params=[F, CX, CY, k], camera_id=1)
    )
    rec.add_image_with_trivial_frame(pycolmap.Image(name="p.png", camera_id=1, image_id=1), pycolmap.Rigid3d())
    (root / "distorted").mkdir()
    rec.write_binary(str(root / "distorted"))
    photo = np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)
    (root / "photos").mkdir()
    Image.fromarray(photo).save(root / "photos" / "p.png")
    return photo


def _undistorted(root: Path) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    undistort(import_pycolmap(), root / "distorted", root / "photos", root / "out", 1)
    camera = next(iter(read_model(root / "out" / "sparse" / "0").cameras.values()))
    assert camera.model == "PINHOLE"
    image = np.asarray(Image.open(root / "out" / "images" / "p.png"))
    assert image.shape[:2] == (camera.height, camera.width)
    return image, np.asarray(camera.params, dtype=float), (camera.width, camera.height)


def test_a_lens_without_visible_distortion_keeps_the_photo(tmp_path):
    # SfM's estimate for a distortion-free lens (k = -5.5e-4 on 400x300 photos): 0.05 px at the
    # corners. COLMAP's undistorter made these 399x299 with cx = 199.5, a 2x2 box blur of each photo.
    photo = _scene(tmp_path, -5.5e-4)
    image, params, size = _undistorted(tmp_path)
    assert size == (W, H)
    np.testing.assert_allclose(params, [F, F, CX, CY])
    diff = np.abs(image.astype(int) - photo)
    # Samples move by up to 0.02 px at the corners (x 255 between random pixels); a half-pixel shift moves them by ~60.
    assert diff.max() <= 6 and diff.mean() < 1.0


@pytest.mark.parametrize("k", [0.12, -0.08])
def test_a_distorting_lens_samples_the_photo_on_its_own_grid(tmp_path, k):
    photo = _scene(tmp_path, k).astype(float)
    image, (fx, fy, cx, cy), (w, h) = _undistorted(tmp_path)
    assert (w, h) != (W, H) and fx == fy == F
    # Whole pixels from the photo's grid: at the principal point a pinhole pixel centre is a photo pixel centre.
    assert (CX - cx) == round(CX - cx) and (CY - cy) == round(CY - cy)
    # The reference, by SIMPLE_RADIAL's formula: pinhole pixel centre -> x (1 + k r^2) -> bilinear in the photo.
    v, u = np.mgrid[0:h, 0:w] + 0.5
    x, y = (u - cx) / fx, (v - cy) / fy
    radial = 1.0 + k * (x * x + y * y)
    px, py = F * x * radial + CX - 0.5, F * y * radial + CY - 0.5
    assert px.min() >= -0.5 and px.max() <= W - 0.5 and py.min() >= -0.5 and py.max() <= H - 0.5  # no blank pixel
    c0, r0 = np.floor(px).astype(int), np.floor(py).astype(int)
    ax, ay = (px - c0)[..., None], (py - r0)[..., None]
    c1, r1 = (c0 + 1).clip(0, W - 1), (r0 + 1).clip(0, H - 1)
    c0, r0 = c0.clip(0, W - 1), r0.clip(0, H - 1)
    ref = (photo[r0, c0] * (1 - ax) + photo[r0, c1] * ax) * (1 - ay) + (
        photo[r1, c0] * (1 - ax) + photo[r1, c1] * ax
    ) * ay
    assert np.abs(image - ref).max() <= 1.0  # rounding to uint8
