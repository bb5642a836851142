"""The photo benchmark scene: scikit-image's sample photos on ray-cast solids in a walled room.

Harder than the demo on purpose (``python -m benchmarks train --scene photo``): photos have detail at every
scale, where the demo's procedural textures are smooth between a few edges, and the walls and floor
fill every pixel, so the background is real geometry to learn rather than a constant colour. Five
solids stand on a gravel floor in a 12 x 12 room whose walls show two photos, bricks and grass; 56
cameras circle them at elevations of about 10 to 38 degrees. Texel sizes are set so that the surfaces
the cameras look at carry about one to two photo pixels per image pixel (finer ones are filtered by the
mip-mapped lookup, see :mod:`.photo_texture`).

Written in the COLMAP layout only (``<out>/colmap/images/r_*.png`` and ``sparse/0/*.bin``, one PINHOLE
camera, 400 x 300); ``ColmapDataset``'s ``test_every: 8`` holds out views 0, 8, ..., 48 (49 train + 7
test). Generated from code (about 35 s of CPU), deterministically: the same bytes on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .make import ensure_generated, noisy_points, write_colmap
from .photo_texture import UV, Decal, Face, Mip, load_photo
from .raycast import Box, Cone, Cylinder, GroundSquare, Primitive, Room, Sphere
from .scene import SUN, DemoCamera, Lighting, camera_ring, render

WIDTH, HEIGHT, N_VIEWS = 400, 300, 56
FOCAL = 400.0  # pixels at 400 wide: a 53 x 41 degree field of view
SUPERSAMPLE = 2
POINTS_PER_VIEW = 150  # ~8.4k SfM-like points
SEED = 0
TARGET = np.array([0.0, 0.0, 0.35])
ROOM_HALF, ROOM_HEIGHT = 6.0, 4.5
# Sky where a ray passes over a wall (no camera's ray does); a brighter ambient than the demo's keeps walls facing away
# from the sun from going flat and dark.
LIGHTING = Lighting(SUN, np.array([0.62, 0.74, 0.90]), ambient=0.5)


def _per_view(p: np.ndarray) -> np.ndarray:
    raise RuntimeError("photo scene primitives are textured per view: use PhotoScene.prims_for(camera)")


# ------------------------------------------------------------------------------- parametrisations
# Each returns (face index, u, v) in world units; side faces run u left to right and v top to bottom as
# seen by a viewer facing them, so photos appear upright and unmirrored.


def _angle(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.arctan2(y, x) + np.pi


def floor_uv(square: GroundSquare) -> UV:
    def uv(p):
        return np.zeros(len(p), np.int64), p[:, 0] + square.half, square.half - p[:, 1]

    return uv


def room_uv(room: Room) -> UV:
    """Faces 0..3: the walls at x = +half, x = -half, y = +half, y = -half."""

    def uv(p):
        axis = np.abs(p[:, :2]).argmax(axis=1)
        face = 2 * axis + (p[np.arange(len(p)), axis] < 0)
        along = np.select([face == 0, face == 1, face == 2], [-p[:, 1], p[:, 1], p[:, 0]], -p[:, 0])
        return face, along + room.half, room.height - p[:, 2]

    return uv


def box_uv(box: Box) -> UV:
    """Faces 0..5: local +x, -x, +y, -y, +z (top, v along -y), -z."""

    def uv(p):
        lp, h = box.to_local(p), np.asarray(box.half)
        axis = np.abs(lp / h).argmax(axis=1)
        face = 2 * axis + (lp[np.arange(len(p)), axis] < 0)
        x, y, z = lp.T
        sides = [face == 0, face == 1, face == 2, face == 3]
        along = np.select(sides, [y + h[1], h[1] - y, h[0] - x, x + h[0]], x + h[0])
        down = np.where(axis == 2, h[1] - y, h[2] - z)
        return face, along, down

    return uv


def sphere_uv(ball: Sphere) -> UV:
    """Longitude and colatitude, as arc lengths on the sphere."""

    def uv(p):
        q = (p - np.asarray(ball.center)) / ball.radius
        colat = np.arccos(np.clip(q[:, 2], -1.0, 1.0))
        return np.zeros(len(p), np.int64), _angle(q[:, 0], q[:, 1]) * ball.radius, colat * ball.radius

    return uv


def cylinder_uv(cyl: Cylinder) -> UV:
    """Face 0: the side (unrolled), face 1: the top cap."""

    def uv(p):
        x, y = p[:, 0] - cyl.base[0], p[:, 1] - cyl.base[1]
        cap = p[:, 2] >= cyl.height - 1e-7
        u = np.where(cap, x + cyl.radius, _angle(x, y) * cyl.radius)
        v = np.where(cap, cyl.radius - y, cyl.height - p[:, 2])
        return cap.astype(np.int64), u, v

    return uv


def cone_uv(cone: Cone) -> UV:
    """Around the base circumference, and down the slant from the apex."""

    def uv(p):
        r = p[:, :2] - np.asarray(cone.base)
        slant = np.linalg.norm(p - np.array([*cone.base, cone.height]), axis=1)
        return np.zeros(len(p), np.int64), _angle(r[:, 0], r[:, 1]) * cone.radius, slant

    return uv


# ------------------------------------------------------------------------------------------ scene


@dataclass
class PhotoScene:
    decals: list[Decal]

    def prims_for(self, cam: DemoCamera, supersample: int = 1) -> list[Primitive]:
        """The primitives textured for ``cam`` sampled ``supersample`` x ``supersample`` times per pixel."""
        R, t = cam.w2c[:3, :3], cam.w2c[:3, 3]
        eye, angle = -R.T @ t, 1.0 / (cam.fx * supersample)
        return [replace(d.prim, texture=d.texture(eye, angle)) for d in self.decals]


def build_photo_scene() -> PhotoScene:
    """Geometry and photo placement (texels in world units per photo pixel)."""
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
    )
    photo = {name: Mip(load_photo(name)) for name in names}

    def fitted(name: str, width: float, tint=(1.0, 1.0, 1.0), height: float | None = None) -> Face:
        """``name`` scaled to span ``width`` (a circumference, for round things); on a wall ``height``
        tall, centred vertically."""
        h, w = photo[name].shape
        texel = width / w
        centre = 0.0 if height is None else max(0.0, (h - height / texel) / 2)
        return Face(photo[name], texel, tint, (0.0, centre))

    room = Room(_per_view, half=ROOM_HALF, height=ROOM_HEIGHT)
    floor = GroundSquare(_per_view, half=ROOM_HALF)
    walls = [
        fitted("motorcycle_left", 2 * ROOM_HALF, height=ROOM_HEIGHT),
        fitted("coffee", 2 * ROOM_HALF, height=ROOM_HEIGHT),
        Face(photo["brick"], 0.012, (0.85, 0.50, 0.38)),
        Face(photo["grass"], 0.012, (0.55, 0.85, 0.45)),
    ]
    box = Box(_per_view, center=(-0.55, 0.45, 0.35), half=(0.5, 0.35, 0.35), yaw=0.45)
    astronaut = fitted("astronaut", 2 * max(box.half))
    box_faces = [replace(astronaut, offset=(40.0 * k, 60.0 * (k % 3))) for k in range(6)]  # six different crops
    ball = Sphere(_per_view, center=(0.7, 0.5, 0.5), radius=0.5)
    cone = Cone(_per_view, base=(-0.6, -0.7), radius=0.38, height=0.95)
    cyl = Cylinder(_per_view, base=(0.55, -0.7), radius=0.3, height=1.0)
    ihc = fitted("immunohistochemistry", 2 * np.pi * cyl.radius)
    moon = Sphere(_per_view, center=(0.05, -0.05, 0.22), radius=0.22)
    return PhotoScene(
        [
            Decal(floor, floor_uv(floor), [Face(photo["gravel"], 0.008, (0.92, 0.82, 0.66))]),
            Decal(room, room_uv(room), walls),
            Decal(box, box_uv(box), box_faces),
            Decal(ball, sphere_uv(ball), [fitted("chelsea", 2 * np.pi * ball.radius)]),
            Decal(cone, cone_uv(cone), [fitted("coins", 2 * np.pi * cone.radius, tint=(1.0, 0.8, 0.45))]),
            Decal(cyl, cylinder_uv(cyl), [ihc, ihc]),
            Decal(moon, sphere_uv(moon), [fitted("moon", 2 * np.pi * moon.radius, tint=(0.95, 0.92, 0.85))]),
        ]
    )


def photo_cameras(n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> list[DemoCamera]:
    """A ring at 10 to 38 degrees elevation, 3.6 from the target; the field of view does not depend on size."""
    return camera_ring(
        n_views, size=width, height=height, focal=FOCAL * width / WIDTH, radius=3.6, target=TARGET, elevation=(24, 14)
    )


def generate_photo_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> None:
    """Render the scene and write its COLMAP layout to ``out/colmap`` (``out`` must not exist yet)."""
    write_scene(out, build_photo_scene(), photo_cameras(n_views, width, height))


def write_scene(out: Path, scene: PhotoScene, cams: list[DemoCamera]) -> None:
    """Render ``scene`` from ``cams`` (supersampled) and write the COLMAP layout to ``out/colmap``, with
    SfM-like noisy points (``out`` must not exist yet)."""
    out.mkdir(parents=True)
    images = []
    for cam in cams:
        rgb = render(scene.prims_for(cam, SUPERSAMPLE), cam, SUPERSAMPLE, LIGHTING)
        images.append(np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8))
    cloud = noisy_points(scene.prims_for, cams, np.random.default_rng(SEED), POINTS_PER_VIEW, LIGHTING)
    write_colmap(out / "colmap", cams, images, cloud)


def ensure_photo_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> Path:
    """Generate the photo scene (by default 400 x 300, the benchmark's) at ``out`` unless it is there;
    returns ``out`` (data in ``out/colmap``)."""
    what = f"the {width}x{height} photo benchmark scene ({n_views} views)"
    return ensure_generated(out, what, lambda folder: generate_photo_scene(folder, n_views, width, height))
