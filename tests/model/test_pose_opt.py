"""Camera pose refinement: the SE(3) correction, gradients through the rasterizer, pull-back, exact resume."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.engine.checkpoint import find_latest
from pointrix_lite.engine.hooks import PoseOptHook
from pointrix_lite.errors import CheckpointError, ConfigError
from pointrix_lite.model.pose import PoseCorrection, rotation_6d_to_matrix
from pointrix_lite.registry import RENDERERS
from pointrix_lite.renderer import GaussianRenderer
from tests.engine.engine_helpers import make_trainer, stop_and_resume


def test_zero_correction_is_identity_and_matches_an_independent_se3():
    pc = PoseCorrection(3)
    vm = torch.tensor(Rotation.random(3, random_state=1).as_matrix(), dtype=torch.float32)
    viewmats = torch.eye(4).repeat(3, 1, 1)
    viewmats[:, :3, :3] = vm
    viewmats[:, :3, 3] = torch.tensor([[0.1, 0.2, 3.0], [1.0, -1.0, 2.0], [0.0, 0.0, 5.0]])
    assert torch.allclose(pc(viewmats, torch.arange(3)), viewmats)

    # A 6D offset that encodes a known rotation: its first two columns minus the identity's.
    R_true = Rotation.from_rotvec([0.02, -0.01, 0.03]).as_matrix()
    with torch.no_grad():
        pc.delta[1, :3] = torch.tensor([0.05, -0.02, 0.01])
        pc.delta[1, 3:] = torch.tensor(np.concatenate([R_true[:, 0], R_true[:, 1]]) - np.array([1, 0, 0, 0, 1, 0]))
    expected = np.eye(4)
    expected[:3, :3], expected[:3, 3] = R_true, [0.05, -0.02, 0.01]
    out = pc(viewmats[1:2], torch.tensor([1]))
    assert np.allclose(out[0].detach().numpy(), expected @ viewmats[1].numpy(), atol=1e-6)
    R = rotation_6d_to_matrix(torch.randn(5, 6))
    assert torch.allclose(R @ R.transpose(1, 2), torch.eye(3).expand(5, 3, 3), atol=1e-5)
    assert torch.allclose(torch.linalg.det(R), torch.ones(5), atol=1e-5)


def _scene(n: int = 300, seed: int = 0) -> SimpleNamespace:
    """Fixed colourful Gaussians 2-4 units in front of a camera at the origin (looking down +z)."""
    g = torch.Generator().manual_seed(seed)
    means = torch.rand(n, 3, generator=g) * torch.tensor([2.4, 2.4, 2.0]) - torch.tensor([1.2, 1.2, -2.0])
    params = {
        "means": means,
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.full((n, 3), 0.06),
        "opacities": torch.full((n,), 0.8),
        "colors": torch.rand(n, 3, generator=g),
        "sh_degree": None,
    }
    return SimpleNamespace(render_params=lambda: params)


def _camera(viewmat: torch.Tensor, size: int = 40) -> Camera:
    return Camera(fx=float(size), fy=float(size), cx=size / 2, cy=size / 2, width=size, height=size, viewmat=viewmat)


def _perturbation() -> torch.Tensor:
    T = torch.eye(4)
    T[:3, :3] = torch.tensor(Rotation.from_rotvec([0.03, -0.02, 0.04]).as_matrix(), dtype=torch.float32)
    T[:3, 3] = torch.tensor([0.06, -0.04, 0.05])
    return T


@pytest.mark.parametrize("backend", ["torch", "native"])
def test_gradients_reach_the_correction_and_match_finite_differences(backend):
    scene, renderer = _scene(), GaussianRenderer(GaussianRenderer.Config(backend=backend))
    target = renderer(scene, [_camera(torch.eye(4))], (0.0, 0.0, 0.0))["rgb"].detach()
    pc = PoseCorrection(2).double()
    start = _perturbation()

    def loss_at(delta: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            pc.delta.copy_(delta)
        vm = pc(start[None].double(), torch.tensor([1]))[0].float()
        rgb = renderer(scene, [_camera(vm)], (0.0, 0.0, 0.0))["rgb"]
        return ((rgb - target) ** 2).sum()

    base = torch.zeros(2, 9, dtype=torch.float64)
    loss_at(base).backward()
    grad = pc.delta.grad.clone()
    assert torch.count_nonzero(grad[0]) == 0  # view 0 was not rendered
    # At the identity the 6D rotation has 3 gauge directions (stretching a column along itself, or
    # the 2nd towards the 1st) that normalisation removes: exactly those get no gradient.
    gauge = [3, 6, 7]
    assert torch.all(grad[1, gauge] == 0)
    assert torch.count_nonzero(grad[1]) == 6
    eps = 1e-3
    for k in (0, 2, 4, 8):
        plus, minus = base.clone(), base.clone()
        plus[1, k], minus[1, k] = eps, -eps
        fd = (loss_at(plus).item() - loss_at(minus).item()) / (2 * eps)
        assert fd == pytest.approx(grad[1, k].item(), rel=0.08, abs=1e-3 * grad.abs().max().item())


def test_a_perturbed_pose_is_pulled_back():
    # auto: the native backend where it builds (fast), else torch; both are checked for gradients above.
    scene, renderer = _scene(), GaussianRenderer(GaussianRenderer.Config(backend="auto"))
    target = renderer(scene, [_camera(torch.eye(4))], (0.0, 0.0, 0.0))["rgb"].detach()
    start = _perturbation()
    pc = PoseCorrection(1)
    opt = torch.optim.Adam(pc.parameters(), lr=2e-3)

    def error() -> float:
        vm = pc(start[None], torch.tensor([0]))[0].detach()
        return float((vm - torch.eye(4)).abs().max())

    before = error()
    for _ in range(150):
        vm = pc(start[None], torch.tensor([0]))[0]
        loss = (renderer(scene, [_camera(vm)], (0.0, 0.0, 0.0))["rgb"] - target).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = error()
    assert after < 0.15 * before, (before, after)


# --- the hook inside the trainer ------------------------------------------------------------------


@RENDERERS.register("PoseAwareToyRenderer")
class PoseAwareToyRenderer:
    """The toy renderer plus a term that depends on the camera pose, so the corrections get gradients."""

    @dataclass
    class Config:
        pass

    def __init__(self, config=None, **_):
        pass

    def __call__(self, model, cameras, background):
        rgb = torch.sigmoid(model.params["means"][..., :3])
        vm = torch.stack([torch.as_tensor(c.viewmat) for c in cameras])
        shift = torch.tanh(vm[:, :3, 3].sum(-1) + vm[:, 0, 1])[:, None, None, None]
        out = rgb[None] + 0.3 * shift
        return {"rgb": out, "width": rgb.shape[1], "height": rgb.shape[0], "n_cameras": len(cameras)}


POSE_EXTRA = {
    "trainer": {"max_steps": 11, "val_interval": 0, "test_at_end": False},
    "renderer": {"type": "PoseAwareToyRenderer"},
    "hooks": [{"type": "CheckPointHook", "interval": 4}, {"type": "PoseOptHook", "lr": 0.01}],
}


def _pose_hook(trainer) -> PoseOptHook:
    return next(h for h in trainer.hooks if isinstance(h, PoseOptHook))


def test_hook_trains_corrections_and_resume_is_exact(toy_config, tmp_path):
    straight = make_trainer(toy_config(POSE_EXTRA, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()
    delta = _pose_hook(straight).correction.delta.detach()
    assert torch.count_nonzero(delta.abs() > 1e-4) >= 4 * 4  # every training view moved
    # The dataset's own poses are untouched: only the copies handed to the renderer are corrected.
    assert straight.dataset.train_views[1].camera.viewmat[0, 3] == pytest.approx(0.1)

    cfg = toy_config(POSE_EXTRA, overrides=[f"exp_dir={tmp_path / 'resumed'}"])
    first, checkpoint, second = stop_and_resume(cfg, 6)
    saved = checkpoint["hooks"]["PoseOptHook"]
    assert torch.equal(saved["delta"], _pose_hook(first).correction.delta.detach())
    assert torch.equal(_pose_hook(second).correction.delta.detach(), delta)
    assert torch.equal(second.model.params["means"].detach(), straight.model.params["means"].detach())


def test_refine_false_keeps_the_given_poses_and_still_aligns_the_test_views(toy_config, tmp_path):
    def trainer(name: str, refine: bool | None, steps: int = 8):
        extra = {
            **POSE_EXTRA,
            "trainer": {"max_steps": steps, "val_interval": 0, "test_at_end": True, "save_test_renders": False},
        }
        align = {"test_align_steps": 30, "test_align_method": "adam", "test_align_lr": 0.05}
        pose = [] if refine is None else [{"type": "PoseOptHook", "lr": 0.01, "refine": refine, **align}]
        extra["hooks"] = [{"type": "CheckPointHook", "interval": 4}, *pose]
        return make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / name}"]))

    fixed, plain = trainer("fixed", refine=False), trainer("plain", refine=None)
    fixed.run(), plain.run()
    assert _pose_hook(fixed).correction is None and _pose_hook(fixed).state_dict() == {}
    # Trained exactly as without the hook: the training views were rendered on their given poses.
    for name, value in plain.model.params.items():
        assert torch.equal(fixed.model.params[name].detach(), value.detach()), name
    metrics = json.loads((tmp_path / "fixed" / "metrics.json").read_text())
    assert metrics["mean"] == json.loads((tmp_path / "plain" / "metrics.json").read_text())["mean"]
    assert metrics["mean_aligned"]["psnr"] > metrics["mean"]["psnr"] + 0.2

    refined = trainer("refined", refine=True, steps=4)
    refined.run()
    with pytest.raises(ConfigError, match="holds pose corrections, but hooks.PoseOptHook.refine is false"):
        trainer("again", refine=False).run(resume_from=find_latest(refined.exp_dir))


def test_checkpoint_from_another_view_count_is_a_clear_error(toy_config, tmp_path):
    run = make_trainer(toy_config(POSE_EXTRA, overrides=[f"exp_dir={tmp_path / 'a'}", "trainer.max_steps=4"]))
    run.run()
    other = make_trainer(toy_config(POSE_EXTRA, overrides=[f"exp_dir={tmp_path / 'b'}", "dataset.num_train=5"]))
    with pytest.raises(CheckpointError, match="pose corrections for 4 views, this dataset has 5 training views"):
        other.run(resume_from=find_latest(run.exp_dir))


def test_hook_config_errors(toy_config):
    # Named where the user wrote them (the list entry), as every Config's own check is.
    with pytest.raises(ConfigError, match=r"^hooks\[0\]\.lr: must be > 0, got 0"):
        toy_config({"hooks": [{"type": "PoseOptHook", "lr": 0}]})
    with pytest.raises(ConfigError, match=r"^hooks\.PoseOptHook\.weight_decay: must be >= 0"):
        toy_config({"hooks": {"PoseOptHook": {"weight_decay": -1}}})


class _EvalTrainer:
    """What PoseOptHook's test-time alignment reads from a trainer (weak-referenceable)."""

    def __init__(self, model, renderer) -> None:
        self.model, self.renderer = model, renderer
        self.dataset = SimpleNamespace(background=(0.0, 0.0, 0.0))
        self.device = torch.device("cpu")


