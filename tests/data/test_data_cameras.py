"""Camera conventions: Blender and COLMAP poses, projection by hand, downscaling, scene extent."""

from __future__ import annotations

import math

import numpy as np
import pycolmap
import pytest
import torch
from data_helpers import random_rotation

from pointrix_lite.data.cameras import (
    Camera,
    blender_c2w_from_viewmat,
    qvec_to_rotmat,
    rotmat_to_qvec,
    scene_extent,
    viewmat_from_blender_c2w,
    viewmat_from_colmap,
)


def project(cam: Camera, X: np.ndarray) -> np.ndarray:
    """Pixel coordinates (continuous) of world point X through the camera's K and viewmat."""
    Xc = cam.viewmat.double().numpy() @ np.append(X, 1.0)
    uvw = cam.K.double().numpy() @ Xc[:3]
    return uvw[:2] / uvw[2]


def test_blender_c2w_projects_point_where_expected_by_hand():
    # Blender camera at (0, -5, 0) looking along +y with z up: camera x = world x, camera up (y) = world z,
    # camera back (z) = world -y.
    c2w = np.array([[1, 0, 0, 0], [0, 0, -1, -5], [0, 1, 0, 0], [0, 0, 0, 1]], dtype=float)
    cam = Camera(100.0, 100.0, 50.0, 40.0, 100, 80, torch.from_numpy(viewmat_from_blender_c2w(c2w)).float())
    # 1 unit right and 0.5 up of the look-at axis, depth 5: u = 50 + 100*1/5, v = 40 - 100*0.5/5.
    np.testing.assert_allclose(project(cam, np.array([1.0, 0.0, 0.5])), [70.0, 30.0], atol=1e-4)
    np.testing.assert_allclose(cam.camera_center.numpy(), [0.0, -5.0, 0.0], atol=1e-6)
    # OpenCV: a point in front of the camera has positive camera z.
    assert (cam.viewmat.double() @ torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64))[2] == pytest.approx(5.0)


def test_blender_roundtrip():
    rng = np.random.default_rng(1)
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = random_rotation(rng), rng.normal(size=3)
    np.testing.assert_allclose(viewmat_from_blender_c2w(blender_c2w_from_viewmat(w2c)), w2c, atol=1e-12)


def test_colmap_qvec_tvec_by_hand_and_against_pycolmap():
    # 90 degrees about z: x -> y.
    q = np.array([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])
    w2c = viewmat_from_colmap(q, np.array([0.0, 0.0, 2.0]))
    np.testing.assert_allclose(w2c @ [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 2.0, 1.0], atol=1e-12)
    cam = Camera(10.0, 20.0, 3.0, 4.0, 6, 8, torch.from_numpy(w2c).float())
    np.testing.assert_allclose(project(cam, np.array([1.0, 0.0, 0.0])), [3.0, 4.0 + 20.0 * 1 / 2], atol=1e-5)

    rng = np.random.default_rng(0)
    for _ in range(5):
        qv = rng.normal(size=4)
        qv /= np.linalg.norm(qv)
        t = rng.normal(size=3)
        ref = pycolmap.Rigid3d(pycolmap.Rotation3d(np.r_[qv[1:], qv[0]]), t).matrix()  # pycolmap quat is xyzw
        np.testing.assert_allclose(viewmat_from_colmap(qv, t)[:3], ref, atol=1e-12)


def test_rotmat_qvec_roundtrip_including_negative_trace():
    rng = np.random.default_rng(2)
    rots = [random_rotation(rng) for _ in range(50)] + [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    for R in rots:
        q = rotmat_to_qvec(R)
        assert q[0] >= 0 and abs(np.linalg.norm(q) - 1) < 1e-12
        np.testing.assert_allclose(qvec_to_rotmat(q), R, atol=1e-12)


def test_downscale_scales_intrinsics_with_pixel_centre_convention():
    rng = np.random.default_rng(3)
    w2c = np.eye(4)
    w2c[:3, :3] = random_rotation(rng)
    w2c[:3, 3] = [0.0, 0.0, 6.0]
    cam = Camera(120.0, 110.0, 49.3, 41.7, 100, 80, torch.from_numpy(w2c).float(), "a")
    half = cam.scaled(2)
    assert (half.width, half.height, half.fx, half.fy, half.cx, half.cy) == (50, 40, 60.0, 55.0, 24.65, 20.85)
    # Continuous pixel coordinates halve: the point in pixel (i, j)'s area lands in pixel (i//2, j//2).
    X = rng.normal(size=3) * 0.3
    np.testing.assert_allclose(project(half, X), project(cam, X) / 2, rtol=1e-6)
    third = cam.scaled(3)  # 100/3 -> 33, 80/3 -> 27: K follows the actual size ratio per axis
    assert (third.width, third.height) == (33, 27)
    assert third.fx == pytest.approx(120 * 33 / 100) and third.cy == pytest.approx(41.7 * 27 / 80)
    assert torch.equal(third.viewmat, cam.viewmat) and third.name == "a"


def test_K_and_center():
    w2c = np.eye(4)
    w2c[:3, 3] = [1.0, -2.0, 3.0]
    cam = Camera(5.0, 6.0, 7.0, 8.0, 10, 10, torch.from_numpy(w2c).float())
    assert torch.equal(cam.K, torch.tensor([[5.0, 0, 7], [0, 6, 8], [0, 0, 1]]))
    assert cam.K.dtype == torch.float32 and cam.viewmat.shape == (4, 4)
    np.testing.assert_allclose(cam.camera_center.numpy(), [-1.0, 2.0, -3.0])


def _cam_at(center) -> Camera:
    w2c = torch.eye(4)
    w2c[:3, 3] = -torch.tensor(center, dtype=torch.float32)
    return Camera(1.0, 1.0, 1.0, 1.0, 2, 2, w2c)


def test_scene_extent_is_inria_nerfpp_norm():
    centers = [(0, 0, 0), (2, 0, 0), (0, 2, 0), (0, 0, 2)]
    # Mean centre (0.5, 0.5, 0.5); farthest camera (2,0,0) etc. at sqrt(1.5^2 + 0.5^2 + 0.5^2).
    assert scene_extent([_cam_at(c) for c in centers]) == pytest.approx(1.1 * math.sqrt(2.75), rel=1e-6)
    assert scene_extent([_cam_at((3, 3, 3))]) == 1.0  # degenerate: a usable default, not 0
