"""dataset.scale: auto -- the rule, the images_N folder it picks, exact intrinsics, the one line it prints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import make_nerf_scene, make_pycolmap_scene

from pointrix_lite.data.images import write_png
from pointrix_lite.data.resolution import LONG_SIDE_CAP, PIXEL_BUDGET, auto_scale
from pointrix_lite.errors import ConfigError
from pointrix_lite.registry import DATASETS


@pytest.mark.parametrize(
    ("size", "factor"),
    [((160, 160), 1), ((500, 500), 1), ((501, 500), 2), ((800, 800), 2), ((1920, 1080), 4), ((1080, 1920), 4),
     ((4000, 3000), 8), ((8000, 6000), 16), ((3300, 60), 4)],  # the last: long side over 1600 px at 1/2
)  # fmt: skip
def test_rule_is_the_smallest_factor_within_the_budget(size, factor):
    assert auto_scale(*size) == factor
    w, h = size[0] // factor, size[1] // factor
    assert w * h <= PIXEL_BUDGET and max(w, h) <= LONG_SIDE_CAP
    if factor > 1:  # the next smaller factor breaks the budget or the cap
        w, h = size[0] // (factor // 2), size[1] // (factor // 2)
        assert w * h > PIXEL_BUDGET or max(w, h) > LONG_SIDE_CAP


def _colmap(root, **options):
    return DATASETS.build({"type": "ColmapDataset", "data_path": str(root), **options}, "dataset")


def test_colmap_auto_uses_images_n_with_exact_intrinsics(tmp_path, capsys):
    make_pycolmap_scene(tmp_path, n=3, size=(1000, 600), params=[900.0, 910.0, 500.5, 299.5])
    resized = _colmap(tmp_path, scale="auto", test_every=100)
    line = capsys.readouterr().out.strip()
    assert line.startswith("dataset.scale: auto -> 2: training at 500x300, 1/2 of the images' 1000x600") and "\n" not in line
    cam = resized.train_views[0].camera
    assert (cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy) == (500, 300, 450.0, 455.0, 250.25, 149.75)
    # Held as uint8 (3 bytes a pixel): 300 photos of 1 MP stay under 1 GB (scripts/bench_memory.py).
    assert all(v.image.shape == (300, 500, 3) and v.image.dtype == torch.uint8 for v in resized.train_views)

    (tmp_path / "images_2").mkdir()
    for i in range(3):
        write_png(tmp_path / "images_2" / f"im_{i:02d}.png", np.full((300, 500, 3), 7, np.uint8))
    pre = _colmap(tmp_path, scale="auto", test_every=100)
    assert int(pre.train_views[0].image.max()) == 7  # images_2, not a resize of images/
    got = pre.train_views[0].camera
    assert (got.width, got.height, got.fx, got.fy, got.cx, got.cy) == (cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy)


def test_nerf_synthetic_auto_and_small_images_stay_full_size(tmp_path, capsys):
    make_nerf_scene(tmp_path / "big", size=(800, 800), rgba=False)
    big = DATASETS.build({"type": "NerfSyntheticDataset", "data_path": str(tmp_path / "big"), "scale": "auto"}, "dataset")
    assert {(v.camera.width, v.camera.height) for v in big.train_views + big.test_views} == {(400, 400)}
    assert capsys.readouterr().out.count("dataset.scale: auto -> 2") == 1  # announced once, not per split
    make_nerf_scene(tmp_path / "small", size=(8, 6))
    small = DATASETS.build({"type": "NerfSyntheticDataset", "data_path": str(tmp_path / "small"), "scale": "auto"}, "dataset")
    assert small.train_views[0].camera.width == 8 and "the images' full size" in capsys.readouterr().out


def test_bad_scale_values_are_one_line_errors(tmp_path):
    make_pycolmap_scene(tmp_path, n=2)
    with pytest.raises(ConfigError, match="dataset.scale"):
        _colmap(tmp_path, scale="half")
    with pytest.raises(ConfigError, match="dataset.scale: must be positive or auto, got -1"):
        _colmap(tmp_path, scale=-1)  # refused by the dataset's Config, before any image is read
