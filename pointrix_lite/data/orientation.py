"""Turning a reconstruction so that its dominant surface directions lie along the world axes.

Gaussians start with identity rotations (INRIA's init), i.e. with their axes along the world axes,
and a Gaussian on a face only has to shrink one scale to flatten onto it when the face is
perpendicular to an axis. SfM's frame is arbitrary (COLMAP fixes it from the first image pair), so
on man-made scenes the same Gaussians start turned against every wall, floor and box: measured on
the photo scene, turning the true reconstruction as SfM's frame is turned costs 0.5 dB at 3000 steps
(docs/model.md, "The frame effect follows the initial orientation"). Turning the whole scene (every
camera and point by one rotation) is a gauge change that renders the same images, so it can be
undone at load time: :func:`manhattan_rotation` finds the rotation that puts the most surface
normals along the axes (a Manhattan frame), :func:`rotate_scene` applies it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from ..errors import DataError
from ..io.atomic import atomic_write_text
from .cameras import View, qvec_to_rotmat
from .pointcloud import PointCloud, neighbourhood_eigh

TOLERANCE_DEG = 15.0  # a normal this close to an axis counts as lying along it


def surface_normals(xyz: np.ndarray, k: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Per point, the normal of the plane through its ``k`` nearest points and how planar they lie.

    Returns:
        ``([N,3] unit normals, [N] planarity in [0, 1])``: planarity ``1 - l3 / l2`` of the
        scatter's eigenvalues ``l1 >= l2 >= l3`` is 1 on a flat patch and near 0 on a line or a
        blob, where the normal is undetermined.
    """
    pts = np.asarray(xyz, np.float64)
    normals = np.zeros((len(pts), 3))
    planarity = np.zeros(len(pts))
    kk = min(k, len(pts) - 1)
    if kk < 3:
        return normals, planarity
    for rows, vals, vecs in neighbourhood_eigh(pts, kk):
        normals[rows] = vecs[:, :, 0]
        planarity[rows] = 1.0 - vals[:, 0] / np.maximum(vals[:, 1], 1e-300)
    return normals, planarity


def axis_alignment(
    normals: np.ndarray, weights: np.ndarray, R: np.ndarray, tolerance_deg: float = TOLERANCE_DEG
) -> float:
    """The weighted share of ``normals`` that ``R`` turns to within ``tolerance_deg`` of an axis."""
    inliers = np.abs(normals @ R.T).max(axis=1) >= np.cos(np.radians(tolerance_deg))
    return float((weights * inliers).sum() / max(weights.sum(), 1e-300))


def manhattan_rotation(
    xyz: np.ndarray | torch.Tensor,
    k: int = 16,
    sample: int = 20000,
    starts: int = 64,
    tolerance_deg: float = TOLERANCE_DEG,
    seed: int = 0,
) -> tuple[np.ndarray, float]:
    """The rotation ``R`` (world -> aligned world) that puts the most surface normals along the axes.

    Normals of up to ``sample`` points (chosen with ``seed``), weighted by planarity squared so that
    edges, corners and noise count little. From each of ``starts`` rotations (identity first), the
    normals within ``tolerance_deg`` of their nearest signed axis are matched to it and ``R`` solved
    in closed form (Kabsch), until the matches stop changing; the start whose result matches the most
    weight wins. Matching only the normals already near an axis makes this a consensus (mode)
    search: surfaces at other angles (a box turned on the floor) neither pull the frame towards a
    compromise nor count. Any permutation or sign of the axes serves an identity-initialised
    Gaussian equally, so ``R`` is determined only up to those.

    Returns:
        ``([3,3] float64 proper rotation, its axis_alignment)``; identity and ``nan`` for fewer than
        4 points.
    """
    pts = xyz.detach().cpu().double().numpy() if isinstance(xyz, torch.Tensor) else np.asarray(xyz, np.float64)
    if len(pts) < 4:
        return np.eye(3), float("nan")
    rng = np.random.default_rng(seed)
    if len(pts) > sample:
        pts = pts[np.sort(rng.choice(len(pts), sample, replace=False))]
    normals, planarity = surface_normals(pts, k)
    weights = planarity**2
    cos_tol = np.cos(np.radians(tolerance_deg))
    best, best_score = np.eye(3), -1.0
    for R in [np.eye(3)] + [_random_rotation(rng) for _ in range(starts - 1)]:
        R = _refine(normals, weights, R, cos_tol)
        score = axis_alignment(normals, weights, R, tolerance_deg)
        if score > best_score + 1e-9:  # ties keep the earlier start: identity when already aligned
            best, best_score = R, score
    # Of the 24 equivalent frames (axes permuted and signed), the one nearest the given frame, so a
    # scene already near-aligned turns by its small misalignment and "up" stays roughly up.
    return max(_AXIS_FRAMES, key=lambda P: np.trace(P @ best)) @ best, best_score


