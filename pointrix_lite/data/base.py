"""What every dataset shares: the contract's attributes, split checks and the demo-scene hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import OptionError
from ..errors import DataError
from ..io.images import composite, read_image
from .cameras import View, scaled_size, scene_extent
from .pointcloud import PointCloud

WHITE = (1.0, 1.0, 1.0)
BLACK = (0.0, 0.0, 0.0)


MIN_SIDE = 16  # pixels a training image keeps on each side at the least (one tile of the renderer)


def check_scene_options(config: Any) -> None:
    """The options every dataset's ``Config`` shares, checked in its ``__post_init__`` (so when the
    config loads, not after images have been read)."""
    if config.scale != "auto" and not config.scale > 0:
        raise OptionError("scale", f"must be positive or auto, got {config.scale}", "dataset")
    if config.scale != "auto" and config.scale < 1 and not getattr(config, "upsample", False):
        raise OptionError(
            "scale",
            f"{config.scale:g} would upsample the images {1 / config.scale:g}x (the scale divides their size: "
            "2 = half); set dataset.upsample=true to train above the images' size",
            "dataset",
        )
    if config.max_points < 0:
        raise OptionError("max_points", f"must be >= 0 (0 = all), got {config.max_points}", "dataset")


def mean_colour(views: list[View]) -> tuple[float, float, float]:
    """The mean RGB in [0, 1] of ``views``' pixels, each view's masked-out pixels left out.

    A background for photos (``mean_background``): a render shows the background where no Gaussian
    covers the view, which in a held-out view is what no training view saw. Black there costs the
    square of the scene's brightness per pixel; the mean colour is the constant with the least squared
    error over the training pixels, so the guess a test view is least wrong with.
    """
    total, count = torch.zeros(3, dtype=torch.float64), 0
    for view in views:
        pixels = view.image.reshape(-1, 3)
        if view.mask is not None:
            pixels = pixels[view.mask.reshape(-1)]
        total += pixels.sum(dim=0, dtype=torch.float64)
        count += len(pixels)
    if count == 0:
        return BLACK
    r, g, b = (total / (255.0 * count)).tolist()
    return (r, g, b)


class SceneDataset:
    """Base for registered datasets; subclasses load views then call :meth:`_finish`.

    Attributes:
        train_views, val_views, test_views: Lists of :class:`View` (val/test empty when ``eval`` is off).
        point_cloud: Initial :class:`PointCloud` (None only if a dataset has no way to make one).
        scene_extent: INRIA ``getNerfppNorm`` radius over the training cameras.
        background: RGB in [0, 1] that transparent pixels were composited on and renders are drawn on
            (``mean_background``: drawn on the training images' mean colour, :func:`mean_colour`).
        transparent: The first image read that had transparent pixels, else None. Their colour
            is then the background's, so a training step on another background
            (``trainer.random_background``) would teach the scene that colour.
    """

    train_views: list[View]
    val_views: list[View]
    test_views: list[View]
    point_cloud: PointCloud | None
    scene_extent: float
    background: tuple[float, float, float]
    transparent: Path | None = None

    def _read_rgb(self, path: Path) -> np.ndarray:
        """``path`` as [H, W, 3] uint8, any transparency composited on the background (noted in
        ``transparent``). Callers downscale after this: averaging straight-alpha RGBA would bleed the
        arbitrary colour of transparent pixels into edges, while averaging composited pixels is what a
        camera at the lower resolution sees. Safe from :func:`load_all`'s threads: they only ever set
        the same kind of value."""
        image = read_image(path)
        if self.transparent is None and image.shape[-1] == 4 and bool((image[..., 3] < 255).any()):
            self.transparent = path
        return composite(image, self.background)

    def _open(self, config: Any, device: Any = "cpu") -> Path:
        """What every dataset does first: set the background and return the data folder (generating
        the demo scene there if it is the demo's path). ``device``: where training runs, for the
        ``scale: auto`` rule (``data/resolution.py``)."""
        self.config = config
        self.device = str(device)
        self._scale: float | None = None if config.scale == "auto" else float(config.scale)
        root = require_dir(Path(config.data_path))
        self.background = WHITE if config.white_background else BLACK
        return root

    @property
    def scale_used(self) -> float | None:
        """The downscale factor the views were loaded at (``auto`` resolved), None before any image size was known."""
        return self._scale

    def _scale_for(self, width: int, height: int) -> float:
        """The downscale factor of every view: ``dataset.scale``, or for ``auto`` the rule of
        ``resolution.py`` applied to the first (largest, where known) image size, announced once."""
        if self._scale is None:
            from ..progress import console
            from .resolution import auto_scale, describe

            self._scale = float(auto_scale(width, height, self.device))
            console().print(describe(width, height, self._scale, device=self.device), markup=False)
        w, h = scaled_size(width, height, self._scale)
        # The factor's doing only: images that are smaller than that already (test fixtures) load as they are.
        if self._scale > 1 and min(w, h) < MIN_SIDE <= min(width, height):
            raise OptionError(
                "scale",
                f"{self._scale:g} leaves {w}x{h} px of the {width}x{height} images, fewer than {MIN_SIDE} on a side; "
                f"at most {max(1, min(width, height) // MIN_SIDE)} keeps {MIN_SIDE}",
                "dataset",
            )
        return self._scale

    def _finish(
        self,
        train: list[View],
        val: list[View],
        test: list[View],
        point_cloud: PointCloud | None,
        source: Path,
        need_test: bool,
    ) -> None:
        if not train:
            raise DataError(f"{source}: the training split is empty")
        if need_test and not test:
            raise DataError(f"{source}: the test split is empty (set eval: false to train on every view)")
        if point_cloud is not None and len(point_cloud) == 0:
            raise DataError(f"{source}: the initial point cloud is empty")
        for split in (train, val, test):
            for i, v in enumerate(split):
                v.index = i
        self.train_views, self.val_views, self.test_views = train, val, test
        self.point_cloud = point_cloud
        self.scene_extent = scene_extent([v.camera for v in train])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(train={len(self.train_views)}, val={len(self.val_views)}, "
            f"test={len(self.test_views)}, points={len(self.point_cloud) if self.point_cloud else 0}, "
            f"extent={self.scene_extent:.3f})"
        )


def require_dir(path: Path, key: str = "dataset.data_path") -> Path:
    """Return ``path`` if it is a folder; generate the demo scene first if ``path`` is one of its layouts.

    The demo is recognised by its shape, ``.../demo/nerf_synthetic`` or ``.../demo/colmap``, so a config
    pointing at ``data/demo/...`` works on a fresh checkout without running ``scripts/make_demo.py``.
    """
    from .demo.make import LAYOUTS, ensure_demo  # local: the demo pulls in the ray caster

    if not path.exists() and path.parent.name == "demo" and path.name in LAYOUTS:
        ensure_demo(path.parent)
    if not path.is_dir():
        raise DataError(f"{key}: folder not found: {path}")
    return path
