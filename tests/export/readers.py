"""Independent numpy readers of the exported files, written from the published layouts (not from
gsplat's or the project's code), plus a test model whose Gaussians can be told apart after
quantisation.

- ``.splat`` (antimatter15/splat, ``convert.py`` / ``main.js``): no header, 32-byte records:
  position float32 x3, scale float32 x3 (linear, not log), RGBA uint8 x4 (colour = 0.5 + C0 * f_dc,
  alpha = sigmoid(opacity)), rotation uint8 x4 (w, x, y, z; decoded as (b - 128) / 128).
- PlayCanvas compressed PLY (SuperSplat / splat-transform ``decompress-ply``): element ``chunk``
  (float32 min/max of x, y, z, log scale x, y, z and colour r, g, b per 256 Gaussians), element
  ``vertex`` (uint32 packed_position 11-10-11, packed_rotation 2-10-10-10 "smallest three",
  packed_scale 11-10-11, packed_color 8-8-8-8 with alpha not chunk-normalised), optional element
  ``sh`` (uint8 f_rest_i, decoded (b + 0.5) / 256 mapped to [-4, 4), with 0 -> -4 and 255 -> 4).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

SH_C0 = 0.28209479177387814
PLY_TYPES = {"float": "<f4", "float32": "<f4", "uint": "<u4", "uint32": "<u4", "uchar": "u1", "uint8": "u1"}


def read_splat(path: Path) -> dict[str, np.ndarray]:
    raw = np.fromfile(path, dtype=np.uint8)
    assert raw.size % 32 == 0, f"{path}: {raw.size} bytes is not a whole number of 32-byte records"
    rec = raw.reshape(-1, 32)
    return {
        "means": rec[:, 0:12].copy().view("<f4"),
        "scales": rec[:, 12:24].copy().view("<f4"),  # linear
        "rgba_u8": rec[:, 24:28].copy(),
        "quats": (rec[:, 28:32].astype(np.float64) - 128) / 128,  # w x y z
    }


def read_ply_elements(path: Path) -> tuple[list[tuple[str, int, list[tuple[str, str]]]], dict[str, np.ndarray]]:
    """A binary little-endian PLY's header and per-element structured arrays (no plyfile)."""
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    lines = data[:end].decode("ascii").splitlines()
    assert lines[0] == "ply" and lines[1] == "format binary_little_endian 1.0", lines[:2]
    elements: list[tuple[str, int, list[tuple[str, str]]]] = []
    for line in lines[2:-1]:
        words = line.split()
        if words[0] == "element":
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property":
            elements[-1][2].append((words[2], PLY_TYPES[words[1]]))
    arrays, offset = {}, end
    for name, count, props in elements:
        dtype = np.dtype(props) if props else np.dtype([])
        arrays[name] = np.frombuffer(data, dtype=dtype, count=count, offset=offset) if props else np.zeros(count, dtype)
        offset += dtype.itemsize * count
    assert offset == len(data), f"{path}: {len(data) - offset} bytes after the last element"
    return elements, arrays


def _unorm(v: np.ndarray, bits: int) -> np.ndarray:
    return (v & ((1 << bits) - 1)).astype(np.float64) / ((1 << bits) - 1)


def _lerp(lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    return lo.astype(np.float64) * (1 - t) + hi.astype(np.float64) * t


def read_compressed_ply(path: Path) -> dict[str, np.ndarray]:
    """Decoded values: means, log scales, colours (0.5 + C0 * f_dc), alpha, quats (wxyz), shN
    ``[N, K-1, 3]``, and ``chunk`` (the raw chunk table)."""
    _, el = read_ply_elements(path)
    chunk, vertex = el["chunk"], el["vertex"]
    n = vertex.shape[0]
    ci = np.arange(n) // 256

    def unpack_111011(v: np.ndarray, prefix: str) -> np.ndarray:
        t = np.stack([_unorm(v >> 21, 11), _unorm(v >> 11, 10), _unorm(v, 11)], axis=1)
        lo = np.stack([chunk[f"min_{prefix}{a}"][ci] for a in "xyz"], axis=1)
        hi = np.stack([chunk[f"max_{prefix}{a}"][ci] for a in "xyz"], axis=1)
        return _lerp(lo, hi, t)

    pos = unpack_111011(vertex["packed_position"], "")
    scales = unpack_111011(vertex["packed_scale"], "scale_")
    c = vertex["packed_color"]
    t = np.stack([_unorm(c >> 24, 8), _unorm(c >> 16, 8), _unorm(c >> 8, 8)], axis=1)
    colour = _lerp(np.stack([chunk[f"min_{a}"][ci] for a in "rgb"], 1), np.stack([chunk[f"max_{a}"][ci] for a in "rgb"], 1), t)
    alpha = _unorm(c, 8)

    r = vertex["packed_rotation"]
    norm = 1 / (math.sqrt(2) * 0.5)
    abc = np.stack([(_unorm(r >> 20, 10) - 0.5) * norm, (_unorm(r >> 10, 10) - 0.5) * norm, (_unorm(r, 10) - 0.5) * norm], 1)
    largest = np.sqrt(np.maximum(0.0, 1 - (abc**2).sum(1)))
    which = (r >> 30).astype(np.int64)
    quats = np.empty((n, 4))
    for k in range(4):
        rows = which == k
        others = [j for j in range(4) if j != k]
        quats[rows, k] = largest[rows]
        quats[np.ix_(rows, others)] = abc[rows]

    out = {"means": pos, "scales": scales, "colours": colour, "alpha": alpha, "quats": quats, "chunk": chunk}
    sh = el.get("sh")
    if sh is not None and sh.dtype.names:
        b = np.stack([sh[f"f_rest_{i}"] for i in range(len(sh.dtype.names))], 1).astype(np.float64)
        val = np.where(b == 0, -4.0, np.where(b == 255, 4.0, ((b + 0.5) / 256 - 0.5) * 8))
        k = val.shape[1] // 3
        out["shN"] = val.reshape(n, 3, k).transpose(0, 2, 1)  # f_rest is channel-major
    else:
        out["shN"] = np.zeros((n, 0, 3))
    return out


def separable_params(n: int = 600, sh_degree: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    """Raw Gaussian parameters whose centres lie >= 0.5 apart (a jittered grid), so a decoded
    Gaussian is matched to its source by nearest centre even after 11-bit quantisation."""
    g = torch.Generator().manual_seed(seed)
    side = math.ceil(n ** (1 / 3))
    grid = torch.stack(torch.meshgrid(*[torch.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n].float()
    means = grid + (torch.rand(n, 3, generator=g) - 0.5) * 0.5
    k = (sh_degree + 1) ** 2 - 1
    return {
        "means": means - 3.0,
        "scales": torch.rand(n, 3, generator=g) * 4 - 6,
        "quats": torch.randn(n, 4, generator=g),
        "opacities": torch.randn(n, generator=g) * 3,
        "sh0": torch.randn(n, 1, 3, generator=g),
        "shN": (torch.randn(n, k, 3, generator=g) * 1.2).clamp(-3.9, 3.9),
    }


def match_rows(decoded_means: np.ndarray, means: np.ndarray, tol: float) -> np.ndarray:
    """Index into ``means`` of each decoded centre (nearest, within ``tol``); asserts a bijection."""
    from scipy.spatial import cKDTree

    dist, idx = cKDTree(means).query(decoded_means)
    assert dist.max() <= tol, f"a decoded centre is {dist.max()} from every source centre"
    assert len(np.unique(idx)) == len(idx), "two decoded Gaussians matched the same source Gaussian"
    return idx
