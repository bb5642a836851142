"""Initial point clouds and their conversion into Gaussian parameters.

* :class:`PointCloud` is what a dataset offers (SfM points, a ``points3d.ply`` or a random cube).
* :func:`init_gaussians` turns it into the model's raw parameters, as gsplat's ``simple_trainer`` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from plyfile import PlyData, PlyElement
from scipy.spatial import cKDTree

from ..errors import DataError

SH_C0 = 0.28209479177387814  # Y_0^0; rgb = SH_C0 * sh0 + 0.5


@dataclass
class PointCloud:
    """Coloured points.

    Attributes:
        xyz: [N, 3] float32 positions.
        rgb: [N, 3] float32 colours in [0, 1].
    """

    xyz: torch.Tensor
    rgb: torch.Tensor

    def __len__(self) -> int:
        return int(self.xyz.shape[0])

    @classmethod
    def from_numpy(cls, xyz: np.ndarray, rgb: np.ndarray) -> PointCloud:
        as_tensor = lambda a: torch.from_numpy(np.array(a, dtype=np.float32))  # noqa: E731 (copies)
        return cls(as_tensor(xyz), as_tensor(rgb))

    def subsample(self, max_points: int, seed: int) -> PointCloud:
        """At most ``max_points`` points chosen uniformly without replacement (0 = keep all)."""
        if max_points <= 0 or len(self) <= max_points:
            return self
        g = torch.Generator().manual_seed(seed)
        keep = torch.randperm(len(self), generator=g)[:max_points].sort().values
        return PointCloud(self.xyz[keep], self.rgb[keep])


def random_cube(n: int, side: float = 2.6, seed: int = 0) -> PointCloud:
    """``n`` uniform points in an axis-aligned cube of ``side`` centred at the origin, random colours.

    This is INRIA 3DGS's NeRF-synthetic init (100k points, side 2.6) except that colours are uniform in
    [0, 1] rather than INRIA's near-grey ``SH2RGB(U[0, 1/255))``.
    """
    rng = np.random.default_rng(seed)
    xyz = (rng.random((n, 3)) - 0.5) * side
    return PointCloud.from_numpy(xyz, rng.random((n, 3)))


def read_ply_points(path: Path) -> PointCloud:
    """Read ``x, y, z`` and ``red, green, blue`` (uint8, INRIA's ``points3d.ply``) from a PLY vertex element."""
    try:
        ply = PlyData.read(str(path))
        v = ply["vertex"]
        xyz = np.stack([v["x"], v["y"], v["z"]], axis=1).astype(np.float32)
        rgb = np.stack([v["red"], v["green"], v["blue"]], axis=1).astype(np.float32) / 255.0
    except KeyError as exc:
        raise DataError(f"{path}: PLY lacks vertex property {exc}") from None
    except Exception as exc:  # plyfile raises assorted types for truncated or non-PLY files
        raise DataError(f"{path}: cannot read PLY ({type(exc).__name__}: {exc})") from None
    if len(xyz) == 0:
        raise DataError(f"{path}: point cloud is empty")
    if not np.all(np.isfinite(xyz)):
        raise DataError(f"{path}: point cloud has non-finite coordinates")
    return PointCloud.from_numpy(xyz, rgb)


def write_ply_points(path: Path, cloud: PointCloud) -> None:
    """Write INRIA's ``points3d.ply`` layout: float x,y,z, nx,ny,nz (zeros), uchar red,green,blue."""
    xyz = cloud.xyz.numpy()
    rgb = np.clip(np.rint(cloud.rgb.numpy() * 255.0), 0, 255).astype(np.uint8)
    names = ["x", "y", "z", "nx", "ny", "nz", "red", "green", "blue"]
    dtype = [(n, "f4") for n in names[:6]] + [(n, "u1") for n in names[6:]]
    data = np.empty(len(xyz), dtype=dtype)
    for i, n in enumerate("xyz"):
        data[n] = xyz[:, i]
        data["n" + n] = 0.0
    for i, n in enumerate(names[6:]):
        data[n] = rgb[:, i]
    PlyData([PlyElement.describe(data, "vertex")]).write(str(path))


def knn_mean_distance(xyz: np.ndarray | torch.Tensor, k: int = 3) -> np.ndarray:
    """Root-mean-square distance of each point to its ``k`` nearest other points (gsplat's rule).

    gsplat's simple_trainer uses ``sqrt(mean(d_i^2))``; INRIA's ``distCUDA2`` gives ``mean(d_i^2)`` and
    takes ``sqrt`` of it later -- the same number. A KD-tree keeps memory O(N k) rather than O(N^2).

    Args:
        xyz: [N, 3] points, N >= 1. Duplicated points get distance 0 (clamp before taking a log).
        k: Neighbours per point; fewer are used when N <= k.

    Returns:
        [N] float64 distances (1.0 for a lone point, which has no neighbours to measure).
    """
    pts = xyz.detach().cpu().double().numpy() if isinstance(xyz, torch.Tensor) else np.asarray(xyz, np.float64)
    n = len(pts)
    if n == 0:
        raise ValueError("knn_mean_distance needs at least one point")
    kk = min(k, n - 1)
    if kk == 0:
        return np.ones(1)
    # k+1 because the nearest hit of each query point is the point itself at distance 0.
    dist, _ = cKDTree(pts).query(pts, k=kk + 1)
    return np.sqrt((dist[:, 1:] ** 2).mean(axis=1))


def rotmats_to_quats(R: np.ndarray) -> np.ndarray:
    """Unit quaternions ``[N,4]`` (wxyz) of rotation matrices ``[N,3,3]`` (each component from the
    diagonal, its sign from the antisymmetric part; exact for proper rotations)."""
    m00, m11, m22 = R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]
    q = 0.5 * np.sqrt(
        np.maximum(
            0.0, np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], axis=1)
        )
    )
    q[:, 1] = np.copysign(q[:, 1], R[:, 2, 1] - R[:, 1, 2])
    q[:, 2] = np.copysign(q[:, 2], R[:, 0, 2] - R[:, 2, 0])
    q[:, 3] = np.copysign(q[:, 3], R[:, 1, 0] - R[:, 0, 1])
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def neighbourhood_eigh(pts: np.ndarray, k: int, chunk: int = 65536) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """Eigen-decompositions of each point's neighbourhood scatter (itself and its ``k`` nearest points).

    Yields ``(rows, eigenvalues [n,3] ascending, eigenvectors [n,3,3] as columns)`` per chunk, so
    the ``[chunk, k, 3]`` neighbourhoods stay small. ``pts`` must hold more than ``k`` points.
    """
    _, idx = cKDTree(pts).query(pts, k=k + 1)
    for lo in range(0, len(pts), chunk):
        nb = pts[idx[lo : lo + chunk]]
        nb = nb - nb.mean(axis=1, keepdims=True)
        vals, vecs = np.linalg.eigh(np.einsum("nki,nkj->nij", nb, nb))
        yield slice(lo, lo + chunk), vals, vecs


