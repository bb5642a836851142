"""Gaussians on a far shell where the training views look (``model.seeding.sky``).

Structure from motion gives the sky no points, and densification grows Gaussians only next to
existing ones, so without a shell the sky and the distant background are drawn by Gaussians near the
scene: floaters in front of it in every held-out view. The shell puts them far away from the start:
``cfg.sky`` points evenly spread over the part of a sphere (centre: the mean camera centre, radius
``cfg.sky_radius`` x the scene extent) that projects into at least one training view, each coloured by
the median over those views of the pixel it projects to. Points the views cannot see would only be
relocated by MCMC or pruned, so none are placed behind every camera. Nor, with
``cfg.sky_max_spread`` < 1, are points behind the scene: a view samples a shell point only where no
point of the initial cloud (SfM's, and the sweep's when it runs) projects near it, and the point is
kept only where at least half the views that see it (and at least three) sample it and agree on its
colour (median absolute deviation at most ``sky_max_spread``): views that look at a shell point past
the ground, a wall or an object see different parts of the scene there (parallax), while the sky, far
away, looks the same from every camera. A point in such a direction would take budget and draw nothing
(indoors, behind the walls, the shell is then empty or nearly so). Nor, with the test on, are points of
the data set's background colour: the renderer draws that already (an object captured on white).
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


MAX_SPIRAL = 32  # directions tried per shell point asked for, at most (outdoors ~6% pass: 17 per point)


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


OPEN_CELLS = 32  # cells along the long side of the grid that tells where a view sees the cloud


def open_map(view: View, cloud: Tensor) -> Tensor:
    """``[H, W]`` bool of ``view``: True where no point of ``cloud [M, 3]`` projects into the pixel's cell of
    a ``OPEN_CELLS``-wide grid, nor into a neighbouring cell (the view sees no scene there that the cloud
    knows of)."""
    cam = view.camera
    cell = max(1, math.ceil(max(cam.width, cam.height) / OPEN_CELLS))
    gh, gw = math.ceil(cam.height / cell), math.ceil(cam.width / cell)
    col, row, inside = project(view, cloud)
    hit = torch.zeros(gh * gw)
    hit[(row[inside] // cell) * gw + col[inside] // cell] = 1.0
    near = torch.nn.functional.max_pool2d(hit.view(1, 1, gh, gw), 3, stride=1, padding=1)[0, 0] > 0
    return ~near.repeat_interleave(cell, 0).repeat_interleave(cell, 1)[: cam.height, : cam.width]


def _samples(views: list[View], xyz: Tensor, open_maps: list[Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """[V, N, 3] float32 colour in [0, 1] of the pixel each point projects to in each view, NaN where the
    point is outside the view or (with ``open_maps``) where the view sees the cloud there, and [N]: the
    number of views each point projects into."""
    samples = torch.full((len(views), len(xyz), 3), float("nan"), dtype=torch.float32)
    seen = torch.zeros(len(xyz), dtype=torch.long)
    for i, view in enumerate(views):
        col, row, inside = project(view, xyz)
        seen += inside
        if open_maps is not None:
            inside &= open_maps[i][row, col]
        # the pixels gathered, then converted as View.float_image converts (not the whole image, per chunk)
        samples[i, inside] = view.image[row[inside], col[inside]].float() / 255.0
    return samples, seen


MIN_AGREEING_VIEWS = 3  # the median deviation of one or two samples is 0 whatever they are


def _colour_and_keep(samples: Tensor, seen: Tensor, max_spread: float) -> tuple[Tensor, Tensor]:
    """Median colour ``[N, 3]`` over the views that sample each point, and ``[N]`` bool: sampled by some view
    and, unless ``max_spread`` >= 1 (no test), by at least MIN_AGREEING_VIEWS and by at least half of the
    ``seen [N]`` views it projects into, with the median absolute deviation from that colour at most
    ``max_spread`` in every channel."""
    rgb = samples.nanmedian(dim=0).values
    views = (~samples[..., 0].isnan()).sum(dim=0)
    if max_spread >= 1.0:
        return rgb, views > 0
    spread = (samples - rgb).abs().nanmedian(dim=0).values.amax(dim=1)
    return rgb, (views >= MIN_AGREEING_VIEWS) & (2 * views >= seen) & (spread <= max_spread)


SAMPLE_BUDGET = 1 << 24  # floats of view samples held at once (64 MB): directions are judged in chunks


def _judge(views: list[View], xyz: Tensor, open_maps: list[Tensor] | None, max_spread: float) -> tuple[Tensor, Tensor]:
    """:func:`_colour_and_keep` of :func:`_samples` for ``xyz [N, 3]``, a chunk of directions at a time."""
    step = max(1, SAMPLE_BUDGET // (3 * len(views)))
    parts = [_colour_and_keep(*_samples(views, chunk, open_maps), max_spread) for chunk in xyz.split(step)]
    return torch.cat([rgb for rgb, _ in parts]), torch.cat([kept for _, kept in parts])


def sky_points(
    views: list[View],
    scene_extent: float,
    cfg: SeedingConfig,
    seed: int,
    say: Callable[[str], None],
    cloud: Tensor | None = None,
    background: tuple[float, float, float] | None = None,
) -> PointCloud:
    """``cfg.sky`` shell points (module docstring), colours in [0, 1]; draws only from its own generator.

    ``cloud [M, 3]``: the points the scene starts from (SfM's and the sweep's); with the agreement test
    on, a view samples a shell direction only where it sees none of them near it. ``background``: the
    colour the renderer composites onto; with the test on, no shell point of that colour (within
    ``sky_max_spread``) is placed: the background already draws it (an object on white, a night sky)."""
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
    test = cfg.sky_max_spread < 1.0
    open_maps = (
        [open_map(view, cloud.double()) for view in views] if test and cloud is not None and len(cloud) else None
    )
    n, resized = 4 * cfg.sky, False
    while True:
        xyz = centre + radius * fibonacci_sphere(n)
        rgb, kept = _judge(views, xyz, open_maps, cfg.sky_max_spread)
        if test and background is not None:
            kept &= (rgb - torch.tensor(background)).abs().amax(dim=1) > cfg.sky_max_spread
        k = int(kept.sum())
        if (k >= cfg.sky and (resized or k <= 1.05 * cfg.sky + 8)) or (k < cfg.sky and n >= MAX_SPIRAL * cfg.sky):
            break
        if 2 * k * MAX_SPIRAL < n:  # even the largest spiral would keep under half of cfg.sky (indoors: ~none)
            break
        resized |= k >= cfg.sky  # shrink once; after that only grow (by >= 1%) until enough are kept
        n = min(math.ceil(n * min(1.01 * cfg.sky / k if k else 4.0, 4.0)) + 1, MAX_SPIRAL * cfg.sky)
    xyz, rgb = xyz[kept], rgb[kept]
    keep = torch.randperm(len(xyz), generator=torch.Generator().manual_seed(seed))[: cfg.sky].sort().values
    xyz, rgb = xyz[keep], rgb[keep].clamp(0.0, 1.0)
    short = (
        ""
        if len(xyz) == cfg.sky
        else (
            f" (only these of {n:,} directions are open to the views and have colours they agree on within "
            f"sky_max_spread={cfg.sky_max_spread:g})"
        )
    )
    say(f"seeding: sky shell, {len(xyz):,} points at radius {radius:.1f} ({cfg.sky_radius:g} x extent){short}")
    return PointCloud(xyz.float(), rgb)
