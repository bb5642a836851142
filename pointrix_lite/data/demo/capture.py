"""A hand-held photo capture of the photo scene, for structure-from-motion benchmarks (``python -m benchmarks sfm``).

What a person with a phone does around an object: three orbits at rising heights, one after the other,
photos named in the order they were taken (``IMG_0001.jpg`` ...), saved as JPEG, each aimed and placed a
little differently. Taking every k-th photo of a capture gives the capture a person with k times fewer
photos would take along the same path, so one rendering serves 50, 150 and 300 photos.

Written: ``<out>/images/IMG_*.jpg`` and the true cameras as a COLMAP model, ``<out>/truth/*.bin`` (one
PINHOLE camera, no points), to score what SfM finds. Deterministic: the same bytes on every run.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ...io.colmap import write_model
from ..cameras import look_at
from .make import ensure_generated, pinhole_model
from .photo import FOCAL, LIGHTING, TARGET, WIDTH, build_photo_scene
from .scene import DemoCamera, render

ORBITS = ((10.0, 3.9), (22.0, 3.6), (36.0, 3.3))  # (elevation in degrees, distance to the target) per orbit
AIM_JITTER = 0.12  # scene units: the point each photo aims at wanders around the target
DISTANCE_JITTER = 0.05  # relative
JPEG_QUALITY = 90
SEED = 0


def photo_name(index: int) -> str:
    """The name (no suffix) of the capture's photo ``index`` (0-based), as a phone names it."""
    return f"IMG_{index + 1:04d}"


def capture_cameras(n: int, width: int, height: int) -> list[DemoCamera]:
    """``n`` cameras (a multiple of 3) on three orbits taken one after the other; names in capture order.

    Every orbit starts at the same azimuth, so photo ``i`` of one orbit sees what photo ``i`` of the
    next sees from higher up: the pairs sequential matching by name never forms.
    """
    if n % len(ORBITS):
        raise ValueError(f"capture_cameras: n={n} must be a multiple of {len(ORBITS)}")
    per_orbit = n // len(ORBITS)
    rng = np.random.default_rng(SEED)
    focal = FOCAL * width / WIDTH
    cams = []
    for elevation, distance in ORBITS:
        el = math.radians(elevation)
        for j in range(per_orbit):
            az = 2 * math.pi * j / per_orbit + 0.3
            r = distance * (1 + DISTANCE_JITTER * rng.uniform(-1, 1))
            eye = TARGET + r * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
            aim = TARGET + AIM_JITTER * rng.uniform(-1, 1, 3)
            w2c = look_at(eye, aim)
            cams.append(DemoCamera(photo_name(len(cams)), w2c, focal, focal, width / 2, height / 2, width, height))
    return cams


_SCENE = None


def _render_jpeg(args: tuple[DemoCamera, Path]) -> None:
    from PIL import Image

    global _SCENE
    if _SCENE is None:  # once per worker process
        _SCENE = build_photo_scene()
    cam, path = args
    rgb = render(_SCENE.prims_for(cam, 1), cam, 1, LIGHTING)  # a lens's own blur stands in for supersampling
    Image.fromarray(np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)).save(path, quality=JPEG_QUALITY)


def write_truth(folder: Path, cams: list[DemoCamera]) -> None:
    """The cameras as a COLMAP model (``cameras.bin``, ``images.bin``, empty ``points3D.bin``)."""
    write_model(pinhole_model(cams, ".jpg", np.zeros((0, 3)), np.zeros((0, 3), np.uint8)), folder, binary=True)


def generate_capture(out: Path, n: int, width: int, height: int, workers: int = 2) -> None:
    """Render the capture into ``out`` (which must not exist yet); ~2.8 s of CPU per 2 MP photo."""
    cams = capture_cameras(n, width, height)
    (out / "images").mkdir(parents=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_render_jpeg, [(c, out / "images" / f"{c.name}.jpg") for c in cams]))
    write_truth(out / "truth", cams)


def ensure_capture(out: Path, n: int, width: int, height: int, workers: int = 2) -> Path:
    """Generate the capture at ``out`` unless it is there; returns ``out``."""
    what = f"a {n}-photo {width}x{height} capture of the photo scene"
    return ensure_generated(out, what, lambda folder: generate_capture(folder, n, width, height, workers))
