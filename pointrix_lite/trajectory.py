"""Camera paths for fly-through videos, built from a data set's cameras.

``orbit_cameras`` circles the scene centre (the point closest to every camera's optical axis)
at the captured cameras' mean distance and height, always looking at the centre. Cameras
follow the rasterizer's convention (``data/cameras.py``): world-to-camera ``viewmat``, OpenCV
axes (x right, y down, z forward).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import Tensor

from .data.cameras import Camera, look_at
from .errors import DataError

TRAJECTORIES = ("orbit",)


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
    centre = scene_centre(cameras)
    positions, _, ups = _poses(cameras)
    up = ups.mean(0)
    up = up / up.norm()
    rel = positions - centre
    heights = rel @ up
    horizontal = rel - heights[:, None] * up
    radius = float(horizontal.norm(dim=1).mean())
    height = float(heights.mean())
    if radius < 1e-8:
        raise DataError("trajectory: the cameras sit on the orbit axis; no circle to follow")
    e1 = horizontal[0] / horizontal[0].norm()
    e2 = torch.linalg.cross(up, e1)
    out = []
    for k in range(n_frames):
        angle = 2.0 * math.pi * k / n_frames
        eye = centre + height * up + radius * (math.cos(angle) * e1 + math.sin(angle) * e2)
        viewmat = torch.from_numpy(look_at(eye.numpy(), centre.numpy(), up.numpy())).float()
        out.append(replace(cameras[0], viewmat=viewmat, name=f"orbit_{k:04d}"))
    return out


def make_trajectory(kind: str, cameras: Sequence[Camera], n_frames: int) -> list[Camera]:
    """Dispatch on the path name (``--trajectory``); only ``orbit`` exists so far."""
    if kind == "orbit":
        return orbit_cameras(cameras, n_frames)
    raise DataError(f"trajectory: unknown kind {kind!r}; choose from {', '.join(TRAJECTORIES)}")
