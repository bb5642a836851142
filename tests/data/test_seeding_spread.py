"""model.seeding.mvs_views: the views the plane sweep runs on, spread over the capture and tied to the run's steps."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pointrix_lite.config import ConfigError, from_dict
from pointrix_lite.data.cameras import Camera, View, look_at
from pointrix_lite.data.pointcloud import PointCloud
from pointrix_lite.data.seeding import SeedingConfig, fusion, seed_points
from pointrix_lite.data.seeding.spread import MIN_VIEWS, STEPS_PER_VIEW, auto_views, spread_views
from pointrix_lite.engine import build


def _camera(eye, target) -> Camera:
    viewmat = torch.from_numpy(look_at(np.asarray(eye, float), np.asarray(target, float))).float()
    return Camera(50.0, 50.0, 32.0, 24.0, 64, 48, viewmat)


def _ring(places: int, copies: int, jitter: float = 1e-3) -> tuple[list[Camera], list[int]]:
    """``copies`` cameras at each of ``places`` positions on a circle looking at the origin, listed copy by
    copy (so a place's cameras are not neighbours in the list); each camera's place."""
    cams, place = [], []
    for c in range(copies):
        for p in range(places):
            a = 2 * math.pi * p / places
            cams.append(_camera((3 * math.cos(a) + c * jitter, 3 * math.sin(a), 0.5), (0, 0, 0)))
            place.append(p)
    return cams, place


def test_one_view_of_each_place_is_kept():
    cams, place = _ring(places=8, copies=3)
    kept = spread_views(cams, 8)
    assert kept == sorted(kept) and len(set(kept)) == 8
    assert sorted(place[i] for i in kept) == list(range(8))  # no place twice, none missed


def test_views_from_one_place_looking_apart_are_kept_apart():
    """Turning around in a room: one centre, twelve directions; four kept are a quarter turn apart."""
    yaws = [30 * k for k in range(12)]
    cams = [_camera((0, 0, 0), (math.cos(math.radians(y)), math.sin(math.radians(y)), 0)) for y in yaws]
    kept = sorted(yaws[i] for i in spread_views(cams, 4))
    gaps = [(b - a) % 360 for a, b in zip(kept, kept[1:] + kept[:1])]
    assert gaps == [90, 90, 90, 90], kept


def test_all_views_when_none_are_too_many_and_no_view_twice():
    cams, _ = _ring(places=5, copies=1)
    assert spread_views(cams, 0) == spread_views(cams, 5) == spread_views(cams, 9) == [0, 1, 2, 3, 4]
    same = [_camera((1, 0, 0), (0, 0, 0)) for _ in range(5)]  # one pose five times
    assert sorted(set(spread_views(same, 3))) == spread_views(same, 3) and len(spread_views(same, 3)) == 3


def test_auto_scales_with_the_steps_and_keeps_sparse_captures_whole():
    assert auto_views(1) == auto_views(STEPS_PER_VIEW * MIN_VIEWS) == MIN_VIEWS
    assert auto_views(10 * STEPS_PER_VIEW * MIN_VIEWS) == 10 * MIN_VIEWS
    assert all(auto_views(s) <= auto_views(s + 500) for s in range(0, 20_000, 500))


def test_options_are_checked():
    assert from_dict(SeedingConfig, {"mvs": True, "mvs_views": 12}, "model.seeding").mvs_views == 12
    for bad in (-1, True):
        with pytest.raises(ConfigError, match=r"^model\.seeding\.mvs_views"):
            from_dict(SeedingConfig, {"mvs": True, "mvs_views": bad}, "model.seeding")


def _dataset(cams: list[Camera]) -> SimpleNamespace:
    views = [View(c, torch.zeros(48, 64, 3, dtype=torch.uint8), f"v{i:02d}", i) for i, c in enumerate(cams)]
    cloud = PointCloud(torch.rand(50, 3) - 0.5, torch.rand(50, 3))
    return SimpleNamespace(train_views=views, scene_extent=3.0, point_cloud=cloud)


def test_the_sweep_runs_on_the_spread_views(monkeypatch):
    cams, _ = _ring(places=10, copies=3)
    dataset = _dataset(cams)
    swept: list[list[str]] = []

    def record(cloud, views, cfg, seed, say):
        swept.append([v.name for v in views])
        return PointCloud(torch.zeros(0, 3), torch.zeros(0, 3))

    monkeypatch.setattr(fusion, "mvs_points", record)
    seed_points(dataset.point_cloud, dataset, SeedingConfig(mvs=True, mvs_views=10), 0)
    seed_points(dataset.point_cloud, dataset, SeedingConfig(mvs=True, mvs_views="auto"), 0)  # outside a run: all
    assert swept[0] == [dataset.train_views[i].name for i in spread_views(cams, 10)]
    assert swept[1] == [v.name for v in dataset.train_views]


def test_the_engine_resolves_auto_from_the_runs_steps(monkeypatch):
    """The run's folder caches the seeded points under the options: ``auto`` reaches it as a number."""
    asked: list[SeedingConfig] = []
    from pointrix_lite.data import seeding

    def record(dataset, cfg, seed, exp_dir):
        asked.append(cfg)
        return dataset.point_cloud

    monkeypatch.setattr(seeding, "seeded_cloud", record)
    dataset = _dataset(_ring(places=4, copies=1)[0])
    for steps, seeding_cfg in ((1000, SeedingConfig(mvs=True)), (1000, SeedingConfig(mvs=True, mvs_views=7))):
        cfg = SimpleNamespace(model={"seeding": seeding_cfg}, trainer=SimpleNamespace(max_steps=steps))
        build._seed(cfg, dataset, None)
    assert [c.mvs_views for c in asked] == [auto_views(1000), 7]
