"""Niantic's SPZ, version 3: the layout of nianticlabs/spz ``src/cc/load-spz.cc`` (``packGaussians``,
``serializePackedGaussians``), written with numpy.

Version 3 is the newest gzip-stream version. Version 4 (zstd streams, 32-byte header) is what the
spz library writes by default now, but the web readers (Spark's ``SpzReader``, PlayCanvas) accept
versions up to 3; v3 differs from v2 only in the rotation (4 bytes "smallest three" instead of
3 bytes of x, y, z).

The whole file is one gzip stream of a 16-byte little-endian header followed by attribute blocks
(each for every Gaussian in turn)::

    u32 magic 0x5053474e ("NGSP")  u32 version 3  u32 numPoints
    u8 shDegree  u8 fractionalBits  u8 flags (bit 0: antialiased; 0 here)  u8 reserved 0
    positions  3 x 24-bit signed fixed point (value * 2^fractionalBits, rounded), little-endian
    alphas     u8  round(sigmoid(opacity) * 255)
    colours    u8  round(f_dc * 0.15 * 255 + 127.5)   (spz's colorScale 0.15, not SH_C0)
    scales     u8  round((log scale + 10) * 16)
    rotations  u32 smallest three: bits 30-31 index of the largest |component| of the unit xyzw
               quaternion (made positive), then 10 bits per other component in index order from
               the high bits: sign bit, 9-bit magnitude round(|q_i| / sqrt(1/2) * 511)
    sh         u8 per coefficient and channel (coefficient-major, r g b), round(x * 128) + 128
               snapped to 5 significant bits for degree 1 and 4 bits above

``fractionalBits`` is spz's 12 when every centre fits (|x| < 2048), else the most that keep every
centre in 24 bits (readers scale by the header's value); a centre beyond 2^23 is refused in one line.
The export prints the bits chosen and the centre that decided them (:func:`precision_note`).
All u8 values are clamped to 0..255.

Frame: ``rdf`` (default) stores the model's own axes, PLY's, which is what splat-transform /
SuperSplat, Spark and Babylon.js assume of an SPZ file and what spz's own ``ply_to_spz`` writes (it
converts nothing); ``rub`` turns the Gaussians 180 degrees about x first (:mod:`.axes`), the RUB
frame spz's README documents and its loaders convert from. Version 3 has nowhere to record which:
the library's trailing extension records are not read back by its own gzip loader (docs/export.md).
"""

from __future__ import annotations

import gzip
import math
import struct
from collections.abc import Mapping
from typing import IO

import numpy as np
from torch import Tensor

from .axes import SPZ_FRAMES, flip_axes
from .formats import FormatNote

SPZ_MAGIC = 0x5053474E
SPZ_VERSION = 3
FRACTIONAL_BITS = 12
COLOR_SCALE = 0.15
SH1_BITS, SH_REST_BITS = 5, 4  # spz's defaults (DEFAULT_SH1_BITS, DEFAULT_SH_REST_BITS)
_FIXED_MAX = 1 << 23  # 24-bit two's complement: -2^23 .. 2^23 - 1