def local_frames(xyz: np.ndarray | torch.Tensor, k: int = 16) -> np.ndarray:
    """Per point, the rotation whose axes are the principal axes of its ``k`` nearest points.

    Columns in order of decreasing spread, the last along the local surface normal where the points
    lie on a surface, turned to a proper rotation. The frames turn with the cloud: a rotated cloud
    gets rotated frames (up to each axis' sign), whatever frame SfM or a dataset gives.

    Returns:
        ``[N,4]`` float64 unit quaternions (wxyz); identity where a point has fewer than 3 neighbours.
    """
    pts = xyz.detach().cpu().double().numpy() if isinstance(xyz, torch.Tensor) else np.asarray(xyz, np.float64)
    n = len(pts)
    quats = np.zeros((n, 4))
    quats[:, 0] = 1.0
    kk = min(k, n - 1)
    if kk < 3:
        return quats
    for rows, _, vecs in neighbourhood_eigh(pts, kk):
        R = vecs[:, :, ::-1].copy()  # largest spread first, normal last
        R[np.linalg.det(R) < 0, :, 2] *= -1.0
        quats[rows] = rotmats_to_quats(R)
    return quats


def init_gaussians(
    xyz: np.ndarray | torch.Tensor,
    rgb: np.ndarray | torch.Tensor,
    sh_degree: int,
    init_opacity: float = 0.1,
    init_scale: float = 1.0,
    random_quats: bool = False,
    seed: int = 0,
    eps: float = 1e-7,
    oriented: bool = False,
) -> dict[str, torch.Tensor]:
    """Raw (pre-activation) Gaussian parameters for a point cloud, named as gsplat names them.

    Args:
        xyz: [N, 3] positions. rgb: [N, 3] colours in [0, 1].
        sh_degree: Maximum SH degree; ``shN`` gets ``(sh_degree + 1)**2 - 1`` zero coefficients.
        init_opacity: Initial opacity (stored as its logit).
        init_scale: Multiplier on the kNN distance.
        random_quats: Uniformly random rotations instead of identity.
        oriented: Rotations from :func:`local_frames` instead of identity (scales stay isotropic).
        eps: Floor on distances before the log (duplicated points would give -inf).

    Returns:
        Float32 CPU tensors: ``means [N,3]``, ``scales [N,3]`` (log, isotropic), ``quats [N,4]`` (wxyz),
        ``opacities [N]`` (logit), ``sh0 [N,1,3]`` (``(rgb - 0.5) / SH_C0``), ``shN [N,K-1,3]``.
    """
    means = torch.as_tensor(np.asarray(xyz, np.float32) if not isinstance(xyz, torch.Tensor) else xyz).float().cpu()
    colors = torch.as_tensor(np.asarray(rgb, np.float32) if not isinstance(rgb, torch.Tensor) else rgb).float().cpu()
    n = means.shape[0]
    dist = np.maximum(knn_mean_distance(means), eps) * init_scale
    scales = torch.from_numpy(np.log(dist)).float()[:, None].repeat(1, 3)
    if random_quats:
        quats = torch.randn(n, 4, generator=torch.Generator().manual_seed(seed))
        quats = quats / quats.norm(dim=-1, keepdim=True)
    elif oriented:
        quats = torch.from_numpy(local_frames(means)).float()
    else:
        quats = torch.zeros(n, 4)
        quats[:, 0] = 1.0
    opacities = torch.full((n,), math.log(init_opacity / (1.0 - init_opacity)))
    sh0 = ((colors - 0.5) / SH_C0)[:, None, :]
    shN = torch.zeros(n, (sh_degree + 1) ** 2 - 1, 3)
    return {
        "means": means.clone(),
        "scales": scales,
        "quats": quats,
        "opacities": opacities,
        "sh0": sh0,
        "shN": shN,
    }


CAMERA_BOX_POINTS = 50_000


def camera_box_points(
    images: Iterable[Any], pad: float = 0.0, n: int = CAMERA_BOX_POINTS, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform points ``[n, 3]`` float64 and random colours ``[n, 3]`` uint8 in the box of the camera
    centres of ``images`` (COLMAP images: ``qvec``, ``tvec``), grown by ``pad`` x its largest side on each side:
    the start of a scene that brings no points (nerfstudio's random init)."""
    from .cameras import qvec_to_rotmat

    centres = np.stack([-qvec_to_rotmat(im.qvec).T @ im.tvec for im in images])
    lo, hi = centres.min(0), centres.max(0)
    margin = pad * float((hi - lo).max())
    rng = np.random.default_rng(seed)
    xyz = lo - margin + (hi - lo + 2 * margin) * rng.random((n, 3))
    return xyz, rng.integers(0, 256, (n, 3), dtype=np.uint8)
