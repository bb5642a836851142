"""A street scene large enough to partition: photo-textured buildings on a 3 x 3 grid of city blocks.

The photo scene (``data/demo/photo.py``) is one room seen from a ring: every camera sees every object,
so there is nothing to split. Here cameras walk the streets of a small town (9 buildings of 2.6 x 2.6
on a 22 x 22 gravel square, walled in so that no ray reaches the sky) and look sideways at the
facades, each seeing a few buildings only: the situation of a city capture, where a spatial block
needs only the views that see it. Textures and lighting are the photo scene's (scikit-image's sample
photos, mip-mapped; sun with hard shadows), so a block's border runs through real detail.

Cameras: 8 straight paths (the 4 inner streets and the 4 outer ones), ``n_views / 24`` stops each,
3 views per stop (left, right, ahead), 1.6 to 2.6 above the ground and pitched 18 to 38 degrees
down. Names ``v_0000 ...`` follow the walk, so ``ColmapDataset``'s every-8th-by-name test split
spreads along it. Written as COLMAP (``<out>/images/*.png``, ``sparse/0/*.bin``, one PINHOLE
camera) with SfM-like noisy points; deterministic.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ..data.cameras import look_at
from ..data.demo.make import noisy_points, write_colmap
from ..data.demo.photo import LIGHTING, PhotoScene, box_uv, floor_uv, room_uv
from ..data.demo.photo_texture import Decal, Face, Mip, load_photo
from ..data.demo.raycast import Box, GroundSquare, Primitive, Room
from ..data.demo.scene import DemoCamera, render

HALF = 11.0  # the square's half size; walls stand on its border
WALL_HEIGHT = 6.0
SPACING = 5.0  # building centres at -5, 0, 5 on both axes
STREETS = (-7.5, -2.5, 2.5, 7.5)  # path lines (x = c or y = c): the outer ring and the two inner streets
FOCAL_AT_64 = 64.0  # 53 x 41 degrees at 64 x 48, the photo scene's field of view
POINTS_PER_VIEW = 20
SUPERSAMPLE = 2
SEED = 0


def _per_view(p: np.ndarray) -> np.ndarray:
    raise RuntimeError("street scene primitives are textured per view: use PhotoScene.prims_for(camera)")


def build_street() -> PhotoScene:
    """The ground, the walls and 9 buildings, each with its own photos and height."""
    names = (
        "astronaut",
        "brick",
        "chelsea",
        "coffee",
        "coins",
        "grass",
        "gravel",
        "immunohistochemistry",
        "moon",
        "motorcycle_left",
        "camera",
    )
    photo = {name: Mip(load_photo(name)) for name in names}
    floor = GroundSquare(_per_view, half=HALF)
    room = Room(_per_view, half=HALF, height=WALL_HEIGHT)
    decals = [
        Decal(floor, floor_uv(floor), [Face(photo["gravel"], 0.01, (0.92, 0.82, 0.66))]),
        Decal(
            room,
            room_uv(room),
            [
                Face(photo["brick"], 0.012, (0.85, 0.5, 0.38)),
                Face(photo["grass"], 0.012, (0.55, 0.85, 0.45)),
                Face(photo["motorcycle_left"], 0.03),
                Face(photo["coffee"], 0.03),
            ],
        ),
    ]
    facades = ("astronaut", "chelsea", "coffee", "coins", "immunohistochemistry", "moon", "motorcycle_left", "camera")
    rng = np.random.default_rng(SEED)
    for k, (cx, cy) in enumerate((x, y) for y in (-SPACING, 0.0, SPACING) for x in (-SPACING, 0.0, SPACING)):
        height = float(rng.uniform(1.0, 2.4))
        box = Box(
            _per_view, center=(cx, cy, height / 2), half=(1.3, 1.3, height / 2), yaw=float(rng.uniform(-0.2, 0.2))
        )
        tint = tuple(float(t) for t in rng.uniform(0.7, 1.0, 3))
        # Each face its own crop of one of two photos: neighbouring facades differ, as in a street.
        faces = [Face(photo[facades[(k + f // 3) % len(facades)]], 0.006, tint, (37.0 * f, 23.0 * f)) for f in range(6)]
        decals.append(Decal(box, box_uv(box), faces))
    return PhotoScene(decals)


def street_cameras(n_views: int = 600, width: int = 64, height: int = 48) -> list[DemoCamera]:
    """``n_views`` (a multiple of 24) cameras along the streets; see the module docstring."""
    if n_views % 24:
        raise ValueError(f"street_cameras: n_views={n_views} must be a multiple of 24 (8 paths x 3 views per stop)")
    stops = n_views // 24
    rng = np.random.default_rng(SEED + 1)
    focal = FOCAL_AT_64 * width / 64
    cams: list[DemoCamera] = []
    for axis, line in [(axis, line) for axis in (0, 1) for line in STREETS]:
        for s in np.linspace(-9.0, 9.0, stops):
            along = np.array([1.0, 0.0]) if axis == 0 else np.array([0.0, 1.0])
            side = np.array([-along[1], along[0]])
            eye_xy = along * s + side * line
            for turn in (side, -side, along):  # left, right, ahead
                z = float(rng.uniform(1.6, 2.6))
                pitch = math.radians(float(rng.uniform(18.0, 38.0)))
                yaw_jitter = float(rng.uniform(-0.25, 0.25))
                c, sn = math.cos(yaw_jitter), math.sin(yaw_jitter)
                look = np.array([c * turn[0] - sn * turn[1], sn * turn[0] + c * turn[1]])
                eye = np.array([*eye_xy, z])
                target = eye + np.array([*look * math.cos(pitch), -math.sin(pitch)])
                name = f"v_{len(cams):04d}"
                cams.append(DemoCamera(name, look_at(eye, target), focal, focal, width / 2, height / 2, width, height))
    return cams


_SCENE: PhotoScene | None = None


def _render(cam: DemoCamera) -> np.ndarray:
    global _SCENE
    if _SCENE is None:  # once per worker process: the photos' mip maps
        _SCENE = build_street()
    rgb = render(_SCENE.prims_for(cam, SUPERSAMPLE), cam, SUPERSAMPLE, LIGHTING)
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


def generate_street(out: Path, n_views: int = 600, width: int = 64, height: int = 48, workers: int = 2) -> Path:
    """Render the street scene into ``out`` (a COLMAP scene folder, which must not exist yet); returns ``out``."""
    cams = street_cameras(n_views, width, height)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        images = list(pool.map(_render, cams, chunksize=8))
    cloud = noisy_points(build_street().prims_for, cams, np.random.default_rng(SEED), POINTS_PER_VIEW, LIGHTING)
    write_colmap(out, cams, images, cloud)
    return out


def surface_points(cam: DemoCamera, scene: PhotoScene | None = None) -> np.ndarray:
    """[H, W, 3] world point each pixel centre of ``cam`` sees (the ray caster's first hit; nan on a miss),
    to tell which test pixels lie near a block border."""
    from ..data.demo.raycast import trace
    from ..data.demo.scene import camera_rays

    prims: list[Primitive] = [d.prim for d in (scene or build_street()).decals]
    u, v = np.meshgrid(np.arange(cam.width) + 0.5, np.arange(cam.height) + 0.5)
    hits = trace(prims, *camera_rays(cam, u.reshape(-1), v.reshape(-1)))
    points = np.where((hits.index >= 0)[:, None], hits.points, np.nan)
    return points.reshape(cam.height, cam.width, 3)
