"""``trainer.random_background``: each training step renders on its own colour, evaluation on the data
set's, a resumed run draws the same colours, and images with transparency are refused.

The renderer is wrapped to record every call's background, and whether the call came from a training
step; the first training render is checked against a second render of the same model on black
(``rgb_c - rgb_0 = c * (1 - alpha)``, the compositing rule), so the colour is known to reach the pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pointrix_lite.config import OptionError
from pointrix_lite.engine import loop
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer, TrainingInterrupted

from .scene import real_raw_config, stop_after
from .test_exact_resume import _tensors_equal

STOP = 7


@pytest.fixture(scope="module")
def opaque_scene(tiny_scene: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny scene with every PNG flattened to RGB (on black), as photos are."""
    root = tmp_path_factory.mktemp("opaque_scene")
    for src in tiny_scene.rglob("*"):
        dst = root / src.relative_to(tiny_scene)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        elif src.suffix == ".png":
            rgba = np.asarray(Image.open(src).convert("RGBA"), dtype=np.float64) / 255.0
            rgb = rgba[..., :3] * rgba[..., 3:]
            Image.fromarray(np.rint(rgb * 255).astype(np.uint8), "RGB").save(dst)
        else:
            dst.write_bytes(src.read_bytes())
    return root


class Recorder:
    """Stands in for the trainer's renderer: forwards every call, noting (step, training?, background)."""

    def __init__(self, trainer: DefaultTrainer) -> None:
        self.inner, self.trainer = trainer.renderer, trainer
        self.training = False
        self.calls: list[tuple[int, bool, tuple[float, ...]]] = []
        self.composite_error: float | None = None

    def __call__(self, model, cameras, background, **kw):
        out = self.inner(model, cameras, background, **kw)
        colour = tuple(float(x) for x in torch.as_tensor(background).reshape(-1))
        if self.training and self.composite_error is None:
            with torch.no_grad():
                black = self.inner(model, cameras, (0.0, 0.0, 0.0), **kw)
                want = torch.tensor(colour) * (1.0 - out["alpha"].detach())
                self.composite_error = float((out["rgb"].detach() - black["rgb"] - want).abs().max())
        self.calls.append((self.trainer.global_step, self.training, colour))
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _trainer(tmp_path: Path, name: str, scene: Path, backend: str, random: bool = True) -> DefaultTrainer:
    raw = real_raw_config(tmp_path / name, scene, backend, random_background=random, val_interval=8)
    raw["writers"] = []
    cfg = load_experiment(None, data=raw)
    return DefaultTrainer(cfg, tmp_path / name / "exp", "cpu")


def _record(trainer: DefaultTrainer) -> Recorder:
    recorder = Recorder(trainer)
    trainer.renderer = recorder
    step = trainer.train_step

    def train_step(batch):
        recorder.training = True
        try:
            return step(batch)
        finally:
            recorder.training = False

    trainer.train_step = train_step
    return recorder


def test_training_steps_draw_a_colour_each_evaluation_keeps_the_datasets(tmp_path, opaque_scene, backend) -> None:
    straight = _trainer(tmp_path, "straight", opaque_scene, backend)
    calls = _record(straight)
    straight.run()

    train = [(step, colour) for step, training, colour in calls.calls if training]
    assert [step for step, _ in train] == list(range(16))
    colours = np.array([colour for _, colour in train])
    assert colours.shape == (16, 3) and (colours >= 0).all() and (colours <= 1).all()
    assert len({tuple(c) for c in colours}) == 16  # a new colour every step
    assert colours.std(axis=0).min() > 0.1  # spread over the cube, not a constant plus noise
    for step, colour in train:
        assert colour == pytest.approx(loop.step_background(straight, step), abs=1e-7)
    evaluation = [colour for _, training, colour in calls.calls if not training]
    assert evaluation and all(c == straight.dataset.background for c in evaluation)
    assert calls.composite_error is not None and calls.composite_error < 1e-5

    # Stopped after 7 steps and resumed in a fresh trainer: the same colours from step index 7 on, the same model.
    stopped = _trainer(tmp_path, "stopped", opaque_scene, backend)
    stopped.register_hook(stop_after(STOP))
    with pytest.raises(TrainingInterrupted) as info:
        stopped.run()
    resumed = _trainer(tmp_path, "stopped", opaque_scene, backend)
    again = _record(resumed)
    resumed.run(resume_from=info.value.checkpoint)
    assert [(s, c) for s, t, c in again.calls if t] == [(s, tuple(c)) for s, c in train if s >= STOP]
    _tensors_equal(resumed.model.state_dict(), straight.model.state_dict(), "model")


def test_the_colour_is_drawn_apart_from_the_strategys_numbers() -> None:
    """The strategy draws from the global streams ``distributed.step_rng`` seeds with ``(seed, step)``; the
    colour comes from a generator of its own, so it is not those streams' first numbers."""
    from types import SimpleNamespace

    from pointrix_lite import distributed

    trainer = SimpleNamespace(cfg=SimpleNamespace(seed=3, trainer=SimpleNamespace(random_background=True)))
    for step in range(4):
        with distributed.step_rng(3, step):
            first = [torch.rand(3, dtype=torch.float64).tolist(), np.random.random(3).tolist()]
        colour = loop.step_background(trainer, step)
        assert all(np.abs(np.subtract(colour, numbers)).max() > 1e-3 for numbers in first)
        assert colour == loop.step_background(trainer, step)  # and still a function of (seed, step)
    assert loop.step_background(trainer, 0) != loop.step_background(
        SimpleNamespace(cfg=SimpleNamespace(seed=4, trainer=trainer.cfg.trainer)), 0
    )


def test_off_every_step_renders_on_the_datasets_background(tmp_path, opaque_scene, backend) -> None:
    trainer = _trainer(tmp_path, "fixed", opaque_scene, backend, random=False)
    trainer.cfg.trainer.max_steps = 4
    calls = _record(trainer)
    trainer.run()
    assert [c for _, t, c in calls.calls if t] == [trainer.dataset.background] * 4


def test_transparent_images_are_refused_in_one_line(tmp_path, tiny_scene, backend) -> None:
    with pytest.raises(OptionError) as info:
        _trainer(tmp_path, "rgba", tiny_scene, backend)
    message = str(info.value)
    assert "\n" not in message and message.startswith("trainer.random_background: ")
    assert "has transparent pixels" in message and str(tiny_scene) in message
    _trainer(tmp_path, "rgba_off", tiny_scene, backend, random=False)  # the same scene trains without it
