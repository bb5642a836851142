"""model.normal_consistency_weight: the depth-normal consistency term (model/surface_loss.py).

- On a plane of flat Gaussians seen head on, the rendered depth is the plane's (constant) and its normals
  the plane's; Gaussians tilted by an angle about x blend a normal at that angle to it. The term must be
  the mean over pixels of ``1 - alpha^2 cos(angle)`` where a pixel and its four neighbours are covered
  (else 1), with alpha from the ordinary render: an independent formula.
- Its gradient in the means and rotations against central differences of the term itself.
- In training: no term before its share of the steps, the term and its extra render after; bad options are
  one line naming the key.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pointrix_lite.data.cameras import Camera
from pointrix_lite.hook import Hook, Priority
from pointrix_lite.model.surface_loss import camera_normals_and_depth, consistency, depth_normal_consistency
from pointrix_lite.renderer import GaussianRenderer

from .helpers import make_model, make_view

SIZE = 48


def head_on_camera() -> Camera:
    """Looking down -z from (0, 0, 3): camera z is 3 on the whole plane z = 0."""
    viewmat = torch.tensor([[1.0, 0, 0, 0], [0, -1, 0, 0], [0, 0, -1, 3], [0, 0, 0, 1]])
    return Camera(50.0, 50.0, SIZE / 2, SIZE / 2, SIZE, SIZE, viewmat, "cam")


class TiltedPlane:
    """Flat Gaussians centred on z = 0, their shortest axis turned by ``angle`` about x."""

    def __init__(self, angle: float, half: float = 1.0) -> None:
        xs = torch.linspace(-half, half, round(25 * half) + 1)  # the view reaches +-1.44 at its border
        gx, gy = torch.meshgrid(xs, xs, indexing="ij")
        n = gx.numel()
        self.means = torch.stack([gx.ravel(), gy.ravel(), torch.zeros(n)], -1)
        self.quats = torch.tensor([math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]).expand(n, 4).clone()
        self.scales = torch.tensor([0.08, 0.08, 0.002]).expand(n, 3).clone()
        self.opacities = torch.full((n,), 0.9)

    def render_params(self) -> dict:
        n = len(self.means)
        return {"means": self.means, "quats": self.quats, "scales": self.scales, "opacities": self.opacities,
                "colors": torch.full((n, 1, 3), 0.5), "sh_degree": 0}  # fmt: skip


@pytest.mark.parametrize("angle", [0.0, math.radians(35.0), math.radians(70.0)])
def test_on_a_plane_the_term_is_one_minus_alpha_squared_cos_angle(angle: float) -> None:
    plane, cam = TiltedPlane(angle), head_on_camera()
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="torch"))
    out = renderer(plane, [cam], (0.0, 0.0, 0.0))
    term = depth_normal_consistency(out["render_features"], plane.render_params(), [cam])

    a = out["alpha"][0, ..., 0].double().numpy()
    assert a[SIZE // 2, SIZE // 2] > 0.9 and a.min() < 0.5  # covered in the middle, not to the border
    covered = a > 1e-4
    inner = np.zeros_like(covered)
    inner[1:-1, 1:-1] = covered[1:-1, 1:-1] & covered[2:, 1:-1] & covered[:-2, 1:-1] & covered[1:-1, 2:]
    inner[1:-1, 1:-1] &= covered[1:-1, :-2]
    expected = np.where(inner, 1.0 - a * a * math.cos(angle), 1.0).mean()
    assert float(term) == pytest.approx(expected, abs=2e-4)


def test_gradient_matches_central_differences() -> None:
    """In two parts, each smooth (the rasterizer's cut-offs, alpha < 1/255 and the footprint's extent, make
    the term jump where a Gaussian's edge crosses a pixel, so differences through the means or rotations
    test those jumps, not the gradient): the term of the features blended (the rasterizer is linear in them,
    alpha does not depend on them), and the features of the means and rotations."""
    g = torch.Generator().manual_seed(5)
    plane = TiltedPlane(math.radians(30.0))
    n = len(plane.means)
    means = (plane.means + 0.02 * torch.randn(n, 3, generator=g)).double()
    quats = (plane.quats + 0.1 * torch.randn(n, 4, generator=g)).double()
    params = {"means": means, "quats": quats, "scales": plane.scales.double(),
              "opacities": torch.full((n,), 0.8, dtype=torch.float64),
              "colors": torch.full((n, 1, 3), 0.5, dtype=torch.float64), "sh_degree": 0}  # fmt: skip
    cam = head_on_camera()
    cam = Camera(cam.fx, cam.fy, cam.cx, cam.cy, SIZE, SIZE, cam.viewmat.double(), "cam")
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="torch"))
    render_features = renderer(SimpleNamespace(render_params=lambda: params), [cam], torch.zeros(3))["render_features"]
    features = camera_normals_and_depth(params, cam.viewmat[None]).requires_grad_(True)

    def term(f: torch.Tensor) -> torch.Tensor:
        return consistency(*render_features(f), [cam.K.double()])

    term(features).backward()
    for seed in range(3):
        d = torch.randn(features.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        with torch.no_grad():
            numeric = float(term(features + 1e-6 * d) - term(features - 1e-6 * d)) / 2e-6
        analytic = float((features.grad * d).sum())
        assert abs(analytic) > 1e-4 and analytic == pytest.approx(numeric, rel=1e-5)

    m, q = means[:40].clone().requires_grad_(True), quats[:40].clone().requires_grad_(True)
    only = {"means": m, "quats": q, "scales": params["scales"][:40]}
    assert torch.autograd.gradcheck(lambda m, q: camera_normals_and_depth({**only, "means": m, "quats": q},
                                                                          cam.viewmat[None]), (m, q))  # fmt: skip


class LossRecorder(Hook):
    priority = Priority.LOWEST

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict] = []

    def after_train_iter(self, batch_idx, batch) -> None:
        self.seen.append(dict(self.trainer.loss_dict))


def test_training_adds_the_term_from_its_share_of_the_steps(tmp_path) -> None:
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer
    from tests.reliability.scene import real_raw_config, write_tiny_scene

    import_all()
    raw = real_raw_config(tmp_path / "out", write_tiny_scene(tmp_path / "scene"), "torch", max_steps=6)
    raw["model"].update(normal_consistency_weight=0.1, normal_consistency_from=0.5)
    cfg = load_experiment(None, data=raw)
    trainer = DefaultTrainer(cfg, tmp_path / "exp", "cpu")
    recorder = LossRecorder()
    trainer.register_hook(recorder)
    trainer.run()
    assert ["normal" in d for d in recorder.seen] == [False, False, False, True, True, True]
    assert all(0.0 < float(d["normal"]) <= 2.0 for d in recorder.seen[3:])


def test_bad_options_and_a_renderer_without_features_are_one_line() -> None:
    for key, value in (("normal_consistency_weight", -1.0), ("normal_consistency_from", 1.5)):
        with pytest.raises(Exception, match=key):
            make_model(3, **{key: value})
    model = make_model(3, normal_consistency_weight=1.0, normal_consistency_from=0.0)
    view = make_view(torch.zeros(8, 8, 3, dtype=torch.uint8), 0)
    with pytest.raises(Exception, match="normal_consistency_weight: needs a renderer"):
        model.get_loss_dict({"rgb": torch.rand(1, 8, 8, 3)}, [view])
