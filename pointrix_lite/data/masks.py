"""Per-pixel training masks: ``<data_path>/masks/<image path>.png``, 0 = ignore the pixel, else keep.

nerfstudio's convention. The folder mirrors the image folder: a mask's path below ``masks/`` is the
image's path below its image folder with the extension replaced by ``.png`` (COLMAP: relative to
``images/``, so ``IMG_1.jpg`` -> ``masks/IMG_1.png``; NeRF-synthetic: relative to the data folder, so
``./train/r_0`` -> ``masks/train/r_0.png``, because Blender layouts reuse stems across splits).

A mask file may be at the view's training resolution or any integer multiple of it, or at the
camera's full resolution (``images_N`` made by other tools round their sizes differently); it is
resized to the view by nearest neighbour, so a kept pixel is one whose nearest full-resolution
pixel is kept. Every failure is a one-line :class:`~pointrix_lite.errors.DataError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from ..errors import DataError
from .cameras import View

MASK_FOLDER = "masks"


def mask_folder(root: Path) -> Path | None:
    """``root/masks`` when it exists (masks are then required for every training view), else None."""
    folder = root / MASK_FOLDER
    return folder if folder.is_dir() else None


def mask_path(folder: Path, image: Path) -> Path:
    """Where the mask of ``image`` (its path below its image folder, extension included) lives."""
    return folder / image.with_suffix(".png")


def read_mask(path: Path) -> np.ndarray:
    """Decode a mask file to ``[H, W]`` bool (True = keep): any non-zero grey or colour value keeps.

    Alpha is not a mask channel here (nerfstudio reads the values), so RGBA keeps where RGB is non-zero.
    """
    if not path.is_file():
        raise DataError(f"{path}: mask not found (a masks/ folder needs a mask for every training image)")
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in ("1", "L", "I", "I;16", "I;16B", "I;16L", "F"):
                arr = np.asarray(im) != 0
            elif im.mode == "LA":
                arr = np.asarray(im)[..., 0] != 0
            else:
                arr = np.asarray(im.convert("RGB")).any(axis=-1)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot decode mask ({exc})") from None
    return np.array(arr, dtype=bool, copy=True)


def resize_nearest(mask: np.ndarray, width: int, height: int) -> np.ndarray:
    """``[H, W]`` -> ``[height, width]`` by nearest neighbour on pixel centres.

    Target pixel ``i`` takes source pixel ``floor((i + 0.5) * H / height)``: for an integer factor
    ``s`` that is the pixel at offset ``s // 2`` of each ``s x s`` block (PIL's NEAREST picks the same).
    """
    h, w = mask.shape
    rows = np.minimum(((np.arange(height) + 0.5) * h / height).astype(np.int64), h - 1)
    cols = np.minimum(((np.arange(width) + 0.5) * w / width).astype(np.int64), w - 1)
    return mask[rows[:, None], cols[None, :]]


def load_mask(path: Path, width: int, height: int, full_size: tuple[int, int]) -> torch.Tensor:
    """The mask at ``path`` for a view of ``width x height`` whose camera is ``full_size`` at scale 1.

    Returns:
        ``[height, width]`` bool tensor, True = the pixel counts in the loss.

    Raises:
        DataError: missing or unreadable file, a size that is neither the camera's nor an integer
            multiple of the view's, or a mask that keeps no pixel.
    """
    mask = read_mask(path)
    h, w = mask.shape
    multiple = w % width == 0 and h % height == 0 and w // width == h // height
    if not multiple and (w, h) != tuple(full_size):
        raise DataError(
            f"{path}: mask is {w}x{h} but its image is {full_size[0]}x{full_size[1]} (training at {width}x{height}); "
            "a mask must have the image's size or an integer multiple of the training size"
        )
    mask = resize_nearest(mask, width, height)
    if not mask.any():
        raise DataError(f"{path}: mask keeps no pixel at {width}x{height} (0 = ignore); this view cannot be trained on")
    return torch.from_numpy(np.ascontiguousarray(mask))


def attach_mask(view: View, folder: Path, image: Path, full_size: tuple[int, int]) -> None:
    """Give training ``view`` the mask of ``image`` (its path below the image folder), resized to the view."""
    cam = view.camera
    view.mask = load_mask(mask_path(folder, image), cam.width, cam.height, full_size)
