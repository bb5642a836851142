"""PlayCanvas SOG, meta.json version 2 (the layout splat-transform 3.7.0 reads and writes:
``readSogSourceV2`` / ``writeSogSource``), written with numpy and Pillow's WebP encoder.

A ``.sog`` file is a ZIP archive (stored, not deflated: WebP is compressed already) of
``meta.json`` and lossless RGBA WebP images. Texel ``i`` of every per-Gaussian image is Gaussian
``i`` in Morton order of the centres; images are ``W x H`` with ``W = 4 ceil(sqrt(N) / 4)`` and
``H = 4 ceil(N / W / 4)``, unused texels zero.

- ``means_l.webp`` / ``means_u.webp``: low / high byte of ``round(65535 (t - min) / (max - min))``
  per axis (RGB), ``t = sign(x) ln(|x| + 1)``; ``means.mins`` / ``maxs`` are t's range per axis.
- ``quats.webp``: unit quaternion (w, x, y, z) with the largest component made positive; RGB the
  other three in w, x, y, z order, ``round(255 (sqrt(2) q / 2 + 1 / 2))``; A ``252 + index`` of the
  largest.
- ``scales.webp``: RGB index into ``scales.codebook`` (256 float log scales, ascending).
- ``sh0.webp``: RGB index into ``sh0.codebook`` (256 f_dc values); A ``round(255 sigmoid(opacity))``.
- ``shN_labels.webp`` (degree >= 1): R, G the low and high byte of the Gaussian's palette entry.
  ``shN_centroids.webp``: ``shN.count`` palette entries, 64 a row, each ``C`` texels (C = 3, 8, 15
  coefficients) whose RGB index ``shN.codebook`` (256 values).

Values are stored in the model's RDF frame, PLY's, which is what SOG readers assume (splat-transform
bakes its data to PLY space before writing). Codebooks and the palette: :mod:`.codebook`.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Mapping
from typing import IO

import numpy as np
from torch import Tensor

from .codebook import codebook_1d, json_floats, nearest_1d, palette

SOG_VERSION = 2
QUAT_TAG = 252  # alpha of quats.webp: 252 + index of the dropped (largest) component
PALETTE_ROW = 64  # palette entries a row of shN_centroids.webp
SH_ITERATIONS = 10  # Lloyd iterations of the SH palette, as splat-transform's default --sh-iterations
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same Gaussians give the same bytes


def texture_size(n: int) -> tuple[int, int]:
    """``(width, height)`` of the per-Gaussian images for ``n`` Gaussians."""
    width = math.ceil(math.sqrt(n) / 4) * 4
    return width, math.ceil(n / width / 4) * 4


def palette_size(n: int) -> int:
    """Palette entries splat-transform uses for ``n`` Gaussians: a power of two, at most 65536 and
    never more than ``n``."""
    return int(min(64, 2.0 ** math.floor(math.log2(n / 1024))) * 1024)


def morton_order(means: np.ndarray) -> np.ndarray:
    """Permutation sorting ``means [N, 3]`` along a Z-order curve of 10 bits per axis, which puts
    neighbours in neighbouring texels (smaller WebP files)."""
    lo, hi = means.min(0), means.max(0)
    q = np.round((means - lo) / np.where(hi > lo, hi - lo, 1) * 1023).astype(np.uint64)
    code = np.zeros(len(means), dtype=np.uint64)
    for bit in range(10):
        for axis in range(3):
            code |= ((q[:, axis] >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + axis)
    return np.argsort(code, kind="stable")


def log_transform(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def _image(n: int, columns: list[np.ndarray], alpha: np.ndarray | int = 255) -> np.ndarray:
    """``[H, W, 4]`` uint8 with texel ``i < n`` = (columns..., alpha), the rest zero."""
    width, height = texture_size(n)
    rgba = np.zeros((height * width, 4), dtype=np.uint8)
    for c, col in enumerate(columns):
        rgba[:n, c] = col
    rgba[:n, 3] = alpha
    return rgba.reshape(height, width, 4)


def _means(means: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    t = log_transform(means)
    mins, maxs = t.min(0), t.max(0)
    span = maxs - mins
    q = np.round(65535 * (t - mins) / np.where(span > 0, span, 1)).astype(np.int64)
    n = len(means)
    low = _image(n, [q[:, a] & 0xFF for a in range(3)])
    high = _image(n, [q[:, a] >> 8 for a in range(3)])
    return {"mins": mins.tolist(), "maxs": maxs.tolist(), "files": ["means_l.webp", "means_u.webp"]}, low, high


def _quats(quats_wxyz: np.ndarray) -> np.ndarray:
    q = quats_wxyz / np.linalg.norm(quats_wxyz, axis=1, keepdims=True)
    largest = np.argmax(np.abs(q), axis=1)  # the first of equal magnitudes, as splat-transform
    rows = np.arange(len(q))
    q = q * np.where(q[rows, largest] < 0, -1.0, 1.0)[:, None] * math.sqrt(2)
    others = np.array([[j for j in range(4) if j != m] for m in range(4)])[largest]
    kept = np.take_along_axis(q, others, axis=1)
    b = np.clip(np.round(255 * (kept * 0.5 + 0.5)), 0, 255).astype(np.uint8)
    return _image(len(q), [b[:, 0], b[:, 1], b[:, 2]], (QUAT_TAG + largest).astype(np.uint8))


def _codebook_image(values: np.ndarray, alpha: np.ndarray | int = 255) -> tuple[list[float], np.ndarray]:
    """A 256-entry codebook of the ``[N, 3]`` ``values`` and the image of their indices."""
    cb = codebook_1d(values)
    labels = nearest_1d(values, cb)
    return json_floats(cb), _image(len(values), [labels[:, c] for c in range(3)], alpha)


def _sh_rest(shN: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    n, coeffs = shN.shape[:2]
    centres, labels = palette(shN.reshape(n, -1), palette_size(n), SH_ITERATIONS)
    count = len(centres)
    cb = codebook_1d(centres)
    entries = nearest_1d(centres, cb).reshape(count, coeffs, 3)
    rows = math.ceil(count / PALETTE_ROW)
    texels = np.zeros((rows * PALETTE_ROW * coeffs, 4), dtype=np.uint8)
    texels[: count * coeffs, :3] = entries.reshape(-1, 3)
    texels[: count * coeffs, 3] = 255
    centroids = texels.reshape(rows, PALETTE_ROW * coeffs, 4)
    label_image = _image(n, [labels & 0xFF, labels >> 8, np.zeros(n, np.int64)])
    meta = {
        "count": count,
        "bands": math.isqrt(coeffs + 1) - 1,
        "codebook": json_floats(cb),
        "files": ["shN_centroids.webp", "shN_labels.webp"],
    }
    return meta, centroids, label_image


def webp_lossless(rgba: np.ndarray) -> bytes:
    """Lossless WebP of an ``[H, W, 4]`` uint8 image, every byte kept (``exact``: libwebp would
    otherwise change the colour of texels whose alpha is 0, e.g. a Gaussian of opacity 0)."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, "WEBP", lossless=True, exact=True)
    return out.getvalue()


