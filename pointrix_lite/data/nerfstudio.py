"""nerfstudio's ``transforms.json``: what ``ns-process-data``, Polycam, Record3D, KIRI and Metashape or
RealityCapture exports (through nerfstudio) write.

The file is turned into a COLMAP scene folder, ``<data>/colmap_from_transforms/`` (``sparse/0`` written
here, ``images`` a link to the data folder, ``masks/`` links to each frame's ``mask_path``), which
:class:`~pointrix_lite.data.colmap.ColmapDataset` then reads. So a transforms.json scene gets every rule a
COLMAP scene gets: distorted cameras undistorted at load (``data/undistorted.py``), the test split every
``test_every``-th image by name, masks, seeding, ``scale: auto``.

Fields honoured:

- ``camera_model``: ``PINHOLE``/``SIMPLE_PINHOLE``, ``OPENCV`` (``k1 k2 p1 p2``, and ``k3`` as
  FULL_OPENCV), ``OPENCV_FISHEYE`` (``k1..k4``); intrinsics ``fl_x fl_y cx cy w h`` and distortion
  globally or per frame (Record3D and Polycam write them per frame).
- ``transform_matrix``: camera-to-world in OpenGL axes (x right, y up, z back).
- ``applied_transform`` (3x4, what nerfstudio applied to COLMAP's world, also to ``ply_file_path``'s
  points): undone, so the scene is in the frame of the COLMAP model it came from, and trains as that
  model does.
- ``ply_file_path``: the initial points; without one, points are drawn in the cameras' region (said in
  a line), as nerfstudio's random init.
- ``mask_path`` per frame; ``depth_file_path`` is read by nothing here (said in a line).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model
from ..registry import DATASETS
from .cameras import rotmat_to_qvec
from .colmap import ColmapDataset
from .derived import derived_folder
from .pointcloud import camera_box_points, read_ply_points

TRANSFORMS = "transforms.json"
CACHE = "colmap_from_transforms"
VERSION = 1
GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])
INTRINSICS = ("fl_x", "fl_y", "cx", "cy", "w", "h")
DISTORTION = ("k1", "k2", "k3", "k4", "p1", "p2")


def _frame_camera(meta: dict, frame: dict, where: str) -> tuple[str, int, int, tuple[float, ...]]:
    """The COLMAP camera (model, width, height, params) of one frame, from its keys or the file's."""

    def get(key: str) -> float:
        value = frame.get(key, meta.get(key, 0.0 if key in DISTORTION else None))
        if value is None:
            raise DataError(f"{where}: no {key} (neither in the frame nor at the top of the file)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise DataError(f"{where}: {key} must be a number, got {str(value)[:40]!r}")
        return float(value)

    fx, fy, cx, cy, w, h = (get(k) for k in INTRINSICS)
    k1, k2, k3, k4, p1, p2 = (get(k) for k in DISTORTION)
    kind = str(frame.get("camera_model", meta.get("camera_model", "OPENCV"))).upper()
    if kind in ("PINHOLE", "SIMPLE_PINHOLE") or (kind == "OPENCV" and not any((k1, k2, k3, k4, p1, p2))):
        return "PINHOLE", int(w), int(h), (fx, fy, cx, cy)
    if kind == "OPENCV":
        if k4:
            raise DataError(f"{where}: OPENCV with k4 has no COLMAP counterpart (k4 is FULL_OPENCV's denominator)")
        if k3:
            return "FULL_OPENCV", int(w), int(h), (fx, fy, cx, cy, k1, k2, p1, p2, k3, 0.0, 0.0, 0.0)
        return "OPENCV", int(w), int(h), (fx, fy, cx, cy, k1, k2, p1, p2)
    if kind == "OPENCV_FISHEYE":
        return "OPENCV_FISHEYE", int(w), int(h), (fx, fy, cx, cy, k1, k2, k3, k4)
    raise DataError(f"{where}: camera_model {kind} is not read here (PINHOLE, OPENCV, OPENCV_FISHEYE)")


def _applied(meta: dict, path: Path) -> np.ndarray:
    """``applied_transform`` as 4x4 (identity when absent)."""
    out = np.eye(4)
    if "applied_transform" in meta:
        try:
            a = np.asarray(meta["applied_transform"], dtype=np.float64)
        except (TypeError, ValueError):
            a = np.zeros(0)
        if a.shape not in ((3, 4), (4, 4)) or not np.isfinite(a).all():
            raise DataError(f"{path}: applied_transform must be a 3x4 or 4x4 matrix of numbers")
        out[:3] = a[:3]
    return out


def transforms_to_model(path: Path, say: Any = print) -> tuple[ColmapModel, dict[str, Path]]:
    """The COLMAP model of a transforms.json (poses and points in the COLMAP frame ``applied_transform``
    came from) and ``{image name: mask file}``; image names are ``file_path`` relative to its folder."""
    root = path.parent
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    frames = meta.get("frames") if isinstance(meta, dict) else None
    if not isinstance(frames, list) or not frames:
        raise DataError(f"{path}: no frames")
    undo = np.linalg.inv(_applied(meta, path))
    cameras: dict[tuple, ColmapCamera] = {}
    images: dict[int, ColmapImage] = {}
    masks: dict[str, Path] = {}
    depths = 0
    for k, frame in enumerate(frames):
        where = f"{path} frames[{k}]"
        if not isinstance(frame, dict) or "file_path" not in frame:
            raise DataError(f"{where}: needs file_path and transform_matrix")
        key = _frame_camera(meta, frame, where)
        if key not in cameras:
            cameras[key] = ColmapCamera(len(cameras) + 1, key[0], key[1], key[2], np.asarray(key[3]))
        try:
            c2w = np.asarray(frame["transform_matrix"], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            c2w = np.zeros(0)
        if c2w.shape not in ((3, 4), (4, 4)) or not np.isfinite(c2w).all():
            raise DataError(f"{where}: transform_matrix must be a 4x4 (or 3x4) matrix of numbers")
        c2w = np.vstack([c2w[:3], [0.0, 0.0, 0.0, 1.0]])
        w2c = np.linalg.inv(undo @ c2w @ GL_TO_CV)
        name = Path(os.path.normpath(str(frame["file_path"]))).as_posix()
        if name.startswith("../") or Path(name).is_absolute():
            raise DataError(f"{where}: file_path {name} lies outside {root}")
        images[k + 1] = ColmapImage(k + 1, rotmat_to_qvec(w2c[:3, :3]), w2c[:3, 3], cameras[key].id, name)
        if frame.get("mask_path"):
            masks[name] = root / str(frame["mask_path"])
        depths += bool(frame.get("depth_file_path"))
    if depths:
        say(f"transforms.json: {depths} frames name a depth_file_path; depth is not used in training here")
    if meta.get("ply_file_path"):
        cloud = read_ply_points(root / str(meta["ply_file_path"]))
        xyz = cloud.xyz.double().numpy() @ undo[:3, :3].T + undo[:3, 3]
        rgb = (cloud.rgb.numpy() * 255.0).round().clip(0, 255).astype(np.uint8)
    else:  # nerfstudio's random init, in the region the cameras look into
        xyz, rgb = camera_box_points(images.values())
        say(f"transforms.json: no ply_file_path; {len(xyz):,} random points in the cameras' box start the model")
    files = {"cameras": path, "images": path, "points3D": path}
    return ColmapModel({c.id: c for c in cameras.values()}, images, xyz, rgb, files), masks


def colmap_scene(path: Path, say: Any = print) -> Path:
    """``<folder>/colmap_from_transforms``, the COLMAP scene of transforms.json ``path`` (made again when
    the file or its point cloud changed)."""
    root = path.parent

    def build(tmp: Path) -> None:
        model, masks = transforms_to_model(path, say)
        (tmp / "sparse" / "0").mkdir(parents=True)
        write_model(model, tmp / "sparse" / "0")
        os.symlink(os.path.relpath(root, tmp), tmp / "images")  # names are file_path, relative to root
        for name, mask in masks.items():
            link = (tmp / "masks" / name).with_suffix(".png" if mask.suffix.lower() == ".png" else mask.suffix)
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.abspath(mask), link)

    h = hashlib.sha1(f"v{VERSION}".encode() + path.read_bytes())
    try:
        ply_name = json.loads(path.read_text()).get("ply_file_path")
    except (ValueError, AttributeError):  # not readable as a mapping: the build says so, naming the file
        ply_name = None
    ply = root / str(ply_name or "")  # its points are copied into the scene: a new cloud makes it again
    if ply_name and ply.is_file():
        h.update(ply.read_bytes())
    digest = h.hexdigest()
    return derived_folder(root, CACHE, digest, build, f"the COLMAP scene of {path.name}")


@DATASETS.register()
class NerfstudioDataset(ColmapDataset):
    """nerfstudio's single ``transforms.json`` (``data_path``: its folder, or the file itself)."""

    @dataclass
    class Config(ColmapDataset.Config):
        pass

    def __init__(self, config: Config, device: str = "cpu") -> None:
        from ..progress import console

        path = Path(config.data_path)
        path = path if path.suffix == ".json" else path / TRANSFORMS
        if not path.is_file():
            raise DataError(f"{path}: not found (dataset.data_path: the folder holding nerfstudio's transforms.json)")
        scene = colmap_scene(path, lambda line: console().print(line, markup=False))
        super().__init__(replace(config, data_path=str(scene), images="images"), device)
