"""``images_2``, ``images_4``, ... next to ``images``: what ``ColmapDataset``'s ``scale`` reads."""

from __future__ import annotations

from pathlib import Path

from ..io.images import downscale, read_image, write_png


def write_downscaled(out: Path, levels: int) -> list[Path]:
    """Write ``out/images_{2^k}`` (PNG, same file names) for k = 1..levels; returns the folders.

    Sizes are ``round(size / factor)`` (what ``Camera.scaled`` expects) and pixels go through the
    dataset's own area filter, so a pre-scaled folder holds what resizing on load would give.
    """
    src = sorted((out / "images").iterdir())
    folders = []
    for k in range(1, levels + 1):
        factor = 2**k
        dst = out / f"images_{factor}"
        dst.mkdir(parents=True, exist_ok=True)
        for path in src:
            image = read_image(path)
            h, w = image.shape[:2]
            small = downscale(image, max(1, round(w / factor)), max(1, round(h / factor)))
            write_png(dst / path.name, small)
        folders.append(dst)
    return folders
