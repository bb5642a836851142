"""Per-image appearance: the colour transform's maths, gradients through the loss, a spoiled view's
gain recovered, canonical colours on test views, exact resume, config errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from pointrix_lite.engine.checkpoint import find_latest
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.hooks import AppearanceOptHook
from pointrix_lite.errors import CheckpointError, ConfigError
from pointrix_lite.model.appearance import AppearanceCorrection
from pointrix_lite.registry import MODELS
from tests.engine.engine_helpers import make_trainer, stop_and_resume
from tests.integration.conftest import REPO, demo_overrides
from tests.model.helpers import make_model, make_view


def _numpy_transform(rgb: np.ndarray, delta: np.ndarray, mode: str) -> np.ndarray:
    """Independent reference: per pixel ``M @ rgb + b`` with ``M`` built from the documented layout."""
    if mode == "gain_bias":
        M, b = np.diag(np.exp(delta[:3])), delta[3:]
    else:
        M, b = np.eye(3) + delta[:9].reshape(3, 3), delta[9:]
    return (rgb.reshape(-1, 3) @ M.T + b).reshape(rgb.shape)


@pytest.mark.parametrize("mode", ["gain_bias", "affine"])
def test_transform_is_identity_at_zero_and_matches_a_numpy_reference(mode):
    g = torch.Generator().manual_seed(0)
    rgb = torch.rand(3, 5, 7, 3, generator=g)
    corr = AppearanceCorrection(4, mode)
    assert torch.equal(corr(rgb, torch.tensor([0, 2, 3])), rgb)  # exactly: x * 1 + 0
    with torch.no_grad():
        corr.delta.copy_(0.3 * torch.randn(corr.delta.shape, generator=g))
    ids = torch.tensor([3, 1, 3])
    out = corr(rgb, ids).detach().numpy()
    for c, i in enumerate(ids.tolist()):
        expected = _numpy_transform(rgb[c].double().numpy(), corr.delta[i].detach().double().numpy(), mode)
        assert np.allclose(out[c], expected, atol=1e-6)
    assert torch.allclose(corr.apply_one(rgb[1], 1), corr(rgb[1:2], torch.tensor([1]))[0])


@pytest.mark.parametrize("mode", ["gain_bias", "affine"])
def test_gradients_reach_the_transform_through_the_model_loss(mode):
    model = make_model(n=20, sh_degree=0)
    g = torch.Generator().manual_seed(1)
    render = torch.rand(1, 24, 24, 3, generator=g, dtype=torch.float64)
    photo = (torch.rand(24, 24, 3, generator=g) * 255).round().to(torch.uint8)
    corr = AppearanceCorrection(3, mode).double()
    view = replace(make_view(photo, index=2), color_transform=lambda rgb: corr.apply_one(rgb, 2))
    with torch.no_grad():
        corr.delta.normal_(0.0, 0.1, generator=g)

    # The model's loss (L1 + float32 SSIM) reaches exactly the batch view's row.
    model.get_loss_dict({"rgb": render}, [view])["loss"].backward()
    assert torch.count_nonzero(corr.delta.grad[[0, 1]]) == 0
    assert torch.count_nonzero(corr.delta.grad[2]) == corr.delta.shape[1]

    # Its pairing of render and photo, under a smooth loss in double precision: autograd against
    # central differences (L1's kinks would make the differences of the real loss noisy).
    def loss_at(delta: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            corr.delta.copy_(delta)
        rgb, gt = model._targets({"rgb": render}, [view])
        return ((rgb - gt) ** 2).sum()

    base = corr.delta.detach().clone()
    corr.delta.grad = None
    loss_at(base).backward()
    grad, eps = corr.delta.grad[2].clone(), 1e-6
    for k in range(corr.delta.shape[1]):
        plus, minus = base.clone(), base.clone()
        plus[2, k] += eps
        minus[2, k] -= eps
        fd = (loss_at(plus).item() - loss_at(minus).item()) / (2 * eps)
        assert fd == pytest.approx(grad[k].item(), rel=1e-6)


def test_hook_config_errors_are_one_line_config_errors(toy_config):
    cases = [
        ({"lr": 0}, r"^hooks\[0\]\.lr: "),
        ({"weight_decay": -1}, r"^hooks\[0\]\.weight_decay: "),
        ({"start_step": -1}, r"^hooks\[0\]\.start_step: "),
        ({"mode": "grid"}, r"^hooks\[0\]\.mode: "),
        ({"tv_weight": -1}, r"^hooks\[0\]\.tv_weight: "),
        ({"grid": [8, 1, 16]}, r"^hooks\[0\]\.grid: "),
        ({"grid": [8, 16]}, r"^hooks\[0\]\.grid: "),
        ({"vignetting_lr": 0}, r"^hooks\[0\]\.vignetting_lr: "),
    ]
    for options, match in cases:
        with pytest.raises(ConfigError, match=match) as err:
            toy_config({"hooks": [{"type": "AppearanceOptHook", **options}]})
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="AppearanceOptHook.mode: must be one of gain_bias, affine"):
        AppearanceOptHook.Config(mode="grid")  # built in Python, past the YAML's type check


# --- the hook inside the trainer ------------------------------------------------------------------

ToyModel = MODELS.get("ToyModel", "test")


@MODELS.register("ColourAwareToyModel")
class ColourAwareToyModel(ToyModel):
    """The toy model whose loss applies each view's ``color_transform``, as GaussianModel's does."""

    def get_loss_dict(self, render_out: dict, batch: list) -> dict:
        rgb = torch.stack(
            [c if v.color_transform is None else v.color_transform(c) for v, c in zip(batch, render_out["rgb"])]
        )
        return super().get_loss_dict({**render_out, "rgb": rgb}, batch)


SPOILED_VIEW, SPOIL_GAIN = 2, 0.7
APP_EXTRA = {
    "trainer": {"max_steps": 300, "val_interval": 0, "test_at_end": False},
    "dataset": {"size": 12},
    "model": {"type": "ColourAwareToyModel", "lr": 0.05, "lr_final_factor": 1.0},
    # lr_final 1: a constant lr, so 300 toy steps recover the gain (the decay is tested on its own below)
    "hooks": [{"type": "CheckPointHook", "interval": 100}, {"type": "AppearanceOptHook", "lr": 0.02, "lr_final": 1.0}],
    "writers": [],
}


def _app_hook(trainer) -> AppearanceOptHook:
    return next(h for h in trainer.hooks if isinstance(h, AppearanceOptHook))


def _spoiled_trainer(cfg):
    trainer = make_trainer(cfg)
    view = trainer.dataset.train_views[SPOILED_VIEW]
    view.image = (view.image.float() * SPOIL_GAIN).round().to(torch.uint8)
    return trainer


def test_a_spoiled_views_gain_is_recovered_and_resume_is_exact(toy_config, tmp_path):
    straight = _spoiled_trainer(toy_config(APP_EXTRA, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()
    delta = _app_hook(straight).correction.delta.detach()
    gains = delta[:, :3].exp()
    # Only the ratio to the other views is observable (the toy has no background to anchor the
    # level, and `center` holds the mean log-gain at 0): the spoiled view's gain is 0.7 of the others'.
    others = gains[[i for i in range(4) if i != SPOILED_VIEW]]
    assert torch.allclose(gains[SPOILED_VIEW] / others.mean(0), torch.full((3,), SPOIL_GAIN), atol=0.03), gains
    assert float((others - others.mean(0)).abs().max()) < 0.02, gains  # the clean views agree
    assert float(delta.mean(0).abs().max()) < 1e-6  # centred: the average transform is the identity
    # The dataset's views are untouched: only the copies handed to the loss carry a transform.
    assert all(v.color_transform is None for v in straight.dataset.train_views)

    cfg = toy_config(APP_EXTRA, overrides=[f"exp_dir={tmp_path / 'resumed'}"])
    first, checkpoint, second = stop_and_resume(cfg, 150, build=_spoiled_trainer)
    saved = checkpoint["hooks"]["AppearanceOptHook"]
    assert saved["mode"] == "gain_bias" and torch.equal(saved["delta"], _app_hook(first).correction.delta.detach())
    assert saved["optimizer"]["state"]  # Adam's moments travel too
    assert torch.equal(_app_hook(second).correction.delta.detach(), delta)
    assert torch.equal(second.model.params["means"].detach(), straight.model.params["means"].detach())


def test_test_views_are_scored_on_canonical_colours(toy_config, tmp_path):
    extra = {
        **APP_EXTRA,
        "trainer": {"max_steps": 20, "val_interval": 0, "test_at_end": False, "save_test_renders": False},
    }
    hooked = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'hooked'}"]))
    hooked.run()
    hook = _app_hook(hooked)
    with torch.no_grad():
        hook.correction.delta.normal_(0.0, 0.5)  # far from the identity: would change every score
    report = hooked.test()
    with torch.no_grad():
        hook.correction.delta.zero_()
    assert hooked.test()["per_view"] == report["per_view"]
    # ... and those scores are the model's own renders against the test photos.
    view = hooked.dataset.test_views[0]
    with torch.no_grad():
        out = hooked.renderer(hooked.model, [view.camera], hooked.dataset.background)
        psnr = float(hooked.model.get_metric_dict(out, [view])["psnr"])
    assert report["per_view"][view.name]["psnr"] == pytest.approx(psnr, abs=1e-4)


def test_identity_transform_leaves_the_first_step_unchanged(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 1, "val_interval": 0, "test_at_end": False}}
    plain = make_trainer(toy_config({**extra, "hooks": []}, overrides=[f"exp_dir={tmp_path / 'plain'}"]))
    plain.run()
    hooked = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'hooked'}"]))
    hooked.run()
    assert torch.equal(hooked.loss_dict["loss"], plain.loss_dict["loss"])
    assert torch.equal(hooked.model.params["means"].detach(), plain.model.params["means"].detach())
    assert torch.count_nonzero(_app_hook(hooked).correction.delta) > 0  # and the transforms did step


def test_start_step_holds_the_transforms_at_identity(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 12, "val_interval": 0, "test_at_end": False}}
    extra["hooks"] = [{"type": "AppearanceOptHook", "lr": 0.02, "start_step": 8}]
    trainer = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'a'}", "trainer.max_steps=8"]))
    trainer.run()
    assert torch.count_nonzero(_app_hook(trainer).correction.delta) == 0
    trainer = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'b'}"]))
    trainer.run()
    assert torch.count_nonzero(_app_hook(trainer).correction.delta) > 0


def test_a_model_that_ignores_the_transform_is_a_clear_error(toy_config, tmp_path):
    trainer = make_trainer(toy_config({"hooks": [{"type": "AppearanceOptHook"}]}, overrides=[f"exp_dir={tmp_path}"]))
    with pytest.raises(ConfigError, match="model ToyModel's loss ignores View.color_transform"):
        trainer.run()


def test_checkpoint_from_another_mode_or_view_count_is_a_clear_error(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 4, "val_interval": 0, "test_at_end": False}}
    run = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'a'}"]))
    run.run()
    other = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'b'}", "dataset.num_train=5"]))
    with pytest.raises(CheckpointError, match="colour transforms for 4 views, this dataset has 5 training views"):
        other.run(resume_from=find_latest(run.exp_dir))
    affine = {**extra, "hooks": [{"type": "AppearanceOptHook", "mode": "affine"}]}
    other = make_trainer(toy_config(affine, overrides=[f"exp_dir={tmp_path / 'c'}"]))
    with pytest.raises(CheckpointError, match="mode 'gain_bias' transforms, this config has mode 'affine'"):
        other.run(resume_from=find_latest(run.exp_dir))


def test_bilagrid_learns_under_its_smoothness_and_resumes_exactly(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 40, "val_interval": 0, "test_at_end": False}}
    extra["hooks"] = [
        {"type": "CheckPointHook", "interval": 20},
        {"type": "AppearanceOptHook", "mode": "bilagrid", "lr": 0.02},
    ]
    straight = _spoiled_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()
    hook = _app_hook(straight)
    delta = hook.correction.delta.detach().clone()
    assert torch.count_nonzero(delta) > 0 and float(delta.mean(0).abs().max()) < 1e-6  # learnt; the gauge holds
    first, checkpoint, second = stop_and_resume(
        toy_config(extra, overrides=[f"exp_dir={tmp_path / 'resumed'}"]), 20, build=_spoiled_trainer
    )
    assert checkpoint["hooks"]["AppearanceOptHook"]["mode"] == "bilagrid"
    assert torch.equal(_app_hook(second).correction.delta.detach(), delta)
    assert torch.equal(second.model.params["means"].detach(), straight.model.params["means"].detach())
    # `grid` sizes the grids; resuming with another size names both instead of a shape mismatch.
    extra["hooks"][1]["grid"] = [2, 4, 3]
    coarse = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'coarse'}"]))
    with pytest.raises(
        CheckpointError, match=r"checkpoint has \[8, 16, 16\] bilateral grids, this config has grid: \[2, 4, 3\]"
    ):
        coarse.run(resume_from=find_latest(straight.exp_dir))
    assert _app_hook(coarse).correction.delta.shape[1] == 12 * 2 * 4 * 3
    del extra["hooks"][1]["grid"]
    # The smoothness term reaches the optimizer: without it the grids come out rougher.
    extra["hooks"][1]["tv_weight"] = 0.0
    rough = _spoiled_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'rough'}"]))
    rough.run()
    tv_rough, tv = (float(_app_hook(t).correction.total_variation().detach()) for t in (rough, straight))
    assert tv_rough > 1.5 * tv, (tv_rough, tv)


# --- the real model on the demo scene -------------------------------------------------------------


def test_demo_keeps_clean_views_at_identity_and_finds_a_spoiled_views_gain(tmp_path):
    """300 steps at 80x80 (the integration tests' short run) with one training photo darkened to 0.7.

    The white background anchors the absolute level, so the gains themselves are observable.
    """
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()  # the real dataset, model, renderer and strategy (the CLI does the same)
    overrides = demo_overrides(tmp_path / "exp", "writers=[]", "trainer.test_at_end=false", "trainer.val_interval=0")
    # lr_final 1 (constant lr): 300 steps show each view ~7 times, too few for the default decay to
    # 1% to find a gain (python -m benchmarks appearance measures the defaults over a whole run)
    hooks = (
        "hooks=[{type: ResolutionScheduleHook, start_factor: 4, full_res_at: 0.3, hold_means_lr: true}, "
        "{type: AppearanceOptHook, lr_final: 1.0}]"
    )
    cfg = load_experiment(REPO / "configs" / "demo.yaml", [*overrides, hooks])
    trainer = DefaultTrainer(cfg, cfg.exp_dir, "cpu")
    view = trainer.dataset.train_views[SPOILED_VIEW]
    view.image = (view.image.float() * SPOIL_GAIN).round().to(torch.uint8)
    trainer.run()
    delta = _app_hook(trainer).correction.delta.detach()
    gains, biases = delta[:, :3].exp(), delta[:, 3:]

    def colour_error(view: int, gain: float) -> float:
        """Largest |transform(x) - gain * x| over x in [0, 1] and the channels (affine in x: the ends)."""
        return max(float(biases[view].abs().max()), float((gains[view] + biases[view] - gain).abs().max()))

    clean = [i for i in range(len(gains)) if i != SPOILED_VIEW]
    clean_errors = [colour_error(i, 1.0) for i in clean]
    errors = {
        "clean_max": max(clean_errors),
        "clean_mean": sum(clean_errors) / len(clean_errors),
        "spoiled": colour_error(SPOILED_VIEW, SPOIL_GAIN),
        "spoiled_gain": gains[SPOILED_VIEW].tolist(),
        "spoiled_bias": biases[SPOILED_VIEW].tolist(),
    }
    print(json.dumps(errors))
    # Measured (2026-11-25, deterministic here): clean views 0.08 from the identity on average, 0.17 at
    # most; the spoiled one 0.08 from x -> 0.7 x (gains 0.72-0.75). 300 steps show each view about 7
    # times, so the transforms are still noisy (docs/model.md: what that costs on clean photos).
    assert errors["clean_max"] < 0.25 and errors["clean_mean"] < 0.12 and errors["spoiled"] < 0.12
    assert abs(float(gains[SPOILED_VIEW].mean()) - SPOIL_GAIN) < 0.1


def test_the_lr_decays_exponentially_to_lr_final_at_max_steps(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 10, "val_interval": 0, "test_at_end": False}}
    extra["hooks"] = [{"type": "AppearanceOptHook", "lr": 0.02, "lr_final": 0.1}]
    trainer = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path}"]))
    hook = _app_hook(trainer)
    seen: list[tuple[int, float]] = []
    step_after = hook.after_train_iter

    def recording(batch_idx: int, batch: list) -> None:
        step_after(batch_idx, batch)
        seen.append((trainer.global_step, hook.optimizer.param_groups[0]["lr"]))

    hook.after_train_iter = recording
    trainer.run()
    base = 0.02 * math.sqrt(trainer.effective_batch_size)
    assert len(seen) == 10
    for step, lr in seen:  # the lr the step just used, from the step count alone
        assert lr == pytest.approx(base * 0.1 ** (step / 10), rel=1e-12)
    assert seen[-1][1] == pytest.approx(base * 0.1)


def test_vignetting_learns_outside_the_gauge_and_resumes_exactly(toy_config, tmp_path):
    extra = {**APP_EXTRA, "trainer": {"max_steps": 40, "val_interval": 0, "test_at_end": False}}
    extra["hooks"] = [{"type": "CheckPointHook", "interval": 20}, {"type": "AppearanceOptHook", "vignetting": True}]
    straight = _spoiled_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()
    hook = _app_hook(straight)
    falloff = hook.correction.falloff.detach().clone()
    # Learnt, and not centred over the views as the colour maps are (the image centre is its gauge).
    assert torch.count_nonzero(falloff) > 0 and float(falloff.mean(0).abs().max()) > 1e-4
    assert float(hook.correction.delta.detach().mean(0).abs().max()) < 1e-6
    first, checkpoint, second = stop_and_resume(
        toy_config(extra, overrides=[f"exp_dir={tmp_path / 'resumed'}"]), 20, build=_spoiled_trainer
    )
    assert checkpoint["hooks"]["AppearanceOptHook"]["falloff"] is not None
    assert torch.equal(_app_hook(second).correction.falloff.detach(), falloff)
    assert torch.equal(second.model.params["means"].detach(), straight.model.params["means"].detach())
    extra["hooks"][1]["vignetting"] = False
    plain = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'plain'}"]))
    with pytest.raises(CheckpointError, match="checkpoint has vignetting on, this config has vignetting: false"):
        plain.run(resume_from=find_latest(straight.exp_dir))
