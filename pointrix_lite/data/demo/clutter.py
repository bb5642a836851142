"""The clutter benchmark scene: the photo scene plus what real captures have and it lacks.

``python -m benchmarks train --scene clutter``. The photo scene (:mod:`.photo`) has photo detail at every
scale but only solid, compact objects in front of distant walls. Here the same room and objects get:

* **thin structures**: 14 poles 2.4 to 8 cm across (2 to 12 px at 400 wide from the camera ring) and
  4 upright planks 2.4 cm thick that turn edge-on in some views, standing between the objects and the
  cameras, so they also occlude;
* **a background at several depths**: 5 free-standing panels between the camera ring and the walls
  (4.3 to 5.3 from the centre, the walls at 6), so a view holds surfaces at ~1 to ~10 units;
* **more texture frequencies**: a zone plate (every frequency up to the image's Nyquist limit on one
  panel), a photo at a third of a pixel per texel (detail finer than a pixel, which only the mip-mapped
  lookup keeps from aliasing), the same photo blown up to blocks several pixels wide (hard edges on a
  coarse grid) and a 2 cm checkerboard.

Same cameras, size, layout and split as the photo scene (56 views of 400 x 300, every 8th held out);
generated from code, deterministically, on first use into ``data/bench_clutter`` (~2 min of CPU).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .make import ensure_generated
from .photo import (
    HEIGHT,
    N_VIEWS,
    WIDTH,
    PhotoScene,
    box_uv,
    build_photo_scene,
    cylinder_uv,
    photo_cameras,
    write_scene,
)
from .photo_texture import Decal, Face, Mip, load_photo
from .raycast import Box, Cylinder

ZONE_PLATE_SIZE = 512


def _per_view(p: np.ndarray) -> np.ndarray:
    raise RuntimeError("clutter scene primitives are textured per view: use PhotoScene.prims_for(camera)")


def zone_plate(size: int = ZONE_PLATE_SIZE) -> np.ndarray:
    """[size, size, 3] cos(pi r^2 / size): the local frequency r / size cycles per texel runs from 0 at
    the centre to 0.5 (Nyquist) at the edge's midpoints, every orientation at once."""
    y, x = np.mgrid[:size, :size] - (size - 1) / 2
    g = 0.5 + 0.5 * np.cos(np.pi * (x * x + y * y) / size)
    return np.repeat(g[..., None], 3, axis=2)


def checkerboard(size: int = 64) -> np.ndarray:
    """[size, size, 3] squares of one texel, black and white."""
    y, x = np.mgrid[:size, :size]
    return np.repeat(((x + y) % 2).astype(np.float64)[..., None], 3, axis=2)


def _ring(n: int, radius: tuple[float, float], phase: float) -> list[tuple[float, float, float]]:
    """(x, y, angle) of n positions around the centre at radii alternating within ``radius``."""
    out = []
    for i in range(n):
        a = phase + 2 * math.pi * i / n
        r = radius[0] + (radius[1] - radius[0]) * ((i * 7) % n) / max(n - 1, 1)
        out.append((r * math.cos(a), r * math.sin(a), a))
    return out


def build_clutter_scene() -> PhotoScene:
    """The photo scene's decals plus poles, planks and background panels (module docstring)."""
    base = build_photo_scene()
    coins, moon, chelsea = (Mip(load_photo(n)) for n in ("coins", "moon", "chelsea"))
    decals = list(base.decals)
    tints = [(0.95, 0.35, 0.25), (0.25, 0.55, 0.95), (0.95, 0.85, 0.3), (0.3, 0.8, 0.4), (0.9, 0.9, 0.9)]
    # Poles: between the objects (within ~1.3 of the centre) and the cameras (2.8 to 3.6 away horizontally).
    for i, (x, y, _) in enumerate(_ring(14, (1.55, 2.15), 0.2)):
        pole = Cylinder(
            _per_view, base=(x, y), radius=0.012 + 0.002 * ((i * 5) % 15), height=0.7 + 0.11 * ((i * 3) % 14)
        )
        face = Face(coins, 0.004, tints[i % len(tints)])
        decals.append(Decal(pole, cylinder_uv(pole), [face, face]))
    for i, (x, y, a) in enumerate(_ring(4, (1.4, 1.7), 0.75)):
        plank = Box(_per_view, center=(x, y, 0.4 + 0.08 * i), half=(0.012, 0.14, 0.4 + 0.08 * i), yaw=a + 0.5 * i)
        face = Face(moon, 0.003, tints[(i + 2) % len(tints)])
        decals.append(Decal(plank, box_uv(plank), [face] * 6))
    # Panels facing the centre, between the camera ring and the walls.
    panel_faces = [
        Face(Mip(zone_plate()), 2.0 / ZONE_PLATE_SIZE),  # 2 units wide: a texel ~1/3 px at ~9 units
        Face(chelsea, 0.0015, (1.0, 0.95, 0.9)),  # ~0.2 texel per px at 8 units: finer than a pixel
        Face(chelsea, 0.05),  # blocks of ~2-3 px
        Face(Mip(checkerboard()), 0.02, (0.9, 0.8, 0.6)),
        Face(coins, 0.006, (0.6, 0.8, 1.0)),
    ]
    for i, ((x, y, a), face) in enumerate(zip(_ring(5, (4.3, 5.3), 0.9), panel_faces, strict=True)):
        half_h = 0.6 + 0.3 * i
        panel = Box(_per_view, center=(x, y, half_h + 0.2 * (i % 2)), half=(0.03, 0.8 + 0.15 * i, half_h), yaw=a)
        decals.append(Decal(panel, box_uv(panel), [face] * 6))
    return PhotoScene(decals)


def generate_clutter_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> None:
    """Render the scene and write its COLMAP layout to ``out/colmap`` (``out`` must not exist yet)."""
    write_scene(out, build_clutter_scene(), photo_cameras(n_views, width, height))


def ensure_clutter_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> Path:
    """Generate the clutter scene at ``out`` unless it is there; returns ``out`` (data in ``out/colmap``)."""
    what = f"the {width}x{height} clutter benchmark scene ({n_views} views)"
    return ensure_generated(out, what, lambda folder: generate_clutter_scene(folder, n_views, width, height))
