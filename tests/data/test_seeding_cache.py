"""``seed_points.npz``: read back for the same request on the same scene; computed again when the
seeding code changed, or when the experiment folder is reused on another scene: another data folder
with the same image names, other pixels in the same folder, another SfM model."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch
from data_helpers import make_pycolmap_scene

from pointrix_lite.data import seeding
from pointrix_lite.data.colmap import ColmapDataset
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.io.images import write_png


@pytest.fixture
def calls(monkeypatch) -> list[int]:
    """Replaces the sweep by one added point whose value counts the calls: the cache is tested."""
    made: list[int] = []

    def one_more_point(cloud, dataset, cfg, seed=0, log=None):
        made.append(len(made))
        extra = torch.full((1, 3), float(len(made)))
        return PointCloud(torch.cat([cloud.xyz, extra]), torch.cat([cloud.rgb, torch.zeros(1, 3)]))

    monkeypatch.setattr(seeding, "seed_points", one_more_point)
    return made


def _seeded(root, exp) -> float:
    """Seed the COLMAP scene at ``root`` with ``exp`` as the run folder; the added point's value."""
    dataset = ColmapDataset(ColmapDataset.Config(data_path=str(root)))
    return float(seeding.seeded_cloud(dataset, seeding.SeedingConfig(mvs=True), 0, exp).xyz[-1, 0])


def test_the_cache_is_read_back_unless_the_seeding_code_changed(tmp_path, calls, monkeypatch) -> None:
    make_pycolmap_scene(tmp_path / "scene")
    exp = tmp_path / "exp"
    exp.mkdir()
    assert _seeded(tmp_path / "scene", exp) == 1.0
    assert _seeded(tmp_path / "scene", exp) == 1.0 and len(calls) == 1  # the second run read the file
    with np.load(exp / seeding.CACHE_NAME) as kept:
        assert seeding.code_digest() in str(kept["key"])

    monkeypatch.setattr(seeding, "code_digest", lambda: "another build")
    assert _seeded(tmp_path / "scene", exp) == 2.0  # seeded again, not the old build's points
    assert _seeded(tmp_path / "scene", exp) == 2.0 and len(calls) == 2  # and kept


def _other_pixels(root, seed: int, keep_stat: bool = False) -> None:
    """Every image of ``root`` replaced by other pixels of the same size (``keep_stat``: mtimes put back)."""
    rng = np.random.default_rng(seed)
    for path in sorted((root / "images").iterdir()):
        before = path.stat()
        write_png(path, rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8))
        if keep_stat:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_another_scene_under_the_same_run_folder_is_seeded_again(tmp_path, calls) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    first = tmp_path / "first"
    make_pycolmap_scene(first)
    assert _seeded(first, exp) == 1.0

    # another data folder: the same image names and SfM model, other pixels
    second = tmp_path / "second"
    shutil.copytree(first / "sparse", second / "sparse")
    shutil.copytree(first / "images", second / "images")
    _other_pixels(second, seed=5)
    assert sorted(p.name for p in (second / "images").iterdir()) == sorted(p.name for p in (first / "images").iterdir())
    assert _seeded(second, exp) == 2.0

    # the same folder, its images rewritten in place with their mtimes put back: the pixels differ
    _other_pixels(second, seed=6, keep_stat=True)
    assert _seeded(second, exp) == 3.0

    # the same folder and images, another SfM model (other poses and points, same image names)
    make_pycolmap_scene(tmp_path / "other_model", seed=9)
    shutil.rmtree(second / "sparse")
    shutil.copytree(tmp_path / "other_model" / "sparse", second / "sparse")
    assert _seeded(second, exp) == 4.0

    # the same scene again: read back, the sweep does not run
    assert _seeded(second, exp) == 4.0 and len(calls) == 4


def test_the_scene_key_reads_no_image_and_ignores_the_run_folder_inside_the_data(tmp_path) -> None:
    make_pycolmap_scene(tmp_path / "scene")
    dataset = ColmapDataset(ColmapDataset.Config(data_path=str(tmp_path / "scene")))
    exp = tmp_path / "scene" / "outputs" / "run"  # a run folder inside the data folder
    key = seeding.scene_key(dataset, exp)
    assert key["data_path"] == str((tmp_path / "scene").resolve())
    exp.mkdir(parents=True)
    write_png(exp / "im_00.png", np.zeros((6, 8, 3), np.uint8))  # a render named like a view, in the run's folder
    assert seeding.scene_key(dataset, exp) == key
    os.utime(tmp_path / "scene" / "images" / "im_03.png", ns=(0, 10**9))  # touched: stat changes, pixels not
    assert seeding.scene_key(dataset, exp)["images"] != key["images"]
