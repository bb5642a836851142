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
- SPZ v2 / v3 (nianticlabs/spz ``load-spz.cc``, gzip path): a gzip stream of a 16-byte header
  (magic "NGSP", version, count, SH degree, fractional bits, flags, reserved) and blocks of
  positions (24-bit signed fixed point), alpha u8 (/255), colour u8 ((b/255 - 0.5) / 0.15 = f_dc),
  scale u8 (b/16 - 10 = log scale), rotation (v2: 3 bytes x y z as b/127.5 - 1, w >= 0 rebuilt;
  v3: u32 "smallest three"), SH u8 ((b - 128) / 128), coefficient-major. Values are in RUB.
  The file does not say its frame: the export writes RDF (PLY's) by default, RUB with
  ``--spz-frame rub``.
- PlayCanvas SOG v2 (splat-transform 3.7.0 ``readSogSourceV2``): a ZIP of ``meta.json`` and RGBA
  WebP images, texel i = Gaussian i. Centres: 16 bits (means_u high byte, means_l low) lerped
  between ``means.mins`` / ``maxs`` of t = sign(x) ln(|x| + 1), then inverted. Rotation: quats.webp
  RGB three components (p / 255 * 2 - 1) / sqrt(2) in w, x, y, z order skipping the one named by
  alpha - 252, which is rebuilt >= 0. Scales: scales.webp RGB index ``scales.codebook``; sh0.webp
  RGB index ``sh0.codebook`` (f_dc), alpha / 255 = opacity. shN: shN_labels.webp R + 256 G picks a
  palette entry (``shN.count`` of them, 64 a row in shN_centroids.webp, one texel per
  coefficient, RGB index ``shN.codebook``). Codebooks decode as float32. Values in PLY's frame.
- glTF binary (glTF 2.0 spec, GLB container) with ``KHR_gaussian_splatting`` attributes; values in
  glTF's frame (LUF).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import struct
import zipfile
from pathlib import Path

import numpy as np
import torch

SH_C0 = 0.28209479177387814
RDF = np.array([1.0, 1.0, 1.0])  # the model's frame, PLY's: SPZ's default and SOG's
RUB = np.array([1.0, -1.0, -1.0])  # SPZ with --spz-frame rub, seen from RDF: y and z flipped
LUF = np.array([-1.0, -1.0, 1.0])  # glTF's: x and y flipped
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
    colour = _lerp(
        np.stack([chunk[f"min_{a}"][ci] for a in "rgb"], 1), np.stack([chunk[f"max_{a}"][ci] for a in "rgb"], 1), t
    )
    alpha = _unorm(c, 8)

    r = vertex["packed_rotation"]
    norm = 1 / (math.sqrt(2) * 0.5)
    abc = np.stack(
        [(_unorm(r >> 20, 10) - 0.5) * norm, (_unorm(r >> 10, 10) - 0.5) * norm, (_unorm(r, 10) - 0.5) * norm], 1
    )
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


def read_spz(path: Path) -> dict:
    """Decoded SPZ (v2 or v3) values in the file's own frame: ``header`` (dict), means, log scales,
    quats (x, y, z, w as stored), alpha, f_dc ``[N, 3]``, shN ``[N, K-1, 3]``."""
    raw = gzip.decompress(Path(path).read_bytes())
    magic, version, n, degree, frac, flags, reserved = struct.unpack_from("<IIIBBBB", raw, 0)
    header = dict(magic=magic, version=version, n=n, degree=degree, frac=frac, flags=flags, reserved=reserved)
    assert magic == 0x5053474E and version in (2, 3), header
    k = (degree + 1) ** 2 - 1
    rot_bytes = 4 if version == 3 else 3
    sizes = {"pos": 9 * n, "alpha": n, "colour": 3 * n, "scale": 3 * n, "rot": rot_bytes * n, "sh": 3 * k * n}
    assert len(raw) == 16 + sum(sizes.values()), f"{path}: {len(raw)} bytes for {header}"
    blocks, off = {}, 16
    for name, size in sizes.items():
        blocks[name] = np.frombuffer(raw, np.uint8, size, off)
        off += size
    b = blocks["pos"].reshape(n, 3, 3).astype(np.int64)
    fixed = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
    fixed = np.where(fixed >= 1 << 23, fixed - (1 << 24), fixed)
    if version == 3:
        word = blocks["rot"].reshape(n, 4).astype(np.uint64) @ (np.array([1, 1 << 8, 1 << 16, 1 << 24], np.uint64))
        largest = (word >> np.uint64(30)).astype(np.int64)
        quats = np.zeros((n, 4))
        shift = 20
        for slot in range(3):  # the other components, lowest index in the highest bits
            idx = np.array([[j for j in range(4) if j != m][slot] for m in largest])
            v = ((word >> np.uint64(shift)) & np.uint64(0x3FF)).astype(np.int64)
            mag = (v & 0x1FF) / 511 * math.sqrt(0.5)
            quats[np.arange(n), idx] = np.where(v & 0x200, -mag, mag)
            shift -= 10
        quats[np.arange(n), largest] = np.sqrt(np.maximum(0, 1 - (quats**2).sum(1)))
    else:
        xyz = blocks["rot"].reshape(n, 3) / 127.5 - 1
        quats = np.concatenate([xyz, np.sqrt(np.maximum(0, 1 - (xyz**2).sum(1, keepdims=True)))], 1)
    return {
        "header": header,
        "means": fixed / float(1 << frac),
        "alpha": blocks["alpha"] / 255.0,
        "f_dc": (blocks["colour"].reshape(n, 3) / 255.0 - 0.5) / 0.15,
        "scales": blocks["scale"].reshape(n, 3) / 16.0 - 10,
        "quats": quats,
        "shN": (blocks["sh"].reshape(n, k, 3).astype(np.float64) - 128) / 128,
    }


GLTF_COMPONENTS = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}