def _axis_frames() -> list[np.ndarray]:
    """The 24 proper rotations that permute and sign the axes."""
    frames = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            P = np.zeros((3, 3))
            P[range(3), perm] = signs
            if np.linalg.det(P) > 0:
                frames.append(P)
    return frames


_AXIS_FRAMES = _axis_frames()


def _refine(normals: np.ndarray, weights: np.ndarray, R: np.ndarray, cos_tol: float, iters: int = 50) -> np.ndarray:
    rows = np.arange(len(normals))
    for _ in range(iters):
        turned = normals @ R.T
        axis = np.abs(turned).argmax(axis=1)
        near = np.abs(turned[rows, axis]) >= cos_tol
        if not near.any():
            return R
        targets = np.zeros_like(turned)
        targets[rows, axis] = np.sign(turned[rows, axis])
        w = weights * near
        H = (w[:, None] * targets).T @ normals  # sum_i w_i a_i n_i^T: R maximises tr(R^T H)
        U, _, Vt = np.linalg.svd(H)
        R_new = U @ np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))]) @ Vt
        if np.allclose(R_new, R, atol=1e-10):
            break
        R = R_new
    return R


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    return qvec_to_rotmat(rng.normal(size=4))  # a normalised Gaussian 4-vector: uniform on SO(3)


def rotate_scene(R: np.ndarray, views: Iterable[View], xyz: torch.Tensor) -> torch.Tensor:
    """Turn every camera in ``views`` (in place) and the points ``xyz`` by ``R`` about the origin.

    A world point ``p`` becomes ``R p``; a world-to-camera matrix ``W`` becomes ``W [R^T 0; 0 1]``, so
    every camera sees the turned points where it saw the old ones. Returns the turned ``xyz``.
    """
    turn = torch.eye(4, dtype=torch.float64)
    turn[:3, :3] = torch.from_numpy(np.asarray(R, np.float64)).T
    for view in views:
        cam = view.camera
        cam.viewmat = (cam.viewmat.double() @ turn).to(cam.viewmat.dtype)
    return (xyz.double() @ turn[:3, :3]).to(xyz.dtype)  # rows p^T R^T = (R p)^T


def orient_to_axes(views: list[View], cloud: PointCloud) -> tuple[PointCloud, np.ndarray]:
    """``dataset.orientation: manhattan``: turn ``views`` (in place) and ``cloud`` by :func:`manhattan_rotation`.

    Returns the turned cloud and the ``[3,3]`` rotation applied (world -> aligned world), with one
    status line saying how far the scene turned and how much of its surface now lies along the axes.
    """
    from ..progress import console

    R, share = manhattan_rotation(cloud.xyz)
    if not np.isfinite(share):  # fewer than 4 points: no surface to read a frame from
        console().print(
            f"orientation: not turned: the point cloud has {len(cloud.xyz)} point(s), fewer than the 4 "
            "needed to find its surfaces",
            markup=False,
        )
        return cloud, np.eye(3)
    angle = np.degrees(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)))
    turned = PointCloud(rotate_scene(R, views, cloud.xyz), cloud.rgb)
    console().print(
        f"orientation: turned the scene {angle:.1f} deg so that {100 * share:.0f}% of its surface "
        f"normals lie within {TOLERANCE_DEG:g} deg of an axis",
        markup=False,
    )
    return turned, R


ORIENTATION_FILE = "orientation.json"


def save_orientation(exp_dir: Path, R: np.ndarray) -> Path | None:
    """Write ``<exp_dir>/orientation.json`` when the dataset turned the scene (else remove an old one).

    The model, its PLY and renders' cameras live in the turned frame; this file says how to go back
    to the dataset's own frame (as nerfstudio's ``dataparser_transforms.json``): a point ``p`` of the
    exports is ``R^T p`` there.
    """
    path = Path(exp_dir) / ORIENTATION_FILE
    if np.array_equal(R, np.eye(3)):
        path.unlink(missing_ok=True)  # an earlier run's; this run's outputs are in the dataset's frame
        return None
    body = {
        "rotation": np.asarray(R, np.float64).tolist(),
        "meaning": "model point = rotation @ dataset point (dataset.orientation); "
        "dataset point = rotation^T @ model point",
    }
    atomic_write_text(path, json.dumps(body, indent=2))
    return path


def read_orientation(path: Path) -> np.ndarray | None:
    """The ``[3,3]`` rotation of an ``orientation.json`` (None when there is none); one-line DataError if unreadable."""
    if not path.is_file():
        return None
    try:
        R = np.array(json.loads(path.read_text())["rotation"], np.float64)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path}: not a readable orientation file ({err})") from None
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) <= 0:
        raise DataError(f"{path}: 'rotation' is not a 3x3 rotation matrix")
    return R
