"""The generated hand-held capture that python -m benchmarks sfm runs structure from motion on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from pointrix_lite.data.demo.capture import AIM_JITTER, ORBITS, capture_cameras, generate_capture
from pointrix_lite.data.demo.photo import TARGET
from pointrix_lite.io.colmap import read_model


def test_three_orbits_in_capture_order_aimed_at_the_target():
    cams = capture_cameras(30, 400, 300)
    assert [c.name for c in cams] == [f"IMG_{i:04d}" for i in range(1, 31)]
    for k, (elevation, distance) in enumerate(ORBITS):
        for c in cams[10 * k : 10 * k + 10]:
            centre = -c.w2c[:3, :3].T @ c.w2c[:3, 3]
            offset = centre - TARGET
            assert math.degrees(math.asin(offset[2] / np.linalg.norm(offset))) == pytest.approx(elevation, abs=3.0)
            assert np.linalg.norm(offset) == pytest.approx(distance, rel=0.06)
            # The target lies near the image centre: aims wander by at most AIM_JITTER per axis.
            x, y, z = c.w2c[:3, :3] @ TARGET + c.w2c[:3, 3]
            off_centre = math.hypot(c.fx * x / z, c.fy * y / z)
            assert off_centre <= c.fx * math.sqrt(3) * AIM_JITTER / (distance * 0.9)
    with pytest.raises(ValueError, match="multiple of 3"):
        capture_cameras(10, 400, 300)


def test_generated_capture_is_jpegs_and_a_true_model(tmp_path):
    generate_capture(tmp_path / "cap", 3, 40, 30, workers=1)
    names = sorted(p.name for p in (tmp_path / "cap" / "images").iterdir())
    assert names == ["IMG_0001.jpg", "IMG_0002.jpg", "IMG_0003.jpg"]
    with Image.open(tmp_path / "cap" / "images" / names[0]) as im:
        assert im.format == "JPEG" and im.size == (40, 30)
    truth = read_model(tmp_path / "cap" / "truth")
    cams = capture_cameras(3, 40, 30)
    assert sorted(im.name for im in truth.images.values()) == names
    np.testing.assert_allclose(truth.cameras[1].params, [cams[0].fx, cams[0].fy, 20, 15])
