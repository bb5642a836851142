"""Scoring SfM cameras against true ones: invariant to the similarity SfM cannot know, and not blind."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pointrix_lite.data.cameras import rotmat_to_qvec
from pointrix_lite.data.demo.capture import capture_cameras
from pointrix_lite.io.colmap import ColmapCamera, ColmapImage, ColmapModel
from pointrix_lite.process.compare import compare_cameras


def _model(w2cs: dict[str, np.ndarray], focal: float, width: int) -> ColmapModel:
    camera = ColmapCamera(1, "SIMPLE_RADIAL", width, width * 3 // 4, np.array([focal, width / 2, width * 3 / 8, 0.0]))
    images = {
        i + 1: ColmapImage(i + 1, rotmat_to_qvec(w[:3, :3]), w[:3, 3].copy(), 1, n)
        for i, (n, w) in enumerate(w2cs.items())
    }
    return ColmapModel({1: camera}, images, np.zeros((0, 3)), np.zeros((0, 3), np.uint8), {})


def _rot(axis: np.ndarray, angle: float) -> np.ndarray:
    k = axis / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def _mean_centre(cams: list) -> np.ndarray:
    return np.mean([-c.w2c[:3, :3].T @ c.w2c[:3, 3] for c in cams], axis=0)


def test_a_similar_copy_scores_zero_and_a_moved_camera_shows():
    cams = capture_cameras(30, 400, 300)
    truth = _model({c.name: c.w2c for c in cams}, cams[0].fx, 400)
    # The same cameras in a frame 2.5x larger, rotated and shifted: world' = s R world + t.
    s, R, t = 2.5, _rot(np.array([1.0, 2.0, 3.0]), 0.7), np.array([4.0, -1.0, 2.0])
    moved = {}
    for c in cams:
        w2c = np.eye(4)
        w2c[:3, :3] = c.w2c[:3, :3] @ R.T
        w2c[:3, 3] = s * c.w2c[:3, 3] - w2c[:3, :3] @ t
        moved[c.name] = w2c
    score = compare_cameras(_model(moved, cams[0].fx * 2, 800), truth)  # twice the size, twice the focal
    assert score.registered == score.total == 30
    assert score.centre_max < 1e-9 and score.rotation_median_deg < 1e-6 and score.focal_rel < 1e-12

    # One camera 10% of the spread off, all turned by 1 degree, focal 2% long, one image missing.
    spread = np.mean([np.linalg.norm(-c.w2c[:3, :3].T @ c.w2c[:3, 3] - _mean_centre(cams)) for c in cams])
    bad = dict(moved)
    first = cams[0].name
    centre = -bad[first][:3, :3].T @ bad[first][:3, 3] + s * 0.1 * spread * np.array([0.0, 0.0, 1.0])
    bad[first] = bad[first].copy()
    bad[first][:3, 3] = -bad[first][:3, :3] @ centre
    turn = _rot(np.array([0.0, 1.0, 0.0]), math.radians(1.0))
    for name in bad:
        w = bad[name].copy()
        c = -w[:3, :3].T @ w[:3, 3]
        w[:3, :3] = turn @ w[:3, :3]
        w[:3, 3] = -w[:3, :3] @ c
        bad[name] = w
    del bad[cams[-1].name]
    score = compare_cameras(_model(bad, cams[0].fx * 2 * 1.02, 800), truth)
    assert score.registered == 29 and score.total == 30
    assert score.centre_max == pytest.approx(0.1, rel=0.05) and score.centre_median < 1e-9  # the robust fit ignores it
    assert score.rotation_median_deg == pytest.approx(1.0, rel=1e-6)
    assert score.focal_rel == pytest.approx(0.02, rel=1e-9)


def test_needs_three_images_in_common():
    cams = capture_cameras(3, 400, 300)
    truth = _model({c.name: c.w2c for c in cams}, cams[0].fx, 400)
    two = dataclasses.replace(truth, images=dict(list(truth.images.items())[:2]))
    with pytest.raises(ValueError, match="2 image"):
        compare_cameras(two, truth)
