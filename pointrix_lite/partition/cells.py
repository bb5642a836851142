"""Cells: axis-aligned rectangles of the ground plane that tile it, and their overlap margins.

A cell is half-open, ``[x0, x1) x [y0, y1)``, and the outer cells reach to infinity (``None`` bounds),
so every point of the plane lies in exactly one cell: each SfM point is trained by the block of its
cell, and at merge time each Gaussian is kept by exactly one block whatever it drifted to.

Two ways to cut (both on the points' ground coordinates, robust to SfM outliers by ``TRIM``):

* ``grid``: ``nx x ny`` equal cells over the points' extent (the simple choice, CityGaussian's);
* ``kd``: split the longer side at the quantile that gives each half its share of the points, then
  recurse (VastGaussian's progressive split): blocks of equal point counts, for uneven scenes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Bound = float | None  # None: unbounded on that side
TRIM = 0.01  # extents are taken between the 1% and 99% quantiles of the points


@dataclass(frozen=True)
class Rect:
    """``(x0, x1, y0, y1)``: half-open on the upper side, ``None`` = unbounded."""

    x0: Bound
    x1: Bound
    y0: Bound
    y1: Bound

    def contains(self, xy: np.ndarray) -> np.ndarray:
        """[N] bool: which ground points [N, 2] lie inside."""
        x, y = xy[:, 0], xy[:, 1]
        inside = np.ones(len(xy), dtype=bool)
        if self.x0 is not None:
            inside &= x >= self.x0
        if self.x1 is not None:
            inside &= x < self.x1
        if self.y0 is not None:
            inside &= y >= self.y0
        if self.y1 is not None:
            inside &= y < self.y1
        return inside

    def expanded(self, dx: float, dy: float) -> Rect:
        """Grown by ``dx`` / ``dy`` on each bounded side (an unbounded side stays so)."""
        grow = lambda b, d: None if b is None else b + d  # noqa: E731
        return Rect(grow(self.x0, -dx), grow(self.x1, dx), grow(self.y0, -dy), grow(self.y1, dy))

    def as_list(self) -> list[Bound]:
        return [self.x0, self.x1, self.y0, self.y1]

    @classmethod
    def from_list(cls, values: list[Bound]) -> Rect:
        x0, x1, y0, y1 = (None if v is None else float(v) for v in values)
        return cls(x0, x1, y0, y1)


def extent(xy: np.ndarray) -> np.ndarray:
    """``[[xlo, xhi], [ylo, yhi]]`` of ground points, trimmed of outliers."""
    return np.quantile(xy, [TRIM, 1 - TRIM], axis=0).T


def grid_cells(xy: np.ndarray, nx: int, ny: int) -> list[Rect]:
    """``nx x ny`` equal cells over the trimmed extent of ``xy``, row by row (y outer, x inner)."""
    (xlo, xhi), (ylo, yhi) = extent(xy)
    xs = [None, *np.linspace(xlo, xhi, nx + 1)[1:-1].tolist(), None]
    ys = [None, *np.linspace(ylo, yhi, ny + 1)[1:-1].tolist(), None]
    return [Rect(xs[i], xs[i + 1], ys[j], ys[j + 1]) for j in range(ny) for i in range(nx)]


def kd_cells(xy: np.ndarray, n: int) -> list[Rect]:
    """``n`` cells holding about ``len(xy) / n`` points each (``xy`` must hold at least one point)."""

    def split(rect: Rect, pts: np.ndarray, k: int) -> list[Rect]:
        if k == 1:
            return [rect]
        if len(pts) == 0:  # many equal coordinates emptied this side: split the parent's points again
            pts = xy
        (xlo, xhi), (ylo, yhi) = extent(pts)
        axis = 0 if xhi - xlo >= yhi - ylo else 1
        left = k // 2
        cut = float(np.quantile(pts[:, axis], left / k))
        lo, hi = (rect.x0, rect.x1) if axis == 0 else (rect.y0, rect.y1)
        cut = min(max(cut, -np.inf if lo is None else lo), np.inf if hi is None else hi)  # children tile the parent
        if axis == 0:
            a, b = Rect(rect.x0, cut, rect.y0, rect.y1), Rect(cut, rect.x1, rect.y0, rect.y1)
        else:
            a, b = Rect(rect.x0, rect.x1, rect.y0, cut), Rect(rect.x0, rect.x1, cut, rect.y1)
        return split(a, pts[pts[:, axis] < cut], left) + split(b, pts[pts[:, axis] >= cut], k - left)

    return split(Rect(None, None, None, None), xy, n)


def margins(cells: list[Rect], xy: np.ndarray, fraction: float) -> list[Rect]:
    """Each cell grown by ``fraction`` of its size on each side; an outer cell's size is measured up to
    the trimmed extent of the points."""
    (xlo, xhi), (ylo, yhi) = extent(xy)
    out = []
    for c in cells:
        w = (xhi if c.x1 is None else c.x1) - (xlo if c.x0 is None else c.x0)
        h = (yhi if c.y1 is None else c.y1) - (ylo if c.y0 is None else c.y0)
        out.append(c.expanded(fraction * max(w, 0.0), fraction * max(h, 0.0)))
    return out
