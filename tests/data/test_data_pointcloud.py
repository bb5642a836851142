"""Gaussian initialisation from a point cloud: kNN scales vs brute force, SH DC, opacity, shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pointrix_lite.data.pointcloud import (
    SH_C0,
    PointCloud,
    init_gaussians,
    knn_mean_distance,
    local_frames,
    random_cube,
    read_ply_points,
    write_ply_points,
)


def brute_force_rms_knn(xyz: torch.Tensor, k: int = 3) -> torch.Tensor:
    d = torch.cdist(xyz.double(), xyz.double())
    d.fill_diagonal_(float("inf"))
    nearest = d.sort(dim=1).values[:, :k]
    return (nearest**2).mean(1).sqrt()


def test_knn_matches_brute_force():
    xyz = torch.randn(300, 3, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 0.2, 3.0])
    np.testing.assert_allclose(knn_mean_distance(xyz), brute_force_rms_knn(xyz).numpy(), rtol=1e-10)


def test_init_gaussians_values_and_shapes():
    g = torch.Generator().manual_seed(1)
    xyz, rgb = torch.randn(200, 3, generator=g), torch.rand(200, 3, generator=g)
    out = init_gaussians(xyz, rgb, sh_degree=3, init_opacity=0.1, init_scale=2.0)
    assert set(out) == {"means", "scales", "quats", "opacities", "sh0", "shN"}
    assert all(v.dtype == torch.float32 for v in out.values())
    assert torch.equal(out["means"], xyz)
    expected = torch.log(2.0 * brute_force_rms_knn(xyz)).float()[:, None].expand(-1, 3)
    torch.testing.assert_close(out["scales"], expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(out["quats"], torch.tensor([[1.0, 0, 0, 0]]).expand(200, 4))
    torch.testing.assert_close(torch.sigmoid(out["opacities"]), torch.full((200,), 0.1))
    assert out["sh0"].shape == (200, 1, 3) and out["shN"].shape == (200, 15, 3) and not out["shN"].any()
    torch.testing.assert_close(out["sh0"][:, 0] * SH_C0 + 0.5, rgb)
    assert init_gaussians(xyz, rgb, sh_degree=0)["shN"].shape == (200, 0, 3)


def test_duplicates_clamped_and_random_quats():
    xyz = np.array([[0.0, 0, 0]] * 4 + [[1.0, 1, 1]])
    out = init_gaussians(xyz, np.full((5, 3), 0.5), sh_degree=1, random_quats=True)
    assert torch.isfinite(out["scales"]).all()
    assert out["scales"][0, 0] == pytest.approx(math.log(1e-7), abs=1e-4)  # three coincident neighbours
    torch.testing.assert_close(out["quats"].norm(dim=1), torch.ones(5))
    assert knn_mean_distance(np.zeros((1, 3))).tolist() == [1.0]
    np.testing.assert_allclose(knn_mean_distance(np.array([[0.0, 0, 0], [0, 0, 2]])), [2.0, 2.0])


def _rotmats(quats: np.ndarray) -> np.ndarray:
    """Rotation matrices of wxyz quaternions, written out independently of the code under test."""
    w, x, y, z = (quats / np.linalg.norm(quats, axis=1, keepdims=True)).T
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        1,
    )


def test_oriented_init_puts_the_last_axis_along_the_surface_normal():
    rng = np.random.default_rng(0)
    # Two surfaces in a random frame: a thin sheet and a long thin rod (largest spread along it).
    sheet = np.c_[rng.uniform(-1, 1, (400, 2)), rng.normal(0, 0.005, 400)]
    rod = np.c_[rng.normal(0, 0.005, (200, 2)), rng.uniform(-4, 4, 200)] + np.array([5.0, 0.0, 0.0])
    turn, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    turn *= np.sign(np.linalg.det(turn))
    pts = np.r_[sheet, rod] @ turn.T
    R = _rotmats(local_frames(pts))
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-9)  # proper rotations
    assert np.abs(R[:400, :, 2] @ turn[:, 2]).min() > 0.98  # sheet: last axis along its normal
    assert np.abs(R[400:, :, 0] @ turn[:, 2]).min() > 0.98  # rod: first axis along it
    # The frames turn with the cloud (each axis up to its sign).
    again = _rotmats(local_frames(pts @ turn))
    np.testing.assert_allclose(np.abs(np.einsum("ij,njk->nik", turn.T, R)), np.abs(again), atol=1e-6)
    out = init_gaussians(pts, np.full((600, 3), 0.5), sh_degree=0, oriented=True)
    np.testing.assert_allclose(out["quats"].numpy(), local_frames(out["means"]), atol=1e-6)  # of the float32 means
    assert torch.equal(out["scales"][:, 0], out["scales"][:, 2])  # scales stay isotropic
    assert local_frames(np.zeros((3, 3))).tolist() == [[1.0, 0, 0, 0]] * 3  # too few neighbours: identity


def test_ply_roundtrip_and_random_cube(tmp_path):
    cloud = random_cube(100, seed=3)
    assert cloud.xyz.abs().max() <= 1.3
    write_ply_points(tmp_path / "p.ply", cloud)
    back = read_ply_points(tmp_path / "p.ply")
    assert torch.equal(back.xyz, cloud.xyz)
    assert (back.rgb - cloud.rgb).abs().max() <= 0.5 / 255 + 1e-6
    sub = cloud.subsample(10, seed=0)
    assert len(sub) == 10 and len(PointCloud(cloud.xyz, cloud.rgb).subsample(0, 0)) == 100
