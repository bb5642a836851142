"""TSDF fusion (geometry/tsdf.py) of exact depth maps of an analytic scene, and the mesh it extracts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.data.cameras import look_at
from pointrix_lite.geometry.tsdf import Grid, TSDFVolume

RADIUS = 0.8
CENTRE = np.array([0.1, -0.2, 0.3])


def sphere_depth(viewmat: np.ndarray, K: np.ndarray, size: int) -> np.ndarray:
    """Exact z-depth of the sphere from a pinhole camera (pixel centres at +0.5), 0 where the ray misses."""
    v, u = np.meshgrid(np.arange(size) + 0.5, np.arange(size) + 0.5, indexing="ij")
    rays = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1)  # z = 1
    c = viewmat[:3, :3] @ CENTRE + viewmat[:3, 3]  # the centre in camera space
    a = (rays**2).sum(-1)
    b = -2 * rays @ c
    disc = b**2 - 4 * a * (c @ c - RADIUS**2)
    t = (-b - np.sqrt(np.clip(disc, 0, None))) / (2 * a)
    return np.where(disc > 0, t, 0.0)


def cameras(n: int = 12) -> list[np.ndarray]:
    out = []
    for k in range(n):
        angle = 2 * np.pi * k / n
        eye = CENTRE + 3.0 * np.array([np.cos(angle), np.sin(angle), 0.6 * np.sin(3 * angle)])
        out.append(np.asarray(look_at(eye, CENTRE)))
    return out


@pytest.mark.parametrize("voxel", [0.05, 0.03])
def test_exact_depth_maps_give_the_sphere_within_a_voxel(voxel):
    size = 96
    K = np.array([[100.0, 0, size / 2], [0, 100.0, size / 2], [0, 0, 1]])
    grid = Grid.covering(CENTRE - 1.2, CENTRE + 1.2, voxel)
    volume = TSDFVolume(grid)
    for viewmat in cameras():
        depth = sphere_depth(viewmat, K, size)
        volume.integrate(
            torch.from_numpy(depth).float(), torch.from_numpy(K).float(), torch.from_numpy(viewmat).float()
        )
    verts, faces, rgb, normals = volume.extract_mesh()
    assert len(verts) > 500 and faces.max() < len(verts) and rgb.shape == verts.shape
    error = np.abs(np.linalg.norm(verts - CENTRE, axis=1) - RADIUS)
    assert error.max() < voxel, error.max()
    # normals point out of the sphere (towards the free space the cameras saw)
    radial = (verts - CENTRE) / np.linalg.norm(verts - CENTRE, axis=1, keepdims=True)
    assert np.median((normals * radial).sum(1)) > 0.95
    # and the triangles wind counter-clockwise seen from outside (glTF's front faces)
    cross = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
    assert ((cross * radial[faces[:, 0]]).sum(1) > 0).mean() > 0.99


def test_grid_is_bounded():
    grid = Grid.covering(np.zeros(3), np.ones(3) * 10, 0.001, max_voxels=64**3)
    assert np.prod(grid.dims) <= 64**3 and grid.voxel > 0.15
    with pytest.raises(ValueError, match="empty box"):
        Grid.covering(np.zeros(3), np.zeros(3), 0.1)
