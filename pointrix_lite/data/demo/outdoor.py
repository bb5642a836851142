"""The outdoor benchmark scene: the photo scene's solids under an open sky (issue 43, floaters).

``python -m benchmarks train --scene outdoor``. Real outdoor captures show sky and distant trees that
structure from motion gives no points (the sky) or few (the distance), and a trainer that starts from
those points and grows Gaussians next to them draws the sky with Gaussians near the scene: floaters in
every held-out view. The photo scene (:mod:`.photo`) has walls everywhere, so it cannot show this. Here
its five solids stand on its gravel floor without the room, and

* the ground goes on as a grass field out to a **skyline** 30 units away: an open ring of trees (a
  bumpy top) and buildings (blocky tops) 2 to 6.5 units tall, photo textured; at ~8 x the camera ring's
  radius it moves little between views;
* rays that hit nothing see a bright **sky**, a function of the ray direction only (at infinity): a
  white-to-blue gradient with elevation and soft value-noise clouds, 0.6 to 1.0 in every channel. The
  SfM-like points come from surface hits only, so the sky gets none, as with real SfM;
* the cameras circle as in the photo scene but at 3 to 11 degrees elevation, so about a third of each
  image is skyline and sky above the objects (:func:`sky_mask` tells which pixels are sky).

Same size, layout and split as the photo scene (56 views of 400 x 300, every 8th held out); generated
from code, deterministically, on first use into ``data/bench_outdoor`` (about a minute of CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .make import ensure_generated, noisy_points, write_colmap
from .photo import (
    FOCAL,
    HEIGHT,
    N_VIEWS,
    POINTS_PER_VIEW,
    SEED,
    SUPERSAMPLE,
    TARGET,
    WIDTH,
    PhotoScene,
    build_photo_scene,
)
from .photo_texture import UV, Decal, Face, Mip, load_photo
from .raycast import GroundSquare, Primitive, Room, _nearest_root, shade, trace
from .scene import SUN, DemoCamera, Lighting, camera_rays, camera_ring, fbm, value_noise

RING_RADIUS = 30.0
PLAZA_HALF = 6.0  # the photo scene's gravel floor; grass beyond it
SECTORS = 8  # around the skyline, trees and buildings alternate
LIGHTING = Lighting(SUN, np.array([0.9, 0.93, 0.97]), ambient=0.5)  # background: unused, misses see the sky


def _per_view(p: np.ndarray) -> np.ndarray:
    raise RuntimeError("outdoor scene primitives are textured per view: use PhotoScene.prims_for(camera)")


def sky(d: np.ndarray) -> np.ndarray:
    """[N, 3] colour of the sky in unit directions ``d [N, 3]`` (z up): the same from every point."""
    up = np.clip(d[:, 2], 0.0, 1.0)
    t = np.sqrt(up)[:, None]
    gradient = (1 - t) * np.array([0.93, 0.95, 0.98]) + t * np.array([0.62, 0.76, 0.97])
    # Clouds on a plane overhead: the direction's point on it, compressed towards the horizon.
    plane = 1.5 * d[:, :2] / (up + 0.2)[:, None]
    n = fbm(np.concatenate([plane, np.zeros((len(d), 1))], axis=1), octaves=3)
    cloud = np.clip((n - 0.45) / 0.3, 0.0, 1.0)
    cloud = (cloud * cloud * (3 - 2 * cloud))[:, None] * 0.85
    return (1 - cloud) * gradient + cloud * np.array([0.99, 0.99, 1.0])


def _sector(angle: np.ndarray) -> np.ndarray:
    return np.floor(angle / (2 * np.pi) * SECTORS).astype(np.int64) % SECTORS


def _skyline_profile(angle: np.ndarray) -> np.ndarray:
    """Height of the skyline at azimuth ``angle`` [N] in [0, 2 pi): bumpy in even sectors (trees),
    flat-topped blocks 3 degrees wide in odd ones (buildings)."""
    ring = np.stack([np.cos(angle), np.sin(angle), np.zeros_like(angle)], axis=1)
    trees = 2.5 + 3.0 * fbm(ring * 40.0, octaves=4)
    block = np.floor(angle * 120 / (2 * np.pi))
    buildings = 2.0 + 4.5 * value_noise(np.stack([block, np.full_like(block, 7.0), np.zeros_like(block)], axis=1))
    return np.where(_sector(angle) % 2 == 0, trees, buildings)


# Tabulated: every ray that can reach the ring (shadow rays too) asks; 2^16 samples are ~3 mm apart at
# 30 units, a tenth of a supersample there.
_PROFILE = _skyline_profile(2 * np.pi * (np.arange(1 << 16) + 0.5) / (1 << 16))


def skyline_top(angle: np.ndarray) -> np.ndarray:
    """Height of the skyline at azimuth ``angle`` [N] in [0, 2 pi) (:func:`_skyline_profile`, tabulated)."""
    return _PROFILE[np.floor(angle * (len(_PROFILE) / (2 * np.pi))).astype(np.int64) % len(_PROFILE)]


def _azimuth(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.mod(np.arctan2(y, x), 2 * np.pi)


@dataclass
class Skyline(Primitive):
    """An open vertical ring about the z axis, from z = 0 up to :func:`skyline_top`, seen from inside."""

    radius: float = RING_RADIUS

    def intersect(self, o, d):
        def below_top(t: np.ndarray) -> np.ndarray:
            p = o + np.where(np.isfinite(t), t, 0.0)[:, None] * d
            return (p[:, 2] >= 0) & (p[:, 2] <= skyline_top(_azimuth(p[:, 0], p[:, 1])))

        q, dxy = o[:, :2], d[:, :2]
        return _nearest_root((dxy * dxy).sum(1), 2 * (q * dxy).sum(1), (q * q).sum(1) - self.radius**2, below_top)

    def normal(self, p):
        return np.concatenate([-p[:, :2] / self.radius, np.zeros((len(p), 1))], axis=1)


def skyline_uv(ring: Skyline) -> UV:
    """Face: the sector; u along the ring, v down from the tallest top."""

    def uv(p):
        angle = _azimuth(p[:, 0], p[:, 1])
        return _sector(angle), angle * ring.radius, 6.5 - p[:, 2]

    return uv


def ground_uv(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Face 0: the gravel plaza (as the photo scene's floor), face 1: the grass beyond."""
    face = (np.abs(p[:, :2]).max(axis=1) > PLAZA_HALF).astype(np.int64)
    return face, p[:, 0] + PLAZA_HALF, PLAZA_HALF - p[:, 1]


