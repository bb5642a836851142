"""``process.py --masks DIR``: per-photo masks (``DIR/<photo stem>.png``, 0 = ignore) through SfM.

COLMAP gets a copy named its way (``colmap/masks/<photo name>.png``) so no features are found on
ignored pixels (a moving passer-by would otherwise add wrong matches); after undistortion each mask
is warped with the same camera mapping as its photo, nearest neighbour, into ``OUT/masks/<stem>.png``,
where ``ColmapDataset`` finds it (it also resizes it for ``images_N``, so no ``masks_N`` is written).
A mask belongs to its photo as shown, i.e. with the photo's EXIF orientation applied (:mod:`.upright`);
a mask file with an EXIF orientation of its own is turned by it, like a photo.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
from PIL import Image

from ..data.masks import read_mask
from ..errors import DataError
from ..io.undistort import photo_positions, warp
from .upright import exif_orientation, upright_mask, upright_size


def _source(mask_dir: Path, name: str) -> Path:
    return mask_dir / f"{Path(name).stem}.png"


def _read(mask_dir: Path, name: str) -> np.ndarray:
    return upright_mask(_source(mask_dir, name), read_mask)


def _write(path: Path, keep: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.where(keep, 255, 0).astype(np.uint8), "L").save(path, format="PNG")


def check_masks(mask_dir: Path, image_dir: Path, names: list[str]) -> None:
    """Every photo has a readable mask of its size that keeps some pixel; else a one-line DataError."""
    if not mask_dir.is_dir():
        raise DataError(f"--masks {mask_dir}: not a folder")
    stems = sorted(Path(n).stem for n in names)
    twins = sorted({a for a, b in zip(stems, stems[1:]) if a == b})
    if twins:
        raise DataError(
            f"--masks: photos {', '.join(twins[:3])} differ only in extension, so DIR/<stem>.png is ambiguous"
        )
    for name in names:
        path = _source(mask_dir, name)
        keep = _read(mask_dir, name)
        with Image.open(image_dir / name) as im:
            orientation = exif_orientation(im)
            stored, size = im.size, upright_size(im.size, orientation)
        if (keep.shape[1], keep.shape[0]) != size:
            shown = (
                f" as shown (EXIF orientation {orientation} turns its stored {stored[0]}x{stored[1]} pixels; "
                "draw the mask on the upright photo)"
                if size != stored
                else ""
            )
            raise DataError(
                f"{path}: mask is {keep.shape[1]}x{keep.shape[0]} but photo {name} is {size[0]}x{size[1]}{shown}"
            )
        if not keep.any():
            raise DataError(f"{path}: mask keeps no pixel (0 = ignore); leave the photo out instead")


def write_colmap_masks(mask_dir: Path, names: list[str], dst: Path) -> Path:
    """COLMAP's copies (``dst/<photo name>.png``, 0 or 255) for ``ImageReaderOptions.mask_path``."""
    for name in names:
        _write(dst / f"{name}.png", _read(mask_dir, name))
    return dst


def undistort_masks(
    pycolmap: ModuleType, model_dir: Path, undistorted_dir: Path, mask_dir: Path, out: Path
) -> list[Path]:
    """Warp the mask of every image of the undistorted model (``undistorted_dir``) from its distorted
    camera in ``model_dir`` exactly as its photo was (:mod:`.undistort`), but nearest neighbour, so a
    mask stays 0/1; pixels that see nothing of the photo are ignored."""
    distorted = pycolmap.Reconstruction(str(model_dir))
    undistorted = pycolmap.Reconstruction(str(undistorted_dir))
    written = []
    for image in sorted(undistorted.images.values(), key=lambda im: im.name):
        camera = distorted.cameras[distorted.find_image_with_name(image.name).camera_id]
        keep = _read(mask_dir, image.name)
        path = out / f"{Path(image.name).stem}.png"
        _write(path, warp(keep, photo_positions(camera, undistorted.cameras[image.camera_id]), nearest=True))
        written.append(path)
    return written
