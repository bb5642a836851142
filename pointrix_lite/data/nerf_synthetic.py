"""NeRF-synthetic / Blender layout: ``transforms_{train,val,test}.json`` plus images.

Each json holds ``frames`` with a ``file_path`` (extension optional) and a ``transform_matrix``
(camera-to-world, Blender/OpenGL axes). Intrinsics come from ``fl_x``/``fl_y``/``cx``/``cy``/``w``/``h``
when present (per frame overriding top level), else ``camera_angle_x`` with ``fy = fx`` and the principal
point at the image centre, as INRIA 3DGS reads them. Optional ``masks/`` mirrors the image paths
(``./train/r_0`` -> ``masks/train/r_0.png``, see ``data/masks.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import at_least
from ..errors import DataError
from ..io.images import downscale, find_image, load_all
from ..progress import phase
from ..registry import DATASETS
from .base import SceneDataset, check_scene_options
from .cameras import Camera, View, check_pose, focal_from_fov, viewmat_from_blender_c2w
from .masks import attach_mask, mask_folder, say_missing
from .pointcloud import random_cube, read_ply_points
from .resolution import Scale


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(f"{path}: transforms file not found")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: invalid JSON ({exc})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("frames"), list):
        raise DataError(f"{path}: missing key 'frames' (a list of frames)")
    return meta


def _number(meta: dict, frame: dict, key: str, where: str) -> float | None:
    value = frame.get(key, meta.get(key))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise DataError(f"{where}: key {key!r} must be a finite number, got {value!r}")
    return float(value)


@DATASETS.register()
class NerfSyntheticDataset(SceneDataset):
    """Blender-rendered scenes (``lego``, ...) and anything else in the ``transforms_*.json`` layout."""

    @dataclass
    class Config:
        data_path: str
        """Folder holding ``transforms_train.json``."""
        white_background: bool = True
        """Composite RGBA images on white (else black); also the render background."""
        scale: Scale = 1.0
        """Downscale factor (2 = half resolution), applied on load with an area filter; ``auto``:
        the rule of ``data/resolution.py`` for the training device (at most 0.25 MP per image on the
        CPU, 1600 px on the long side on CUDA)."""
        upsample: bool = False
        """Allow ``scale`` below 1 (training above the images' own size); refused otherwise."""
        eval: bool = True
        """Hold out the test split; off = train on train + test views."""
        random_init_points: int = 100_000
        """Points in the random init cube when there is no ``points3d.ply``."""
        max_points: int = 0
        """Subsample the initial point cloud to at most this many points (0 = all)."""
        seed: int = 0
        """Seed of the random init cloud and of subsampling."""

        def __post_init__(self) -> None:
            check_scene_options(self)
            at_least(self, 1, "random_init_points", home="dataset")

    def __init__(self, config: Config, device: str = "cpu") -> None:
        root = self._open(config, device)
        masks = mask_folder(root)  # training views only: metrics judge the whole image, as nerfstudio's
        self._unmasked: list[str] = []  # training images the mask folder has no mask of (kept whole)
        train = self._load_split(root / "transforms_train.json", masks)
        test = self._load_split(root / "transforms_test.json") if config.eval else []
        val_json = root / "transforms_val.json"
        # NeRF-synthetic ships a val split; layouts without one (ours, many converters) validate on test.
        val = self._load_split(val_json) if config.eval and val_json.is_file() else list(test)
        if not config.eval and (root / "transforms_test.json").is_file():
            train += self._load_split(root / "transforms_test.json", masks)
        if masks is not None:
            say_missing(masks, self._unmasked, len(train))
        ply = root / "points3d.ply"
        cloud = read_ply_points(ply) if ply.is_file() else random_cube(config.random_init_points, seed=config.seed)
        self._finish(train, val, test, cloud.subsample(config.max_points, config.seed), root, config.eval)

    def _load_split(self, path: Path, masks: Path | None = None) -> list[View]:
        meta = _read_json(path)
        frames = list(enumerate(meta["frames"]))
        for k, frame in frames:
            where = f"{path} frames[{k}]"
            if not isinstance(frame, dict) or "file_path" not in frame:
                raise DataError(f"{where}: missing key 'file_path'")
            if "transform_matrix" not in frame:
                raise DataError(f"{where}: missing key 'transform_matrix'")

        def load(item: tuple[int, dict]) -> View:
            return self._load_frame(meta, item[1], path.parent, f"{path} frames[{item[0]}]", masks)

        with phase("loading images", total=len(frames), unit="images") as advance:
            return load_all(frames, load, advance)

    def _load_frame(self, meta: dict, frame: dict, root: Path, where: str, masks: Path | None) -> View:
        try:
            c2w = np.array(frame["transform_matrix"], dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"{where}: 'transform_matrix' is not a numeric matrix") from None
        if c2w.shape == (3, 4):
            c2w = np.vstack([c2w, [0.0, 0.0, 0.0, 1.0]])
        if c2w.shape != (4, 4):
            raise DataError(f"{where}: 'transform_matrix' must be 4x4, got shape {c2w.shape}")
        check_pose(c2w, where)

        path = find_image(root / str(frame["file_path"]))
        image = self._read_rgb(path)
        height, width = image.shape[:2]
        w, h = _number(meta, frame, "w", where), _number(meta, frame, "h", where)
        if (w is not None and int(w) != width) or (h is not None and int(h) != height):
            raise DataError(f"{path}: image is {width}x{height} but the camera says {w:g}x{h:g}")

        fx, fy = _number(meta, frame, "fl_x", where), _number(meta, frame, "fl_y", where)
        if fx is None:
            angle_x = _number(meta, frame, "camera_angle_x", where)
            if angle_x is None:
                raise DataError(f"{where}: missing key 'camera_angle_x' (or 'fl_x')")
            fx = focal_from_fov(angle_x, width)
        if fy is None:
            angle_y = _number(meta, frame, "camera_angle_y", where)
            fy = focal_from_fov(angle_y, height) if angle_y is not None else fx
        cx, cy = _number(meta, frame, "cx", where), _number(meta, frame, "cy", where)
        viewmat = torch.from_numpy(viewmat_from_blender_c2w(c2w)).float()
        name = Path(str(frame["file_path"])).stem
        camera = Camera(
            fx, fy, width / 2 if cx is None else cx, height / 2 if cy is None else cy, width, height, viewmat, name
        )
        scale = self._scale_for(width, height)
        if scale != 1.0:
            camera = camera.scaled(scale)
            image = downscale(image, camera.width, camera.height)
        view = View(camera, torch.from_numpy(image), name, 0)
        if masks is not None:
            if not path.is_relative_to(root) or ".." in path.relative_to(root).parts:
                raise DataError(f"{path}: image lies outside {root}, so masks/ cannot mirror its path")
            if not attach_mask(view, masks, path.relative_to(root), (width, height)):
                self._unmasked.append(str(path.relative_to(root)))
        return view