def build_outdoor_scene() -> PhotoScene:
    """The photo scene's solids, a ground out to the skyline and the skyline (module docstring)."""
    base = build_photo_scene()
    solids = [d for d in base.decals if not isinstance(d.prim, (Room, GroundSquare))]
    gravel, grass, brick = (Mip(load_photo(n)) for n in ("gravel", "grass", "brick"))
    ground = GroundSquare(_per_view, half=RING_RADIUS + 1.0)  # every downward ray inside the ring lands on it
    ground_faces = [Face(gravel, 0.008, (0.92, 0.82, 0.66)), Face(grass, 0.02, (0.55, 0.8, 0.4))]
    ring = Skyline(_per_view)
    tints = [(0.3, 0.5, 0.25), (0.85, 0.6, 0.5), (0.4, 0.55, 0.3), (0.75, 0.72, 0.7)]
    faces = [Face(grass, 0.04, tints[k % 4]) if k % 2 == 0 else Face(brick, 0.02, tints[k % 4]) for k in range(SECTORS)]
    return PhotoScene([Decal(ground, ground_uv, ground_faces), Decal(ring, skyline_uv(ring), faces), *solids])


def outdoor_cameras(n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> list[DemoCamera]:
    """The photo scene's ring (3.6 from the target) at 3 to 11 degrees elevation: a third of the view is sky."""
    return camera_ring(
        n_views, size=width, height=height, focal=FOCAL * width / WIDTH, radius=3.6, target=TARGET, elevation=(7, 4)
    )


def _rays(cam: DemoCamera, supersample: int) -> tuple[np.ndarray, np.ndarray]:
    """Ray origins and directions [H * s * W * s, 3] of ``supersample``^2 stratified samples per pixel."""
    offs = (np.arange(supersample) + 0.5) / supersample
    u = (np.arange(cam.width)[:, None] + offs[None, :]).reshape(-1)
    v = (np.arange(cam.height)[:, None] + offs[None, :]).reshape(-1)
    uu, vv = np.meshgrid(u, v)
    return camera_rays(cam, uu.reshape(-1), vv.reshape(-1))


def _pixels(samples: np.ndarray, cam: DemoCamera, supersample: int) -> np.ndarray:
    s = supersample
    return samples.reshape(cam.height, s, cam.width, s, -1).mean(axis=(1, 3))


def render_outdoor(prims: list[Primitive], cam: DemoCamera, supersample: int = SUPERSAMPLE) -> np.ndarray:
    """[H, W, 3] float64 image (box filter over the samples); a ray that hits nothing sees :func:`sky`.

    (``scene.render`` fills misses with one background colour; the sky depends on the direction.)
    """
    o, d = _rays(cam, supersample)
    hits = trace(prims, o, d)
    colour = shade(prims, hits, LIGHTING.sun, LIGHTING.background, LIGHTING.ambient)
    miss = hits.index < 0
    colour[miss] = sky(d[miss])
    return _pixels(colour, cam, supersample)


def sky_mask(cam: DemoCamera, supersample: int = SUPERSAMPLE) -> np.ndarray:
    """[H, W] float64: the share of each pixel's samples that see the sky (1 = all sky, 0 = none)."""
    prims = [d.prim for d in build_outdoor_scene().decals]
    o, d = _rays(cam, supersample)
    return _pixels((trace(prims, o, d).index < 0).astype(np.float64)[:, None], cam, supersample)[..., 0]


def generate_outdoor_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> None:
    """Render the scene and write its COLMAP layout to ``out/colmap`` (``out`` must not exist yet)."""
    scene, cams = build_outdoor_scene(), outdoor_cameras(n_views, width, height)
    out.mkdir(parents=True)
    images = []
    for cam in cams:
        rgb = render_outdoor(scene.prims_for(cam, SUPERSAMPLE), cam)
        images.append(np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8))
    cloud = noisy_points(scene.prims_for, cams, np.random.default_rng(SEED), POINTS_PER_VIEW, LIGHTING)
    write_colmap(out / "colmap", cams, images, cloud)


def ensure_outdoor_scene(out: Path, n_views: int = N_VIEWS, width: int = WIDTH, height: int = HEIGHT) -> Path:
    """Generate the outdoor scene at ``out`` unless it is there; returns ``out`` (data in ``out/colmap``)."""
    what = f"the {width}x{height} outdoor benchmark scene ({n_views} views)"
    return ensure_generated(out, what, lambda folder: generate_outdoor_scene(folder, n_views, width, height))
