"""A tiny vectorised ray caster (numpy, float64) for the procedural demo scene.

Independent of the Gaussian rasterizer on purpose: the demo is ground truth that the splatting model
has to *learn*, so it must not be produced by the code under test. Each primitive answers two questions
for a batch of rays: where is the first hit (``intersect``) and what is the surface normal there
(``normal``). Shading is Lambert with a hemisphere ambient term and hard shadows from one sun.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

EPS = 1e-6
Texture = Callable[[np.ndarray], np.ndarray]  # world points [N,3] -> albedo [N,3] in [0, 1]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _nearest_root(a: np.ndarray, b: np.ndarray, c: np.ndarray, ok: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Smallest root t > EPS of ``a t^2 + b t + c = 0`` for which ``ok(t)`` holds, else inf. [N] arrays."""
    disc = b * b - 4 * a * c
    hit = (disc >= 0) & (np.abs(a) > 1e-12)
    sq = np.sqrt(np.where(hit, disc, 0.0))
    safe_a = np.where(hit, a, 1.0)
    best = np.full(a.shape, np.inf)
    # Larger root first so the smaller one overwrites it when both are valid.
    for t in ((-b + sq) / (2 * safe_a), (-b - sq) / (2 * safe_a)):
        good = hit & (t > EPS) & ok(t)
        best = np.where(good & (t < best), t, best)
    return best


