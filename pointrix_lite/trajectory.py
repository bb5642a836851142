"""Camera paths for fly-through videos, built from a data set's cameras.

- ``orbit``: a circle around the scene centre (the point closest to every camera's optical axis)
  at the captured cameras' mean distance and height, always looking at the centre.
- ``interp``: through the captured cameras in their order (gsplat's ``generate_interpolated_path``):
  Catmull-Rom through the centres, rotations slerped, so every captured pose is a frame of the path.
- ``ellipse``: an ellipse around the scene centre fitted to the cameras' horizontal spread at
  their mean height (gsplat's ``generate_ellipse_path_z``), looking at the centre.
- ``spiral``: LLFF's forward-facing spiral (gsplat's ``generate_spiral_path``) around the mean
  camera, looking at a point ahead of it; it needs no scene centre, so it suits forward captures.

Cameras follow the rasterizer's convention (``data/cameras.py``): world-to-camera ``viewmat``,
OpenCV axes (x right, y down, z forward). A path from a file is read by ``io/camera_path.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from .data.cameras import Camera, look_at
from .errors import DataError
from .io.camera_path import PathFrame, read_camera_path, write_camera_path

TRAJECTORIES = ("orbit", "interp", "ellipse", "spiral")


def _poses(cameras: Sequence[Camera]) -> tuple[Tensor, Tensor, Tensor]:
    """Camera centres [C,3], forward axes [C,3] and up axes [C,3] in world space (float64)."""
    R = torch.stack([torch.as_tensor(c.viewmat)[:3, :3] for c in cameras]).double()
    t = torch.stack([torch.as_tensor(c.viewmat)[:3, 3] for c in cameras]).double()
    centres = -torch.einsum("cji,cj->ci", R, t)  # -R^T t
    # Rows of R are the camera axes in world coordinates: x right, y down, z forward.
    return centres, R[:, 2], -R[:, 1]


def scene_centre(cameras: Sequence[Camera]) -> Tensor:
    """The point with the least squared distance to all optical axes. [3] float64

    Solves ``sum_i (I - d_i d_i^T) p = sum_i (I - d_i d_i^T) c_i`` (camera centres c, unit view
    directions d), the usual "look-at point" of an inward-facing capture.

    Raises:
        DataError: the axes are (nearly) parallel, e.g. a forward-facing capture: no centre to orbit.
    """
    centres, forward, _ = _poses(cameras)
    eye = torch.eye(3, dtype=torch.float64)
    proj = eye - forward[:, :, None] * forward[:, None, :]  # [C,3,3] projectors orthogonal to each axis
    A = proj.sum(0)
    b = torch.einsum("cij,cj->i", proj, centres)
    if len(cameras) < 2 or torch.linalg.eigvalsh(A / len(cameras))[0] < 1e-3:
        raise DataError(
            "trajectory: the cameras' optical axes are (nearly) parallel, so there is no scene centre to orbit "
            "(an orbit needs an inward-facing capture)"
        )
    return torch.linalg.solve(A, b)


def orbit_cameras(cameras: Sequence[Camera], n_frames: int = 120) -> list[Camera]:
    """``n_frames`` cameras on a circle around the scene, all looking at its centre.

    The circle's axis is the mean camera up direction through :func:`scene_centre`; its radius
    and height above the centre are the means over ``cameras``; it starts at the first camera's
    azimuth and turns counter-clockwise seen from above. Intrinsics and image size are those of
    ``cameras[0]``.

    Args:
        cameras: The captured cameras (e.g. a data set's training cameras), at least 2.
        n_frames: Number of cameras on the path (>= 1), evenly spaced over one full turn.
    """
    if n_frames < 1:
        raise DataError(f"trajectory: need at least 1 frame, got {n_frames}")
    centre, up, height, horizontal = _ground_frame(cameras)
    radius = float(horizontal.norm(dim=1).mean())
    if radius < 1e-8:
        raise DataError("trajectory: the cameras sit on the orbit axis; no circle to follow")
    e1 = horizontal[0] / horizontal[0].norm()
    return _ring(cameras[0], centre, up, height, (e1, radius), (torch.linalg.cross(up, e1), radius), n_frames, "orbit")


def _ground_frame(cameras: Sequence[Camera]) -> tuple[Tensor, Tensor, float, Tensor]:
    """:func:`scene_centre`, the cameras' mean up direction (unit), their mean height above the centre along it,
    and their offsets from the centre with that height taken out ``[C, 3]``: the plane orbits and ellipses lie in."""
    centre = scene_centre(cameras)
    positions, _, ups = _poses(cameras)
    up = ups.mean(0)
    up = up / up.norm()
    rel = positions - centre
    heights = rel @ up
    return centre, up, float(heights.mean()), rel - heights[:, None] * up


def _aimed(camera: Camera, eye: Tensor, target: Tensor, up: Tensor, name: str) -> Camera:
    """``camera`` at ``eye`` looking at ``target``, ``up`` upwards in its image."""
    viewmat = torch.from_numpy(look_at(eye.numpy(), target.numpy(), up.numpy())).float()
    return replace(camera, viewmat=viewmat, name=name)


def _ring(
    camera: Camera,
    centre: Tensor,
    up: Tensor,
    height: float,
    first: tuple[Tensor, float],
    second: tuple[Tensor, float],
    n_frames: int,
    prefix: str,
) -> list[Camera]:
    """``n_frames`` cameras evenly in angle on the ellipse ``a cos t e1 + b sin t e2`` (``first`` = (e1, a),
    ``second`` = (e2, b)) at ``height`` above ``centre``, all looking at it."""
    (e1, a), (e2, b) = first, second
    out = []
    for k in range(n_frames):
        angle = 2.0 * math.pi * k / n_frames
        eye = centre + height * up + a * math.cos(angle) * e1 + b * math.sin(angle) * e2
        out.append(_aimed(camera, eye, centre, up, f"{prefix}_{k:04d}"))
    return out


def _with_pose(camera: Camera, rotation: Tensor, centre: Tensor, name: str) -> Camera:
    """``camera`` moved to world-from-camera ``rotation`` [3,3] (columns: camera axes) at ``centre`` [3]."""
    viewmat = torch.eye(4, dtype=torch.float64)
    viewmat[:3, :3] = rotation.T
    viewmat[:3, 3] = -rotation.T @ centre
    return replace(camera, viewmat=viewmat.float(), name=name)


def interp_cameras(cameras: Sequence[Camera], n_frames: int = 120) -> list[Camera]:
    """``n_frames`` cameras through ``cameras`` in their order: Catmull-Rom between the centres,
    spherical interpolation between the rotations. Frame ``k * (n_frames - 1) / (C - 1)`` is camera
    ``k`` exactly (for a whole number), so the path shows every captured view. Intrinsics: ``cameras[0]``'s."""
    from scipy.spatial.transform import Rotation, Slerp

    if n_frames < 2 or len(cameras) < 2:
        raise DataError(f"trajectory interp: needs at least 2 cameras and 2 frames, got {len(cameras)} and {n_frames}")
    centres, _, _ = _poses(cameras)
    rots = Rotation.from_matrix(torch.stack([torch.as_tensor(c.viewmat)[:3, :3].double().T for c in cameras]).numpy())
    knots = torch.arange(len(cameras), dtype=torch.float64)
    slerp = Slerp(knots.numpy(), rots)
    padded = torch.cat([2 * centres[:1] - centres[1:2], centres, 2 * centres[-1:] - centres[-2:-1]])
    out = []
    for k, u in enumerate(torch.linspace(0, len(cameras) - 1, n_frames, dtype=torch.float64)):
        i = min(int(u), len(cameras) - 2)
        t = float(u) - i
        p0, p1, p2, p3 = padded[i : i + 4]
        pos = 0.5 * (
            2 * p1 + (p2 - p0) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t**2 + (3 * p1 - p0 - 3 * p2 + p3) * t**3
        )
        rotation = torch.from_numpy(slerp([float(u)]).as_matrix()[0])
        out.append(_with_pose(cameras[0], rotation, pos, f"interp_{k:04d}"))
    return out


def ellipse_cameras(cameras: Sequence[Camera], n_frames: int = 120) -> list[Camera]:
    """``n_frames`` cameras on an ellipse around :func:`scene_centre` at the cameras' mean height,
    its axes the 90th percentile of their horizontal offsets along their two principal directions
    (so a few far cameras do not stretch it), all looking at the centre."""
    if n_frames < 1:
        raise DataError(f"trajectory: need at least 1 frame, got {n_frames}")
    centre, up, height, horizontal = _ground_frame(cameras)
    _, _, vh = torch.linalg.svd(horizontal, full_matrices=False)
    e1 = vh[0] - (vh[0] @ up) * up
    e1 = e1 / e1.norm()
    e2 = torch.linalg.cross(up, e1)
    a = float(torch.quantile((horizontal @ e1).abs(), 0.9))
    b = float(torch.quantile((horizontal @ e2).abs(), 0.9))
    if min(a, b) < 1e-8:
        raise DataError("trajectory ellipse: the cameras have no horizontal spread around the scene centre")
    return _ring(cameras[0], centre, up, height, (e1, a), (e2, b), n_frames, "ellipse")


def spiral_cameras(cameras: Sequence[Camera], n_frames: int = 120, rotations: int = 2) -> list[Camera]:
    """LLFF's spiral: ``rotations`` turns around the mean camera, in its image plane with radii the
    90th percentile of the cameras' offsets (and along its axis at half that), each camera looking
    at a point ahead of the mean camera: the scene centre's depth when the axes meet, else five times
    the cameras' spread."""
    if n_frames < 1:
        raise DataError(f"trajectory: need at least 1 frame, got {n_frames}")
    positions, forward, ups = _poses(cameras)
    mean = positions.mean(0)
    z = forward.mean(0) / forward.mean(0).norm()
    x = torch.linalg.cross(z, ups.mean(0))
    x = x / x.norm()
    y = torch.linalg.cross(z, x)  # down, as OpenCV's y
    rel = positions - mean
    radii = torch.stack([torch.quantile((rel @ axis).abs(), 0.9) for axis in (x, y, z)])
    try:
        focus = float((scene_centre(cameras) - mean) @ z)
    except DataError:
        focus = 0.0
    if focus <= 0.0:
        focus = 5.0 * float(radii[:2].max())
    if focus <= 1e-8:
        raise DataError("trajectory spiral: the cameras have no spread to spiral around")
    target = mean + focus * z
    out = []
    for k in range(n_frames):
        t = 2.0 * math.pi * rotations * k / n_frames
        offset = radii[0] * math.cos(t) * x + radii[1] * math.sin(t) * y + 0.5 * radii[2] * math.sin(t / rotations) * z
        eye = mean + offset
        out.append(_aimed(cameras[0], eye, target, -y, f"spiral_{k:04d}"))
    return out


def make_trajectory(kind: str, cameras: Sequence[Camera], n_frames: int) -> list[Camera]:
    """The camera path ``kind`` (one of :data:`TRAJECTORIES`, ``--trajectory``) through ``cameras``."""
    paths = {"orbit": orbit_cameras, "interp": interp_cameras, "ellipse": ellipse_cameras, "spiral": spiral_cameras}
    if kind in paths:
        return paths[kind](cameras, n_frames)
    raise DataError(f"trajectory: unknown kind {kind!r}; choose from {', '.join(TRAJECTORIES)}")


def path_cameras(path: Path) -> list[Camera]:
    """The cameras of a camera path file (``render.py --camera-path``; ``io/camera_path.py``), named ``path_0000``..."""
    return [
        Camera(f.fx, f.fy, f.cx, f.cy, f.width, f.height, f.viewmat.float(), f"path_{k:04d}")
        for k, f in enumerate(read_camera_path(path))
    ]


def save_path(cameras: Sequence[Camera], path: Path, fps: int = 30) -> Path:
    """Write ``cameras`` (e.g. a trajectory, or a run's test cameras) as a camera path file."""
    frames = [
        PathFrame(torch.as_tensor(c.viewmat).double(), c.fx, c.fy, c.cx, c.cy, c.width, c.height) for c in cameras
    ]
    return write_camera_path(frames, path, fps)
