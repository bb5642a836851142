"""Which training views a block needs: the views that *see* it (VastGaussian's visibility-based selection).

A camera's position says little in a city: a camera on one street looks at the facades of the next
block, and one inside a block may look out of it. So each view is judged by what it shows: the image
is cut into ``BINS`` columns (and rows in proportion), the SfM points are projected into it, and in
each bin only the nearest point counts (a coarse depth test: a facade hides the points behind it,
which a plain count of projected points would not see). A view's *share* of a block is the fraction of
its non-empty bins whose nearest point lies in the block's margin region: about the fraction of the
image that shows the block. Views with ``share >= min_share`` train the block.

Every training view goes to at least one block (the one it shows most), so no photo is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BINS = 16  # columns of the coarse depth test (rows: BINS * height / width)
MAX_POINTS = 200_000  # points projected per view (a seeded subsample above that): cost is views x points


@dataclass(frozen=True)
class PinholeView:
    """What projection needs of one image: ``R`` [3, 3] and ``t`` [3] world-to-camera, pixels."""

    name: str
    R: np.ndarray
    t: np.ndarray
    focal: tuple[float, float]  # fx, fy
    center: tuple[float, float]  # cx, cy (pixel centres at +0.5)
    size: tuple[int, int]  # width, height


def front_points(view: PinholeView, points: np.ndarray) -> np.ndarray:
    """Indices of the points that are nearest to the camera in their bin of the image (each bin once)."""
    pc = points @ view.R.T + view.t
    z = pc[:, 2]
    ok = z > 1e-9
    z_safe = np.where(ok, z, 1.0)
    (fx, fy), (cx, cy), (width, height) = view.focal, view.center, view.size
    u, v = fx * pc[:, 0] / z_safe + cx, fy * pc[:, 1] / z_safe + cy
    ok &= (u >= 0) & (u < width) & (v >= 0) & (v < height)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return idx
    rows = max(1, round(BINS * height / width))
    col = np.minimum((u[idx] * BINS / width).astype(np.int64), BINS - 1)
    row = np.minimum((v[idx] * rows / height).astype(np.int64), rows - 1)
    bin_id = row * BINS + col
    order = np.lexsort((z[idx], bin_id))  # by bin, nearest first
    _, first = np.unique(bin_id[order], return_index=True)
    return idx[order[first]]


def view_shares(views: list[PinholeView], points: np.ndarray, regions: np.ndarray, seed: int = 0) -> np.ndarray:
    """[views, blocks] share of each view's non-empty bins whose nearest point is in each block's
    region (``regions`` [blocks, points] bool); 0 for a view that sees no point."""
    if len(points) > MAX_POINTS:
        keep = np.sort(np.random.default_rng(seed).choice(len(points), MAX_POINTS, replace=False))
        points, regions = points[keep], regions[:, keep]
    shares = np.zeros((len(views), len(regions)))
    for i, view in enumerate(views):
        front = front_points(view, points)
        if len(front):
            shares[i] = regions[:, front].sum(axis=1) / len(front)
    return shares


def assign_views(shares: np.ndarray, min_share: float, home: np.ndarray) -> tuple[list[list[int]], int]:
    """Per block the view indices with ``share >= min_share``; a view below it everywhere goes to the
    block it shows most, or, seeing no point at all, to ``home`` [views] (the block of its camera's
    cell). Returns the lists and how many views only that rule placed."""
    chosen = shares >= min_share
    orphans = np.flatnonzero(~chosen.any(axis=1))
    best = np.where(shares[orphans].max(axis=1, initial=0.0) > 0, shares[orphans].argmax(axis=1), home[orphans])
    chosen[orphans, best] = True
    return [np.flatnonzero(chosen[:, b]).tolist() for b in range(shares.shape[1])], len(orphans)
