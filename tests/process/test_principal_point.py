"""process.py's principal-point stage: a bundle adjustment that frees the point finds a lens's off-centre
point from observations made with it, and a point that drifts beyond MAX_SHIFT is held at the centre."""

from __future__ import annotations

import numpy as np
import pytest

pycolmap = pytest.importorskip("pycolmap")

from pointrix_lite.process.principal_point import MAX_SHIFT, refine_principal_point  # noqa: E402

W, H, F = 640, 480, 500.0


def look_at(centre: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera rotation of a camera at ``centre`` looking at ``target`` (y down, no roll)."""
    z = target - centre
    z /= np.linalg.norm(z)
    x = np.cross([0.0, -1.0, 0.0], z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z])


def reconstruction(true_point: tuple[float, float], images: int = 8, seed: int = 0):
    """A model whose observations were made by a camera with principal point ``true_point`` (and no
    distortion), stored with the point at the image centre, as COLMAP's mapper leaves it."""
    rng = np.random.default_rng(seed)
    rec = pycolmap.Reconstruction()
    camera = pycolmap.Camera(model="SIMPLE_RADIAL", width=W, height=H, params=[F, W / 2, H / 2, 0.0], camera_id=1)
    rec.add_camera_with_trivial_rig(camera)
    points = rng.uniform(-1.5, 1.5, size=(300, 3)) * [1.0, 0.7, 1.0]
    tracks = [pycolmap.Track() for _ in points]
    for i, angle in enumerate(np.linspace(-0.7, 0.7, images)):
        centre = np.array([5 * np.sin(angle), 1.5 * (-1) ** i, -5 * np.cos(angle)])  # two heights
        R = look_at(centre, np.zeros(3))
        cam = (points - centre) @ R.T
        uv = F * cam[:, :2] / cam[:, 2:] + np.array(true_point) + rng.normal(scale=0.1, size=(len(points), 2))
        image = pycolmap.Image(
            name=f"im_{i}.jpg",
            points2D=pycolmap.Point2DList([pycolmap.Point2D(xy) for xy in uv]),
            camera_id=1,
            image_id=i + 1,
        )
        rec.add_image_with_trivial_frame(image, pycolmap.Rigid3d(pycolmap.Rotation3d(R), -R @ centre))
        for j, track in enumerate(tracks):
            track.add_element(i + 1, j)
    for xyz, track in zip(points, tracks):
        rec.add_point3D(xyz, track, np.array([128, 128, 128], np.uint8))
    return rec


def test_the_off_centre_point_of_the_lens_is_found() -> None:
    rec = reconstruction((W / 2 - 8.0, H / 2 + 6.0))
    shifts = refine_principal_point(pycolmap, rec)
    assert len(shifts) == 1 and shifts[0].kept and shifts[0].before == (W / 2, H / 2)
    cx, cy = rec.cameras[1].params[1:3]
    assert abs(cx - (W / 2 - 8.0)) < 0.5 and abs(cy - (H / 2 + 6.0)) < 0.5
    assert shifts[0].after == pytest.approx((cx, cy))


def test_a_point_that_drifts_too_far_is_held_at_the_centre() -> None:
    far = MAX_SHIFT * W * 1.6
    rec = reconstruction((W / 2 + far, H / 2))
    shifts = refine_principal_point(pycolmap, rec)
    assert not shifts[0].kept and shifts[0].after[0] > W / 2 + MAX_SHIFT * W
    assert tuple(rec.cameras[1].params[1:3]) == (W / 2, H / 2)  # held, and the poses adjusted to it


def test_too_few_images_leave_the_model_alone() -> None:
    rec = reconstruction((W / 2 - 8.0, H / 2), images=4)
    before = rec.cameras[1].params.copy()
    assert refine_principal_point(pycolmap, rec) == []
    assert (rec.cameras[1].params == before).all()
