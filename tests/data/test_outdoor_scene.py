"""The outdoor benchmark scene: open sky that the SfM-like cloud never reaches, loads as COLMAP.

Generated small (96 x 72, 8 views); the benchmark's 400 x 300 x 56 differs only in the size arguments.
"""

from __future__ import annotations

import numpy as np

from pointrix_lite.data.demo.outdoor import generate_outdoor_scene, outdoor_cameras, sky_mask
from pointrix_lite.registry import DATASETS

W, H, N = 96, 72, 8


def test_sky_fills_part_of_every_view_and_gets_no_points(tmp_path):
    out = tmp_path / "scene"
    generate_outdoor_scene(out, n_views=N, width=W, height=H)
    ds = DATASETS.build({"type": "ColmapDataset", "data_path": str(out / "colmap")}, "dataset")
    assert len(ds.train_views) == N - 1 and ds.train_views[0].image.shape == (H, W, 3)
    cams = outdoor_cameras(N, W, H)
    for cam, view in zip(cams[1:3], ds.train_views[:2]):
        mask = sky_mask(cam)
        assert 0.1 < (mask == 1).mean() < 0.5  # open sky above the skyline in every view
        # The sky pixels are the sky function's bright colours (quantised to 8 bits, supersampled).
        sky_px = view.image.numpy()[mask == 1] / 255.0
        assert sky_px.min() > 0.55
    # SfM-like points come from surface hits: none beyond the skyline, none up in the air.
    xyz = ds.point_cloud.xyz.numpy()
    assert np.linalg.norm(xyz[:, :2], axis=1).max() < 31 and xyz[:, 2].max() < 7
