"""Read a PlayCanvas SOG file (meta.json version 2 in a ZIP) back into raw Gaussian parameters, as
a viewer reconstructs them (``python -m benchmarks export`` renders them). Layout: :mod:`.sog`."""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np
from torch import Tensor

from ..errors import DataError
from .decode import SH_C0, _params
from .sog import QUAT_TAG, SOG_VERSION


def _archive(path: Path) -> tuple[zipfile.ZipFile, dict]:
    try:
        archive = zipfile.ZipFile(path)
        meta = json.loads(archive.read("meta.json"))
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise DataError(f"{path}: not a SOG file ({type(exc).__name__}: {exc})") from None
    version = meta.get("version", 1)  # version 1 files have no version key
    if version != SOG_VERSION:
        raise DataError(f"{path}: SOG meta.json version {version!r}; readable: version {SOG_VERSION}")
    return archive, meta


def read_sog(path: str | Path) -> dict[str, Tensor]:
    """Raw parameters (PLY's frame, as stored) of a ``.sog`` file."""
    from PIL import Image

    path = Path(path)
    archive, meta = _archive(path)
    n = int(meta["count"])

    def texels(name: str, count: int = n) -> np.ndarray:
        try:
            rgba = np.asarray(Image.open(io.BytesIO(archive.read(name))).convert("RGBA")).reshape(-1, 4)
        except (KeyError, OSError) as exc:
            raise DataError(f"{path}: cannot read {name} ({type(exc).__name__}: {exc})") from None
        if len(rgba) < count:
            raise DataError(f"{path}: {name} has {len(rgba)} texels, {count} needed")
        return rgba[:count].astype(np.int64)

    low, high = texels("means_l.webp"), texels("means_u.webp")
    t = np.asarray(meta["means"]["mins"]) + (np.asarray(meta["means"]["maxs"]) - meta["means"]["mins"]) * (
        (low[:, :3] | high[:, :3] << 8) / 65535
    )
    q = texels("quats.webp")
    largest = q[:, 3] - QUAT_TAG
    if ((largest < 0) | (largest > 3)).any():
        raise DataError(f"{path}: quats.webp alpha outside {QUAT_TAG}..{QUAT_TAG + 3}")
    quats = np.zeros((n, 4))
    rows = np.arange(n)
    for slot in range(3):  # the kept components in w, x, y, z order
        quats[rows, slot + (largest <= slot)] = (q[:, slot] / 255 * 2 - 1) / math.sqrt(2)
    quats[rows, largest] = np.sqrt(np.maximum(0, 1 - (quats**2).sum(1)))
    scale_cb = np.asarray(meta["scales"]["codebook"], np.float32)
    sh0 = texels("sh0.webp")
    colour_cb = np.asarray(meta["sh0"]["codebook"], np.float32)
    shN = np.zeros((n, 0, 3))
    if "shN" in meta:
        coeffs = (meta["shN"]["bands"] + 1) ** 2 - 1
        count = int(meta["shN"]["count"])
        centroids = texels("shN_centroids.webp", count * coeffs).reshape(count, coeffs, 4)[..., :3]
        labels = texels("shN_labels.webp")
        labels = labels[:, 0] | labels[:, 1] << 8
        if (labels >= count).any():
            raise DataError(f"{path}: shN_labels.webp names palette entry {labels.max()}, the palette has {count}")
        shN = np.asarray(meta["shN"]["codebook"], np.float32)[centroids][labels]
    return _params(
        np.sign(t) * np.expm1(np.abs(t)),
        scale_cb[texels("scales.webp")[:, :3]],
        quats,
        sh0[:, 3] / 255,
        0.5 + SH_C0 * colour_cb[sh0[:, :3]],
        shN,
    )
