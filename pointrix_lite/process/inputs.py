"""Checking the input images in Python before COLMAP sees them (its errors are not one-liners)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from ..errors import DataError
from .upright import exif_orientation, upright_size

EXTENSIONS = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"}
MIN_IMAGES = 3


@dataclass
class ImageSet:
    """Readable images of one folder: names relative to ``root``, sorted; the skipped ones with why."""

    root: Path
    names: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    size: tuple[int, int] = (0, 0)  # (width, height) of the first image, upright (as it is shown)
    turned: dict[str, int] = field(default_factory=dict)  # name -> EXIF orientation, for those not stored upright


def scan_images(root: Path) -> ImageSet:
    """Every readable image file directly in ``root`` (unreadable ones are skipped and counted).

    Raises:
        DataError: ``root`` is not a folder, holds no image files, or fewer than 3 readable ones.
    """
    if not root.is_dir():
        raise DataError(f"--images {root}: not a folder")
    files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in EXTENSIONS)
    if not files:
        raise DataError(f"--images {root}: no image files ({', '.join(sorted(EXTENSIONS))})")
    names, skipped, size, turned = [], [], (0, 0), {}
    for path in files:
        try:
            with Image.open(path) as im:
                im.load()  # decodes the pixels: a truncated file fails here, not inside COLMAP
                orientation = exif_orientation(im)
                if not names:
                    size = upright_size(im.size, orientation)
        except (OSError, UnidentifiedImageError, ValueError) as exc:
            skipped.append((path.name, " ".join(str(exc).split())[:120] or type(exc).__name__))
            continue
        names.append(path.name)
        if orientation != 1:
            turned[path.name] = orientation
    if len(names) < MIN_IMAGES:
        extra = f" ({len(skipped)} unreadable skipped, e.g. {skipped[0][0]})" if skipped else ""
        raise DataError(
            f"--images {root}: {len(names)} readable image(s){extra}; structure from motion needs at least "
            f"{MIN_IMAGES} overlapping photos (20+ is better)"
        )
    return ImageSet(root, names, skipped, size, turned)
