"""nerfbaselines' training data set written as the COLMAP scene folder ``ColmapDataset`` reads.

nerfbaselines hands a method its data already loaded (undistorted to pinhole cameras when the method
asks for them, split into train and test, masks and colours as arrays). Writing it out as
``images/`` + ``sparse/0`` + ``masks/`` lets the project's own loader, and with it the shipped recipe's
data options (``scale: auto``, ``orientation``, seeding), read exactly what nerfbaselines chose.

The data set is a mapping (nerfbaselines' ``Dataset``); only these keys are read, so the module needs
no nerfbaselines import:

- ``cameras``: ``poses`` [N, 3, 4] camera-to-world (OpenCV axes), ``intrinsics`` [N, 4] (fx, fy, cx, cy;
  pixel centres at +0.5, as COLMAP), ``camera_models`` [N] (0 = pinhole), ``image_sizes`` [N, 2] (w, h)
- ``images``: N arrays [H, W, 3|4] uint8 (sRGB); ``masks`` (optional): N arrays [H, W] (nonzero = kept)
- ``image_paths`` / ``image_paths_root``: the images' files, for their names
- ``points3D_xyz`` [P, 3], ``points3D_rgb`` [P, 3] uint8 (optional: without them the cameras' box is
  filled with random points, nerfstudio's random init)
- ``metadata["background_color"]`` (optional): white makes the scene ``white_background``
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ...data.cameras import rotmat_to_qvec
from ...data.pointcloud import camera_box_points
from ...errors import DataError
from ...io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model
from ...io.images import write_png

PINHOLE = 0  # nerfbaselines' camera_model_to_int("pinhole"): the first of its CameraModel literals


def image_names(dataset: Mapping[str, Any]) -> list[str]:
    """Each image's path below ``image_paths_root`` (POSIX), suffix ``.png``: the names the scene uses."""
    root = dataset.get("image_paths_root")
    names = []
    for path in dataset["image_paths"]:
        rel = os.path.relpath(path, root) if root else os.path.basename(path)
        if rel.startswith(".."):
            rel = os.path.basename(path)
        names.append(str(PurePosixPath(Path(rel).as_posix()).with_suffix(".png")))
    if len(set(names)) != len(names):  # a.jpg and a.png: keep both, numbered in order
        names = [f"{i:05d}_{n}" for i, n in enumerate(names)]
    return names


def white_background(dataset: Mapping[str, Any]) -> bool:
    """Whether the data set's background colour (nerfbaselines' metadata) is white."""
    color = (dataset.get("metadata") or {}).get("background_color")
    return color is not None and bool(np.all(np.asarray(color) == 255))


def to_colmap(dataset: Mapping[str, Any], names: list[str]) -> ColmapModel:
    """The data set's cameras (one PINHOLE camera per image) and points as a COLMAP model."""
    cams = dataset["cameras"]
    poses = np.asarray(cams.poses, np.float64)
    intrinsics = np.asarray(cams.intrinsics, np.float64)
    sizes = np.asarray(cams.image_sizes)
    models = np.asarray(cams.camera_models)
    cameras: dict[int, ColmapCamera] = {}
    images: dict[int, ColmapImage] = {}
    for i, name in enumerate(names):
        if int(models[i]) != PINHOLE:
            raise DataError(f"image {name}: camera model {int(models[i])} is not pinhole (method asks for pinhole)")
        c2w = np.vstack([poses[i, :3, :4], [0.0, 0.0, 0.0, 1.0]])
        w2c = np.linalg.inv(c2w)
        cameras[i + 1] = ColmapCamera(i + 1, "PINHOLE", int(sizes[i, 0]), int(sizes[i, 1]), intrinsics[i].copy())
        images[i + 1] = ColmapImage(i + 1, rotmat_to_qvec(w2c[:3, :3]), w2c[:3, 3], i + 1, name)
    xyz = dataset.get("points3D_xyz")
    if xyz is not None and len(xyz):
        rgb = dataset.get("points3D_rgb")
        rgb = np.full((len(xyz), 3), 128, np.uint8) if rgb is None else np.asarray(rgb, np.uint8)
        xyz = np.asarray(xyz, np.float64)
    else:
        xyz, rgb = camera_box_points(images.values())
    return ColmapModel(cameras, images, xyz, rgb, {})


def write_scene(dataset: Mapping[str, Any], folder: Path) -> Path:
    """Write ``dataset`` into ``folder`` (``images/``, ``sparse/0/``, ``masks/`` when it has masks).

    Returns ``folder``. Raises DataError (one line, naming the image) for what the scene cannot hold:
    images that are not 8-bit, an image whose size is not its camera's.
    """
    names = image_names(dataset)
    model = to_colmap(dataset, names)
    masks = dataset.get("masks")
    for i, (name, image) in enumerate(zip(names, dataset["images"])):
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
            raise DataError(f"image {name}: {image.dtype} {image.shape}; the scene takes 8-bit RGB or RGBA images")
        cam = model.cameras[i + 1]
        if image.shape[:2] != (cam.height, cam.width):
            raise DataError(f"image {name}: {image.shape[1]}x{image.shape[0]}, its camera {cam.width}x{cam.height}")
        path = folder / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_png(path, image)
        if masks is not None and masks[i] is not None:
            mask = (np.asarray(masks[i]) > 0).astype(np.uint8) * 255
            mask_path = folder / "masks" / name
            mask_path.parent.mkdir(parents=True, exist_ok=True)
            write_png(mask_path, np.repeat(mask.reshape(mask.shape[0], mask.shape[1], 1), 3, axis=2))
    (folder / "sparse" / "0").mkdir(parents=True, exist_ok=True)
    write_model(model, folder / "sparse" / "0")
    return folder
