"""Image files -> [H, W, 3] uint8 arrays: finding, decoding, alpha compositing, downscaling, loading many.

Every failure is a one-line :class:`~pointrix_lite.errors.DataError` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import DataError
from .atomic import atomic_write

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")
LOAD_THREADS = 4  # image loading threads, at most one per core
T = TypeVar("T")
R = TypeVar("R")


def find_image(path: Path) -> Path:
    """Resolve an image path that may lack its extension (NeRF-synthetic writes ``./train/r_0``).

    Tries the path as given, then with each of ``IMAGE_EXTENSIONS`` appended.
    """
    if path.is_file():
        return path
    for ext in IMAGE_EXTENSIONS:
        candidate = path.with_name(path.name + ext)
        if candidate.is_file():
            return candidate
    raise DataError(f"{path}: image not found (also tried extensions {', '.join(IMAGE_EXTENSIONS[:3])})")


def read_image(path: Path) -> np.ndarray:
    """Decode an image file to uint8 [H, W, 3] (RGB) or [H, W, 4] (RGBA).

    Grey, palette and 16-bit images are converted; 16-bit keeps its top 8 bits.
    """
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                arr = (np.asarray(im, dtype=np.uint32) >> 8).clip(0, 255).astype(np.uint8)
                return np.repeat(arr[..., None], 3, axis=-1)
            has_alpha = im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)
            arr = np.asarray(im.convert("RGBA" if has_alpha else "RGB"))
    except FileNotFoundError:
        raise DataError(f"{path}: image not found") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot decode image ({exc})") from None
    return np.array(arr, dtype=np.uint8, copy=True)  # writable: torch.from_numpy warns on read-only arrays


def composite(rgba: np.ndarray, background: tuple[float, float, float]) -> np.ndarray:
    """Alpha-composite an [H, W, 4] uint8 image over a constant ``background`` (RGB in [0, 1]).

    Returns:
        [H, W, 3] uint8: ``round(255 * (rgb * a + bg * (1 - a)))`` computed in float.
    """
    if rgba.shape[-1] == 3:
        return rgba
    x = rgba.astype(np.float32) / 255.0
    a = x[..., 3:4]
    out = x[..., :3] * a + np.asarray(background, dtype=np.float32) * (1.0 - a)
    return np.clip(np.rint(out * 255.0), 0, 255).astype(np.uint8)


def downscale(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Area-filter ``image`` ([H, W, C] uint8) down to ``width`` x ``height``.

    An exact integer factor averages s x s blocks (the same as PIL's BOX filter, but exact and
    independent of PIL's fixed-point rounding); other sizes use PIL's BOX filter.
    """
    h, w = image.shape[:2]
    if (w, h) == (width, height):
        return image
    if w % width == 0 and h % height == 0 and w // width == h // height:
        s = w // width
        # Integer sums of strided slices: exact, so rint(sum / s^2) in float32 is bit for bit the
        # float32 block mean it replaces, 5-10x faster (a reshape + float mean copied every pixel).
        total = np.zeros((height, width, image.shape[-1]), dtype=np.uint32)
        for i in range(s):
            for j in range(s):
                total += image[i::s, j::s]
        return np.clip(np.rint(total.astype(np.float32) / np.float32(s * s)), 0, 255).astype(np.uint8)
    mode = "RGBA" if image.shape[-1] == 4 else "RGB"
    # np.array, not asarray: PIL's buffer is read-only, and torch.from_numpy of it warns (writes to it are undefined)
    return np.array(Image.fromarray(image, mode).resize((width, height), Image.Resampling.BOX))


def write_png(path: Path, image: np.ndarray) -> None:
    """Write an [H, W, 3|4] uint8 array as PNG (deterministic bytes for identical input).

    zlib level 1, not PIL's default 6: on a 400x400 photo-like render 8.9 ms and 268 KB against
    35.5 ms and 275 KB (photo noise leaves level 6 nothing to find); test renders, ``images_N`` and
    video frames are all photo-like.
    """
    mode = "RGBA" if image.shape[-1] == 4 else "RGB"
    picture = Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), mode)
    # Through a temp file and a rename: a Ctrl-C while saving never leaves a truncated PNG
    # (test renders, downscaled photos); no fsync, thousands of frames would pay for it.
    atomic_write(Path(path), lambda f: picture.save(f, format="PNG", compress_level=1), durable=False)


def write_png16(path: Path, image: np.ndarray) -> None:
    """Write an [H, W] uint16 array as a 16-bit greyscale PNG (depth maps), as :func:`write_png` writes."""
    picture = Image.fromarray(np.ascontiguousarray(image, dtype=np.uint16))
    atomic_write(Path(path), lambda f: picture.save(f, format="PNG", compress_level=1), durable=False)


def load_all(items: Sequence[T], load: Callable[[T], R], advance: Callable[[], object]) -> list[R]:
    """``[load(item) for item in items]`` on a few threads, in order; ``advance()`` after each one.

    Decoding (PIL) and resampling (numpy) release the GIL, so on 2 cores loading 160 photos takes
    about half the time. The first exception (a DataError naming the file) is raised as it would be
    from the loop, and the loads not yet started are cancelled.
    """
    workers = max(1, min(LOAD_THREADS, os.cpu_count() or 1, len(items)))
    if workers == 1:
        out = []
        for item in items:
            out.append(load(item))
            advance()
        return out
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(load, item) for item in items]
        try:
            results = []
            for future in futures:
                results.append(future.result())
                advance()
            return results
        finally:
            for future in futures:
                future.cancel()
