"""Gaussians on a far shell where the training views look (``model.seeding.sky``).

Structure from motion gives the sky no points, and densification grows Gaussians only next to
existing ones, so without a shell the sky and the distant background are drawn by Gaussians near the
scene: floaters in front of it in every held-out view. The shell puts them far away from the start:
``cfg.sky`` points evenly spread over the part of a sphere (centre: the mean camera centre, radius
``cfg.sky_radius`` x the scene extent) that projects into at least one training view, each coloured by
the median over those views of the pixel it projects to. Points the views cannot see would only be
relocated by MCMC or pruned, so none are placed behind every camera. Nor are points whose views
disagree on their colour (``cfg.sky_max_spread``): the views that look at a shell point past the
ground, the skyline or an object see different parts of it (parallax), while the sky, far away, looks
the same from every camera; a point in such a direction would take budget and draw nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ...errors import DataError
from ..cameras import View
from ..pointcloud import PointCloud

if TYPE_CHECKING:
    from . import SeedingConfig


MAX_SPIRAL = 64  # directions tried per shell point asked for, at most


def fibonacci_sphere(n: int) -> Tensor:
    """[n, 3] float64 unit vectors spread evenly over the sphere (the golden-angle spiral)."""
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1.0 - 2.0 * i / n
    r, phi = (1.0 - z * z).clamp(min=0).sqrt(), i * math.pi * (3.0 - math.sqrt(5.0))
    return torch.stack([r * phi.cos(), r * phi.sin(), z], dim=1)


def project(view: View, xyz: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Pixel column, row ``[N]`` (long) of world points ``xyz [N, 3]`` in ``view``, and ``[N]`` bool:
    in front of the camera and inside the image."""
    cam = view.camera
    m = cam.viewmat.double()
    pc = xyz @ m[:3, :3].T + m[:3, 3]
    z = pc[:, 2].clamp(min=1e-12)
    u, v = cam.fx * pc[:, 0] / z + cam.cx, cam.fy * pc[:, 1] / z + cam.cy
    inside = (pc[:, 2] > 1e-9) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
    col, row = u.floor().clamp(0, cam.width - 1).long(), v.floor().clamp(0, cam.height - 1).long()
    return col, row, inside


def _samples(views: list[View], xyz: Tensor) -> Tensor:
    """[V, N, 3] float32 colour in [0, 1] of the pixel each point projects to in each view, NaN where the
    point is outside the view."""
    samples = torch.full((len(views), len(xyz), 3), float("nan"), dtype=torch.float32)
    for i, view in enumerate(views):
        col, row, inside = project(view, xyz)
        samples[i, inside] = view.float_image()[row[inside], col[inside]]
    return samples


MIN_AGREEING_VIEWS = 3  # the median deviation of one or two samples is 0 whatever they are


def _colour_and_keep(samples: Tensor, max_spread: float) -> tuple[Tensor, Tensor]:
    """Median colour ``[N, 3]`` over the views that see each point, and ``[N]`` bool: seen by some view
    and, unless ``max_spread`` >= 1 (no test), by at least MIN_AGREEING_VIEWS with the median absolute
    deviation from that colour at most ``max_spread`` in every channel."""
    rgb = samples.nanmedian(dim=0).values
    views = (~samples[..., 0].isnan()).sum(dim=0)
    if max_spread >= 1.0:
        return rgb, views > 0
    spread = (samples - rgb).abs().nanmedian(dim=0).values.amax(dim=1)
    return rgb, (views >= MIN_AGREEING_VIEWS) & (spread <= max_spread)


def sky_points(
    views: list[View], scene_extent: float, cfg: SeedingConfig, seed: int, say: Callable[[str], None]
) -> PointCloud:
    """``cfg.sky`` shell points (module docstring), colours in [0, 1]; draws only from its own generator."""
    if not views:
        raise DataError("model.seeding.sky: there are no training views to place the sky shell in")
    centre = torch.stack([v.camera.camera_center.double() for v in views]).mean(dim=0)
    radius = cfg.sky_radius * scene_extent
    # Fibonacci points on the sphere are even everywhere: grow the spiral until the kept part holds
    # cfg.sky of them (a second pass sizes it to just above), then drop the few extra at random.
    # Colour: the median over the views that see a point; the agreement test drops the directions
    # where they see the scene rather than the background (module docstring).
    # The spiral stops growing at MAX_SPIRAL x cfg.sky directions: where fewer agree than asked for,
    # the shell gets those and the line says so (a shell that only takes budget is worse than a thin one).
    n, resized = 4 * cfg.sky, False
    while True:
        xyz = centre + radius * fibonacci_sphere(n)
        rgb, kept = _colour_and_keep(_samples(views, xyz), cfg.sky_max_spread)
        k = int(kept.sum())
        if (k >= cfg.sky and (resized or k <= 1.05 * cfg.sky + 8)) or (k < cfg.sky and n >= MAX_SPIRAL * cfg.sky):
            break
        resized |= k >= cfg.sky  # shrink once; after that only grow (by >= 1%) until enough are kept
        n = min(math.ceil(n * min(1.01 * cfg.sky / k if k else 4.0, 4.0)) + 1, MAX_SPIRAL * cfg.sky)
    xyz, rgb = xyz[kept], rgb[kept]
    keep = torch.randperm(len(xyz), generator=torch.Generator().manual_seed(seed))[: cfg.sky].sort().values
    xyz, rgb = xyz[keep], rgb[keep].clamp(0.0, 1.0)
    short = "" if len(xyz) == cfg.sky else (
        f" (only these of {n:,} directions have colours the views agree on within "
        f"sky_max_spread={cfg.sky_max_spread:g})")
    say(f"seeding: sky shell, {len(xyz):,} points at radius {radius:.1f} ({cfg.sky_radius:g} x extent){short}")
    return PointCloud(xyz.float(), rgb)
