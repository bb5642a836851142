"""The scene's ground plane: which way is up, and the two horizontal axes the blocks are cut along.

COLMAP's world frame is arbitrary (fixed by the first image pair), so "horizontal" must be found, from
two clues, tried in this order by ``up="auto"``:

* **cameras**: people, cars and drones hold cameras without roll, so each camera's x axis (image
  right) is horizontal, whatever the camera's pitch (a street view pitched down, a nadir drone shot):
  up is the direction most perpendicular to all of them (the least eigenvector of the sum of their
  outer products), when they all are (its eigenvalue below ``ROLL_TOLERANCE``) and turn in at least
  two directions (the next eigenvalue above ``MIN_TURN``). The mean of the image-up vectors, which
  lean towards the way the cameras face, only gives its sign.
* **pca**: otherwise a large scene is much wider than it is tall, so the direction of least spread
  of the SfM points is up.

Either way up is turned to the side the cameras are on (above the points' median) when the image-up
vectors do not say (nadir shots).

The horizontal axes are the principal axes of the points projected onto the ground plane, so a grid
follows a street or a valley instead of cutting it diagonally; when the scene is about as wide one way
as the other (spreads within ``ISOTROPIC``), the principal axes are noise and the world axis closest
to the ground plane is taken instead. Nothing is moved: the frame only decides which block a point or
camera lies in; every block keeps COLMAP's world coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError

ROLL_TOLERANCE = 0.02  # mean squared sine of the camera x axes' tilt out of the ground plane (~8 deg)
MIN_TURN = 0.05  # second eigenvalue: the x axes must point in at least two directions
AXES = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1), "-z": (0, 0, -1)}
UP_CHOICES = ("auto", "cameras", "pca", *AXES)
ISOTROPIC = 0.8  # second / first horizontal spread above which the principal axes are not used


@dataclass(frozen=True)
class GroundFrame:
    """``rotation`` [3, 3]: rows are the two horizontal axes and up; partition coordinates
    ``q = rotation @ p`` of a world point ``p`` (``q[:2]`` on the ground, ``q[2]`` the height)."""

    rotation: np.ndarray
    method: str  # how up was found: cameras, pca or an axis given by the user

    @property
    def up(self) -> np.ndarray:
        return self.rotation[2]

    def ground(self, points: np.ndarray) -> np.ndarray:
        """World points [N, 3] -> ground coordinates [N, 2]."""
        return points @ self.rotation[:2].T


def camera_centers(rotations: np.ndarray, translations: np.ndarray) -> np.ndarray:
    """World positions [C, 3] of cameras with world-to-camera ``R`` [C, 3, 3] and ``t`` [C, 3]."""
    return -np.einsum("cji,cj->ci", rotations, translations)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def up_from_cameras(rotations: np.ndarray) -> np.ndarray | None:
    """The direction perpendicular to every camera's x axis (unsigned), or None when the cameras roll or
    all face one way (row 0 of a world-to-camera R is the camera's x axis in world axes)."""
    x = rotations[:, 0, :]
    values, vectors = np.linalg.eigh(x.T @ x / len(x))
    return vectors[:, 0] if values[0] < ROLL_TOLERANCE and values[1] > MIN_TURN else None


def up_from_points(points: np.ndarray) -> np.ndarray:
    """The points' direction of least spread (unsigned)."""
    centred = points - points.mean(axis=0)
    return np.linalg.eigh(centred.T @ centred)[1][:, 0]


def signed_up(up: np.ndarray, rotations: np.ndarray, points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """``up`` or ``-up``: along the cameras' mean image-up when that leans clearly one way, else towards
    the side of the points the cameras are on."""
    lean = float((-rotations[:, 1, :]).mean(axis=0) @ up)
    if abs(lean) < 0.3:
        lean = float(np.median(centers @ up) - np.median(points @ up))
    return up if lean >= 0 else -up


def find_frame(points: np.ndarray, rotations: np.ndarray, translations: np.ndarray, up: str = "auto") -> GroundFrame:
    """The ground frame of a scene (``up``: one of ``UP_CHOICES``)."""
    if up in AXES:
        up_vec, method = np.asarray(AXES[up], dtype=np.float64), up
    else:
        from_cameras = up_from_cameras(rotations) if up != "pca" else None
        if up == "cameras" and from_cameras is None:
            raise DataError(
                "--up cameras: the cameras roll or all face one way, so they do not show which way is up "
                "(use --up pca or name the axis)"
            )
        method = "cameras" if from_cameras is not None else "pca"
        raw = from_cameras if from_cameras is not None else up_from_points(points)
        up_vec = signed_up(raw, rotations, points, camera_centers(rotations, translations))
    flat = points - np.outer(points @ up_vec, up_vec)
    flat = flat - flat.mean(axis=0)
    values, vectors = np.linalg.eigh(flat.T @ flat)
    major = vectors[:, 2]
    if values[1] > ISOTROPIC * values[2]:
        world = np.eye(3)
        major = world[np.argmin(np.abs(world @ up_vec))]
    major = _unit(major - (major @ up_vec) * up_vec)
    # Deterministic sign: the major axis points along +x, +y or +z of the world, whichever it is closest to.
    if major[np.argmax(np.abs(major))] < 0:
        major = -major
    return GroundFrame(np.stack([major, np.cross(up_vec, major), up_vec]), method)