def read_glb(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """A ``.glb``'s JSON and each attribute of its first primitive as float32 ``[N, components]``."""
    data = Path(path).read_bytes()
    magic, version, length = struct.unpack_from("<III", data, 0)
    assert magic == 0x46546C67 and version == 2 and length == len(data), (magic, version, length, len(data))
    json_len, json_type = struct.unpack_from("<II", data, 12)
    assert json_type == 0x4E4F534A and json_len % 4 == 0
    gltf = json.loads(data[20 : 20 + json_len])
    bin_off = 20 + json_len
    bin_len, bin_type = struct.unpack_from("<II", data, bin_off)
    assert bin_type == 0x004E4942 and bin_off + 8 + bin_len == len(data)
    binary = data[bin_off + 8 :]
    attrs = {}
    for name, i in gltf["meshes"][0]["primitives"][0]["attributes"].items():
        acc = gltf["accessors"][i]
        view = gltf["bufferViews"][acc["bufferView"]]
        assert acc["componentType"] == 5126, f"{name}: not float"  # all this exporter writes
        comps = GLTF_COMPONENTS[acc["type"]]
        start = view["byteOffset"] + acc.get("byteOffset", 0)
        assert start % 4 == 0 and view.get("byteStride", 4 * comps) == 4 * comps
        attrs[name] = np.frombuffer(binary, "<f4", acc["count"] * comps, start).reshape(acc["count"], comps)
        assert view["byteOffset"] + view["byteLength"] <= gltf["buffers"][0]["byteLength"] <= bin_len
    return gltf, attrs


def sh_basis(d: np.ndarray) -> np.ndarray:
    """The 15 real SH basis functions of degrees 1-3 (INRIA / gsplat order, their constants) at unit
    directions ``d [M, 3]``."""
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    return np.stack(
        [
            -0.4886025119029199 * y,
            0.4886025119029199 * z,
            -0.4886025119029199 * x,
            1.0925484305920792 * x * y,
            -1.0925484305920792 * y * z,
            0.31539156525252005 * (2 * zz - xx - yy),
            -1.0925484305920792 * x * z,
            0.5462742152960396 * (xx - yy),
            -0.5900435899266435 * y * (3 * xx - yy),
            2.890611442640554 * x * y * z,
            -0.4570457994644658 * y * (4 * zz - xx - yy),
            0.3731763325901154 * z * (2 * zz - 3 * xx - 3 * yy),
            -0.4570457994644658 * x * (4 * zz - xx - yy),
            1.445305721320277 * z * (xx - yy),
            -0.5900435899266435 * x * (xx - 3 * yy),
        ],
        axis=1,
    )


def sh_flip_factors(signs: tuple[float, float, float]) -> np.ndarray:
    """``[15]``: a_k' = f_k a_k keeps the colour seen from every direction when positions are
    multiplied by ``signs`` (the basis evaluated at flipped and original directions)."""
    d = np.random.default_rng(0).normal(size=(64, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    ratio = sh_basis(d * np.asarray(signs)) / sh_basis(d)
    assert np.allclose(ratio, ratio[0]), "a flip maps each basis function to +-itself"
    return np.round(ratio[0])


def rotation_matrices(q_wxyz: np.ndarray) -> np.ndarray:
    """``[N, 3, 3]`` rotations of (normalised) quaternions w, x, y, z."""
    q = q_wxyz / np.linalg.norm(q_wxyz, axis=1, keepdims=True)
    w, x, y, z = q.T
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        1,
    )


def read_sog(path: Path) -> dict:
    """Decoded SOG values: ``meta`` (meta.json), ``images`` ({name: [H, W, 4] uint8}), ``stored``
    (every archive entry is stored, not deflated), means, quats (w, x, y, z), log scales, alpha,
    f_dc ``[N, 3]``, ``labels`` (palette entry per Gaussian), ``palette`` ``[K, C, 3]`` and shN
    ``[N, C, 3]``."""
    from PIL import Image

    archive = zipfile.ZipFile(path)
    meta = json.loads(archive.read("meta.json"))
    assert meta["version"] == 2, meta.get("version")
    n = meta["count"]
    images = {}
    for name in [f for key in ("means", "quats", "scales", "sh0", "shN") if key in meta for f in meta[key]["files"]]:
        images[name] = np.asarray(Image.open(io.BytesIO(archive.read(name))).convert("RGBA"))
    tex = {name: im.reshape(-1, 4)[:n].astype(np.int64) for name, im in images.items()}
    lo, hi = np.array(meta["means"]["mins"]), np.array(meta["means"]["maxs"])
    t = lo + (hi - lo) * (tex["means_l.webp"][:, :3] + 256 * tex["means_u.webp"][:, :3]) / 65535
    quats = np.zeros((n, 4))
    for i, (a, b, c, tag) in enumerate(tex["quats.webp"]):
        largest = tag - 252
        assert 0 <= largest <= 3, tag
        kept = [j for j in range(4) if j != largest]
        quats[i, kept] = (np.array([a, b, c]) / 255 * 2 - 1) / math.sqrt(2)
        quats[i, largest] = math.sqrt(max(0.0, 1 - (quats[i, kept] ** 2).sum()))
    out = {
        "meta": meta,
        "images": images,
        "stored": all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist()),
        "means": np.sign(t) * (np.exp(np.abs(t)) - 1),
        "quats": quats,
        "scales": np.float32(meta["scales"]["codebook"])[tex["scales.webp"][:, :3]],
        "alpha": tex["sh0.webp"][:, 3] / 255,
        "f_dc": np.float32(meta["sh0"]["codebook"])[tex["sh0.webp"][:, :3]],
        "labels": np.zeros(n, np.int64),
        "palette": np.zeros((0, 0, 3), np.float32),
        "shN": np.zeros((n, 0, 3)),
    }
    if "shN" in meta:
        coeffs = {1: 3, 2: 8, 3: 15}[meta["shN"]["bands"]]
        count = meta["shN"]["count"]
        cen = images["shN_centroids.webp"]
        assert cen.shape[1] == 64 * coeffs and cen.shape[0] == -(-count // 64), cen.shape
        entries = cen.reshape(-1, 4)[: count * coeffs, :3].astype(np.int64).reshape(count, coeffs, 3)
        out["palette"] = np.float32(meta["shN"]["codebook"])[entries]
        out["labels"] = tex["shN_labels.webp"][:, 0] + 256 * tex["shN_labels.webp"][:, 1]
        assert out["labels"].max() < count
        out["shN"] = out["palette"][out["labels"]]
    return out
