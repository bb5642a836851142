"""Read exported SPZ and glTF (``KHR_gaussian_splatting``) files back into raw Gaussian parameters
in the model's RDF frame, as a viewer reconstructs them (``python -m benchmarks export`` renders them).
Layouts: :mod:`.spz` and :mod:`.glb`."""

from __future__ import annotations

import gzip
import json
import math
import struct
import zlib
from pathlib import Path

import numpy as np
from torch import Tensor

from ..errors import DataError
from ..io.gltf import GLB_MAGIC
from .axes import RDF_TO_LUF, SPZ_FRAMES, flip_axes
from .decode import SH_C0, _params
from .glb import EXTENSION
from .spz import COLOR_SCALE, SPZ_MAGIC


def read_spz(path: str | Path, frame: str = "rdf") -> dict[str, Tensor]:
    """Raw parameters of an SPZ file of version 2 or 3 (the gzip versions) stored in ``frame``
    (``rdf`` or ``rub``: the file does not say which, see :mod:`.spz`)."""
    try:
        raw = gzip.decompress(Path(path).read_bytes())
        magic, version, n, degree, frac, _flags, _ = struct.unpack_from("<IIIBBBB", raw)
    except (OSError, EOFError, zlib.error, struct.error) as exc:
        raise DataError(f"{path}: not a gzip SPZ file ({type(exc).__name__}: {exc})") from None
    if magic != SPZ_MAGIC or version not in (2, 3):
        raise DataError(
            f"{path}: SPZ magic {magic:#x} version {version}; readable: magic {SPZ_MAGIC:#x}, versions 2 and 3"
        )
    k = (degree + 1) ** 2 - 1
    rot_bytes = 4 if version == 3 else 3
    sizes = [9 * n, n, 3 * n, 3 * n, rot_bytes * n, 3 * k * n]
    if len(raw) < 16 + sum(sizes):
        raise DataError(f"{path}: {len(raw)} bytes decompressed, {16 + sum(sizes)} needed for {n:,} Gaussians")
    blocks = np.split(np.frombuffer(raw, np.uint8, sum(sizes), 16), np.cumsum(sizes)[:-1])
    pos, alpha, colour, scale, rot, sh = blocks
    b = pos.reshape(n, 3, 3).astype(np.int32)
    fixed = (b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)) << 8 >> 8  # sign-extend 24 bits
    if version == 3:
        quats = _smallest_three(rot.reshape(n, 4).copy().view("<u4")[:, 0])
    else:
        xyz = rot.reshape(n, 3) / 127.5 - 1
        quats = np.concatenate([xyz, np.sqrt(np.maximum(0, 1 - (xyz**2).sum(1, keepdims=True)))], 1)
    p = _params(
        fixed / float(1 << frac),
        scale.reshape(n, 3) / 16.0 - 10,
        quats[:, [3, 0, 1, 2]],
        alpha / 255.0,
        0.5 + SH_C0 * (colour.reshape(n, 3) / 255.0 - 0.5) / COLOR_SCALE,
        (sh.reshape(n, k, 3) - 128.0) / 128,
    )
    return flip_axes(p, SPZ_FRAMES[frame])  # each flip is its own inverse


def _smallest_three(word: np.ndarray) -> np.ndarray:
    """``[N, 4]`` x, y, z, w of SPZ v3 rotations."""
    word = word.astype(np.int64)
    largest = word >> 30
    q = np.zeros((len(word), 4))
    rows = np.arange(len(word))
    for slot, shift in enumerate((20, 10, 0)):  # the other indices in increasing order, high bits first
        index = slot + (largest <= slot)
        v = (word >> shift) & 0x3FF
        q[rows, index] = np.where(v & 0x200, -1, 1) * (v & 0x1FF) / 511 * math.sqrt(0.5)
    q[rows, largest] = np.sqrt(np.maximum(0, 1 - (q**2).sum(1)))
    return q


def read_glb(path: str | Path) -> dict[str, Tensor]:
    """Raw parameters of a ``.glb`` whose first primitive has float ``KHR_gaussian_splatting`` attributes."""
    data = Path(path).read_bytes()
    try:
        magic, _, _, json_len = struct.unpack_from("<IIII", data)
        gltf = json.loads(data[20 : 20 + json_len])
        binary = data[20 + json_len + 8 :]
        attributes = gltf["meshes"][0]["primitives"][0]["attributes"]
    except (struct.error, ValueError, KeyError, IndexError) as exc:
        raise DataError(f"{path}: not a glTF binary ({type(exc).__name__}: {exc})") from None
    if magic != GLB_MAGIC:
        raise DataError(f"{path}: not a glTF binary (magic {magic:#x})")

    def attr(name: str) -> np.ndarray:
        if name not in attributes:
            raise DataError(f"{path}: the first primitive has no {name} attribute")
        acc = gltf["accessors"][attributes[name]]
        if acc["componentType"] != 5126:
            raise DataError(f"{path}: {name} is not float (componentType {acc['componentType']}); only float is read")
        comps = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}[acc["type"]]
        start = gltf["bufferViews"][acc["bufferView"]].get("byteOffset", 0) + acc.get("byteOffset", 0)
        return np.frombuffer(binary, "<f4", acc["count"] * comps, start).reshape(acc["count"], comps).astype(np.float64)

    sh_names = [f"{EXTENSION}:SH_DEGREE_{deg}_COEF_{m}" for deg in range(1, 4) for m in range(2 * deg + 1)]
    rest = [attr(name) for name in sh_names if name in attributes]
    n = attr("POSITION").shape[0]
    p = _params(
        attr("POSITION"),
        np.log(attr(f"{EXTENSION}:SCALE")),
        attr(f"{EXTENSION}:ROTATION")[:, [3, 0, 1, 2]],
        attr(f"{EXTENSION}:OPACITY")[:, 0],
        0.5 + SH_C0 * attr(f"{EXTENSION}:SH_DEGREE_0_COEF_0"),
        np.stack(rest, 1) if rest else np.zeros((n, 0, 3)),
    )
    return flip_axes(p, RDF_TO_LUF)
