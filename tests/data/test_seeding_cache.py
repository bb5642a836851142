"""``seed_points.npz``: read back for the same request, computed again when the seeding code changed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from pointrix_lite.data import seeding
from pointrix_lite.data.pointcloud import PointCloud


def _dataset() -> SimpleNamespace:
    cloud = PointCloud(torch.rand(20, 3, generator=torch.Generator().manual_seed(0)), torch.full((20, 3), 0.5))
    views = [SimpleNamespace(name=f"v{i}", camera=SimpleNamespace(width=64)) for i in range(3)]
    return SimpleNamespace(point_cloud=cloud, train_views=views, scene_extent=1.0)


def test_the_cache_is_read_back_unless_the_seeding_code_changed(tmp_path, monkeypatch) -> None:
    calls = []

    def one_more_point(cloud, dataset, cfg, seed=0, log=None):  # stands in for the sweep: the cache is tested
        calls.append(len(calls))
        extra = torch.full((1, 3), float(len(calls)))
        return PointCloud(torch.cat([cloud.xyz, extra]), torch.cat([cloud.rgb, torch.zeros(1, 3)]))

    monkeypatch.setattr(seeding, "seed_points", one_more_point)
    cfg, data = seeding.SeedingConfig(mvs=True), _dataset()

    first = seeding.seeded_cloud(data, cfg, 0, tmp_path)
    again = seeding.seeded_cloud(data, cfg, 0, tmp_path)
    assert len(calls) == 1 and torch.equal(first.xyz, again.xyz)  # the second run read the file
    with np.load(tmp_path / seeding.CACHE_NAME) as kept:
        assert seeding.code_digest() in str(kept["key"])

    monkeypatch.setattr(seeding, "code_digest", lambda: "another build")
    upgraded = seeding.seeded_cloud(data, cfg, 0, tmp_path)
    assert len(calls) == 2 and float(upgraded.xyz[-1, 0]) == 2.0  # seeded again, not the old build's points
    assert seeding.seeded_cloud(data, cfg, 0, tmp_path).xyz[-1, 0] == 2.0 and len(calls) == 2  # and kept