def _round(x: np.ndarray) -> np.ndarray:
    """C's ``std::round`` (halves away from zero), so bytes match the spz library's."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _u8(x: np.ndarray) -> np.ndarray:
    return np.clip(_round(x), 0, 255).astype(np.uint8)


def fixed_point(means: np.ndarray, bits: int = FRACTIONAL_BITS) -> np.ndarray:
    """Positions as int64 multiples of 2^-bits (spz's 24-bit fixed point before packing)."""
    return _round(means.astype(np.float64) * (1 << bits)).astype(np.int64)


def fractional_bits(means: np.ndarray) -> int:
    """The most fractional bits, at most spz's 12, that keep every centre ``[N,3]`` (RUB) within
    24-bit two's complement (-2^23 <= fixed < 2^23): spz's own 12 for a scene within +-2048.

    Raises:
        DataError: a centre does not fit even with 0 fractional bits (its count and extent named).
    """
    for bits in range(FRACTIONAL_BITS, -1, -1):
        fixed = fixed_point(means, bits)
        if fixed.size == 0 or ((fixed >= -_FIXED_MAX) & (fixed < _FIXED_MAX)).all():
            return bits
    from ..errors import DataError

    out = (np.abs(fixed_point(means, 0)) >= _FIXED_MAX).any(axis=1)
    raise DataError(
        f"spz: {int(out.sum())} Gaussian centre(s) lie beyond +-{_FIXED_MAX} scene units (largest |coordinate| "
        f"{float(np.abs(means).max()):.6g}), which 24-bit fixed point cannot hold; export ply instead"
    )


def precision_note(params: Mapping[str, Tensor], frame: str = "rdf") -> FormatNote:
    """The line the export prints about the centres' precision: the fractional bits :func:`spz_bytes`
    will choose for ``params`` stored in ``frame``, and the centre that decided them.

    One centre far out (a stray Gaussian at x = 1e5) lowers the precision of every centre in the
    file; this says so, and names the cut-off that drops such outliers first (``--max-distance``).

    Raises:
        DataError: a centre does not fit 24 bits at all (:func:`fractional_bits`).
    """
    signs = np.array(SPZ_FRAMES[frame], dtype=np.float32)  # a sign flip: exactly the stored values
    means = params["means"].detach().float().cpu().numpy() * signs
    bits = fractional_bits(means)
    reach = np.abs(means.astype(np.float64)).max(axis=1)  # per centre: what its 24 bits must hold
    far = means[int(reach.argmax())] if len(means) else np.zeros(3)
    where = f"({', '.join(f'{v:.6g}' for v in far)})"
    text = f"precision: {bits} fractional bits, centres rounded to 2^-{bits} = {2.0**-bits:.3g} scene units"
    if bits == FRACTIONAL_BITS:
        return FormatNote(f"{text} (spz's own; the farthest centre, at {where}, is within +-2048)")
    coarser = 1 << (FRACTIONAL_BITS - bits)
    return FormatNote(
        f"{text}, {coarser}x coarser than spz's 12 bits for every centre, because the farthest centre lies at "
        f"{where}, {float(reach.max()):.6g} units out on an axis; if it is a stray, --max-distance D drops "
        "centres farther than D from the scene centre first",
        degraded=True,
    )


def _positions(means: np.ndarray, bits: int) -> np.ndarray:
    fixed = fixed_point(means, bits).astype("<i4")
    return fixed.view(np.uint8).reshape(-1, 3, 4)[:, :, :3]  # low three bytes, little-endian


def _rotations(quats_wxyz: np.ndarray) -> np.ndarray:
    q = quats_wxyz[:, [1, 2, 3, 0]].astype(np.float64)  # spz orders x, y, z, w
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    largest = np.argmax(np.abs(q), axis=1)  # first of equal magnitudes, as spz's strict '>' loop
    rows = np.arange(len(q))
    negate = q[rows, largest] < 0
    comp = largest.astype(np.uint32)
    for i in range(4):
        other = largest != i
        negbit = ((q[:, i] < 0) ^ negate).astype(np.uint32)
        mag = np.floor(511 * np.abs(q[:, i]) / math.sqrt(0.5) + 0.5).astype(np.uint32)
        comp = np.where(other, (comp << 10) | (negbit << 9) | mag, comp)
    return comp.astype("<u4").view(np.uint8).reshape(-1, 4)


def _sh(shN: np.ndarray) -> np.ndarray:
    q = (_round(shN * 128.0) + 128).astype(np.int64)
    bucket = np.full(shN.shape[1], 1 << (8 - SH_REST_BITS), dtype=np.int64)
    bucket[:3] = 1 << (8 - SH1_BITS)
    b = bucket[None, :, None]
    # C++ '/' truncates toward zero; it differs from '//' only for negative sums, clamped to 0 anyway.
    return np.clip((q + b // 2) // b * b, 0, 255).astype(np.uint8)


def spz_bytes(params: Mapping[str, Tensor], frame: str = "rdf") -> bytes:
    """The uncompressed SPZ v3 stream (header and attribute blocks) of RDF ``params``, stored in
    ``frame`` (a key of :data:`.axes.SPZ_FRAMES`)."""
    p = {k: v.numpy() for k, v in flip_axes(params, SPZ_FRAMES[frame]).items()}
    n, num_rest = p["means"].shape[0], p["shN"].shape[1]
    degree = math.isqrt(num_rest + 1) - 1
    bits = fractional_bits(p["means"])
    header = struct.pack("<IIIBBBB", SPZ_MAGIC, SPZ_VERSION, n, degree, bits, 0, 0)
    alpha = 1 / (1 + np.exp(-p["opacities"].astype(np.float64)))
    blocks = [
        _positions(p["means"], bits),
        _u8(alpha * 255),
        _u8(p["sh0"][:, 0].astype(np.float64) * (COLOR_SCALE * 255) + 127.5),
        _u8((p["scales"].astype(np.float64) + 10) * 16),
        _rotations(p["quats"]),
        _sh(p["shN"].astype(np.float64)),
    ]
    return header + b"".join(np.ascontiguousarray(b).tobytes() for b in blocks)


def write_spz(params: Mapping[str, Tensor], f: IO[bytes], frame: str = "rdf") -> None:
    # mtime 0: the same Gaussians give the same bytes.
    f.write(gzip.compress(spz_bytes(params, frame), compresslevel=6, mtime=0))
