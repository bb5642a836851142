"""dataset.scale: auto -- the rule, the images_N folder it picks, exact intrinsics, the one line it prints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from data_helpers import make_nerf_scene, make_pycolmap_scene

from pointrix_lite.data.resolution import LONG_SIDE_CAP, PIXEL_BUDGET, auto_scale
from pointrix_lite.errors import ConfigError
from pointrix_lite.io.images import write_png
from pointrix_lite.registry import DATASETS


@pytest.mark.parametrize(
    ("size", "factor"),
    [
        ((160, 160), 1),
        ((500, 500), 1),
        ((501, 500), 2),
        ((800, 800), 2),
        ((1920, 1080), 4),
        ((1080, 1920), 4),
        ((4000, 3000), 8),
        ((8000, 6000), 16),
        ((3300, 60), 4),
    ],  # the last: long side over 1600 px at 1/2
)
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
    assert (
        line.startswith("dataset.scale: auto -> 2: training at 500x300, 1/2 of the images' 1000x600")
        and "\n" not in line
    )
    cam = resized.train_views[0].camera
    assert (cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy) == (500, 300, 450.0, 455.0, 250.25, 149.75)
    # Held as uint8 (3 bytes a pixel): 300 photos of 1 MP stay under 1 GB (python -m benchmarks memory).
    assert all(v.image.shape == (300, 500, 3) and v.image.dtype == torch.uint8 for v in resized.train_views)

    (tmp_path / "images_2").mkdir()
    for i in range(3):
        write_png(tmp_path / "images_2" / f"im_{i:02d}.png", np.full((300, 500, 3), 7, np.uint8))
    pre = _colmap(tmp_path, scale="auto", test_every=100)
    assert int(pre.train_views[0].image.max()) == 7  # images_2, not a resize of images/
    got = pre.train_views[0].camera
    assert (got.width, got.height, got.fx, got.fy, got.cx, got.cy) == (
        cam.width,
        cam.height,
        cam.fx,
        cam.fy,
        cam.cx,
        cam.cy,
    )


def test_nerf_synthetic_auto_and_small_images_stay_full_size(tmp_path, capsys):
    make_nerf_scene(tmp_path / "big", size=(800, 800), rgba=False)
    big = DATASETS.build(
        {"type": "NerfSyntheticDataset", "data_path": str(tmp_path / "big"), "scale": "auto"}, "dataset"
    )
    assert {(v.camera.width, v.camera.height) for v in big.train_views + big.test_views} == {(400, 400)}
    assert capsys.readouterr().out.count("dataset.scale: auto -> 2") == 1  # announced once, not per split
    make_nerf_scene(tmp_path / "small", size=(8, 6))
    small = DATASETS.build(
        {"type": "NerfSyntheticDataset", "data_path": str(tmp_path / "small"), "scale": "auto"}, "dataset"
    )
    assert small.train_views[0].camera.width == 8 and "the images' full size" in capsys.readouterr().out


def test_bad_scale_values_are_one_line_errors(tmp_path):
    make_pycolmap_scene(tmp_path, n=2)
    with pytest.raises(ConfigError, match="dataset.scale"):
        _colmap(tmp_path, scale="half")
    with pytest.raises(ConfigError, match="dataset.scale: must be positive or auto, got -1"):
        _colmap(tmp_path, scale=-1)  # refused by the dataset's Config, before any image is read


@pytest.mark.parametrize(
    ("size", "factor"),
    [
        ((160, 160), 1),
        ((1600, 1200), 1),
        ((1536, 1024), 1),
        ((1920, 1080), 1.2),
        ((1080, 1920), 1.2),
        ((4000, 3000), 2.5),
    ],
)
def test_cuda_rule_is_inrias_long_side_cap(size, factor):
    """On CUDA: full size up to 1600 px on the long side, else long side / 1600 (INRIA); the CPU's
    pixel budget does not apply there, and any other device keeps the CPU rule."""
    assert auto_scale(*size, device="cuda") == pytest.approx(factor)
    assert auto_scale(*size, device="cuda:1") == pytest.approx(factor)
    assert auto_scale(*size, device="mps") == auto_scale(*size)
    long_side = max(round(size[0] / factor), round(size[1] / factor))
    assert long_side == min(max(size), LONG_SIDE_CAP)


def test_the_dataset_applies_the_rule_of_the_training_device(tmp_path, capsys):
    make_pycolmap_scene(tmp_path, n=3, size=(2000, 1000), params=[900.0, 910.0, 1000.0, 500.0])
    cfg = {"type": "ColmapDataset", "data_path": str(tmp_path), "scale": "auto", "test_every": 100}
    gpu = DATASETS.build(cfg, "dataset", device="cuda")
    line = capsys.readouterr().out.strip()
    assert line.startswith("dataset.scale: auto -> 1.25: training at 1600x800") and "INRIA's rule for a GPU" in line
    cam = gpu.train_views[0].camera
    assert (cam.width, cam.height, cam.fx, cam.cx) == (1600, 800, 720.0, 800.0)
    assert gpu.train_views[0].image.shape == (800, 1600, 3)
    cpu = DATASETS.build(cfg, "dataset")  # the default is the CPU's rule: 2000x1000 -> 1/4 (0.125 MP)
    assert cpu.train_views[0].camera.width == 500 and "sized for a CPU" in capsys.readouterr().out


def test_the_trainer_passes_its_device_to_the_dataset(monkeypatch):
    from pointrix_lite.engine.build import _dataset_kw

    assert _dataset_kw({"type": "ColmapDataset"}, torch.device("cuda")) == {"device": "cuda"}

    @DATASETS.register("NoDeviceDataset")
    class NoDevice:  # a custom dataset written before the keyword existed
        def __init__(self, config=None) -> None:
            pass

    try:
        assert _dataset_kw({"type": "NoDeviceDataset"}, torch.device("cuda")) == {}
    finally:
        DATASETS._table.pop("NoDeviceDataset")


def test_a_scale_below_one_needs_upsample_and_a_factor_must_leave_16_px(tmp_path):
    """Issue 47: a factor that cannot mean what it says is refused before any image is read."""
    make_pycolmap_scene(tmp_path, n=2, size=(200, 100))
    with pytest.raises(ConfigError, match=r"^dataset.scale: 0.25 would upsample the images 4x .*dataset.upsample=true"):
        _colmap(tmp_path, scale=0.25)
    up = _colmap(tmp_path, scale=0.5, upsample=True, test_every=100)  # asked for: trains at twice the size
    assert (up.train_views[0].camera.width, up.train_views[0].image.shape) == (400, (200, 400, 3))
    with pytest.raises(
        ConfigError,
        match=r"^dataset.scale: 8 leaves 25x12 px of the 200x100 images, fewer than 16 on a side; at most 6 keeps 16$",
    ):
        _colmap(tmp_path, scale=8)
    assert _colmap(tmp_path, scale=6, test_every=100).train_views[0].camera.height == 17  # 16 px or more is fine
    small = tmp_path / "small"  # images below 16 px already: the factor is not what makes them small
    make_pycolmap_scene(small, n=2, size=(8, 6))
    assert _colmap(small, scale=2, test_every=100).train_views[0].camera.width == 4
