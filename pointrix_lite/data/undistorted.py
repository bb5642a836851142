"""COLMAP scenes with lens distortion, undistorted once at load and cached beside the scene.

The rasterizer renders pinhole cameras, so a model whose cameras have distortion parameters (COLMAP's
default SIMPLE_RADIAL, RADIAL, OPENCV as ``ns-process-data`` and INRIA's ``convert.py`` write it,
FULL_OPENCV, OPENCV_FISHEYE, ...) is resampled to PINHOLE images first, with the same warp as
``process.py`` (``io/undistort.py``: COLMAP's focal lengths, the largest inner crop whose pixels lie a
whole number of pixels from the photo's, so no pixel outside the photo is trained on). Masks are
warped alike, nearest neighbour. The result is a scene folder ``<data>/undistorted/`` (images, masks,
``sparse/0``) that the data set then reads as if the user had run ``colmap image_undistorter``.

It is written once, to a temporary folder renamed into place, with ``source.json`` holding a digest of
what it was made from (the sparse model's bytes, each image's and mask's name, size and mtime, and this
module's version): a later run whose inputs match reads it directly; one whose inputs changed makes it
again. A fisheye camera becomes a pinhole of the field of view its inner crop keeps, stated in the line.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ..errors import DataError
from ..io.colmap import ColmapModel
from ..io.undistort import photo_positions, undistort, warp
from .derived import derived_folder
from .masks import mask_folder, mask_path, read_mask

PINHOLE_MODELS = ("PINHOLE", "SIMPLE_PINHOLE")
# COLMAP's undistorter maps these to a pinhole; the others (equirectangular, division, EUCM) have no pinhole crop
UNDISTORTED = (
    "SIMPLE_RADIAL",
    "RADIAL",
    "OPENCV",
    "FULL_OPENCV",
    "OPENCV_FISHEYE",
    "SIMPLE_RADIAL_FISHEYE",
    "RADIAL_FISHEYE",
    "THIN_PRISM_FISHEYE",
    "FOV",
)
CACHE = "undistorted"
VERSION = 1  # bump when the warp changes, so every cache is made again


def needs_undistortion(model: ColmapModel) -> bool:
    """Whether any camera of ``model`` is not a plain pinhole.

    Raises:
        DataError: a camera model that cannot be undistorted to a pinhole (one line naming the file).
    """
    for cam in sorted(model.cameras.values(), key=lambda c: c.id):
        if cam.model not in PINHOLE_MODELS + UNDISTORTED:
            raise DataError(
                f"{model.files['cameras']}: camera {cam.id} uses model {cam.model}, which has no pinhole "
                f"undistortion; supported: {', '.join(PINHOLE_MODELS)} and, undistorted at load, {', '.join(UNDISTORTED)}"
            )
    return any(cam.model not in PINHOLE_MODELS for cam in model.cameras.values())


def _digest(root: Path, sparse_dir: Path, image_dir: Path, model: ColmapModel, masks: Path | None) -> str:
    h = hashlib.sha1(f"v{VERSION}".encode())
    for f in sorted(sparse_dir.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    for im in sorted(model.images.values(), key=lambda im: im.name):
        for path in (image_dir / im.name, mask_path(masks, Path(im.name)) if masks else None):
            if path is not None and path.is_file():
                st = path.stat()
                h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def undistorted_scene(root: Path, sparse_dir: Path, model: ColmapModel, images: str) -> Path:
    """The undistorted copy of the scene at ``root`` (made now unless a matching one is cached).

    Args:
        root: The scene folder (``images/``, ``sparse/``, optional masks).
        sparse_dir: Its sparse model's folder, ``model`` the model read from it.
        images: The image folder's name (``dataset.images``); the copy uses the same name.

    Returns:
        ``root/undistorted``, a scene folder with PINHOLE cameras.

    Raises:
        DataError: pycolmap missing, the scene folder not writable, or an image the model names missing.
    """
    image_dir = root / images
    masks = mask_folder(root)
    kinds = sorted({cam.model for cam in model.cameras.values()} - set(PINHOLE_MODELS))
    done: list[str] = []

    def build(tmp: Path) -> None:
        try:
            import pycolmap
        except ImportError:
            raise DataError(
                f"{sparse_dir}: distorted cameras need pycolmap to undistort (pip install pycolmap)"
            ) from None
        missing = [im.name for im in model.images.values() if not (image_dir / im.name).is_file()]
        if missing:
            raise DataError(f"{image_dir / missing[0]}: image not found ({len(missing)} of the model's images missing)")
        from ..progress import console

        console().print(
            f"undistorting {len(model.images)} images ({', '.join(kinds)} cameras) into {root / CACHE} (once)",
            markup=False,
        )
        try:
            undistort(pycolmap, sparse_dir, image_dir, tmp, threads=0)
        except (RuntimeError, ValueError) as exc:  # pycolmap's own checks, e.g. parameters it cannot invert
            raise DataError(f"{sparse_dir}: cannot undistort its {', '.join(kinds)} cameras ({exc})") from None
        if images != "images":
            os.rename(tmp / "images", tmp / images)
        distorted, pinhole = pycolmap.Reconstruction(str(sparse_dir)), pycolmap.Reconstruction(str(tmp / "sparse/0"))
        if masks is not None:
            _warp_masks(distorted, pinhole, masks, tmp / masks.name)
        fovs = sorted(
            {
                f"{math.degrees(2 * math.atan(0.5 * c.width / c.params[0])):.0f}x"
                f"{math.degrees(2 * math.atan(0.5 * c.height / c.params[1])):.0f} deg"
                for c in pinhole.cameras.values()
            }
        )
        size = ", ".join(sorted({f"{c.width}x{c.height}" for c in pinhole.cameras.values()}))
        done.append(f"undistorted to PINHOLE: {size} px, field of view {', '.join(fovs)}")

    cache = derived_folder(
        root,
        CACHE,
        _digest(root, sparse_dir, image_dir, model, masks),
        build,
        f"the undistorted copy of its {', '.join(kinds)} cameras",
        "make it writable or undistort once with process.py / colmap image_undistorter",
    )
    if done:  # said after the folder is in place: a failed build says its own line instead
        from ..progress import console

        console().print(done[0], markup=False)
    return cache


def _warp_masks(distorted: Any, pinhole: Any, masks: Path, out: Path) -> None:
    """Each image's mask (where it has one) warped as its photo was, nearest neighbour: 0/1 stays 0/1.
    ``distorted`` and ``pinhole``: the two pycolmap reconstructions."""
    for image in pinhole.images.values():
        src = mask_path(masks, Path(image.name))
        if src is None:
            continue  # kept whole, said by the data set
        camera = distorted.cameras[distorted.find_image_with_name(image.name).camera_id]
        keep = read_mask(src)
        if keep.shape != (camera.height, camera.width):
            raise DataError(
                f"{src}: mask is {keep.shape[1]}x{keep.shape[0]}, its distorted photo {camera.width}x{camera.height}; "
                "a distorted scene's masks must have the photos' size"
            )
        warped = warp(keep.astype(np.uint8) * 255, photo_positions(camera, pinhole.cameras[image.camera_id]), True)
        dst = out / Path(image.name).with_suffix(".png")
        dst.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(warped).save(dst)
