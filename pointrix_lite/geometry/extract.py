"""A trained scene's surface: its training views' depth fused into a TSDF, a mesh and a point cloud.

The stages of ``scripts/mesh.py``, each a function: :func:`view_depth` (depth, alpha, colour and normals
of one training view; :func:`render_views` for a list), :func:`scene_box` (where the surface is: the views'
depth back-projected, the far background cut off), :func:`fuse` (the TSDF over that box) and
:class:`SurfacePoints` (the views' points the fused surface agrees with).

**Memory is bounded**: the box, the fusion and the points each take the views as a stream, one view at a
time, so a capture of hundreds of large photos never holds more than one view's maps (``mesh.py`` renders
each view twice, for the box and for the fusion, rather than keeping them).

**Unbounded scenes are cropped**: a pixel farther than ``far`` times its view's median depth (sky, distant
background, the far shell of Gaussians ``model.seeding.sky`` adds) is neither fused nor counted in the box,
so the grid's voxels go to the scene the cameras look at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from . import DEPTH_KINDS
from .maps import backproject, view_maps
from .tsdf import DEFAULT_MAX_VOXELS, Grid, TSDFVolume


@dataclass
class ViewDepth:
    """One view's maps for fusion: ``depth [H,W]`` (0 = not fused), ``confidence [H,W]``, ``rgb [H,W,3]``,
    ``normal [H,W,3]`` (world frame), with the camera's ``K [3,3]`` and ``viewmat [4,4]``."""

    depth: Tensor
    confidence: Tensor
    rgb: Tensor
    normal: Tensor
    K: Tensor
    viewmat: Tensor

    def points(self) -> tuple[Tensor, Tensor, Tensor]:
        """World points ``[M,3]``, colours ``[M,3]`` and normals ``[M,3]`` of the pixels with depth."""
        keep = self.depth > 0
        cam = backproject(self.depth, self.K)[keep]
        R, t = self.viewmat[:3, :3], self.viewmat[:3, 3]
        return (cam - t) @ R, self.rgb[keep], self.normal[keep]


def view_depth(
    model: object,
    renderer: object,
    camera: object,
    background: object,
    min_alpha: float = 0.5,
    far: float = 3.0,
    depth: str = "expected",
) -> ViewDepth:
    """``camera``'s :class:`ViewDepth`: its ``depth`` (``"expected"`` or ``"median"``, see
    :mod:`~pointrix_lite.geometry.maps`) where alpha >= ``min_alpha`` and the depth is within ``far`` x the
    median of the view's depths; confidence = alpha there."""
    if depth not in DEPTH_KINDS:
        raise ValueError(f"depth: must be one of {', '.join(DEPTH_KINDS)}, got {depth!r}")
    # the mesh and points read the depth and its normals, not the Gaussians' (a second rasterization)
    maps = view_maps(model, renderer, camera, background, gaussian_normals=False, normals_of=depth)
    depth_map, alpha = maps["median_depth" if depth == "median" else "depth"].cpu(), maps["alpha"].cpu()
    keep = (alpha >= min_alpha) & (depth_map > 0)
    if keep.any():
        keep &= depth_map <= far * depth_map[keep].median()
    viewmat = camera.viewmat.float().cpu()
    return ViewDepth(
        depth=torch.where(keep, depth_map, torch.zeros_like(depth_map)),
        confidence=torch.where(keep, alpha, torch.zeros_like(alpha)),
        rgb=maps["rgb"].cpu().clamp(0, 1),
        normal=maps["normal_depth"].cpu() @ viewmat[:3, :3],  # camera -> world: R^T n, as rows
        K=camera.K.float().cpu(),
        viewmat=viewmat,
    )


def render_views(
    model: object,
    renderer: object,
    cameras: Iterable[object],
    background: object,
    min_alpha: float = 0.5,
    far: float = 3.0,
    advance: Callable[[], object] = lambda: None,
    depth: str = "expected",
) -> list[ViewDepth]:
    """Every camera's :func:`view_depth`, held in memory (a few views; ``mesh.py`` streams them)."""
    out = []
    for camera in cameras:
        out.append(view_depth(model, renderer, camera, background, min_alpha, far, depth))
        advance()
    return out


