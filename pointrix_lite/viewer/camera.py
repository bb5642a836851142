"""viser's browser camera <-> the rasterizer's pinhole camera, and the initial view of a data set.

viser reports ``wxyz`` / ``position`` as the camera-to-world pose in OpenCV axes (x right, y down,
z forward), ``fov`` as the *vertical* field of view in radians and the canvas size in pixels. The
rasterizer wants the inverse (world-to-camera ``viewmat``) and a pinhole ``K`` with
``f = H / (2 tan(fov / 2))`` and the principal point at the image centre (pixel centres at +0.5,
``data/cameras.py``), so a render fills the canvas exactly as three.js would draw the same camera.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..data.cameras import Camera, qvec_to_rotmat


@dataclass(frozen=True)
class ViewState:
    """One camera as the browser reported it (a snapshot: viser mutates its handle in place).

    ``wxyz`` [4] and ``position`` [3] are camera-to-world (OpenCV axes); ``fov`` vertical, radians;
    ``canvas_width`` / ``canvas_height`` the browser canvas in pixels (0 while it is hidden).
    """

    wxyz: tuple[float, float, float, float]
    position: tuple[float, float, float]
    fov: float
    canvas_width: int
    canvas_height: int


def render_size(canvas_width: int, canvas_height: int, max_res: int) -> tuple[int, int] | None:
    """(width, height) to render for a canvas: its aspect, longer side at most ``max_res``.

    Returns None for a zero-size canvas (a hidden or collapsed browser tab): nothing to render.
    """
    if canvas_width <= 0 or canvas_height <= 0 or max_res <= 0:
        return None
    scale = min(1.0, max_res / max(canvas_width, canvas_height))
    return max(1, round(canvas_width * scale)), max(1, round(canvas_height * scale))


def viewmat_from_pose(wxyz: np.ndarray, position: np.ndarray) -> np.ndarray:
    """[4, 4] float64 world-to-camera matrix from a camera-to-world quaternion (w, x, y, z) and position."""
    R = qvec_to_rotmat(np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz))
    w2c = np.eye(4)
    w2c[:3, :3] = R.T
    w2c[:3, 3] = -R.T @ np.asarray(position, dtype=np.float64)
    return w2c


def camera_from_view(view: ViewState, width: int, height: int) -> Camera:
    """The pinhole :class:`Camera` (``width`` x ``height`` pixels) that sees what the browser sees."""
    f = height / (2.0 * math.tan(view.fov / 2.0))
    viewmat = torch.from_numpy(viewmat_from_pose(np.asarray(view.wxyz), np.asarray(view.position))).float()
    return Camera(
        fx=f, fy=f, cx=width / 2.0, cy=height / 2.0, width=width, height=height, viewmat=viewmat, name="viewer"
    )


@dataclass(frozen=True)
class InitialView:
    """Where a new browser tab starts: camera ``position``, the point it orbits (``look_at``),
    the world ``up`` direction and the vertical ``fov`` (radians)."""

    position: np.ndarray
    look_at: np.ndarray
    up: np.ndarray
    fov: float


def initial_view_from_cameras(cameras: list[Camera]) -> InitialView:
    """Start at the first camera, orbiting the point nearest to all optical axes, up = the cameras' mean up.

    Raises:
        ValueError: ``cameras`` is empty.
    """
    if not cameras:
        raise ValueError("initial_view_from_cameras needs at least one camera")
    Rs = [c.viewmat[:3, :3].double().numpy() for c in cameras]
    centres = [c.camera_center.double().numpy() for c in cameras]
    forwards = [R[2] for R in Rs]  # camera z axis in world coordinates
    up = -np.mean([R[1] for R in Rs], axis=0)  # OpenCV y points down
    up = up / np.linalg.norm(up) if np.linalg.norm(up) > 1e-9 else -Rs[0][1]
    # Least-squares point closest to every optical axis (the object a capture circles around).
    A = np.zeros((3, 3))
    b = np.zeros(3)
    for c, d in zip(centres, forwards):
        P = np.eye(3) - np.outer(d, d)
        A += P
        b += P @ c
    first, forward = centres[0], forwards[0]
    target = np.linalg.solve(A, b) if np.linalg.cond(A) < 1e6 else first + forward
    distance = float(np.dot(target - first, forward))
    look_at = first + forward * (distance if distance > 1e-6 else 1.0)
    fov = 2.0 * math.atan(cameras[0].height / (2.0 * cameras[0].fy))
    return InitialView(position=first, look_at=look_at, up=up, fov=fov)


def initial_view_from_points(means: torch.Tensor) -> InitialView:
    """For a PLY without cameras: look at the Gaussians' median from outside their spread, z up.

    ``means`` [N, 3].
    """
    pts = means.detach().double().cpu().numpy()
    centre = np.median(pts, axis=0)
    spread = float(np.percentile(np.linalg.norm(pts - centre, axis=1), 90)) if len(pts) else 1.0
    direction = np.array([0.0, -1.0, 0.5]) / math.sqrt(1.25)
    return InitialView(
        position=centre + direction * 2.5 * max(spread, 1e-3),
        look_at=centre,
        up=np.array([0.0, 0.0, 1.0]),
        fov=math.radians(50.0),
    )
