"""``dataset.mean_background``: renders drawn on the training images' mean colour (masked pixels left out,
test views not read), refused beside ``white_background``, and a seeding cache made on another background
not read back (the sky shell leaves out directions of the background's colour)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import make_pycolmap_scene
from PIL import Image

from pointrix_lite.config import ConfigError
from pointrix_lite.data import seeding
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.registry import DATASETS


def colmap(root, **options):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(root), **options}, "dataset")


def test_the_background_is_the_mean_of_the_training_pixels_the_masks_keep(tmp_path) -> None:
    make_pycolmap_scene(tmp_path, n=6, size=(16, 12))
    rng = np.random.default_rng(3)
    keeps = {f"im_{i:02d}": rng.random((12, 16)) > 0.5 for i in (1, 2, 4)}  # im_05 has no mask: kept whole
    (tmp_path / "masks").mkdir()
    for name, keep in keeps.items():
        Image.fromarray(np.where(keep, 255, 0).astype(np.uint8), "L").save(tmp_path / "masks" / f"{name}.png")
    ds = colmap(tmp_path, test_every=3, mean_background=True)
    assert [v.name for v in ds.train_views] == ["im_01", "im_02", "im_04", "im_05"]
    pixels = []
    for name in ("im_01", "im_02", "im_04", "im_05"):
        image = np.asarray(Image.open(tmp_path / "images" / f"{name}.png").convert("RGB"), dtype=np.float64) / 255
        pixels.append(image[keeps[name]] if name in keeps else image.reshape(-1, 3))
    expected = np.concatenate(pixels).mean(axis=0)
    np.testing.assert_allclose(ds.background, expected, rtol=0, atol=1e-12)
    # the test views (im_00, im_03) are not read: another mean than all six images'
    every = np.concatenate(
        [np.asarray(Image.open(p).convert("RGB")).reshape(-1, 3) for p in sorted((tmp_path / "images").iterdir())]
    )
    assert not np.allclose(ds.background, every.mean(axis=0) / 255, atol=1e-4)
    assert colmap(tmp_path, test_every=3).background == (0.0, 0.0, 0.0)  # off: black, as before


def test_mean_and_white_background_together_are_one_line(tmp_path) -> None:
    make_pycolmap_scene(tmp_path)
    with pytest.raises(ConfigError, match=r"^dataset\.mean_background: .*white_background.*: set one$"):
        colmap(tmp_path, mean_background=True, white_background=True)


def test_a_seeding_cache_made_on_another_background_is_made_again(tmp_path, monkeypatch) -> None:
    made: list[tuple[float, ...]] = []

    def record_background(cloud, dataset, cfg, seed=0, log=None):
        made.append(tuple(dataset.background))
        return PointCloud(torch.cat([cloud.xyz, torch.zeros(1, 3)]), torch.cat([cloud.rgb, torch.zeros(1, 3)]))

    monkeypatch.setattr(seeding, "seed_points", record_background)
    make_pycolmap_scene(tmp_path / "scene")
    exp = tmp_path / "exp"
    exp.mkdir()
    for mean in (False, True, True):
        seeding.seeded_cloud(colmap(tmp_path / "scene", mean_background=mean), seeding.SeedingConfig(mvs=True), 0, exp)
    assert len(made) == 2 and made[0] == (0.0, 0.0, 0.0) and made[1] != made[0]  # the third run read the cache
