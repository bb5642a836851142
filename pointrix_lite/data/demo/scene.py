"""The demo scene: five textured solids on a checkered table, seen by a ring of cameras.

World axes are Blender's (z up). Units are arbitrary; the table is 4 x 4 and the objects fit in a
radius of about 1.2 around the origin. Textures are procedural (integer-hash value noise, so they are
bit-identical on every run) and have detail down to a few pixels at 160 x 160, so that a blurry
reconstruction scores a visibly lower PSNR than a sharp one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..cameras import look_at
from .raycast import Box, Cone, Cylinder, GroundSquare, Primitive, Sphere, shade, trace

BACKGROUND = np.array([1.0, 1.0, 1.0])  # white, so the same images work with white_background: true
SUN = np.array([0.45, -0.35, 0.82])
TARGET = np.array([0.0, 0.0, 0.2])  # cameras look here


@dataclass(frozen=True)
class Lighting:
    """What :func:`~.raycast.shade` needs besides the geometry: sun direction, background, ambient share."""

    sun: np.ndarray
    background: np.ndarray
    ambient: float = 0.35


DEMO_LIGHTING = Lighting(SUN, BACKGROUND)


# ------------------------------------------------------------------------------------------ noise


def _hash(ix: np.ndarray, iy: np.ndarray, iz: np.ndarray) -> np.ndarray:
    """Integer lattice -> uniform [0, 1) via a 32-bit mix (exact, unlike the usual sin-hash)."""
    h = (ix.astype(np.uint32) * np.uint32(374761393)) ^ (iy.astype(np.uint32) * np.uint32(668265263))
    h = h ^ (iz.astype(np.uint32) * np.uint32(2246822519))
    h = (h ^ (h >> np.uint32(13))) * np.uint32(1274126177)
    h = h ^ (h >> np.uint32(16))
    return h.astype(np.float64) / 2.0**32


def value_noise(p: np.ndarray) -> np.ndarray:
    """Smooth value noise in [0, 1] at points [N, 3] (lattice spacing 1)."""
    i = np.floor(p)
    f = p - i
    w = f * f * (3.0 - 2.0 * f)  # smoothstep weights: C1-continuous across cells
    i = i.astype(np.int64) + (1 << 20)  # keep lattice indices non-negative for the unsigned hash
    out = np.zeros(len(p))
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                wx = w[:, 0] if dx else 1 - w[:, 0]
                wy = w[:, 1] if dy else 1 - w[:, 1]
                wz = w[:, 2] if dz else 1 - w[:, 2]
                out += wx * wy * wz * _hash(i[:, 0] + dx, i[:, 1] + dy, i[:, 2] + dz)
    return out


def fbm(p: np.ndarray, octaves: int = 4) -> np.ndarray:
    """Fractal sum of value noise, normalised to [0, 1]."""
    total, amp, norm = np.zeros(len(p)), 1.0, 0.0
    for k in range(octaves):
        total += amp * value_noise(p * 2.0**k + 17.0 * k)
        norm += amp
        amp *= 0.5
    return total / norm


def _mix(a, b, t: np.ndarray) -> np.ndarray:
    return np.asarray(a) * (1 - t[:, None]) + np.asarray(b) * t[:, None]


# --------------------------------------------------------------------------------------- textures


def checker_table(p: np.ndarray) -> np.ndarray:
    cell = (np.floor(p[:, 0] / 0.25) + np.floor(p[:, 1] / 0.25)) % 2
    base = _mix((0.88, 0.83, 0.72), (0.30, 0.40, 0.56), cell)
    grain = 0.8 + 0.35 * fbm(p * 6.0)
    return np.clip(base * grain[:, None], 0, 1)


def wood(box: Box):
    def tex(p: np.ndarray) -> np.ndarray:
        lp = box.to_local(p)
        r = np.hypot(lp[:, 1] + 0.9, lp[:, 2] + 0.6) * 14.0 + 2.5 * fbm(lp * 3.0)
        ring = np.abs(np.sin(np.pi * r)) ** 3
        return _mix((0.80, 0.58, 0.34), (0.42, 0.24, 0.11), ring)

    return tex


def striped_ball(ball: Sphere):
    palette = np.array(
        [(0.85, 0.15, 0.15), (0.95, 0.75, 0.10), (0.15, 0.55, 0.25), (0.15, 0.35, 0.80), (0.55, 0.20, 0.65)]
    )

    def tex(p: np.ndarray) -> np.ndarray:
        q = (p - np.asarray(ball.center)) / ball.radius
        band = np.floor((np.arctan2(q[:, 1], q[:, 0]) + np.pi) / (2 * np.pi) * 10).astype(int) % len(palette)
        col = palette[band]
        lines = np.abs(np.sin(np.arccos(np.clip(q[:, 2], -1, 1)) * 9.0)) < 0.18
        return np.where(lines[:, None], 0.95, col)

    return tex


def marble(p: np.ndarray) -> np.ndarray:
    v = 0.5 + 0.5 * np.sin(10.0 * p[:, 2] + 3.0 * p[:, 0] + 7.0 * fbm(p * 2.5, octaves=5))
    return _mix((0.93, 0.93, 0.90), (0.15, 0.35, 0.32), v**4)


def spiral(cone: Cone):
    def tex(p: np.ndarray) -> np.ndarray:
        r = p[:, :2] - np.asarray(cone.base)
        s = np.sin(3.0 * np.arctan2(r[:, 1], r[:, 0]) + 28.0 * p[:, 2])
        return _mix((0.95, 0.55, 0.05), (0.70, 0.05, 0.10), (s > 0).astype(np.float64))

    return tex


def speckled_gold(p: np.ndarray) -> np.ndarray:
    n = fbm(p * 14.0, octaves=3)
    return _mix((0.95, 0.78, 0.30), (0.35, 0.20, 0.05), (n > 0.55).astype(np.float64))


def build_scene() -> list[Primitive]:
    """The demo's primitives (textures are closures over each primitive's frame)."""
    prims: list[Primitive] = [GroundSquare(checker_table, half=2.0)]
    box = Box(lambda p: p, center=(-0.55, 0.45, 0.3), half=(0.45, 0.3, 0.3), yaw=0.45)
    box.texture = wood(box)
    ball = Sphere(lambda p: p, center=(0.65, 0.5, 0.45), radius=0.45)
    ball.texture = striped_ball(ball)
    cone = Cone(lambda p: p, base=(-0.6, -0.65), radius=0.35, height=0.85)
    cone.texture = spiral(cone)
    prims += [box, ball, cone]
    prims.append(Cylinder(marble, base=(0.5, -0.65), radius=0.28, height=0.9))
    prims.append(Sphere(speckled_gold, center=(0.05, -0.05, 0.2), radius=0.2))
    return prims


# ---------------------------------------------------------------------------------------- cameras


@dataclass
class DemoCamera:
    name: str
    w2c: np.ndarray  # [4, 4] float64, OpenCV axes
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int


def camera_ring(
    n: int = 48,
    size: int = 160,
    focal: float = 190.0,
    radius: float = 3.9,
    height: int | None = None,
    target: np.ndarray = TARGET,
    elevation: tuple[float, float] = (32.0, 17.0),
) -> list[DemoCamera]:
    """``n`` cameras looking at ``target``; azimuth steps evenly, elevation wanders around a mean.

    The elevation of camera ``i`` is ``mean + amplitude * sin(2.4 i)`` degrees (``elevation`` =
    ``(mean, amplitude)``; the demo's ~15 to ~50 deg). Images are ``size`` wide and ``height`` (default
    ``size``) high, principal point at the image centre. With names ``r_000 ...`` the test split "every
    8th sorted by name" (indices 0, 8, ...) is spread evenly in azimuth.
    """
    height = size if height is None else height
    mean, amplitude = elevation
    cams = []
    for i in range(n):
        az = 2 * math.pi * i / n + 0.3
        el = math.radians(mean + amplitude * math.sin(2.4 * i))
        eye = target + radius * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
        w2c = look_at(eye, target)
        cams.append(DemoCamera(f"r_{i:03d}", w2c, focal, focal, size / 2, height / 2, size, height))
    return cams


def camera_rays(cam: DemoCamera, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World rays through continuous pixel coordinates ``(u, v)`` (pixel centres at +0.5)."""
    R, t = cam.w2c[:3, :3], cam.w2c[:3, 3]
    dirs_cam = np.stack([(u - cam.cx) / cam.fx, (v - cam.cy) / cam.fy, np.ones_like(u)], axis=1)
    dirs = dirs_cam @ R  # R^T applied to row vectors
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    origin = -R.T @ t
    return np.broadcast_to(origin, dirs.shape).copy(), dirs


