"""COLMAP layout: ``images/`` plus a sparse model in ``sparse/0/`` (or ``sparse/``), binary or text;
optionally ``masks/`` (``data/masks.py``).

Only undistorted pinhole cameras are accepted (what ``colmap image_undistorter`` writes): splatting
renders through an ideal pinhole, so treating a distorted camera as pinhole would silently blur the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ..config import OptionError, at_least
from ..errors import DataError
from ..io.colmap import ColmapCamera, ColmapImage, ColmapModel, find_sparse_dir, read_model
from ..io.images import downscale, find_image, load_all
from ..progress import phase
from ..registry import DATASETS
from .base import SceneDataset, check_scene_options, mean_colour
from .cameras import Camera, View, check_pose, viewmat_from_colmap
from .masks import attach_mask, mask_folder, say_missing
from .orientation import orient_to_axes
from .pointcloud import PointCloud
from .resolution import Scale
from .undistorted import needs_undistortion, undistorted_scene

PREDOWNSCALED = (2, 4, 8)  # INRIA/Mip-NeRF 360 ship images_2, images_4, images_8


def pinhole_intrinsics(cam: ColmapCamera, cameras_file: Path) -> tuple[float, float, float, float]:
    """``(fx, fy, cx, cy)`` of a PINHOLE or SIMPLE_PINHOLE camera; DataError for any other model."""
    p = [float(v) for v in cam.params]
    if cam.model == "PINHOLE" and len(p) == 4:
        return p[0], p[1], p[2], p[3]
    if cam.model == "SIMPLE_PINHOLE" and len(p) == 3:
        return p[0], p[0], p[1], p[2]
    raise DataError(
        f"{cameras_file}: camera {cam.id} uses model {cam.model}, which has lens distortion or is not a "
        "pinhole; only PINHOLE and SIMPLE_PINHOLE are supported -- undistort with colmap image_undistorter"
    )


@DATASETS.register()
class ColmapDataset(SceneDataset):
    """A COLMAP reconstruction of real photos (Mip-NeRF 360, Tanks and Temples, your own captures)."""

    @dataclass
    class Config:
        data_path: str
        """Folder holding ``images/`` and ``sparse/``."""
        images: str = "images"
        """Name of the image folder inside ``data_path``."""
        white_background: bool = False
        """Render (and composite any RGBA images) on white instead of black."""
        mean_background: bool = False
        """Render on the training images' mean colour instead (``data/base.py``, :func:`mean_colour`): where
        no Gaussian covers a view (what no training view saw), the render shows the best constant guess."""
        scale: Scale = 1.0
        """Downscale factor; ``images_<scale>/`` is used when it exists, else images are resized on
        load. ``auto``: the rule of ``data/resolution.py`` for the training device (at most 0.25 MP per image
        on the CPU, 1600 px on the long side on CUDA)."""
        upsample: bool = False
        """Allow ``scale`` below 1 (training above the images' own size); refused otherwise."""
        test_every: int = 8
        """Every n-th image, sorted by name, is a test view (INRIA's ``llffhold``)."""
        eval: bool = True
        """Hold out the test split; off = train on every image."""
        max_points: int = 0
        """Subsample the SfM point cloud to at most this many points (0 = all)."""
        seed: int = 0
        """Seed of point subsampling."""
        orientation: Literal["none", "manhattan"] = "none"
        """``manhattan``: turn the scene (cameras and points) so that most surface normals of the SfM
        points lie along the axes, where identity-initialised Gaussians start flat against them
        (``data/orientation.py``); renders the same images, and the model and its exports are then
        in the turned frame."""

        def __post_init__(self) -> None:
            check_scene_options(self)
            at_least(self, 1, "test_every", home="dataset")
            if self.mean_background and self.white_background:
                raise OptionError(
                    "mean_background", "cannot be true beside white_background (two backgrounds): set one", "dataset"
                )

    def __init__(self, config: Config, device: str = "cpu") -> None:
        root = self._open(config, device)
        sparse_dir = find_sparse_dir(root)
        model = read_model(sparse_dir)
        if needs_undistortion(model):  # read the undistorted copy instead, made once (data/undistorted.py)
            root = undistorted_scene(root, sparse_dir, model, config.images)
            model = read_model(find_sparse_dir(root))
        sizes = [(c.width, c.height) for c in model.cameras.values()]
        if sizes:
            self._scale_for(*max(sizes, key=lambda wh: wh[0] * wh[1]))  # the largest photo decides
        image_dir, prescaled = self._image_dir(root)

        by_name = sorted(model.images.values(), key=lambda im: im.name)
        with phase("loading images", total=len(by_name), unit="images") as advance:
            views = load_all(by_name, lambda im: self._load_view(model, im, image_dir, prescaled), advance)
        held_out = [config.eval and i % config.test_every == 0 for i in range(len(views))]
        test = [v for v, out in zip(views, held_out) if out]
        train = [v for v, out in zip(views, held_out) if not out]
        masks = mask_folder(root)
        if masks is not None:  # training views only: metrics judge the whole image, as nerfstudio's
            missing = [
                im.name
                for im, view, out in zip(by_name, views, held_out)
                if not out and not attach_mask(view, masks, Path(im.name), self._camera_size(model, im))
            ]
            say_missing(masks, missing, len(train))
        if len(model.xyz) == 0:
            raise DataError(f"{model.files['points3D']}: point cloud is empty")
        cloud = PointCloud.from_numpy(model.xyz, model.rgb.astype("float32") / 255.0)
        self.world_rotation = np.eye(3)  # aligned world = R @ COLMAP world
        if config.orientation == "manhattan":
            cloud, self.world_rotation = orient_to_axes(views, cloud)
        self._finish(train, list(test), test, cloud.subsample(config.max_points, config.seed), root, config.eval)
        if config.mean_background:
            self.background = mean_colour(train)

    @staticmethod
    def _camera_size(model: ColmapModel, im: ColmapImage) -> tuple[int, int]:
        """The full size of ``im``'s camera (masks may be stored at it)."""
        cam = model.cameras[im.camera_id]
        return cam.width, cam.height

    def _image_dir(self, root: Path) -> tuple[Path, bool]:
        s = self._scale if self._scale is not None else 1.0  # None: a model without cameras
        if float(s).is_integer() and int(s) in PREDOWNSCALED:
            folder = root / f"{self.config.images}_{int(s)}"
            if folder.is_dir():
                return folder, True
        folder = root / self.config.images
        if not folder.is_dir():
            raise DataError(f"{folder}: image folder not found")
        return folder, False

    def _load_view(self, model: ColmapModel, im: ColmapImage, image_dir: Path, prescaled: bool) -> View:
        if im.camera_id not in model.cameras:
            raise DataError(f"{model.files['images']}: image {im.name} refers to missing camera {im.camera_id}")
        cam = model.cameras[im.camera_id]
        fx, fy, cx, cy = pinhole_intrinsics(cam, model.files["cameras"])
        w2c = check_pose(viewmat_from_colmap(im.qvec, im.tvec), f"{model.files['images']} image {im.name}")
        name = Path(im.name).stem
        camera = Camera(fx, fy, cx, cy, cam.width, cam.height, torch.from_numpy(w2c).float(), name)

        path = find_image(image_dir / im.name)
        image = self._read_rgb(path)
        h, w = image.shape[:2]
        if prescaled:
            # Other tools round images_N sizes their own way; accept within a pixel and rescale K to match.
            s = self._scale
            if abs(w - cam.width / s) > 1 or abs(h - cam.height / s) > 1:
                raise DataError(
                    f"{path}: image is {w}x{h} but camera {cam.id} downscaled by {s:g} is "
                    f"{cam.width / s:g}x{cam.height / s:g}"
                )
            return View(camera.scaled(s, width=w, height=h), torch.from_numpy(image), name, 0)
        if (w, h) != (cam.width, cam.height):
            raise DataError(f"{path}: image is {w}x{h} but camera {cam.id} is {cam.width}x{cam.height}")
        if self._scale != 1.0:
            camera = camera.scaled(self._scale)
            image = downscale(image, camera.width, camera.height)
        return View(camera, torch.from_numpy(image), name, 0)