def sog_files(params: Mapping[str, Tensor]) -> dict[str, bytes]:
    """``{file name in the archive: bytes}`` of RDF ``params`` (SH degree at most 3)."""
    p = {k: v.detach().double().cpu().numpy() for k, v in params.items()}
    order = morton_order(p["means"])
    p = {k: v[order] for k, v in p.items()}
    n, coeffs = p["means"].shape[0], p["shN"].shape[1]
    means_meta, means_l, means_u = _means(p["means"])
    scales_cb, scales = _codebook_image(p["scales"])
    alpha = np.round(255 / (1 + np.exp(-p["opacities"]))).astype(np.uint8)
    sh0_cb, sh0 = _codebook_image(p["sh0"][:, 0], alpha)
    images = {
        "means_l.webp": means_l,
        "means_u.webp": means_u,
        "quats.webp": _quats(p["quats"]),
        "scales.webp": scales,
        "sh0.webp": sh0,
    }
    meta = {
        "version": SOG_VERSION,
        "asset": {"generator": "pointrix_lite"},
        "count": n,
        "means": means_meta,
        "scales": {"codebook": scales_cb, "files": ["scales.webp"]},
        "quats": {"files": ["quats.webp"]},
        "sh0": {"codebook": sh0_cb, "files": ["sh0.webp"]},
    }
    if coeffs:
        meta["shN"], images["shN_centroids.webp"], images["shN_labels.webp"] = _sh_rest(p["shN"])
    files = {"meta.json": json.dumps(meta, separators=(",", ":")).encode()}
    files.update({name: webp_lossless(image) for name, image in images.items()})
    return files


def write_sog(params: Mapping[str, Tensor], f: IO[bytes]) -> None:
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as archive:
        for name, data in sog_files(params).items():
            archive.writestr(zipfile.ZipInfo(name, date_time=_ZIP_TIME), data)
