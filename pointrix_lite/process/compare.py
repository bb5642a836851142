"""How close a reconstruction's cameras are to the true ones, up to the similarity SfM cannot know.

Used by ``python -m benchmarks sfm`` and the end-to-end test; SfM recovers the scene only up to scale,
rotation and translation, so the centres are compared after the similarity that fits them best.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.cameras import qvec_to_rotmat
from ..io.colmap import ColmapModel


def similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Umeyama: ``s, R, t`` minimising ``|s R src + t - dst|`` over rows ``[N, 3]``."""
    ms, md = src.mean(0), dst.mean(0)
    a, b = src - ms, dst - md
    U, S, Vt = np.linalg.svd(b.T @ a / len(a))
    D = np.eye(3)
    D[2, 2] = np.sign(np.linalg.det(U @ Vt))
    R = U @ D @ Vt
    s = float(np.trace(np.diag(S) @ D) / (a**2).sum(1).mean())
    return s, R, md - s * R @ ms


def robust_similarity(src: np.ndarray, dst: np.ndarray, keep: float = 0.8) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`similarity` refitted on the ``keep`` fraction of rows it explains best.

    One view that SfM registers in a wrong place (it happens, depending on thread timing in the
    mapper) would otherwise drag the whole fit and make every other centre look wrong.
    """
    s, R, t = similarity(src, dst)
    for _ in range(2):
        err = np.linalg.norm(s * src @ R.T + t - dst, axis=1)
        best = np.argsort(err)[: max(3, int(keep * len(src)))]
        s, R, t = similarity(src[best], dst[best])
    return s, R, t


def centres(model: ColmapModel) -> dict[str, np.ndarray]:
    """Camera centre ``[3]`` of every image, by name."""
    return {im.name: -qvec_to_rotmat(im.qvec).T @ im.tvec for im in model.images.values()}


@dataclass
class PoseScore:
    registered: int  # images of ``truth`` the model holds
    total: int  # images of ``truth``
    centre_median: float  # centre error after the fitted similarity, relative to the true cameras' spread
    centre_max: float
    rotation_median_deg: float  # angle between true and aligned rotations
    focal_rel: float  # |f / f_true - 1| of the first camera (scaled by the width ratio)


def compare_cameras(model: ColmapModel, truth: ColmapModel) -> PoseScore:
    """Score ``model``'s cameras against ``truth``'s (matched by image name; needs 3 in common)."""
    found, true = centres(model), centres(truth)
    names = sorted(set(found) & set(true))
    if len(names) < 3:
        raise ValueError(f"compare_cameras: {len(names)} image(s) in common, need 3")
    src, dst = np.array([found[n] for n in names]), np.array([true[n] for n in names])
    s, R, t = robust_similarity(src, dst)
    spread = float(np.linalg.norm(dst - dst.mean(0), axis=1).mean())
    err = np.linalg.norm(s * src @ R.T + t - dst, axis=1) / spread
    by_name = {im.name: im for im in model.images.values()}
    true_by_name = {im.name: im for im in truth.images.values()}
    angles = []
    for n in names:
        # world_true = s R world + t, so the camera's rotation in the true frame is R_found R^T.
        rel = qvec_to_rotmat(true_by_name[n].qvec) @ (qvec_to_rotmat(by_name[n].qvec) @ R.T).T
        angles.append(np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0))))
    cam, true_cam = next(iter(model.cameras.values())), next(iter(truth.cameras.values()))
    focal_rel = abs(float(cam.params[0]) * true_cam.width / cam.width / float(true_cam.params[0]) - 1)
    return PoseScore(
        len(names), len(true), float(np.median(err)), float(err.max()), float(np.median(angles)), focal_rel
    )