@pytest.mark.parametrize("method", ["gauss_newton", "adam"])
def test_test_time_alignment_fits_the_test_pose_and_leaves_the_model_alone(method):
    scene = _scene()
    means = torch.nn.Parameter(scene.render_params()["means"].clone())
    params = {**scene.render_params(), "means": means}
    model = SimpleNamespace(render_params=lambda: params)
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="auto"))
    image = renderer(model, [_camera(torch.eye(4))], (0.0, 0.0, 0.0))["rgb"][0].detach()
    view = View(_camera(_perturbation()), (image * 255).round().to(torch.uint8), "t0", 0)
    hook = PoseOptHook(PoseOptHook.Config(test_align_steps=150, test_align_method=method, test_align_lr=2e-3))
    trainer = _EvalTrainer(model, renderer)
    hook.trainer = trainer
    with torch.no_grad():  # as the trainer evaluates
        fitted, _ = hook._aligned_viewmat(trainer, view, 150)
    before = float((_perturbation() - torch.eye(4)).abs().max())
    after = float((fitted - torch.eye(4)).abs().max())
    assert after < 0.15 * before, (before, after)
    assert torch.equal(view.camera.viewmat, _perturbation())  # the dataset's view is kept
    assert means.grad is None


def test_metrics_json_keeps_given_poses_in_mean_and_adds_the_aligned_scores(toy_config, tmp_path):
    def run(steps: int) -> dict:
        extra = {
            **POSE_EXTRA,
            "trainer": {"max_steps": 8, "val_interval": 0, "test_at_end": True, "save_test_renders": False},
        }
        # The toy renderer has no depth to linearise with: Adam's fit needs only gradients.
        align = {"test_align_steps": steps, "test_align_method": "adam", "test_align_lr": 0.05}
        extra["hooks"] = [{"type": "PoseOptHook", "lr": 0.01, **align}]
        trainer = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / str(steps)}"]))
        trainer.run()
        return json.loads((tmp_path / str(steps) / "metrics.json").read_text())

    plain, aligned = run(0), run(30)
    assert "mean_aligned" not in plain and "per_view_aligned" not in plain
    # "mean" is the same training scored on the given poses, with or without alignment.
    assert aligned["mean"] == plain["mean"] and aligned["per_view"] == plain["per_view"]
    assert set(aligned["per_view_aligned"]) == set(aligned["per_view"])
    # Equal scores would mean the aligned pass rendered the dataset's pose, not the fitted one.
    assert aligned["mean_aligned"]["psnr"] > aligned["mean"]["psnr"] + 0.2


