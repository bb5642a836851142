"""From plane-sweep depth maps to points where the cloud has none (``model.seeding.mvs``).

A depth is kept only where the neighbours' own depth maps agree with it (COLMAP's fusion test: the
point, seen from a neighbour at that neighbour's depth and brought back, lands within ``REPROJ_PX`` of
its pixel at a depth within ``REL_DEPTH``): one view's sweep is fooled by repeated texture or an
occlusion, two views rarely in the same way. The kept points are merged into one per voxel of about one
reduced pixel's footprint at their depth (a surface seen by many views is not seeded many times over)
where at least ``MIN_HITS`` fall, and voxels next to a cloud point are left to it. Where the sweep has
no confirmed depth, a depth on one of the cloud's dominant planes (:mod:`.planes`, tested at
``PLANE_SCALE`` times the sweep's size) is taken instead when the neighbours' images and ``PLANE_AGREE``
neighbour's plane depths agree with it and it lies within the cloud's extent along the planes' axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from scipy.spatial import cKDTree
from torch import Tensor

from ...progress import phase
from ..pointcloud import PointCloud
from .plane_sweep import SweepView, choose_neighbours, depth_map, sweep_view, visible
from .planes import dominant_planes, plane_depths

REPROJ_PX = 1.0  # px of the reduced views
REL_DEPTH = 0.01
MIN_AGREE = 2  # neighbours whose depth maps must agree (fewer when a view has fewer neighbours)
# Depths that must fall in a voxel for it to become a point. A surface seen by several views is hit by
# each of them; a stray depth lands alone. On the clutter scene 94% of the points so kept lie within
# 0.05 of a true surface (as many as of SfM's own), against 81% keeping every voxel (docs/model.md).
MIN_HITS = 3
# A depth on a dominant plane counts for this many: two of them make a voxel. They are confirmed
# photometrically and by two neighbours' plane depths already, and with 3 the clutter scene's far floor
# got 842 points where the true cloud has 1,010 (with 1.5: 3,352, and +0.93 dB, docs/model.md).
PLANE_HIT = 1.5
# Share of the cloud's surface normals along its three dominant directions above which planes are
# looked for along them (``mvs_planes``; the rooms measured: 0.73).
MIN_ALIGNED = 0.3
# The dominant planes' depths are tested this far beyond the sweep's far bound (the cloud's 99th
# percentile x 1.25): a floor's far part is what the cloud lacks.
PLANE_FAR = 4.0
# The plane test runs at this many times the sweep's size: far down a floor its texture is at the pixel
# scale of the sweep's views, and two neighbours confirm a right plane depth there for 10% of the pixels
# at 160x120, 29% at 320x240 (the clutter scene's floor beyond 3 units of its centre). It is one depth
# per plane, so 4x the pixels costs little against the sweep's 64. (3 measured no better: docs/model.md.)
PLANE_SCALE = 2
# Neighbours whose plane depths must agree with a plane depth (the sweep's depths need MIN_AGREE). A plane
# depth has already passed the neighbours' images (planes.MAX_COST) and competes with no other depth, so
# one more view suffices: SfM's points on the clutter scene's true poses get 78,841 points instead of
# 64,486, as accurate (91.8% within 0.05 of a surface against 91.6%), and the processed photos' gap to
# the true poses with the true points fell from 0.49 to 0.26 dB over two seeds (docs/model.md).
PLANE_AGREE = 1
BOX_MARGIN = 0.01  # plane depths are kept within the cloud's extent along its axes, widened by this share


def _back_project(view: SweepView, depth: Tensor) -> Tensor:
    """[H * W, 3] world points of ``view``'s pixels at ``depth [H, W]`` (along the optical axis)."""
    cam = view.rays() * depth.reshape(-1, 1)
    return (cam - view.t) @ view.R


