"""``images_2``, ``images_4``, ... next to ``images``: what ``ColmapDataset``'s ``scale`` reads."""

from __future__ import annotations

from pathlib import Path

from PIL import Image


def write_downscaled(out: Path, levels: int) -> list[Path]:
    """Write ``out/images_{2^k}`` for k = 1..levels; returns the folders.

    Sizes are ``round(size / factor)`` (what ``Camera.scaled`` expects); pixels are box-filtered
    (the mean of each factor x factor block when it divides), so no aliasing.
    """
    src = out / "images"
    folders = []
    for k in range(1, levels + 1):
        factor = 2**k
        dst = out / f"images_{factor}"
        dst.mkdir(parents=True, exist_ok=True)
        for path in sorted(src.iterdir()):
            with Image.open(path) as im:
                size = (max(1, round(im.width / factor)), max(1, round(im.height / factor)))
                im.convert("RGB").resize(size, Image.Resampling.BOX).save(dst / path.name)
        folders.append(dst)
    return folders
