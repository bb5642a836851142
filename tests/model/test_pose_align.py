"""Gauss-Newton pose alignment: the motion Jacobian against real renders, the SE(3) step, the fit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from pointrix_lite.data.cameras import Camera
from pointrix_lite.model.pose_align import align_pose, normal_equations, se3_exp
from pointrix_lite.renderer import GaussianRenderer

SIZE = 64


def _textured_wall(seed: int = 0) -> SimpleNamespace:
    """Opaque, overlapping Gaussians on a slanted wall 2.4-3.6 units ahead, smoothly random colours:
    a surface, so the expected depth is where the colour comes from (what the linearisation assumes)."""
    g = torch.Generator().manual_seed(seed)
    n = 70
    xs = torch.linspace(-1.6, 1.6, n)
    x, y = torch.meshgrid(xs, xs, indexing="xy")
    # Slanted along both axes: Gaussians at equal depth would swap their blending order under the
    # slightest rotation, a jump no linearisation (nor gsplat) smooths over.
    means = torch.stack((x.flatten(), y.flatten(), 3.0 + 0.25 * x.flatten() + 0.15 * y.flatten()), dim=-1)
    coarse = torch.rand(1, 3, 9, 9, generator=g)
    colors = torch.nn.functional.interpolate(coarse, size=(n, n), mode="bicubic", align_corners=True)
    colors = colors[0].permute(1, 2, 0).reshape(-1, 3).clamp(0, 1)
    params = {
        "means": means,
        "quats": torch.tensor([1.0, 0.0, 0.0, 0.0]).repeat(n * n, 1),
        "scales": torch.full((n * n, 3), 0.04),
        "opacities": torch.full((n * n,), 0.99),
        "colors": colors,
        "sh_degree": None,
    }
    return SimpleNamespace(render_params=lambda: params)


def _camera(viewmat: torch.Tensor) -> Camera:
    # An off-centre principal point, so a swapped cx/cy or a missing half-pixel shows.
    return Camera(fx=70.0, fy=66.0, cx=30.0, cy=34.5, width=SIZE, height=SIZE, viewmat=viewmat)


def _renderer(scene):
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="auto"))

    def render(viewmat: torch.Tensor):
        with torch.no_grad():
            return renderer(scene, [_camera(viewmat)], (0.0, 0.0, 0.0))

    return render


def _images(out) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return out["rgb"][0], out["depth"][0], out["alpha"][0]


def test_se3_exp_matches_an_independent_rotation_and_is_exact_at_zero():
    w = np.array([0.3, -0.2, 0.5])
    T = se3_exp(torch.tensor([0.1, -0.2, 0.3, *w], dtype=torch.float64))
    assert np.allclose(T[:3, :3].numpy(), Rotation.from_rotvec(w).as_matrix(), atol=1e-12)
    assert np.allclose(T[:3, 3].numpy(), [0.1, -0.2, 0.3]) and np.allclose(T[3].numpy(), [0, 0, 0, 1])
    assert torch.equal(se3_exp(torch.zeros(6, dtype=torch.float64)), torch.eye(4, dtype=torch.float64))


@pytest.mark.parametrize("axis", range(6))
def test_the_linearised_image_predicts_what_a_small_camera_motion_renders(axis):
    # J @ xi from one render against the difference of two real renders, one motion axis at a time
    # (three translations, three rotations); a wrong sign, column or intrinsic fails the correlation.
    render = _renderer(_textured_wall())
    rgb, depth, alpha = _images(render(torch.eye(4)))
    eps = 0.01 if axis < 3 else 0.004  # about a third of a pixel
    xi = torch.zeros(6, dtype=torch.float64)
    xi[axis] = eps
    moved, _, _ = _images(render(se3_exp(xi).float()))
    actual = (moved - rgb)[1:-1, 1:-1].reshape(-1).double()

    # normal_equations gives J^T J and J^T r; with r = J xi its J^T r equals (J^T J) xi, and with
    # r = the actual change it is J^T (actual): the two agree iff J predicts the change.
    A, b_actual = normal_equations(rgb, depth, alpha, moved - rgb, _camera(torch.eye(4)).K)
    predicted_along = (A @ xi)[axis]
    assert float(b_actual[axis]) == pytest.approx(float(predicted_along), rel=0.25)
    # And directly: the predicted difference image against the rendered one.
    ok = (alpha[1:-1, 1:-1, 0] >= 0.5).reshape(-1)
    assert ok.float().mean() > 0.95
    gx = (rgb[1:-1, 2:] - rgb[1:-1, :-2]) * 0.5
    gy = (rgb[2:, 1:-1] - rgb[:-2, 1:-1]) * 0.5
    # Independently of the closed form: move each back-projected pixel and project it again.
    shift = torch.zeros(2, SIZE - 2, SIZE - 2, dtype=torch.float64)
    K = _camera(torch.eye(4)).K.double()
    v, u = torch.meshgrid(torch.arange(1, SIZE - 1) + 0.5, torch.arange(1, SIZE - 1) + 0.5, indexing="ij")
    Z = depth[1:-1, 1:-1, 0].double()
    p = torch.stack(((u - K[0, 2]) / K[0, 0] * Z, (v - K[1, 2]) / K[1, 1] * Z, Z), dim=-1)
    q = p @ se3_exp(xi)[:3, :3].T + se3_exp(xi)[:3, 3]
    shift[0] = K[0, 0] * q[..., 0] / q[..., 2] + K[0, 2] - u
    shift[1] = K[1, 1] * q[..., 1] / q[..., 2] + K[1, 2] - v
    independent = -(gx.double() * shift[0][..., None] + gy.double() * shift[1][..., None]).reshape(-1)
    corr = torch.corrcoef(torch.stack((independent, actual)))[0, 1]
    assert corr > 0.85, corr


@pytest.mark.parametrize("size, levels", [(1.0, (0.0,)), (4.0, (0.0,)), (4.0, (2.0, 1.0, 0.0))])
def test_align_pose_recovers_a_perturbed_camera_and_never_returns_a_worse_one(size, levels):
    # size 4: ~10 px of motion at the image's edge
    render = _renderer(_textured_wall())
    target, _, _ = _images(render(torch.eye(4)))
    start = torch.eye(4)
    start[:3, :3] = torch.tensor(Rotation.from_rotvec([0.02 * size, -0.015 * size, 0.03 * size]).as_matrix())
    start[:3, 3] = torch.tensor([0.05, -0.04, 0.08]) * size
    fit = align_pose(render, start, _camera(start).K, target, max_renders=50, blur_levels=levels)
    assert float((fit.viewmat - torch.eye(4)).abs().max()) < 2e-3
    assert fit.mse < 1e-3 * fit.initial_mse and fit.renders < 50
    assert torch.equal(fit.render_out["rgb"], render(fit.viewmat)["rgb"])  # the render of the pose returned

    # The right pose already: the fit keeps it (or finds one at least as good) and stops quickly.
    kept = align_pose(render, torch.eye(4), _camera(torch.eye(4)).K, target, max_renders=50)
    assert kept.mse <= kept.initial_mse == 0.0 and kept.renders == 1
    # With the given pose's render handed in, not even that one render is spent.
    given = render(torch.eye(4))
    kept = align_pose(render, torch.eye(4), _camera(torch.eye(4)).K, target, max_renders=50, given_render=given)
    assert kept.renders == 0 and kept.render_out is given and kept.mse == 0.0


def test_masked_pixels_neither_pull_the_fit_nor_count_in_its_error():
    render = _renderer(_textured_wall())
    target, _, _ = _images(render(torch.eye(4)))
    spoiled = target.clone()
    spoiled[:, : SIZE // 2] = 1.0 - spoiled[:, : SIZE // 2]  # an "occluder" over the left half
    mask = torch.ones(SIZE, SIZE, 1)
    mask[:, : SIZE // 2] = 0.0
    start = torch.eye(4)
    start[:3, 3] = torch.tensor([0.06, 0.0, 0.0])
    fit = align_pose(render, start, _camera(start).K, spoiled, max_renders=50, mask=mask)
    assert float((fit.viewmat - torch.eye(4)).abs().max()) < 2e-3
    assert fit.mse < 1e-6  # the error of the kept half only: the occluder would add ~0.1
    rgb, _, _ = _images(render(fit.viewmat))
    assert float(((rgb - spoiled).square() * mask).sum() / (mask.sum() * 3)) == pytest.approx(fit.mse, rel=1e-4)


def test_an_empty_view_returns_the_given_pose_after_one_render():
    empty = SimpleNamespace(render_params=lambda: {**_textured_wall().render_params(), "opacities": torch.zeros(4900)})
    render = _renderer(empty)
    target = torch.full((SIZE, SIZE, 3), 0.5)
    start = torch.eye(4)
    start[2, 3] = 0.3
    fit = align_pose(render, start, _camera(start).K, target, max_renders=20)
    assert torch.equal(fit.viewmat, start) and fit.renders == 1 and fit.mse == pytest.approx(0.25)
