"""Camera paths on the demo's cameras (orbit, interp, ellipse, spiral), checked against how the demo scene
placed them, and camera path files read back as the cameras written."""

from __future__ import annotations

import math

import pytest
import torch

from pointrix_lite.data.demo.scene import TARGET
from pointrix_lite.data.nerf_synthetic import NerfSyntheticDataset
from pointrix_lite.errors import DataError
from pointrix_lite.trajectory import (
    ellipse_cameras,
    interp_cameras,
    make_trajectory,
    orbit_cameras,
    path_cameras,
    save_path,
    scene_centre,
    spiral_cameras,
)

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


def _rotation_ok(cam) -> bool:
    R = cam.viewmat[:3, :3].double()
    return bool(torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-5) and torch.det(R) > 0)


def test_interp_passes_through_every_camera_in_order(cameras):
    few = cameras[:5]
    path = interp_cameras(few, 4 * (len(few) - 1) + 1)  # every 4th frame lands on a captured camera
    assert all(_rotation_ok(c) for c in path)
    for k, cam in enumerate(few):
        assert torch.allclose(path[4 * k].viewmat, cam.viewmat, atol=1e-5), k
    # Between two cameras the centre moves smoothly: no frame jumps more than twice the mean step.
    eyes = torch.stack([c.camera_center.double() for c in path])
    steps = (eyes[1:] - eyes[:-1]).norm(dim=1)
    assert steps.max() < 2.5 * steps.mean()


def test_ellipse_looks_at_the_centre_at_the_cameras_mean_height(cameras):
    path = ellipse_cameras(cameras, 24)
    centre = scene_centre(cameras)
    eyes = torch.stack([c.camera_center.double() for c in path])
    for cam in path:
        assert _rotation_ok(cam)
        assert torch.allclose(_project(cam, centre), torch.tensor([cam.cx, cam.cy], dtype=torch.float64), atol=1e-3)
    # The demo is z-up: every frame at one height, the captured cameras' mean.
    mean_height = torch.stack([c.camera_center.double() for c in cameras])[:, 2].mean()
    assert torch.allclose(eyes[:, 2], mean_height.expand(len(path)), atol=0.05)
    # Inside the captured cameras' horizontal reach (their 90th percentile spread), not collapsed to a point.
    reach = (torch.stack([c.camera_center.double() for c in cameras])[:, :2] - centre[:2]).norm(dim=1).max()
    radii = (eyes[:, :2] - centre[:2]).norm(dim=1)
    assert radii.max() <= reach + 1e-6 and radii.min() > 0.3 * reach


def test_spiral_turns_around_the_mean_camera_looking_ahead(cameras):
    path = spiral_cameras(cameras, 40)
    mean = torch.stack([c.camera_center.double() for c in cameras]).mean(0)
    centre = scene_centre(cameras)
    eyes = torch.stack([c.camera_center.double() for c in path])
    assert all(_rotation_ok(c) for c in path)
    assert (eyes - mean).norm(dim=1).min() > 1e-3  # around the mean camera, not through it
    # Every frame looks at a point at the scene centre's depth along the mean camera's axis.
    for cam in path:
        forward = cam.viewmat[2, :3].double()
        to_centre = centre - cam.camera_center.double()
        assert (forward @ to_centre) > 0.8 * to_centre.norm()  # the centre is near the middle of the view


def test_unknown_kind_is_one_line(cameras):
    with pytest.raises(DataError, match="unknown kind 'zigzag'"):
        make_trajectory("zigzag", cameras, 4)


def test_a_camera_path_file_reads_back_the_cameras_written(cameras, tmp_path):
    written = orbit_cameras(cameras, 6)
    path = save_path(written, tmp_path / "path.json")
    read = path_cameras(path)
    assert [c.name for c in read] == [f"path_{k:04d}" for k in range(6)]
    for a, b in zip(written, read):
        assert torch.allclose(a.viewmat, b.viewmat, atol=1e-5)
        assert (a.width, a.height) == (b.width, b.height)
        assert a.fx == pytest.approx(b.fx) and a.cy == pytest.approx(b.cy)


def test_a_nerfstudio_style_path_uses_opengl_axes_and_the_vertical_fov(tmp_path):
    """A hand-written file as nerfstudio's viewer exports it: camera at (0, 0, 5) looking down -z."""
    c2w = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 5, 0, 0, 0, 1]  # OpenGL: looks along its -z, i.e. at the origin
    data = {"render_width": 64, "render_height": 48, "camera_path": [{"camera_to_world": c2w, "fov": 90.0}]}
    (tmp_path / "ns.json").write_text(__import__("json").dumps(data))
    (cam,) = path_cameras(tmp_path / "ns.json")
    assert cam.fy == pytest.approx(24.0) and cam.fx == pytest.approx(24.0) and (cam.cx, cam.cy) == (32.0, 24.0)
    origin = _project(cam, torch.zeros(3))  # in front of the camera, at the principal point
    assert torch.allclose(origin, torch.tensor([32.0, 24.0], dtype=torch.float64))
    up = _project(cam, torch.tensor([0.0, 1.0, 0.0]))  # world +y (OpenGL up) is up in the image: smaller row
    assert up[1] < 24.0


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "cannot read camera path"),
        ('{"camera_path": []}', "no camera_path list"),
        ('{"render_width": 4, "render_height": 4, "camera_path": [{"camera_to_world": [1, 2]}]}', "16 numbers"),
        (
            '{"render_width": 4, "render_height": 4, "camera_path": [{"camera_to_world": '
            + str(list(range(16)))
            + "}]}",
            "no field of view",
        ),
    ],
)
def test_a_bad_camera_path_is_one_line_naming_the_file(tmp_path, content, message):
    (tmp_path / "p.json").write_text(content)
    with pytest.raises(DataError) as e:
        path_cameras(tmp_path / "p.json")
    assert str(e.value).startswith(str(tmp_path / "p.json")) and message in str(e.value) and "\n" not in str(e.value)
