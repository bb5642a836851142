"""Undistortion to PINHOLE that keeps the photos' pixel grid.

COLMAP's undistorter (``pycolmap.undistort_images``) sizes the pinhole image to the undistorted border
truncated to whole pixels and scales the principal point with the size. For a lens with almost no
distortion (SIMPLE_RADIAL k = -5.5e-4 on 400x300 photos) that gave 399x299 with cx = 199.5: every pixel
was sampled half way between four photo pixels, i.e. the photos were blurred by a 2x2 box filter
(27.5 dB against themselves), and the model trained on them blurred alike (docs/data.md, "Where SfM
poses lose quality"). Here the pinhole image is the largest one, with COLMAP's focal lengths, whose
pixels lie a whole number of pixels from the photo's: where the lens does not distort, a pinhole
pixel centre lands on a photo pixel centre and bilinear sampling returns the photo's pixel unchanged.
"""

from __future__ import annotations

import math
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from PIL import Image

from .images import read_image, write_png

EDGE_SAMPLES = 257  # points per photo edge whose undistorted positions bound the pinhole image
ON_GRID = 1e-3  # pixels: samples this close to photo pixel centres everywhere make the warp a copy


def aligned_pinhole(pycolmap: ModuleType, camera: Any) -> Any:
    """The PINHOLE camera of ``camera``'s undistorted photos (see the module docstring).

    It sees no point outside the photo (COLMAP's ``blank_pixels = 0``): its edges are the innermost
    undistorted positions of the photo's edges, rounded inwards to whole pixels from the photo's grid.
    """
    colmap = pycolmap.undistort_camera(pycolmap.UndistortCameraOptions(), camera)
    fx, fy = float(colmap.focal_length_x), float(colmap.focal_length_y)
    cx, cy = float(camera.principal_point_x), float(camera.principal_point_y)
    w, h = int(camera.width), int(camera.height)
    t = np.linspace(0.0, 1.0, EDGE_SAMPLES)

    def pinhole_xy(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = camera.cam_from_img(np.stack([u, v], axis=1))
        return fx * x[:, 0] + cx, fy * x[:, 1] + cy

    left = pinhole_xy(np.zeros_like(t), t * h)[0].max()
    right = pinhole_xy(np.full_like(t, w), t * h)[0].min()
    top = pinhole_xy(t * w, np.zeros_like(t))[1].max()
    bottom = pinhole_xy(t * w, np.full_like(t, h))[1].min()
    x0, y0 = math.ceil(left - ON_GRID), math.ceil(top - ON_GRID)
    width, height = math.floor(right + ON_GRID) - x0, math.floor(bottom + ON_GRID) - y0
    return pycolmap.Camera(
        model="PINHOLE",
        width=max(1, width),
        height=max(1, height),
        params=[fx, fy, cx - x0, cy - y0],
        camera_id=camera.camera_id,
    )


def copy_camera(pycolmap: ModuleType, camera: Any) -> Any:
    """A detached copy of a reconstruction's camera (the reconstruction's own one is edited in place)."""
    return pycolmap.Camera(
        model=camera.model, width=camera.width, height=camera.height, params=camera.params, camera_id=camera.camera_id
    )


def photo_positions(source: Any, target: Any) -> np.ndarray:
    """[H', W', 2] continuous photo coordinates (pixel centres at +0.5) of ``target``'s pixel centres."""
    fx, fy, cx, cy = (float(p) for p in target.params)
    v, u = np.mgrid[0 : target.height, 0 : target.width] + 0.5
    rays = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], axis=-1).reshape(-1, 3)
    return source.img_from_cam(rays, check_cheirality=False).reshape(target.height, target.width, 2)


