"""Reader and writer for COLMAP sparse models (``cameras``, ``images``, ``points3D``; .bin or .txt).

Only what a splatting trainer needs is kept: camera models and parameters, image poses and names,
point positions and colours. 2D keypoints and tracks are skipped on read and written empty. COLMAP 3.12+
(and pycolmap 4) also write ``rigs`` and ``frames`` files; ``images`` still carries each image's composed
world-to-camera pose, so those files are not needed here.

Binary layout (little endian), from COLMAP's ``src/colmap/scene/reconstruction_io_binary.cc``:

* cameras.bin: u64 count, then per camera: i32 id, i32 model_id, u64 width, u64 height, f64 params[n].
* images.bin: u64 count, then per image: i32 id, f64 qw qx qy qz, f64 tx ty tz, i32 camera_id,
  NUL-terminated name, u64 n_points2D, n x (f64 x, f64 y, i64 point3D_id).
* points3D.bin: u64 count, then per point: i64 id, f64 xyz[3], u8 rgb[3], f64 error,
  u64 track_length, track_length x (i32 image_id, i32 point2D_idx).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError

# name -> (model_id, number of parameters); ids and counts from COLMAP's sensor/models.h.
CAMERA_MODELS: dict[str, tuple[int, int]] = {
    "SIMPLE_PINHOLE": (0, 3),
    "PINHOLE": (1, 4),
    "SIMPLE_RADIAL": (2, 4),
    "RADIAL": (3, 5),
    "OPENCV": (4, 8),
    "OPENCV_FISHEYE": (5, 8),
    "FULL_OPENCV": (6, 12),
    "FOV": (7, 5),
    "SIMPLE_RADIAL_FISHEYE": (8, 4),
    "RADIAL_FISHEYE": (9, 5),
    "THIN_PRISM_FISHEYE": (10, 12),
    "RAD_TAN_THIN_PRISM_FISHEYE": (11, 16),
    "SIMPLE_DIVISION": (12, 4),
    "DIVISION": (13, 5),
    "SIMPLE_FISHEYE": (14, 3),
    "FISHEYE": (15, 4),
    "EUCM": (16, 6),
    "EQUIRECTANGULAR": (17, 2),
}
MODEL_BY_ID = {mid: (name, n) for name, (mid, n) in CAMERA_MODELS.items()}


@dataclass
class ColmapCamera:
    id: int
    model: str
    width: int
    height: int
    params: np.ndarray  # [n] float64, in the model's order (PINHOLE: fx, fy, cx, cy)


@dataclass
class ColmapImage:
    id: int
    qvec: np.ndarray  # [4] float64 world-to-camera rotation, w x y z
    tvec: np.ndarray  # [3] float64 world-to-camera translation
    camera_id: int
    name: str


@dataclass
class ColmapModel:
    cameras: dict[int, ColmapCamera]
    images: dict[int, ColmapImage]
    xyz: np.ndarray  # [N, 3] float64
    rgb: np.ndarray  # [N, 3] uint8
    files: dict[str, Path]  # "cameras"/"images"/"points3D" -> the file read, for error messages


# ----------------------------------------------------------------------------------------- reading


class _Buffer:
    """Sequential little-endian reader that turns truncation into a DataError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = path.read_bytes()
        self.pos = 0

    def read(self, fmt: str) -> tuple:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.data):
            raise DataError(f"{self.path}: truncated COLMAP binary file")
        out = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return out

    def skip(self, nbytes: int) -> None:
        if self.pos + nbytes > len(self.data):
            raise DataError(f"{self.path}: truncated COLMAP binary file")
        self.pos += nbytes

    def cstring(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise DataError(f"{self.path}: truncated COLMAP binary file (unterminated image name)")
        s = self.data[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return s


def _read_cameras_bin(path: Path) -> dict[int, ColmapCamera]:
    buf = _Buffer(path)
    cams = {}
    for _ in range(buf.read("Q")[0]):
        cid, model_id, w, h = buf.read("iiQQ")
        if model_id not in MODEL_BY_ID:
            raise DataError(f"{path}: camera {cid} has unknown COLMAP model id {model_id}")
        name, n = MODEL_BY_ID[model_id]
        cams[cid] = ColmapCamera(cid, name, int(w), int(h), np.array(buf.read("d" * n)))
    return cams


def _read_images_bin(path: Path) -> dict[int, ColmapImage]:
    buf = _Buffer(path)
    images = {}
    for _ in range(buf.read("Q")[0]):
        iid, *pose, cam_id = buf.read("idddddddi")
        name = buf.cstring()
        buf.skip(buf.read("Q")[0] * 24)  # points2D: f64 x, f64 y, i64 id
        images[iid] = ColmapImage(iid, np.array(pose[:4]), np.array(pose[4:]), cam_id, name)
    return images


def _read_points_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    buf = _Buffer(path)
    n = buf.read("Q")[0]
    xyz, rgb = np.empty((n, 3)), np.empty((n, 3), np.uint8)
    for i in range(n):
        _, x, y, z, r, g, b, _err = buf.read("qdddBBBd")
        xyz[i], rgb[i] = (x, y, z), (r, g, b)
        buf.skip(buf.read("Q")[0] * 8)  # track: i32 image_id, i32 point2D_idx
    return xyz, rgb


def _data_lines(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip() and not line.lstrip().startswith("#")]


def _read_cameras_txt(path: Path) -> dict[int, ColmapCamera]:
    cams = {}
    for lineno, tok in enumerate(_data_lines(path)):
        try:
            cid, model, w, h = int(tok[0]), tok[1], int(tok[2]), int(tok[3])
            cams[cid] = ColmapCamera(cid, model, w, h, np.array([float(p) for p in tok[4:]]))
        except (ValueError, IndexError):
            raise DataError(f"{path}: malformed camera entry {lineno + 1}: {' '.join(tok)}") from None
    return cams


def _read_images_txt(path: Path) -> dict[int, ColmapImage]:
    # Two lines per image, the second (keypoints) may be empty -- so count raw lines, not data lines.
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if not line.lstrip().startswith("#")]
    images = {}
    for i in range(0, len(lines), 2):
        tok = lines[i].split()
        if not tok:
            continue
        try:
            iid, cam_id = int(tok[0]), int(tok[8])
            vals = np.array([float(v) for v in tok[1:8]])
            # Names may contain spaces: everything after the camera id is the name.
            name = lines[i].split(None, 9)[9].strip()
        except (ValueError, IndexError):
            raise DataError(f"{path}: malformed image entry: {lines[i].strip()}") from None
        images[iid] = ColmapImage(iid, vals[:4], vals[4:], cam_id, name)
    return images


def _read_points_txt(path: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = _data_lines(path)
    try:
        xyz = np.array([[float(v) for v in t[1:4]] for t in rows], dtype=np.float64).reshape(-1, 3)
        rgb = np.array([[int(v) for v in t[4:7]] for t in rows], dtype=np.uint8).reshape(-1, 3)
    except (ValueError, IndexError):
        raise DataError(f"{path}: malformed point entry") from None
    return xyz, rgb


def find_sparse_dir(root: Path) -> Path:
    """``root/sparse/0`` if it holds a model, else ``root/sparse``; DataError if neither does."""
    for cand in (root / "sparse" / "0", root / "sparse"):
        if any((cand / f"cameras{ext}").is_file() for ext in (".bin", ".txt")):
            return cand
    raise DataError(f"{root / 'sparse'}: no COLMAP model (cameras.bin or cameras.txt in sparse/0/ or sparse/)")


def read_model(sparse_dir: Path) -> ColmapModel:
    """Read a COLMAP model from ``sparse_dir``, preferring binary files when both forms exist."""
    ext = ".bin" if (sparse_dir / "cameras.bin").is_file() else ".txt"
    readers = {
        ".bin": (_read_cameras_bin, _read_images_bin, _read_points_bin),
        ".txt": (_read_cameras_txt, _read_images_txt, _read_points_txt),
    }[ext]
    files = {stem: sparse_dir / f"{stem}{ext}" for stem in ("cameras", "images", "points3D")}
    for p in files.values():
        if not p.is_file():
            raise DataError(f"{p}: COLMAP file not found")
    cams, images = readers[0](files["cameras"]), readers[1](files["images"])
    xyz, rgb = readers[2](files["points3D"])
    return ColmapModel(cams, images, xyz, rgb, files)


# ----------------------------------------------------------------------------------------- writing


def write_model(model: ColmapModel, sparse_dir: Path, binary: bool = True) -> None:
    """Write ``model`` (no keypoints, empty tracks) as COLMAP ``.bin`` or ``.txt`` files."""
    sparse_dir.mkdir(parents=True, exist_ok=True)
    (_write_bin if binary else _write_txt)(model, sparse_dir)


def _write_bin(model: ColmapModel, d: Path) -> None:
    out = [struct.pack("<Q", len(model.cameras))]
    for c in model.cameras.values():
        out.append(struct.pack("<iiQQ", c.id, CAMERA_MODELS[c.model][0], c.width, c.height))
        out.append(struct.pack(f"<{len(c.params)}d", *c.params))
    (d / "cameras.bin").write_bytes(b"".join(out))
    out = [struct.pack("<Q", len(model.images))]
    for im in model.images.values():
        out.append(struct.pack("<idddddddi", im.id, *im.qvec, *im.tvec, im.camera_id))
        out.append(im.name.encode("utf-8") + b"\x00" + struct.pack("<Q", 0))
    (d / "images.bin").write_bytes(b"".join(out))
    out = [struct.pack("<Q", len(model.xyz))]
    for i, (p, c) in enumerate(zip(model.xyz, model.rgb)):
        out.append(struct.pack("<qdddBBBdQ", i + 1, *p, *(int(v) for v in c), 0.0, 0))
    (d / "points3D.bin").write_bytes(b"".join(out))


def _write_txt(model: ColmapModel, d: Path) -> None:
    def fmt(vals) -> str:
        return " ".join(repr(float(v)) for v in vals)

    with open(d / "cameras.txt", "w", encoding="utf-8") as f:
        f.write("# CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
        for c in model.cameras.values():
            f.write(f"{c.id} {c.model} {c.width} {c.height} {fmt(c.params)}\n")
    with open(d / "images.txt", "w", encoding="utf-8") as f:
        f.write("# IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n#   POINTS2D[] as (X, Y, POINT3D_ID)\n")
        for im in model.images.values():
            f.write(f"{im.id} {fmt(im.qvec)} {fmt(im.tvec)} {im.camera_id} {im.name}\n\n")
    with open(d / "points3D.txt", "w", encoding="utf-8") as f:
        f.write("# POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n")
        for i, (p, c) in enumerate(zip(model.xyz, model.rgb)):
            f.write(f"{i + 1} {fmt(p)} {int(c[0])} {int(c[1])} {int(c[2])} 0.0\n")