@dataclass
class Primitive:
    texture: Texture = field(repr=False)

    def intersect(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Ray origins/directions [N,3] -> distance to the first hit [N] (inf on a miss)."""
        raise NotImplementedError

    def normal(self, p: np.ndarray) -> np.ndarray:
        """Hit points [N,3] -> outward unit normals [N,3]."""
        raise NotImplementedError

    def bounds(self) -> tuple[np.ndarray, float] | None:
        """A sphere ``(centre [3], radius)`` holding the primitive, or None (unbounded, or cheaper to
        test exactly): :func:`trace` then intersects only the rays that meet the sphere."""
        return None


@dataclass
class GroundSquare(Primitive):
    """The square ``|x|, |y| <= half`` in the plane z = 0, facing up."""

    half: float = 2.0

    def intersect(self, o, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -o[:, 2] / d[:, 2]
        p = o + np.nan_to_num(t, posinf=0, neginf=0)[:, None] * d
        ok = (t > EPS) & (np.abs(p[:, 0]) <= self.half) & (np.abs(p[:, 1]) <= self.half)
        return np.where(ok, t, np.inf)

    def normal(self, p):
        return np.tile([0.0, 0.0, 1.0], (len(p), 1))


@dataclass
class Room(Primitive):
    """The four walls of the room ``|x|, |y| <= half``, ``0 <= z <= height``, seen from inside.

    Rays must start inside the room (cameras and the surfaces they see are); normals point inwards.
    One primitive instead of four boxes: every camera ray of an indoor scene tests it.
    """

    half: float = 6.0
    height: float = 4.0

    def intersect(self, o, d):
        dxy = d[:, :2]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_axis = (np.copysign(self.half, dxy) - o[:, :2]) / dxy  # where the ray leaves each slab
        t_axis = np.where(dxy != 0, t_axis, np.inf)
        t = np.minimum(t_axis[:, 0], t_axis[:, 1])
        z = o[:, 2] + np.where(np.isfinite(t), t, 0.0) * d[:, 2]
        ok = np.isfinite(t) & (t > EPS) & (z >= 0) & (z <= self.height)
        return np.where(ok, t, np.inf)

    def normal(self, p):
        axis = np.abs(p[:, :2]).argmax(axis=1)
        n = np.zeros_like(p)
        n[np.arange(len(p)), axis] = -np.sign(p[np.arange(len(p)), axis])
        return n


@dataclass
class Sphere(Primitive):
    center: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 1.0

    def intersect(self, o, d):
        oc = o - np.asarray(self.center)
        return _nearest_root(_dot(d, d), 2 * _dot(oc, d), _dot(oc, oc) - self.radius**2, lambda t: True)

    def normal(self, p):
        return (p - np.asarray(self.center)) / self.radius


@dataclass
class Box(Primitive):
    """A box with half sizes ``half`` centred at ``center``, rotated by ``yaw`` radians about z."""

    center: tuple[float, float, float] = (0.0, 0.0, 0.0)
    half: tuple[float, float, float] = (0.5, 0.5, 0.5)
    yaw: float = 0.0

    def rotation(self) -> np.ndarray:
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def to_local(self, p: np.ndarray) -> np.ndarray:
        return (p - np.asarray(self.center)) @ self.rotation()

    def bounds(self):
        return np.asarray(self.center, dtype=np.float64), float(np.linalg.norm(self.half))

    def intersect(self, o, d):
        lo, ld = self.to_local(o), d @ self.rotation()
        h = np.asarray(self.half)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (-h - lo) / ld, (h - lo) / ld
        # A ray parallel to a slab gives nan (0/0 on the boundary) or +-inf; nan must not win min/max.
        t1, t2 = np.nan_to_num(t1, nan=-np.inf), np.nan_to_num(t2, nan=np.inf)
        tmin = np.minimum(t1, t2).max(axis=1)
        tmax = np.maximum(t1, t2).min(axis=1)
        ok = (tmax >= tmin) & (tmin > EPS)
        return np.where(ok, tmin, np.inf)

    def normal(self, p):
        lp = self.to_local(p) / np.asarray(self.half)
        axis = np.abs(lp).argmax(axis=1)
        n = np.zeros_like(lp)
        n[np.arange(len(p)), axis] = np.sign(lp[np.arange(len(p)), axis])
        return n @ self.rotation().T


@dataclass
class _Upright(Primitive):
    """A solid about a vertical axis through ``base``, standing on z = 0: its size and bounds."""

    base: tuple[float, float] = (0.0, 0.0)
    radius: float = 0.5
    height: float = 1.0

    def bounds(self):
        return np.array([*self.base, self.height / 2]), math.hypot(self.radius, self.height / 2)


@dataclass
class Cylinder(_Upright):
    """Vertical cylinder standing on z = 0 with a top cap."""

    def intersect(self, o, d):
        q = o[:, :2] - np.asarray(self.base)
        dz_ok = lambda t: (o[:, 2] + t * d[:, 2] >= 0) & (o[:, 2] + t * d[:, 2] <= self.height)  # noqa: E731
        t_side = _nearest_root(_dot(d[:, :2], d[:, :2]), 2 * _dot(q, d[:, :2]), _dot(q, q) - self.radius**2, dz_ok)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_cap = (self.height - o[:, 2]) / d[:, 2]
        pc = q + np.nan_to_num(t_cap, posinf=0, neginf=0)[:, None] * d[:, :2]
        cap_ok = (t_cap > EPS) & (_dot(pc, pc) <= self.radius**2)
        return np.minimum(t_side, np.where(cap_ok, t_cap, np.inf))

    def normal(self, p):
        radial = np.concatenate([p[:, :2] - np.asarray(self.base), np.zeros((len(p), 1))], axis=1) / self.radius
        on_cap = p[:, 2] >= self.height - 1e-7
        return np.where(on_cap[:, None], [0.0, 0.0, 1.0], radial)


@dataclass
class Cone(_Upright):
    """Upright cone: base disc of ``radius`` on z = 0, apex at ``height`` above ``base``."""

    def intersect(self, o, d):
        k2 = (self.radius / self.height) ** 2
        q = o - np.array([*self.base, self.height])
        a = d[:, 0] ** 2 + d[:, 1] ** 2 - k2 * d[:, 2] ** 2
        b = 2 * (q[:, 0] * d[:, 0] + q[:, 1] * d[:, 1] - k2 * q[:, 2] * d[:, 2])
        c = q[:, 0] ** 2 + q[:, 1] ** 2 - k2 * q[:, 2] ** 2
        z_ok = lambda t: (q[:, 2] + t * d[:, 2] <= 0) & (q[:, 2] + t * d[:, 2] >= -self.height)  # noqa: E731
        return _nearest_root(a, b, c, z_ok)

    def normal(self, p):
        k2 = (self.radius / self.height) ** 2
        r = p[:, :2] - np.asarray(self.base)
        return _unit(np.concatenate([r, (k2 * (self.height - p[:, 2]))[:, None]], axis=1))


def _meets_sphere(o: np.ndarray, d: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """[N] bool: the ray (or the line behind its origin, when it starts inside) meets the sphere.

    Conservative (the radius is padded), so a ray it drops would have missed the primitive inside.
    """
    oc = o - center
    b, c = _dot(oc, d), _dot(oc, oc) - (radius * (1 + 1e-6) + 1e-9) ** 2
    return (b * b - _dot(d, d) * c >= 0) & ((b <= 0) | (c <= 0))


@dataclass
class Hits:
    t: np.ndarray  # [N] distance, inf on a miss
    index: np.ndarray  # [N] primitive index, -1 on a miss
    points: np.ndarray  # [N,3] hit points (undefined on a miss)


def trace(prims: list[Primitive], o: np.ndarray, d: np.ndarray) -> Hits:
    """First hit of each ray among ``prims``."""
    ts = np.full((len(prims), len(o)), np.inf)  # [P, N]
    for k, prim in enumerate(prims):
        bounds = prim.bounds()
        if bounds is None:
            ts[k] = prim.intersect(o, d)
            continue
        sel = _meets_sphere(o, d, *bounds)
        if sel.any():
            ts[k, sel] = prim.intersect(o[sel], d[sel])
    index = ts.argmin(axis=0)
    t = ts[index, np.arange(ts.shape[1])]
    index = np.where(np.isfinite(t), index, -1)
    points = o + np.where(np.isfinite(t), t, 0.0)[:, None] * d
    return Hits(t, index, points)


def shade(
    prims: list[Primitive],
    hits: Hits,
    sun: np.ndarray,
    background: np.ndarray,
    ambient: float = 0.35,
) -> np.ndarray:
    """Colours [N,3] of traced rays: albedo x (hemisphere ambient + Lambert sun with hard shadows)."""
    out = np.tile(np.asarray(background, dtype=np.float64), (len(hits.t), 1))
    sun = _unit(np.asarray(sun, dtype=np.float64))
    for i, prim in enumerate(prims):
        sel = hits.index == i
        if not sel.any():
            continue
        p = hits.points[sel]
        n = prim.normal(p)
        lit = trace(prims, p + 1e-4 * n, np.tile(sun, (len(p), 1))).index < 0
        lambert = np.clip(n @ sun, 0.0, None) * lit
        sky = ambient * (0.75 + 0.25 * n[:, 2])  # more light from above than from the ground
        out[sel] = prim.texture(p) * (sky + (1.0 - ambient) * lambert)[:, None]
    return np.clip(out, 0.0, 1.0)
