"""Photos as they were taken: the EXIF orientation applied before structure from motion.

A phone stores a portrait photo as landscape pixels plus an EXIF tag saying how to turn them
(orientation 6: 90 degrees clockwise); viewers apply the tag, COLMAP does not (it reads the pixels as
stored). So the photos whose tag turns or mirrors them are written upright, without the tag, to
``colmap/upright/`` and SfM, undistortion and training all see the pixels as the photo is shown: a
4032x3024 photo tagged 6 becomes 3024x4032. Their other EXIF fields stay (COLMAP takes its first
focal length guess from them). Masks follow the same rule (:func:`upright_mask`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ORIENTATION = 0x0112  # EXIF tag 274
SIDEWAYS = frozenset({5, 6, 7, 8})  # orientations that swap width and height
# Re-encoding settings per format: JPEG at quality 100 without chroma subsampling, as io/undistort.py
# writes (56.4 dB against a 1 MP photo); WebP lossless. PNG and TIFF are lossless anyway.
SAVE_OPTIONS = {"JPEG": {"quality": 100, "subsampling": 0}, "WEBP": {"lossless": True}}


def exif_orientation(im: Image.Image) -> int:
    """The EXIF orientation (1-8) of an opened image; 1 when absent, unreadable or not a valid value
    (viewers show such files as stored)."""
    try:
        value = im.getexif().get(ORIENTATION, 1)
    except (OSError, SyntaxError, ValueError, TypeError):  # a damaged EXIF block: the pixels still decode
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def upright_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    """(width, height) of a stored ``size`` once turned by ``orientation``."""
    return (size[1], size[0]) if orientation in SIDEWAYS else size


def upright_array(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """``pixels`` [H, W, ...] as stored, turned as a viewer shows them (PIL's ``exif_transpose``)."""
    turned = {
        2: lambda a: a[:, ::-1],  # mirrored left-right
        3: lambda a: a[::-1, ::-1],  # 180 degrees
        4: lambda a: a[::-1],  # mirrored top-bottom
        5: lambda a: a.swapaxes(0, 1),  # mirrored about the main diagonal
        6: lambda a: np.rot90(a, -1),  # 90 degrees clockwise
        7: lambda a: a[::-1, ::-1].swapaxes(0, 1),  # mirrored about the other diagonal
        8: lambda a: np.rot90(a, 1),  # 90 degrees counter-clockwise
    }.get(orientation)
    return pixels if turned is None else np.ascontiguousarray(turned(pixels))


def upright_mask(path: Path, read: Callable[[Path], np.ndarray]) -> np.ndarray:
    """The mask ``read(path)`` decodes, turned by the mask file's own EXIF orientation (an editor may
    have saved it with one); ``read`` reports a missing or broken file first."""
    mask = read(path)
    with Image.open(path) as im:
        return upright_array(mask, exif_orientation(im))


def _turn(src: Path, dst: Path) -> None:
    with Image.open(src) as im:
        fmt = im.format
        turned = ImageOps.exif_transpose(im)  # also drops the orientation from the EXIF it carries
        extra = {"icc_profile": im.info["icc_profile"]} if im.info.get("icc_profile") else {}
        turned.save(dst, format=fmt, exif=turned.getexif(), **extra, **SAVE_OPTIONS.get(fmt, {}))


def _place(src: Path, dst: Path) -> None:
    """An untouched photo: a hard link where the file system allows, else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_upright(
    root: Path,
    names: list[str],
    turned: dict[str, int],
    dst: Path,
    threads: int = -1,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Every photo of ``names`` (in ``root``) into ``dst``: those in ``turned`` (name -> orientation)
    decoded, turned and re-encoded in their own format, the others linked as they are."""
    dst.mkdir(parents=True, exist_ok=True)
    done = 0

    def one(name: str) -> None:
        (_turn if name in turned else _place)(root / name, dst / name)

    with ThreadPoolExecutor(max_workers=threads if threads > 0 else None) as pool:
        for _ in pool.map(one, names):
            done += 1
            if progress is not None:
                progress(done, len(names))