def scene_box(
    views: Iterable[ViewDepth], margin: float = 0.05, percentile: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The box holding the views' depth points (``percentile``..``100 - percentile`` on each axis, grown by
    ``margin`` of its size on each side). Raises ValueError when no view has depth."""
    sample = []
    for v in views:
        pts, _, _ = v.points()
        if len(pts):
            step = max(1, len(pts) // 20_000)  # a sample per view keeps the percentiles cheap
            sample.append(pts[::step])
    if not sample:
        raise ValueError("no view has depth where alpha >= min_alpha: nothing to mesh")
    pts = torch.cat(sample).double().numpy()
    lo, hi = np.percentile(pts, percentile, axis=0), np.percentile(pts, 100 - percentile, axis=0)
    pad = margin * (hi - lo).max()
    return lo - pad, hi + pad


def fuse(
    views: Iterable[ViewDepth],
    lo: np.ndarray,
    hi: np.ndarray,
    resolution: int = 256,
    voxel: float | None = None,
    trunc: float | None = None,
    max_voxels: int = DEFAULT_MAX_VOXELS,
    advance: Callable[[], object] = lambda: None,
    each: Callable[[ViewDepth], object] = lambda view: None,
) -> TSDFVolume:
    """The TSDF of ``views`` over the box ``lo``..``hi``: ``voxel`` (default: the box's longest side /
    ``resolution``), ``trunc`` (default 4 voxels), at most ``max_voxels`` voxels. ``each`` sees every view
    once it is fused (:meth:`SurfacePoints.add`, while the view is at hand)."""
    voxel = voxel or float((np.asarray(hi) - np.asarray(lo)).max()) / resolution
    volume = TSDFVolume(Grid.covering(lo, hi, voxel, max_voxels), trunc)
    for v in views:
        volume.integrate(v.depth, v.K, v.viewmat, v.rgb, v.confidence)
        each(v)
        advance()
    return volume


class SurfacePoints:
    """The views' depth points that lie on the fused surface (within half the truncation band of its zero
    level, in an observed voxel), which drops what only one view put there; at most ``max_points``, drawn
    uniformly. Views stream through :meth:`add` (``pixels``: the pixels with depth of all the views together,
    known from a first pass); :meth:`on` keeps the candidates on a volume."""

    def __init__(self, pixels: int, max_points: int = 500_000, seed: int = 0) -> None:
        # Four candidates for each point kept, drawn view by view in proportion to each view's pixels with
        # depth: a uniform share of every view's points without holding them all (views x pixels can be billions).
        self.max_points, self.seed = max_points, seed
        self.share = min(1.0, 4 * max_points / max(1, pixels))
        self.generator = torch.Generator().manual_seed(seed)
        self.parts: list[tuple[Tensor, Tensor, Tensor]] = []

    def add(self, view: ViewDepth) -> None:
        """Draw ``view``'s candidates."""
        p, c, nv = view.points()
        if self.share < 1.0:
            pick = torch.randperm(len(p), generator=self.generator)[: math.ceil(self.share * len(p))]
            p, c, nv = p[pick], c[pick], nv[pick]
        self.parts.append((p, c, nv))

    def on(self, volume: TSDFVolume) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(xyz [N,3] float32, rgb [N,3] uint8, normals [N,3] float32)``: the candidates on ``volume``'s surface."""
        pts, rgb, nrm = (torch.cat(column) for column in zip(*self.parts))
        tsdf, weight = volume.sample(pts)
        keep = (tsdf.abs() <= 0.5) & (weight > 0)
        pts, rgb, nrm = pts[keep], rgb[keep], nrm[keep]
        if len(pts) > self.max_points:
            pick = torch.randperm(len(pts), generator=torch.Generator().manual_seed(self.seed + 1))
            pts, rgb, nrm = pts[pick[: self.max_points]], rgb[pick[: self.max_points]], nrm[pick[: self.max_points]]
        colors = (rgb * 255).round().to(torch.uint8)
        return pts.float().numpy(), colors.numpy(), nrm.float().numpy()


def surface_points(
    views: list[ViewDepth], volume: TSDFVolume, max_points: int = 500_000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:class:`SurfacePoints` of views held in memory."""
    points = SurfacePoints(sum(int((v.depth > 0).sum()) for v in views), max_points, seed)
    for v in views:
        points.add(v)
    return points.on(volume)
