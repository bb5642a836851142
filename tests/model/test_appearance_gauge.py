"""The appearance gauge holds: AppearanceOptHook's ``center`` keeps the mean log-gain and the mean bias
over the training views at 0 after every step, so with every training photo under its own known
exposure the transforms come out as the applied gains relative to their geometric mean, and the
canonical colours (what test views render) sit at that mean exposure.

The photos fix only ratios: gains x2 with colours x0.5 explain them as well, so without the
constraint the common level is wherever the optimisers leave it (checked below: the test can fail).
"""

from __future__ import annotations

import torch

from tests.engine.engine_helpers import make_trainer

from .test_appearance_opt import APP_EXTRA, _app_hook

# Per training view and channel: an exposure times a white balance, one view brightened past 1
# (its photo clips as a camera's would; the hook's `clip` does the same to the transformed render).
GAINS = torch.tensor([[0.55, 0.60, 0.50], [0.80, 0.75, 0.85], [1.00, 0.95, 1.05], [1.25, 1.30, 1.20]])
EXTRA = {**APP_EXTRA, "trainer": {"max_steps": 400, "val_interval": 0, "test_at_end": False}}


def _exposed_trainer(cfg):
    trainer = make_trainer(cfg)
    for view, gain in zip(trainer.dataset.train_views, GAINS):
        view.image = (view.image.float() * gain).round().clamp(0, 255).to(torch.uint8)
    return trainer


def _train(toy_config, tmp_path, name: str, center: bool = True):
    extra = {**EXTRA, "hooks": [{**APP_EXTRA["hooks"][1], "center": center}]}
    trainer = _exposed_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / name}"]))
    hook = _app_hook(trainer)
    means: list[torch.Tensor] = []
    step_after = hook.after_train_iter

    def recording(batch_idx: int, batch: list) -> None:  # the gauge after every step, not only the last
        step_after(batch_idx, batch)
        means.append(hook.correction.delta.detach().mean(0))

    hook.after_train_iter = recording
    trainer.run()
    return trainer, hook.correction.delta.detach(), torch.stack(means)


def test_the_appearance_gauge_holds(toy_config, tmp_path):
    trainer, delta, means = _train(toy_config, tmp_path, "centred")
    assert len(means) == EXTRA["trainer"]["max_steps"]
    # mean log-gain and mean bias at 0 after every step, to float32 precision of numbers ~0.5
    assert float(means.abs().max()) < 1e-6, means.abs().max(0)

    # The recovered gains are the applied ones relative to their geometric mean, per channel.
    log_applied = GAINS.log()
    expected = log_applied - log_applied.mean(0)
    assert float((delta[:, :3] - expected).abs().max()) < 0.04, (delta[:, :3], expected)  # measured 0.026
    assert float(delta[:, 3:].abs().max()) < 0.03, delta[:, 3:]  # no bias was applied (measured 0.014)

    # The canonical colours are the photos' mean exposure: the toy's render is the clean image times
    # the geometric-mean gain, per channel (on mid-tones: the toy's sigmoid never reaches 0).
    clean = trainer.dataset.test_views[0].float_image()
    with torch.no_grad():
        render = trainer.renderer(trainer.model, [trainer.dataset.test_views[0].camera], (0.0, 0.0, 0.0))["rgb"][0]
    mid = (clean > 0.2) & (clean < 0.8)
    level = torch.stack([(render / clean)[..., c][mid[..., c]].median() for c in range(3)])
    assert torch.allclose(level, log_applied.mean(0).exp(), atol=0.02), (level, log_applied.mean(0).exp())


def test_without_centring_the_level_is_free(toy_config, tmp_path):
    """The contrast: the same run with ``center: false`` ends with a common gain away from 1 (the
    Gaussians' colours off the photos' mean exposure by as much), though the photos agree as well."""
    _, delta, means = _train(toy_config, tmp_path, "free", center=False)
    assert float(means[-1, :3].abs().max()) > 0.05, means[-1]
    relative = delta[:, :3] - delta[:, :3].mean(0)  # the ratios are still found
    expected = GAINS.log() - GAINS.log().mean(0)
    assert float((relative - expected).abs().max()) < 0.05
