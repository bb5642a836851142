"""Builders of tiny scenes on disk for the data tests (kept here so each test states only what differs)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pycolmap
import torch

from pointrix_lite.data.cameras import Camera, View, blender_c2w_from_viewmat
from pointrix_lite.io.images import write_png


def tree_hash(root: Path) -> str:
    """SHA-256 over every file's relative path and bytes below ``root``: equal hashes, identical trees."""
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def random_w2c(rng: np.random.Generator) -> np.ndarray:
    w2c = np.eye(4)
    w2c[:3, :3] = random_rotation(rng)
    w2c[:3, 3] = rng.normal(size=3)
    return w2c


def make_nerf_scene(
    root: Path,
    n_train: int = 3,
    n_test: int = 2,
    size: tuple[int, int] = (8, 6),
    rgba: bool = True,
    seed: int = 0,
    extension: bool = False,
    extra: dict | None = None,
) -> dict[str, list[np.ndarray]]:
    """Write ``transforms_{train,test}.json`` + random images; returns the raw images per split."""
    rng = np.random.default_rng(seed)
    w, h = size
    raw: dict[str, list[np.ndarray]] = {}
    for split, n in (("train", n_train), ("test", n_test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames, raw[split] = [], []
        for i in range(n):
            img = rng.integers(0, 256, size=(h, w, 4 if rgba else 3), dtype=np.uint8)
            write_png(root / split / f"r_{i}.png", img)
            raw[split].append(img)
            c2w = blender_c2w_from_viewmat(random_w2c(rng))
            path = f"./{split}/r_{i}" + (".png" if extension else "")
            frames.append({"file_path": path, "transform_matrix": c2w.tolist()})
        meta = {"camera_angle_x": 0.8, "frames": frames, **(extra or {})}
        (root / f"transforms_{split}.json").write_text(json.dumps(meta))
    return raw


def make_pycolmap_scene(
    root: Path,
    n: int = 10,
    size: tuple[int, int] = (8, 6),
    model: str = "PINHOLE",
    params: list[float] | None = None,
    binary: bool = True,
    seed: int = 0,
) -> pycolmap.Reconstruction:
    """A reconstruction written by pycolmap (the reference writer) plus random images of the camera's size."""
    rng = np.random.default_rng(seed)
    w, h = size
    defaults = {"PINHOLE": [9.0, 10.0, 4.1, 2.9], "SIMPLE_PINHOLE": [9.0, 4.0, 3.0]}
    params = params or defaults[model]
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(model=model, width=w, height=h, params=params, camera_id=1))
    (root / "images").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        w2c = random_w2c(rng)
        pose = pycolmap.Rigid3d(w2c[:3, :])
        rec.add_image_with_trivial_frame(pycolmap.Image(name=f"im_{i:02d}.png", camera_id=1, image_id=i + 1), pose)
        write_png(root / "images" / f"im_{i:02d}.png", rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))
    for _ in range(20):
        rec.add_point3D(rng.normal(size=3), pycolmap.Track(), rng.integers(0, 256, size=3).astype(np.uint8))
    sparse = root / "sparse" / "0"
    sparse.mkdir(parents=True, exist_ok=True)
    (rec.write_binary if binary else rec.write_text)(str(sparse))
    return rec


def pycolmap_viewmat(rec: pycolmap.Reconstruction, name: str) -> np.ndarray:
    m = np.eye(4)
    m[:3, :] = rec.find_image_with_name(name).cam_from_world().matrix()
    return m


class FakeDataset:
    """Just ``train_views``: what DataPipeline needs."""

    def __init__(self, n: int) -> None:
        cam = Camera(1.0, 1.0, 1.0, 1.0, 2, 2, torch.eye(4))
        self.train_views = [View(cam, torch.full((2, 2, 3), i, dtype=torch.uint8), f"v{i}", i) for i in range(n)]