def render(
    prims: list[Primitive], cam: DemoCamera, supersample: int = 2, lighting: Lighting = DEMO_LIGHTING
) -> np.ndarray:
    """[H, W, 3] float64 image, box-filtered over ``supersample``^2 stratified samples per pixel."""
    s = supersample
    offs = (np.arange(s) + 0.5) / s
    u = (np.arange(cam.width)[:, None] + offs[None, :]).reshape(-1)
    v = (np.arange(cam.height)[:, None] + offs[None, :]).reshape(-1)
    uu, vv = np.meshgrid(u, v)
    o, d = camera_rays(cam, uu.reshape(-1), vv.reshape(-1))
    colour = shade(prims, trace(prims, o, d), lighting.sun, lighting.background, lighting.ambient)
    return colour.reshape(cam.height, s, cam.width, s, 3).mean(axis=(1, 3))


def sample_surface_points(
    prims: list[Primitive] | Callable[[DemoCamera], list[Primitive]],
    cams: list[DemoCamera],
    per_view: int,
    rng: np.random.Generator,
    lighting: Lighting = DEMO_LIGHTING,
) -> tuple[np.ndarray, np.ndarray]:
    """SfM-like points: surface points seen through random pixels of each camera, with their colour.

    ``prims`` may be a function of the camera (scenes whose textures filter to each view's footprint).

    Returns:
        xyz [M, 3], rgb [M, 3] in [0, 1], noise-free (the caller adds noise).
    """
    xyz, rgb = [], []
    for cam in cams:
        seen_by = prims(cam) if callable(prims) else prims
        u, v = rng.random(per_view) * cam.width, rng.random(per_view) * cam.height
        o, d = camera_rays(cam, u, v)
        hits = trace(seen_by, o, d)
        seen = hits.index >= 0
        colour = shade(seen_by, hits, lighting.sun, lighting.background, lighting.ambient)
        xyz.append(hits.points[seen])
        rgb.append(colour[seen])
    return np.concatenate(xyz), np.concatenate(rgb)