def _agreement(ref: SweepView, depth: Tensor, xyz: Tensor, other: SweepView, other_depth: Tensor) -> Tensor:
    """[H, W] bool: ``ref``'s depth (its points ``xyz [H * W, 3]``) confirmed by ``other``'s depth map
    (module docstring)."""
    _, h, w = ref.image.shape
    u, v, z = other.project(xyz)
    _, ho, wo = other.image.shape
    ui, vi = u.floor().long(), v.floor().long()
    inside = (z > 1e-6) & (ui >= 0) & (ui < wo) & (vi >= 0) & (vi < ho)
    d_other = other_depth[vi.clamp(0, ho - 1), ui.clamp(0, wo - 1)]
    pix = torch.stack([u, v, torch.ones_like(u)], -1)
    back = (pix @ torch.linalg.inv(other.K).T) * d_other[:, None]  # the neighbour's point, its own frame
    world = (back - other.t) @ other.R
    u2, v2, z2 = ref.project(world)
    pu = (torch.arange(w) + 0.5).repeat(h)
    pv = (torch.arange(h) + 0.5).repeat_interleave(w)
    d_ref = depth.reshape(-1)
    ok = inside & (d_other > 0) & (d_ref > 0)
    ok &= ((u2 - pu) ** 2 + (v2 - pv) ** 2 < REPROJ_PX**2) & ((z2 - d_ref).abs() < REL_DEPTH * d_ref)
    return ok.reshape(h, w)


def _dominant_axes(xyz: Tensor) -> Tensor:
    """[3, 3] rows: the directions most of the cloud's surface normals lie along (its Manhattan frame,
    ``data/orientation.py``), or [0, 3] when fewer than ``MIN_ALIGNED`` of them do (no dominant planes)."""
    from ..orientation import manhattan_rotation

    R, share = manhattan_rotation(xyz)
    return torch.from_numpy(R).float() if share >= MIN_ALIGNED else torch.zeros(0, 3)


def _resized(mask: Tensor, view: SweepView, other: SweepView) -> Tensor:
    """[H' * W'] bool: ``mask [H * W]`` over ``view``'s pixels, read at ``other``'s (the same camera at
    another size; nearest pixel)."""
    _, h, w = view.image.shape
    size = other.image.shape[1:]
    return torch.nn.functional.interpolate(mask.reshape(1, 1, h, w).float(), size=size, mode="nearest").reshape(-1) > 0


def _extent(xyz: Tensor, axes: Tensor) -> tuple[Tensor, Tensor]:
    """([A], [A]): the cloud's ``xyz [M, 3]`` 0.1st and 99.9th percentiles along ``axes [A, 3]``."""
    if len(axes) == 0:
        return torch.zeros(0), torch.zeros(0)
    lo, hi = torch.quantile(xyz @ axes.T, torch.tensor([0.001, 0.999]), dim=0)
    return lo, hi


