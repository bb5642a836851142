"""Seams: is a merged model worse where blocks meet than inside them?

Each test pixel is placed on the ground plane by the surface it shows (world points [H, W, 3] from
rendered depth, or, for the generated street, from its ray caster) and classed by the distance to the
nearest border between cells. Comparing the error near borders with the error inside, for the merged
model and for one model trained on the whole scene, shows a seam as a gap the whole model lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cells import Rect


def border_distance(cells: list[Rect], xy: np.ndarray) -> np.ndarray:
    """[N] distance from each ground point [N, 2] to the nearest bounded side of its cell (inf for a
    point whose cell has none: a single-block partition)."""
    dist = np.full(len(xy), np.inf)
    for cell in cells:
        inside = cell.contains(xy)
        x, y = xy[inside, 0], xy[inside, 1]
        d = np.full(len(x), np.inf)
        for side, coord in ((cell.x0, x), (cell.x1, x), (cell.y0, y), (cell.y1, y)):
            if side is not None:
                d = np.minimum(d, np.abs(coord - side))
        dist[inside] = d
    return dist


@dataclass
class ClassError:
    pixels: int
    mae: float  # mean absolute error per channel, 0..1
    psnr: float  # from the mean squared error of the class's pixels


def class_errors(render: np.ndarray, gt: np.ndarray, masks: dict[str, np.ndarray]) -> dict[str, ClassError]:
    """Error of ``render`` against ``gt`` (uint8 [H, W, 3] each, or stacks of them) on each pixel mask."""
    diff = render.astype(np.float64) / 255.0 - gt.astype(np.float64) / 255.0
    out = {}
    for name, mask in masks.items():
        d = diff[mask]
        mse = float((d**2).mean()) if d.size else float("nan")
        out[name] = ClassError(
            int(mask.sum()), float(np.abs(d).mean()) if d.size else float("nan"), -10 * np.log10(max(mse, 1e-12))
        )
    return out