def warp(image: np.ndarray, positions: np.ndarray, nearest: bool = False) -> np.ndarray:
    """``image`` [H, W, ...] sampled at ``positions`` [H', W', 2] (x, y; pixel centres at +0.5).

    Bilinear, clamped at the border (the pinhole image ends within half a pixel of the photo's edge);
    ``nearest``: the pixel each position falls in, 0 outside the photo (for masks, 0 = ignore).
    """
    h, w = image.shape[:2]
    if nearest:
        col, row = np.floor(positions[..., 0]).astype(int), np.floor(positions[..., 1]).astype(int)
        inside = (col >= 0) & (col < w) & (row >= 0) & (row < h)
        out = image[row.clip(0, h - 1), col.clip(0, w - 1)]
        return np.where(inside.reshape(inside.shape + (1,) * (image.ndim - 2)), out, 0).astype(image.dtype)
    x, y = positions[..., 0] - 0.5, positions[..., 1] - 0.5
    x0, y0 = np.floor(x), np.floor(y)
    ax, ay = x - x0, y - y0
    if image.ndim == 3:
        ax, ay = ax[..., None], ay[..., None]
    c0, c1 = x0.astype(int).clip(0, w - 1), (x0.astype(int) + 1).clip(0, w - 1)
    r0, r1 = y0.astype(int).clip(0, h - 1), (y0.astype(int) + 1).clip(0, h - 1)
    img = image.astype(np.float32)
    top = img[r0, c0] * (1 - ax) + img[r0, c1] * ax
    bottom = img[r1, c0] * (1 - ax) + img[r1, c1] * ax
    return np.rint(top * (1 - ay) + bottom * ay).clip(0, 255).astype(image.dtype)


def is_copy(positions: np.ndarray, width: int, height: int) -> bool:
    """Whether sampling at ``positions`` returns a ``width`` x ``height`` photo as it is."""
    if positions.shape[:2] != (height, width):
        return False
    v, u = np.mgrid[0:height, 0:width] + 0.5
    return bool(np.abs(positions - np.stack([u, v], axis=-1)).max() < ON_GRID)


def _write_image(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        write_png(path, image)
    else:  # the photo's own format, as COLMAP writes it. JPEG re-encoding of a 1 MP photo measured
        # 51.2 dB at quality 95, 56.4 dB at 100 without chroma subsampling (COLMAP's files lie between)
        Image.fromarray(image).save(path, quality=100, subsampling=0)


def undistort(pycolmap: ModuleType, model_dir: Path, image_dir: Path, out: Path, threads: int) -> None:
    """Undistort the model's images to PINHOLE: ``out/images`` and ``out/sparse/0/*.bin`` (the cameras
    of :func:`aligned_pinhole`, keypoints moved onto them, points unchanged)."""
    rec = pycolmap.Reconstruction(str(model_dir))
    distorted = {cid: copy_camera(pycolmap, cam) for cid, cam in rec.cameras.items()}
    targets = {cid: aligned_pinhole(pycolmap, cam) for cid, cam in distorted.items()}
    positions = {cid: photo_positions(distorted[cid], targets[cid]) for cid in distorted}
    copies = {cid: is_copy(positions[cid], int(cam.width), int(cam.height)) for cid, cam in distorted.items()}

    def one(image: Any) -> None:
        src, dst = image_dir / image.name, out / "images" / image.name
        cam, target = distorted[image.camera_id], targets[image.camera_id]
        if copies[image.camera_id]:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)  # no resampling, and no second JPEG compression
        else:
            _write_image(dst, warp(read_image(src), positions[image.camera_id]))
        points = image.points2D
        if len(points):
            rays = cam.cam_from_img(np.array([p.xy for p in points]))
            moved = target.img_from_cam(np.hstack([rays, np.ones((len(rays), 1))]), check_cheirality=False)
            for point, xy in zip(points, moved):
                point.xy = xy

    with ThreadPoolExecutor(max_workers=threads if threads > 0 else None) as pool:
        list(pool.map(one, rec.images.values()))
    for cid, target in targets.items():
        cam = rec.cameras[cid]
        cam.model, cam.width, cam.height, cam.params = target.model, target.width, target.height, target.params
    (out / "sparse" / "0").mkdir(parents=True)
    rec.write_binary(str(out / "sparse" / "0"))
