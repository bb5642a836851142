"""TSDF fusion of depth maps into a voxel grid, and its zero level set as a triangle mesh.

Curless and Levoy's volumetric fusion as KinectFusion and Open3D's ``ScalableTSDFVolume`` do it: every voxel
centre is projected into each view; where the view's depth ``d`` at that pixel is valid, the signed distance
along the ray ``s = d - z`` (positive in front of the surface) is truncated to ``[-trunc, trunc]`` and
averaged over the views that see it, weighted by each view's confidence (the caller's, e.g. the pixel's
alpha, times how squarely the pixel's ray meets its surface, :func:`facing`). Voxels
more than ``trunc`` behind the surface are left out of that view's average (they may be seen from the other
side). Marching cubes (scikit-image) extracts the level set 0 where at least one view observed the voxel.

The grid is dense and bounded: at most ``max_voxels`` voxels (the voxel grows to fit), and the voxel
centres are projected a slab at a time, so memory is the grid (20 bytes a voxel) plus one slab's work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .maps import backproject, normals_from_depth

DEFAULT_MAX_VOXELS = 256**3  # 16.8M voxels: 335 MB of grid


def facing(depth: Tensor, K: Tensor) -> Tensor:
    """``[H, W]`` cosine between each pixel's ray and its depth map's normal (0 at depth edges and where the
    surface is seen edge on). A pixel's depth holds for its centre's ray only; at a grazing angle a voxel a
    little off that ray has a very different depth, so such pixels are trusted less."""
    points = backproject(depth, K)
    rays = torch.nn.functional.normalize(points, dim=-1)
    return (-(normals_from_depth(depth, K) * rays).sum(-1)).clamp_min(0)


@dataclass(frozen=True)
class Grid:
    """A box of voxels: ``origin`` is the centre of voxel (0, 0, 0), ``dims`` voxels along x, y, z."""

    origin: tuple[float, float, float]
    voxel: float
    dims: tuple[int, int, int]

    @staticmethod
    def covering(lo: np.ndarray, hi: np.ndarray, voxel: float, max_voxels: int = DEFAULT_MAX_VOXELS) -> Grid:
        """The grid of ``voxel`` over the box ``lo``..``hi``, the voxel grown until at most ``max_voxels`` fit."""
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)) or voxel <= 0:
            raise ValueError(f"grid: empty box {lo.tolist()}..{hi.tolist()} or voxel {voxel}")
        count = np.prod(np.ceil((hi - lo) / voxel) + 1)
        if count > max_voxels:
            voxel *= (count / max_voxels) ** (1 / 3) * 1.001
        dims = tuple(int(n) for n in np.ceil((hi - lo) / voxel) + 1)
        while math.prod(dims) > max_voxels:  # the rounding up above can leave a few too many
            voxel *= 1.01
            dims = tuple(int(n) for n in np.ceil((hi - lo) / voxel) + 1)
        return Grid(tuple(float(x) for x in lo), float(voxel), dims)  # type: ignore[arg-type]


class TSDFVolume:
    """A truncated signed distance field with colours over ``grid`` (see the module docstring).

    Args:
        grid: The voxels.
        trunc: Truncation distance in world units (a few voxels: 4 x the voxel by default).
    """

    def __init__(self, grid: Grid, trunc: float | None = None) -> None:
        self.grid = grid
        self.trunc = float(trunc) if trunc is not None else 4.0 * grid.voxel
        n = math.prod(grid.dims)
        self.tsdf = torch.ones(n, dtype=torch.float32)
        self.weight = torch.zeros(n, dtype=torch.float32)
        self.color = torch.zeros(n, 3, dtype=torch.float32)
        nx, ny, nz = grid.dims
        self._slab = max(1, (1 << 21) // (ny * nz))  # x-slices per slab: about 2M voxel centres at once

    def _centres(self, x0: int, x1: int) -> Tensor:
        """``[(x1-x0)*ny*nz, 3]`` world centres of the voxels in x-slices ``x0..x1`` (flat index order)."""
        _, ny, nz = self.grid.dims
        ix, iy, iz = torch.meshgrid(
            torch.arange(x0, x1, dtype=torch.float32),
            torch.arange(ny, dtype=torch.float32),
            torch.arange(nz, dtype=torch.float32),
            indexing="ij",
        )
        idx = torch.stack([ix, iy, iz], dim=-1).reshape(-1, 3)
        return torch.tensor(self.grid.origin, dtype=torch.float32) + idx * self.grid.voxel

    @torch.no_grad()
    def integrate(
        self, depth: Tensor, K: Tensor, viewmat: Tensor, rgb: Tensor | None = None, confidence: Tensor | None = None
    ) -> None:
        """Fuse one view: ``depth [H, W]`` (camera z, 0 = none), ``K [3, 3]``, ``viewmat [4, 4]`` world-to-camera
        (OpenCV axes), ``rgb [H, W, 3]`` in 0..1 (optional), ``confidence [H, W]`` per-pixel weight (default 1)."""
        H, W = depth.shape
        depth, K, viewmat = depth.float().cpu(), K.float().cpu(), viewmat.float().cpu()
        conf = torch.ones_like(depth) if confidence is None else confidence.float().cpu()
        conf = conf * facing(depth, K)
        rgb = None if rgb is None else rgb.float().cpu().reshape(-1, 3)
        R, t = viewmat[:3, :3], viewmat[:3, 3]
        _, ny, nz = self.grid.dims
        for x0 in range(0, self.grid.dims[0], self._slab):
            x1 = min(self.grid.dims[0], x0 + self._slab)
            start = x0 * ny * nz
            pc = self._centres(x0, x1) @ R.T + t
            z = pc[:, 2]
            front = z > 1e-6
            u = torch.where(front, K[0, 0] * pc[:, 0] / z.clamp_min(1e-6) + K[0, 2], torch.full_like(z, -1.0))
            v = torch.where(front, K[1, 1] * pc[:, 1] / z.clamp_min(1e-6) + K[1, 2], torch.full_like(z, -1.0))
            inside = front & (u >= 0) & (u < W) & (v >= 0) & (v < H)
            sel = inside.nonzero().squeeze(1)
            if not len(sel):
                continue
            pix = v[sel].long() * W + u[sel].long()  # pixel centres at +0.5: the pixel is floor(u), floor(v)
            d = depth.reshape(-1)[pix]
            sdf = d - z[sel]
            w = conf.reshape(-1)[pix]
            keep = (d > 0) & (sdf > -self.trunc) & (w > 0)
            sel, sdf, w, pix = sel[keep], sdf[keep], w[keep], pix[keep]
            flat = sel + start
            obs = (sdf / self.trunc).clamp(max=1.0)
            old_w = self.weight[flat]
            new_w = old_w + w
            self.tsdf[flat] = (self.tsdf[flat] * old_w + obs * w) / new_w
            if rgb is not None:
                self.color[flat] = (self.color[flat] * old_w[:, None] + rgb[pix] * w[:, None]) / new_w[:, None]
            self.weight[flat] = new_w

    def _nearest(self, points: Tensor) -> tuple[Tensor, Tensor]:
        """Flat index of the voxel nearest each of ``points [N, 3]`` (clamped into the grid), and whether it
        lies inside."""
        idx = torch.round((points.float() - torch.tensor(self.grid.origin)) / self.grid.voxel).long()
        dims = torch.tensor(self.grid.dims)
        inside = ((idx >= 0) & (idx < dims)).all(-1)
        idx = torch.minimum(idx.clamp_min(0), dims - 1)
        return (idx[:, 0] * dims[1] + idx[:, 1]) * dims[2] + idx[:, 2], inside

    def sample(self, points: Tensor) -> tuple[Tensor, Tensor]:
        """``(tsdf, weight)`` of the voxel nearest each of ``points [N, 3]`` (1 and 0 outside the grid)."""
        flat, inside = self._nearest(points)
        tsdf = torch.where(inside, self.tsdf[flat], torch.ones(len(points)))
        weight = torch.where(inside, self.weight[flat], torch.zeros(len(points)))
        return tsdf, weight

    def _observed_edges(
        self, verts: np.ndarray, faces: np.ndarray, normals: np.ndarray, observed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Only the triangles whose every vertex lies on a grid edge between two observed voxels: an edge to an
        unobserved voxel (its TSDF still the initial 1) puts a false surface on the far side of the truncation
        band, and scikit-image's mask does not keep those out (``verts`` in voxel units times the voxel)."""
        idx = verts / self.grid.voxel
        lo = np.clip(
            np.floor(idx + 1e-3).astype(np.int64), 0, np.asarray(observed.shape) - 1
        )  # 1e-3: float noise on a grid point
        hi = np.clip(np.ceil(idx - 1e-3).astype(np.int64), 0, np.asarray(observed.shape) - 1)
        good = observed[lo[:, 0], lo[:, 1], lo[:, 2]] & observed[hi[:, 0], hi[:, 1], hi[:, 2]]
        faces = faces[good[faces].all(axis=1)]
        used = np.zeros(len(verts), bool)
        used[faces.reshape(-1)] = True
        remap = np.cumsum(used) - 1
        return verts[used], remap[faces], normals[used]

    def extract_mesh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(verts [V,3] float32, faces [F,3] int64, rgb [V,3] uint8, normals [V,3] float32)`` of the zero
        level set where the grid was observed; empty arrays when there is none."""
        from skimage.measure import marching_cubes

        dims = self.grid.dims
        tsdf = self.tsdf.reshape(dims).numpy()
        observed = (self.weight > 0).reshape(dims).numpy()
        empty = (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int64), np.zeros((0, 3), np.uint8))
        if min(dims) < 2 or not observed.any() or tsdf[observed].min() > 0 or tsdf[observed].max() < 0:
            return (*empty, np.zeros((0, 3), np.float32))
        spacing = (self.grid.voxel,) * 3
        verts, faces, normals, _ = marching_cubes(tsdf, level=0.0, spacing=spacing, mask=observed)
        verts, faces, normals = self._observed_edges(verts, faces, normals, observed)
        verts = verts + np.asarray(self.grid.origin)
        flat, _ = self._nearest(torch.from_numpy(verts))
        rgb = (self.color[flat].clamp(0, 1) * 255).round().to(torch.uint8).numpy()
        # scikit-image's normals point down the TSDF's gradient, into the surface; turned out, towards the
        # free space the views saw (what renderers and mesh tools expect of a closed surface)
        return verts.astype(np.float32), faces.astype(np.int64), rgb, (-normals).astype(np.float32)
