"""Orbit camera path on the demo's cameras, checked against how the demo scene placed them."""

from __future__ import annotations

import math

import pytest
import torch

from pointrix_lite.data.demo.scene import TARGET
from pointrix_lite.data.nerf_synthetic import NerfSyntheticDataset
from pointrix_lite.errors import DataError
from pointrix_lite.trajectory import orbit_cameras, scene_centre

from .conftest import DEMO_DATA


@pytest.fixture(scope="module")
def cameras():
    ds = NerfSyntheticDataset(NerfSyntheticDataset.Config(data_path=str(DEMO_DATA), scale=4.0))
    return [v.camera for v in ds.train_views + ds.test_views]


def _project(cam, point: torch.Tensor) -> torch.Tensor:
    p = cam.viewmat.double() @ torch.cat([point.double(), torch.ones(1, dtype=torch.float64)])
    assert p[2] > 0  # in front of the camera
    return torch.tensor([cam.fx * p[0] / p[2] + cam.cx, cam.fy * p[1] / p[2] + cam.cy])


def test_scene_centre_is_the_demo_look_at_target(cameras):
    # scene.py aims every camera at TARGET; the JSON round trip leaves float32-level error.
    assert torch.allclose(scene_centre(cameras), torch.tensor(TARGET, dtype=torch.float64), atol=1e-4)


def test_orbit_looks_at_the_centre_from_a_circle(cameras):
    n = 16
    orbit = orbit_cameras(cameras, n)
    centre = scene_centre(cameras)
    assert len(orbit) == n and [c.name for c in orbit] == [f"orbit_{k:04d}" for k in range(n)]
    for cam in orbit:
        assert (cam.width, cam.height, cam.fx, cam.cx) == (
            cameras[0].width,
            cameras[0].height,
            cameras[0].fx,
            cameras[0].cx,
        )
        R = cam.viewmat[:3, :3].double()
        assert torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-5) and torch.det(R) > 0
        # The centre projects onto the principal point: the camera looks straight at it.
        assert torch.allclose(_project(cam, centre), torch.tensor([cam.cx, cam.cy], dtype=torch.float64), atol=1e-3)
    eyes = torch.stack([c.camera_center.double() for c in orbit])
    dist = (eyes - centre).norm(dim=1)
    assert torch.allclose(dist, dist.mean().expand(n), rtol=1e-5)
    # The demo ring has radius 3.9 around TARGET and elevations 15..49 deg: the orbit sits on that sphere's band.
    assert 3.0 < dist.mean() < 3.9 + 1e-3
    elev = torch.rad2deg(torch.asin((eyes[:, 2] - TARGET[2]) / dist))
    assert 15.0 < elev.mean() < 49.0
    # Evenly spaced: equal chords between consecutive cameras, the path closes after one turn.
    chords = (eyes.roll(-1, 0) - eyes).norm(dim=1)
    radius = (eyes[:, :2] - eyes[:, :2].mean(0)).norm(dim=1).mean()
    assert torch.allclose(chords, torch.full_like(chords, float(2 * radius * math.sin(math.pi / n))), rtol=2e-2)
    # Starts at the first camera's azimuth (the demo is z-up).
    first = cameras[0].camera_center.double() - centre
    start = eyes[0] - centre
    assert math.atan2(start[1], start[0]) == pytest.approx(math.atan2(first[1], first[0]), abs=0.05)


def test_parallel_cameras_have_no_orbit(cameras):
    same_direction = [cameras[0]] * 3
    with pytest.raises(DataError, match="parallel"):
        orbit_cameras(same_direction, 4)