def _inside(xyz: Tensor, axes: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """[M] bool: ``xyz [M, 3]`` within the box ``lo``..``hi`` along ``axes`` (:func:`_extent`), widened by
    ``BOX_MARGIN`` of its size. A plane's depth beyond the cloud's walls matched there at the foot of the
    wall (the clutter scene's floor: 13,639 points beyond its walls without this test)."""
    pad = BOX_MARGIN * (hi - lo)
    c = xyz @ axes.T
    return ((c >= lo - pad) & (c <= hi + pad)).all(1)


def _confirmed(
    r: int, views: list[SweepView], maps: list[Tensor], neighbours: list[int], min_agree: int = MIN_AGREE
) -> tuple[Tensor, Tensor]:
    """``views[r]``'s points at its depths ``maps[r]`` ([H * W, 3]) and which of them [H * W] enough of its
    ``neighbours``' depth maps confirm (module docstring)."""
    depth = maps[r]
    xyz = _back_project(views[r], depth)
    agree = sum(_agreement(views[r], depth, xyz, views[n], maps[n]).int() for n in neighbours)
    return xyz, ((depth > 0) & (agree >= min(min_agree, len(neighbours)))).reshape(-1)


def _depth_range(view: SweepView, xyz: Tensor) -> tuple[float, float] | None:
    """(near, far) around the cloud points ``view`` sees, or None when it sees too few to say."""
    seen = visible(view, xyz)
    if int(seen.sum()) < 8:
        return None
    z = view.project(xyz[seen])[2]
    lo, hi = torch.quantile(z, torch.tensor([0.01, 0.99])).tolist()
    return 0.8 * lo, 1.25 * hi


def mvs_points(
    cloud: PointCloud, train_views: list[Any], cfg: Any, seed: int, say: Callable[[str], None]
) -> PointCloud:
    """Points from the training views' plane-sweep depths where ``cloud`` has none (module docstring).

    Args:
        cfg: :class:`~pointrix_lite.data.seeding.SeedingConfig` (``mvs_size``, ``mvs_depths``,
            ``mvs_neighbours``, ``mvs_max_points``).
    Returns:
        The added points only (possibly none), colours from the reduced images.
    """
    # A phase: timed into metrics.json's phase_seconds, and a progress line on a capture of hundreds of views.
    with torch.no_grad(), phase("seeding", total=len(train_views), unit="views") as advance:
        views = [sweep_view(v, cfg.mvs_size) for v in train_views]
        xyz = cloud.xyz.float()
        if len(xyz) > 5_000:  # neighbour choice needs the cloud's shape, not every point
            xyz = xyz[torch.randperm(len(xyz), generator=torch.Generator().manual_seed(seed))[:5_000]]
        neighbours = choose_neighbours(views, xyz, cfg.mvs_neighbours)
        axes = _dominant_axes(xyz) if cfg.mvs_planes else torch.zeros(0, 3)
        planes = dominant_planes(xyz, axes)
        box = _extent(xyz, axes)
        plane_views = [sweep_view(v, PLANE_SCALE * cfg.mvs_size) for v in train_views] if planes else []
        depths, on_planes = [], []
        for r, (view, near_ones) in enumerate(zip(views, neighbours)):
            rng = _depth_range(view, xyz)
            _, h, w = view.image.shape
            if rng is None or not near_ones:
                depths.append(torch.zeros(h, w))
                if planes:
                    on_planes.append(torch.zeros(plane_views[r].image.shape[1:]))
            else:
                sources = [views[n] for n in near_ones]
                depths.append(depth_map(view, sources, *rng, cfg.mvs_depths))
                if planes:
                    plane_sources = [plane_views[n] for n in near_ones]
                    on_planes.append(plane_depths(plane_views[r], plane_sources, planes, rng[0], PLANE_FAR * rng[1]))
            advance()
        points, colours, footprints, hits, swept = [], [], [], [], []
        for r, view in enumerate(views):
            if not neighbours[r]:
                continue
            # The sweep's confirmed depths first; a dominant plane only where the sweep has none (its
            # unconfirmed depths on a far floor are mostly wrong ones that matched better).
            xyz_r, keep = _confirmed(r, views, depths, neighbours[r])
            found_r = [(view.image, xyz_r, keep, depths[r], 1.0, True)]
            if planes:
                plane_view = plane_views[r]
                xyz_p, keep_p = _confirmed(r, plane_views, on_planes, neighbours[r], PLANE_AGREE)
                keep_p &= ~_resized(keep, views[r], plane_view) & _inside(xyz_p, axes, *box)
                found_r.append((plane_view.image, xyz_p, keep_p, on_planes[r], PLANE_HIT, False))
            for image, pts, kept, depth, hit, from_sweep in found_r:
                points.append(pts[kept])
                hits.append(torch.full((int(kept.sum()),), hit, dtype=torch.float64))
                swept.append(torch.full((int(kept.sum()),), from_sweep))
                colours.append(image.reshape(3, -1).T[kept])
                # One pixel of the sweep's views in world units at the depth, for the plane's finer depths
                # too: their voxels keep the sweep's density, and collect PLANE_SCALE^2 times the hits.
                footprints.append(depth.reshape(-1)[kept] / float(view.K[0, 0]))
        if not points:
            return PointCloud(torch.zeros(0, 3), torch.zeros(0, 3))
        found = torch.cat(points)
        added = _thin(
            found,
            torch.cat(colours),
            torch.cat(footprints),
            torch.cat(hits),
            torch.cat(swept),
            cloud,
            cfg.mvs_max_points,
            seed,
        )
    say(
        f"seeding: plane sweep of {len(views)} views at {views[0].image.shape[2]}x{views[0].image.shape[1]} "
        f"and on {len(planes)} dominant plane(s)"
        + (f" at {plane_views[0].image.shape[2]}x{plane_views[0].image.shape[1]}" if plane_views else "")
        + ": "
        f"{len(found):,} consistent depths, {len(added):,} points added where the cloud has none"
    )
    return added


def _thin(
    xyz: Tensor,
    rgb: Tensor,
    footprint: Tensor,
    hits: Tensor,
    swept: Tensor,
    cloud: PointCloud,
    max_points: int,
    seed: int,
) -> PointCloud:
    """The mean point and colour of each voxel whose depths' ``hits`` (1 each, ``PLANE_HIT`` on a plane)
    add up to ``MIN_HITS``, none within a voxel's diagonal of a cloud point, at most ``max_points`` (0:
    all; uniformly chosen, voxels holding a sweep depth, ``swept [M]``, first).

    Voxels are sized to the depths' footprints: the median one-pixel footprint, doubled once for each
    doubling of a depth's own footprint beyond it (rounded in log2; a grid per size). With one size for
    all, a far surface, whose every depth covers several voxels, spreads its hits one per voxel and is
    hardly seeded (the clutter scene's floor beyond 2 units of the centre: ~20,000 plane depths gave 156
    points on one grid, 842 on these)."""
    if len(xyz) == 0:
        return PointCloud(torch.zeros(0, 3), torch.zeros(0, 3))
    base = float(footprint.median())
    level = torch.log2(footprint / base).round().clamp(min=0).long()  # [M]: 0 up to ~1.41x the median
    side = (base * torch.pow(2.0, level.double())).to(xyz.dtype)  # [M]; level 0 divides as one scalar did
    cells = torch.cat([level[:, None], torch.floor(xyz / side[:, None]).long()], dim=1)
    _, inverse, counts = torch.unique(cells, dim=0, return_inverse=True, return_counts=True)

    def mean(x: Tensor) -> Tensor:
        return torch.zeros(len(counts), x.shape[1], dtype=x.dtype).index_add_(0, inverse, x) / counts[:, None]

    solid = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, inverse, hits.double()) >= MIN_HITS - 1e-9
    voxel = torch.zeros(len(counts), dtype=torch.float64).scatter_(0, inverse, side.double())[solid]  # one size a voxel
    swept = torch.zeros(len(counts), dtype=torch.bool).index_fill_(0, inverse[swept], True)[solid]
    xyz, rgb = mean(xyz)[solid], mean(rgb)[solid]
    gap = torch.from_numpy(cKDTree(cloud.xyz.numpy()).query(xyz.numpy(), k=1)[0])
    near_cloud = gap < voxel * math.sqrt(3)
    xyz, rgb, swept = xyz[~near_cloud], rgb[~near_cloud], swept[~near_cloud]
    if 0 < max_points < len(xyz):
        # Uniformly chosen, the sweep's voxels before the planes': a floor is one surface that the
        # planes seed densely, while thin and small things get their points from the sweep alone.
        order = torch.randperm(len(xyz), generator=torch.Generator().manual_seed(seed))
        order = order[torch.argsort((~swept[order]).int(), stable=True)]
        keep = order[:max_points].sort().values
        xyz, rgb = xyz[keep], rgb[keep]
    return PointCloud(xyz.float().contiguous(), rgb.float().clamp(0, 1).contiguous())
