"""Shared helpers of the engine tests: the toy plugin and toy experiment configs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pointrix_lite.cli.plugins import load_plugin
from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.engine.experiment import ExperimentConfig
from pointrix_lite.engine.hooks import Hook
from pointrix_lite.engine.trainer import DefaultTrainer, TrainingInterrupted

TOY_PLUGIN = Path(__file__).with_name("toy_components.py")
load_plugin(TOY_PLUGIN)  # registers ToyDataset, ToyModel, ToyRenderer, ToyStrategy once per process


def toy_raw_config(tmp_path: Path) -> dict[str, Any]:
    """A small experiment on the toy components: 4 train views (1 epoch = 4 steps)."""
    return {
        "name": "toy",
        "output_dir": str(tmp_path / "outputs"),
        "device": "cpu",
        "trainer": {"max_steps": 12, "val_interval": 6, "val_images": 1},
        "dataset": {"type": "ToyDataset"},
        "model": {"type": "ToyModel"},
        "renderer": {"type": "ToyRenderer"},
        "hooks": [{"type": "LogHook", "interval": 4}, {"type": "CheckPointHook", "interval": 8}],
        "writers": [{"type": "JsonlWriter"}],
    }


def merge(base: dict, extra: dict) -> dict:
    """Recursive dict merge; lists and scalars in ``extra`` replace those in ``base``."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def make_trainer(cfg: ExperimentConfig) -> DefaultTrainer:
    return DefaultTrainer(cfg, cfg.exp_dir, cfg.device)


class StopAt(Hook):
    """Ctrl-C once ``step`` steps are done (the trainer saves a checkpoint of that step)."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def after_train_iter(self, batch_idx, batch):
        if self.trainer.global_step == self.step:
            raise KeyboardInterrupt


def stop_and_resume(
    cfg: ExperimentConfig, step: int, build: Callable[[ExperimentConfig], DefaultTrainer] = make_trainer
) -> tuple[DefaultTrainer, dict, DefaultTrainer]:
    """Train ``cfg`` until ``step``, interrupted there, then resume its checkpoint in a new trainer to the end.

    Returns the interrupted trainer, the checkpoint it saved and the resumed trainer.
    """
    first = build(cfg)
    first.register_hook(StopAt(step))
    with pytest.raises(TrainingInterrupted):
        first.run()
    checkpoint = load_checkpoint_file(find_latest(cfg.exp_dir))
    second = build(cfg)
    second.run(resume_from=find_latest(cfg.exp_dir))
    return first, checkpoint, second