def test_summary_names_both_figures_given_poses_first(tmp_path):
    from pointrix_lite.cli.summary import format_summary

    view = {"psnr": 25.0, "ssim": 0.9, "lpips": None}
    fitted = {"psnr": 27.5, "ssim": 0.93, "lpips": None}
    report = {
        "mean": view,
        "per_view": {"a": view},
        "mean_aligned": fitted,
        "per_view_aligned": {"a": fitted},
        "steps": 10,
        "train_seconds": 1.0,
        "num_gaussians": 5,
    }
    (tmp_path / "metrics.json").write_text(json.dumps(report))
    lines = format_summary(tmp_path).splitlines()
    assert lines[1].startswith("test (1 views): PSNR 25.00 dB")
    assert lines[2].startswith("test, poses fitted to the images (1 views): PSNR 27.50 dB")
    del report["mean_aligned"], report["per_view_aligned"]
    (tmp_path / "metrics.json").write_text(json.dumps(report))
    assert "fitted" not in format_summary(tmp_path)


@pytest.mark.parametrize("method", ["gauss_newton", "adam"])
def test_alignment_stops_when_converged_and_never_returns_a_worse_pose(method):
    scene = _scene()
    base = GaussianRenderer(GaussianRenderer.Config(backend="auto"))
    renders = []

    def renderer(model, cameras, background):
        renders.append(cameras[0].width)
        return base(model, cameras, background)

    def error(view, viewmat):  # what each method minimises: squared error (Gauss-Newton) or L1 (Adam)
        with torch.no_grad():
            rgb = base(scene, [replace(view.camera, viewmat=viewmat)], (0.0, 0.0, 0.0))["rgb"][0]
        diff = rgb - view.float_image("cpu")
        return float(diff.square().mean() if method == "gauss_newton" else diff.abs().mean())

    image = base(scene, [_camera(torch.eye(4), size=64)], (0.0, 0.0, 0.0))["rgb"][0].detach()
    hook = PoseOptHook(PoseOptHook.Config(test_align_steps=400, test_align_method=method, test_align_lr=2e-3))
    trainer = _EvalTrainer(scene, renderer)
    hook.trainer = trainer
    perturbed = View(_camera(_perturbation(), size=64), (image * 255).round().to(torch.uint8), "t0", 0)
    with torch.no_grad():
        fitted, fitted_out = hook._aligned_viewmat(trainer, perturbed, 400)
    before = float((_perturbation() - torch.eye(4)).abs().max())
    assert float((fitted - torch.eye(4)).abs().max()) < 0.15 * before
    assert len(renders) < 400 and set(renders) == {64}  # converged before the step budget, at full size
    if method == "gauss_newton":
        assert len(renders) <= 40  # one forward render per iteration, where Adam takes ~100 render+backward steps
        # The fit hands back the render of the pose it returns, for scoring without rendering it again.
        with torch.no_grad():
            again = base(scene, [replace(perturbed.camera, viewmat=fitted)], (0.0, 0.0, 0.0))["rgb"]
        assert torch.equal(fitted_out["rgb"], again)
        # Given the render of the starting pose (the test pass has one), the fit does not render it again.
        n_before = len(renders)
        with torch.no_grad():
            start = base(scene, [perturbed.camera], (0.0, 0.0, 0.0))
            refit, _ = hook._aligned_viewmat(trainer, perturbed, 400, start)
        assert torch.equal(refit, fitted) and len(renders) - n_before == n_before - 1
    else:
        assert fitted_out is None  # Adam keeps no render: the hook renders the fitted pose itself

    # Already on the right pose: whatever the steps try, the result explains the image at least as well.
    exact = replace(perturbed, camera=_camera(torch.eye(4), size=64))
    renders.clear()
    with torch.no_grad():
        kept, _ = hook._aligned_viewmat(trainer, exact, 400)
    assert error(exact, kept) <= error(exact, torch.eye(4)) and len(renders) < 400


def test_gauss_newton_alignment_needs_depth_and_alpha_from_the_renderer():
    view = View(_camera(torch.eye(4), size=8), torch.zeros(8, 8, 3, dtype=torch.uint8), "t0", 0)
    trainer = _EvalTrainer(SimpleNamespace(), lambda model, cameras, bg: {"rgb": torch.zeros(1, 8, 8, 3)})
    hook = PoseOptHook(PoseOptHook.Config(test_align_steps=5))
    hook.trainer = trainer
    with pytest.raises(
        ConfigError,
        match=r"^hooks\.PoseOptHook\.test_align_method: gauss_newton needs .*'depth'.*"
        r"use test_align_method: adam$",
    ):
        hook._aligned_viewmat(trainer, view, 5)
