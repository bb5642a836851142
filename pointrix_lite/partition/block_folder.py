"""Write one block as an ordinary COLMAP scene folder that ``ColmapDataset`` (and COLMAP) reads.

``images/`` (and ``images_2/4/8/``, ``masks/`` when the scene has them) hold the block's training
views as hard links to the scene's files: no copy, and the folder stays valid if the scene is moved
(a symlink would not); across file systems, where hard links are impossible, symlinks, and copies
where neither works. ``sparse/0`` holds the block's images with their COLMAP ids and poses, the
cameras they use, and the SfM points of the block's margin region.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..io import colmap as colmap_io

EXTENSIONS = ("", ".png", ".jpg", ".jpeg", ".JPG", ".PNG", ".JPEG")  # a COLMAP name may omit it (like find_image)
LINK_ORDER = ("hardlink", "symlink", "copy")


def place(src: Path, dst: Path, how: str) -> str:
    """Put ``src`` at ``dst`` by ``how`` or, failing that, the next way in ``LINK_ORDER``; returns the way used."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    for way in LINK_ORDER[LINK_ORDER.index(how) :]:
        try:
            if way == "hardlink":
                os.link(src, dst)
            elif way == "symlink":
                os.symlink(src.resolve(), dst)
            else:
                shutil.copy2(src, dst)
            return way
        except OSError:
            if way == "copy":
                raise
    raise AssertionError("unreachable")


def source_file(folder: Path, name: str) -> Path | None:
    """The file of image ``name`` in ``folder`` (trying the usual extensions), or None."""
    for ext in EXTENSIONS:
        path = folder / f"{name}{ext}"
        if path.is_file():
            return path
    return None


def image_folders(scene: Path, images: str = "images") -> list[str]:
    """The scene's image folders to mirror: ``images`` and any pre-downscaled ``images_N``."""
    names = [images] + [f"{images}_{n}" for n in (2, 4, 8)]
    return [n for n in names if (scene / n).is_dir()]


def write_block(scene: Path, out: Path, model: Any, image_ids: list[int], point_mask: np.ndarray, how: str) -> str:
    """Write block folder ``out`` from the scene's COLMAP ``model``: images ``image_ids``, points where
    ``point_mask`` [N] is True. Returns the weakest way images were placed (``copy`` if any was copied)."""
    used = set()
    for folder in image_folders(scene):
        for image_id in image_ids:
            name = model.images[image_id].name
            src = source_file(scene / folder, name)
            if src is None:
                if folder == "images":
                    raise DataError(f"{scene / folder / name}: image listed in the COLMAP model not found")
                continue  # a pre-downscaled copy may be missing; ColmapDataset then resizes
            used.add(place(src, out / folder / (name + src.name[len(Path(name).name) :]), how))
    masks = scene / "masks"
    if masks.is_dir():  # ColmapDataset needs a mask for every training image once masks/ exists
        for image_id in image_ids:
            rel = Path(model.images[image_id].name).with_suffix(".png")
            if (masks / rel).is_file():
                used.add(place(masks / rel, out / "masks" / rel, how))
    images = {i: model.images[i] for i in image_ids}
    cameras = {im.camera_id: model.cameras[im.camera_id] for im in images.values() if im.camera_id in model.cameras}
    sub = colmap_io.ColmapModel(cameras, images, model.xyz[point_mask], model.rgb[point_mask], {})
    colmap_io.write_model(sub, out / "sparse" / "0", binary=True)
    return max(used, key=LINK_ORDER.index) if used else how
