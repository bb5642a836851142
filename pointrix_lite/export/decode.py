"""Read exported ``.splat`` and PlayCanvas compressed PLY files back into raw Gaussian parameters.

What a viewer reconstructs, as the model's raw parameters (log scales, logit opacities, SH DC),
so a decoded file renders through the project's rasterizer (``python -m benchmarks export`` measures
the quality lost this way). Layouts: see :mod:`.formats`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError
from .formats import PLAYCANVAS_CHUNK, SPLAT_RECORD_BYTES

SH_C0 = 0.28209479177387814
_ALPHA_EPS = 1e-6  # alpha 0 or 1 has no finite logit


def _logit(alpha: np.ndarray) -> np.ndarray:
    a = np.clip(alpha, _ALPHA_EPS, 1 - _ALPHA_EPS)
    return np.log(a / (1 - a))


def _params(means, log_scales, quats, alpha, colour, shN) -> dict[str, Tensor]:
    n = means.shape[0]
    as_t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    return {
        "means": as_t(means),
        "scales": as_t(log_scales),
        "quats": as_t(quats),
        "opacities": as_t(_logit(alpha)),
        "sh0": as_t((colour - 0.5) / SH_C0).reshape(n, 1, 3),
        "shN": as_t(shN),
    }


def read_splat(path: str | Path) -> dict[str, Tensor]:
    """Raw parameters (``means [N,3]``, ``scales [N,3]``, ``quats [N,4]``, ``opacities [N]``,
    ``sh0 [N,1,3]``, ``shN [N,0,3]``) of an antimatter15 ``.splat`` file."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size % SPLAT_RECORD_BYTES:
        raise DataError(f"{path}: {raw.size} bytes is not a whole number of {SPLAT_RECORD_BYTES}-byte .splat records")
    rec = raw.reshape(-1, SPLAT_RECORD_BYTES)
    rgba = rec[:, 24:28].astype(np.float64) / 255
    return _params(
        rec[:, :12].copy().view("<f4"),
        np.log(rec[:, 12:24].copy().view("<f4")),
        (rec[:, 28:32].astype(np.float64) - 128) / 128,
        rgba[:, 3],
        rgba[:, :3],
        np.zeros((len(rec), 0, 3)),
    )


def _unorm(v: np.ndarray, bits: int) -> np.ndarray:
    return (v & ((1 << bits) - 1)) / float((1 << bits) - 1)


def read_compressed_ply(path: str | Path) -> dict[str, Tensor]:
    """Raw parameters of a PlayCanvas compressed PLY (``shN [N,K-1,3]`` from its ``sh`` element)."""
    from plyfile import PlyData

    try:
        ply = PlyData.read(str(path))
        chunk, vertex = ply["chunk"].data, ply["vertex"].data
    except Exception as exc:  # plyfile raises assorted types; KeyError for a missing element
        raise DataError(f"{path}: not a compressed PLY ({type(exc).__name__}: {exc})") from None
    n = len(vertex)
    ci = np.arange(n) // PLAYCANVAS_CHUNK

    def bounds(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        lo = np.stack([chunk[f"min_{a}"][ci] for a in names], 1).astype(np.float64)
        hi = np.stack([chunk[f"max_{a}"][ci] for a in names], 1).astype(np.float64)
        return lo, hi - lo

    def unpack(v: np.ndarray, names: list[str]) -> np.ndarray:
        lo, span = bounds(names)
        return lo + span * np.stack([_unorm(v >> 21, 11), _unorm(v >> 11, 10), _unorm(v, 11)], 1)

    colour = vertex["packed_color"]
    lo, span = bounds(["r", "g", "b"])
    rgb = lo + span * np.stack([_unorm(colour >> s, 8) for s in (24, 16, 8)], 1)

    rot = vertex["packed_rotation"]
    abc = np.stack([(_unorm(rot >> s, 10) - 0.5) * math.sqrt(2) for s in (20, 10, 0)], 1)
    largest = np.sqrt(np.maximum(0.0, 1 - (abc**2).sum(1)))
    which = (rot >> 30).astype(np.int64)
    quats = np.empty((n, 4))
    for k in range(4):
        rows = which == k
        quats[rows] = np.insert(abc[rows], k, largest[rows], axis=1)

    sh_el = next((e for e in ply.elements if e.name == "sh"), None)
    names = sh_el.data.dtype.names if sh_el is not None else None
    if names:
        b = np.stack([sh_el.data[f"f_rest_{i}"] for i in range(len(names))], 1).astype(np.float64)
        sh = np.where(b == 0, -4.0, np.where(b == 255, 4.0, ((b + 0.5) / 256 - 0.5) * 8))
        shN = sh.reshape(n, 3, -1).transpose(0, 2, 1)  # f_rest is channel-major
    else:
        shN = np.zeros((n, 0, 3))
    return _params(
        unpack(vertex["packed_position"], ["x", "y", "z"]),
        unpack(vertex["packed_scale"], ["scale_x", "scale_y", "scale_z"]),
        quats,
        _unorm(colour, 8),
        rgb,
        shN,
    )
