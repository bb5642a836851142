"""viser camera -> pinhole camera: checked against where known 3D points must land on the image."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pointrix_lite.data.cameras import Camera, look_at
from pointrix_lite.viewer.camera import ViewState, camera_from_view, initial_view_from_cameras, render_size

from .helpers import pose_looking_at


def project(cam: Camera, point: np.ndarray) -> tuple[float, float]:
    p = cam.viewmat.double().numpy() @ np.append(point, 1.0)
    K = cam.K.double().numpy()
    return K[0, 0] * p[0] / p[2] + K[0, 2], K[1, 1] * p[1] / p[2] + K[1, 2]


@pytest.mark.parametrize("eye", [(0.3, -4.0, 1.5), (2.0, 2.0, -1.0)])
def test_known_points_land_on_centre_and_edges(eye):
    target, up = np.array([0.1, 0.2, -0.3]), np.array([0.0, 0.0, 1.0])
    wxyz, position = pose_looking_at(eye, target, up)
    fov, width, height = math.radians(60.0), 320, 200
    cam = camera_from_view(ViewState(wxyz, position, fov, 640, 400), width, height)
    eye = np.asarray(eye)
    d = float(np.linalg.norm(target - eye))
    forward = (target - eye) / d
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    screen_up = np.cross(right, forward)
    half_h = d * math.tan(fov / 2)  # vertical fov: the top edge is fov/2 above the optical axis
    half_w = half_h * width / height
    np.testing.assert_allclose(project(cam, target), (width / 2, height / 2), atol=1e-4)
    np.testing.assert_allclose(project(cam, target + screen_up * half_h), (width / 2, 0.0), atol=1e-4)
    np.testing.assert_allclose(project(cam, target + right * half_w), (width, height / 2), atol=1e-4)
    assert (cam.width, cam.height) == (width, height)


def test_viewmat_is_the_inverse_of_the_reported_pose():
    eye, target = np.array([1.0, -3.0, 2.0]), np.zeros(3)
    wxyz, position = pose_looking_at(tuple(eye), target)
    cam = camera_from_view(ViewState(wxyz, position, 1.0, 100, 100), 100, 100)
    np.testing.assert_allclose(cam.viewmat.numpy(), look_at(eye, target), atol=1e-6)
    np.testing.assert_allclose(cam.camera_center.numpy(), eye, atol=1e-5)


@pytest.mark.parametrize(
    "canvas, max_res, expected",
    [
        ((1280, 720), 512, (512, 288)),
        ((300, 200), 512, (300, 200)),
        ((720, 1280), 256, (144, 256)),
        ((0, 720), 512, None),
        ((1280, 0), 512, None),
        ((3000, 1), 512, (512, 1)),
    ],
)
def test_render_size_keeps_aspect_and_ignores_zero_size(canvas, max_res, expected):
    assert render_size(*canvas, max_res) == expected


def test_initial_view_looks_at_what_a_ring_of_cameras_circles():
    centre, cams = np.array([0.5, -0.2, 0.3]), []
    for k in range(8):
        a = 2 * math.pi * k / 8
        eye = centre + np.array([3 * math.cos(a), 3 * math.sin(a), 1.0])
        cams.append(Camera(100.0, 100.0, 40.0, 30.0, 80, 60, torch.from_numpy(look_at(eye, centre)).float()))
    view = initial_view_from_cameras(cams)
    np.testing.assert_allclose(view.position, cams[0].camera_center.numpy(), atol=1e-5)
    np.testing.assert_allclose(view.look_at, centre, atol=1e-4)
    assert view.up @ np.array([0.0, 0.0, 1.0]) > 0.9
    assert view.fov == pytest.approx(2 * math.atan(60 / 200))
