"""Render the demo scene and write it in both supported layouts.

``<out>/nerf_synthetic/``: ``transforms_train.json`` / ``transforms_test.json`` (Blender c2w,
``camera_angle_x``, ``file_path`` without extension like the original Blender scenes), ``train/*.png``,
``test/*.png`` and ``points3d.ply``.
``<out>/colmap/``: ``images/*.png`` and ``sparse/0/{cameras,images,points3D}.bin`` (one PINHOLE camera).

Both hold the same 48 views (``r_000`` .. ``r_047``; every 8th is a test view) and the same point cloud,
so the two loaders must produce identical datasets.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model
from ...io.images import write_png
from ..cameras import blender_c2w_from_viewmat, rotmat_to_qvec
from ..pointcloud import PointCloud, write_ply_points
from .raycast import Primitive
from .scene import DEMO_LIGHTING, DemoCamera, Lighting, build_scene, camera_ring, render, sample_surface_points

LAYOUTS = ("nerf_synthetic", "colmap")
TEST_EVERY = 8
SEED = 0


def _is_test(i: int) -> bool:
    return i % TEST_EVERY == 0


def noisy_points(
    prims: list[Primitive] | Callable[[DemoCamera], list[Primitive]],
    cams: list[DemoCamera],
    rng: np.random.Generator,
    per_view: int = 100,
    lighting: Lighting = DEMO_LIGHTING,
) -> PointCloud:
    """SfM-like points (~4k for the demo): visible surface samples with 1 cm position and some colour noise."""
    xyz, rgb = sample_surface_points(prims, cams, per_view=per_view, rng=rng, lighting=lighting)
    xyz = xyz + rng.normal(scale=0.01, size=xyz.shape)
    rgb = np.clip(rgb + rng.normal(scale=0.03, size=rgb.shape), 0.0, 1.0)
    # Quantise colours now so the PLY (uint8) and points3D.bin (uint8) carry exactly the same values.
    return PointCloud.from_numpy(xyz, np.rint(rgb * 255.0) / 255.0)


def _write_nerf_synthetic(root: Path, cams: list[DemoCamera], images: list[np.ndarray], cloud: PointCloud) -> None:
    splits = {"train": [], "test": []}
    for i, (cam, img) in enumerate(zip(cams, images)):
        split = "test" if _is_test(i) else "train"
        (root / split).mkdir(parents=True, exist_ok=True)
        write_png(root / split / f"{cam.name}.png", img)
        c2w = blender_c2w_from_viewmat(cam.w2c)
        splits[split].append({"file_path": f"./{split}/{cam.name}", "transform_matrix": c2w.tolist()})
    angle_x = 2.0 * math.atan(0.5 * cams[0].width / cams[0].fx)
    for split, frames in splits.items():
        with open(root / f"transforms_{split}.json", "w", encoding="utf-8") as f:
            json.dump({"camera_angle_x": angle_x, "frames": frames}, f, indent=2)
    write_ply_points(root / "points3d.ply", cloud)


def pinhole_model(cams: list[DemoCamera], suffix: str, xyz: np.ndarray, rgb: np.ndarray) -> ColmapModel:
    """``cams`` as a COLMAP model: one PINHOLE camera (``cams[0]``'s intrinsics), images named
    ``<name><suffix>``, points ``xyz [N, 3]`` float64 with colours ``rgb [N, 3]`` uint8."""
    c0 = cams[0]
    camera = ColmapCamera(1, "PINHOLE", c0.width, c0.height, np.array([c0.fx, c0.fy, c0.cx, c0.cy]))
    images = {
        i + 1: ColmapImage(i + 1, rotmat_to_qvec(c.w2c[:3, :3]), c.w2c[:3, 3].copy(), 1, f"{c.name}{suffix}")
        for i, c in enumerate(cams)
    }
    return ColmapModel({1: camera}, images, xyz, rgb, {})


def write_colmap(root: Path, cams: list[DemoCamera], images: list[np.ndarray], cloud: PointCloud) -> None:
    """``root/images/<name>.png`` and ``root/sparse/0/*.bin``; one PINHOLE camera (``cams[0]``'s intrinsics)."""
    (root / "images").mkdir(parents=True)
    for cam, img in zip(cams, images):
        write_png(root / "images" / f"{cam.name}.png", img)
    rgb = np.rint(cloud.rgb.numpy().astype(np.float64) * 255.0).astype(np.uint8)
    model = pinhole_model(cams, ".png", cloud.xyz.numpy().astype(np.float64), rgb)
    write_model(model, root / "sparse" / "0", binary=True)


def generate_demo(out: Path, n_views: int = 48, size: int = 160) -> None:
    """Render the scene and write both layouts under ``out`` (which must not exist yet)."""
    out.mkdir(parents=True)
    prims = build_scene()
    cams = camera_ring(n_views, size=size, focal=190.0 * size / 160)
    images = [np.clip(np.rint(render(prims, c) * 255.0), 0, 255).astype(np.uint8) for c in cams]
    cloud = noisy_points(prims, cams, np.random.default_rng(SEED))
    _write_nerf_synthetic(out / "nerf_synthetic", cams, images, cloud)
    write_colmap(out / "colmap", cams, images, cloud)


def ensure_demo(out: Path) -> Path:
    """Generate the demo at ``out`` unless it is already there (see :func:`ensure_generated`)."""
    return ensure_generated(out, "the demo scene", generate_demo)


def ensure_generated(out: Path, what: str, generate: Callable[[Path], None]) -> Path:
    """Run ``generate(folder)`` to create ``out`` unless it is already there; returns ``out``.

    Generation goes to a temporary sibling folder that is renamed into place at the end, so an
    interrupted run never leaves a half-written ``out`` that later runs would take as complete, and two
    processes racing to create it both end up with one whole copy.
    """
    if out.is_dir():
        return out
    # A first run otherwise sits silent for seconds before the hook table: say what and where.
    print(f"generating {what} in {out.resolve()} (only once: later runs reuse it)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        generate(tmp / "scene")
        try:
            os.rename(tmp / "scene", out)
        except OSError:
            if not out.is_dir():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
