"""Per-pixel training masks, 0 = ignore the pixel, else keep, in the folders users' tools write.

The mask folder is the first of ``masks/`` (nerfstudio, this project's ``process.py``), ``mask/``,
``segmentation/`` and ``dynamic_masks/`` (OpenSplat's other names) beside the images; two of them at once
are refused, since which one was meant is a guess. The folder mirrors the image folder: a mask's path
below it is the image's path below its image folder with the extension replaced by ``.png``, ``.jpg`` or
``.jpeg``, or with ``.png`` appended to the whole name (COLMAP's ``IMG_1.jpg.png``). COLMAP: relative to
``images/``, so ``IMG_1.jpg`` -> ``masks/IMG_1.png``; NeRF-synthetic: relative to the data folder, so
``./train/r_0`` -> ``masks/train/r_0.png``, because Blender layouts reuse stems across splits. A
transforms.json frame's own ``mask_path`` wins over the folder.

A training image without a mask is kept whole (as nerfstudio and OpenSplat do): masks are often made
only for the images that show a passer-by. The loader says so in one line, once per data set.

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

MASK_FOLDERS = ("masks", "mask", "segmentation", "dynamic_masks")
MASK_SUFFIXES = (".png", ".jpg", ".jpeg")


def mask_folder(root: Path) -> Path | None:
    """The data set's mask folder (one of :data:`MASK_FOLDERS` in ``root``), or None without one.

    Raises:
        DataError: two or more of them exist.
    """
    found = [root / name for name in MASK_FOLDERS if (root / name).is_dir()]
    if len(found) > 1:
        names = ", ".join(f"{f.name}/" for f in found)
        raise DataError(
            f"{root}: holds {names}: keep one mask folder (or rename the others) so the masks are not guessed"
        )
    return found[0] if found else None


def mask_path(folder: Path, image: Path) -> Path | None:
    """The mask file of ``image`` (its path below its image folder, extension included), or None."""
    stem = image.with_suffix("")
    candidates = [stem.with_name(stem.name + suffix) for suffix in MASK_SUFFIXES]
    candidates.append(image.with_name(image.name + ".png"))  # COLMAP's image_name.png
    return next((folder / c for c in candidates if (folder / c).is_file()), None)


def say_missing(folder: Path, missing: list[str], total: int) -> None:
    """One line for the training images ``folder`` has no mask of: they are kept whole."""
    if not missing:
        return
    from ..progress import console

    example = ", ".join(missing[:2]) + (", ..." if len(missing) > 2 else "")
    console().print(
        f"masks: {folder} has no mask for {len(missing)} of {total} training images ({example}); those are kept whole",
        markup=False,
    )


def read_mask(path: Path) -> np.ndarray:
    """Decode a mask file to ``[H, W]`` bool (True = keep): any non-zero grey or colour value keeps.

    Alpha is not a mask channel here (nerfstudio reads the values), so RGBA keeps where RGB is non-zero.
    A JPEG mask keeps from 128 up: its compression turns a hard edge's zeros into small values.
    """
    if not path.is_file():
        raise DataError(f"{path}: mask not found")
    try:
        with Image.open(path) as im:
            im.load()
            lossy = im.format == "JPEG"
            if im.mode in ("1", "L", "I", "I;16", "I;16B", "I;16L", "F"):
                values = np.asarray(im)
            elif im.mode == "LA":
                values = np.asarray(im)[..., 0]
            else:
                values = np.asarray(im.convert("RGB")).max(axis=-1)
            # JPEG rings around edges: a dropped pixel may decode as 1-20, so a lossy mask keeps from mid-grey
            arr = values >= 128 if lossy else values != 0
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


def attach_mask(view: View, folder: Path, image: Path, full_size: tuple[int, int]) -> bool:
    """Give training ``view`` the mask of ``image`` (its path below the image folder), resized to the view;
    False (the view kept whole) when ``folder`` has no mask for it."""
    path = mask_path(folder, image)
    if path is None:
        return False
    cam = view.camera
    view.mask = load_mask(path, cam.width, cam.height, full_size)
    return True
