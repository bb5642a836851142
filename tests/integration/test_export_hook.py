"""PlyExportHook on its own: writes what load_ply reads back, skips models without Gaussians."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from pointrix_lite.errors import ConfigError
from pointrix_lite.export.hook import PlyExportHook
from pointrix_lite.io.ply import load_ply
from pointrix_lite.model.gaussian_model import GaussianModel


class _FakeTrainer:
    def __init__(self, model, exp_dir: Path, step: int = 0) -> None:
        self.model, self.exp_dir, self.global_step = model, exp_dir, step
        self.printed: list[str] = []
        self.console = types.SimpleNamespace(print=lambda msg, **_: self.printed.append(msg))


def _attach(hook: PlyExportHook, trainer: _FakeTrainer) -> PlyExportHook:
    hook.trainer = trainer  # stored as a weak reference, like the real trainer does
    return hook


def test_writes_ply_after_train_and_snapshots(tmp_path):
    model = GaussianModel(GaussianModel.Config(sh_degree=1, init_num_points=50))
    trainer = _FakeTrainer(model, tmp_path, step=20)
    hook = _attach(PlyExportHook(PlyExportHook.Config(every=10)), trainer)
    hook.after_train_iter(batch_idx=0, batch=[])
    trainer.global_step = 25
    hook.after_train_iter(batch_idx=0, batch=[])  # not a multiple of 10: nothing
    hook.after_train()
    assert sorted(p.name for p in tmp_path.glob("*.ply")) == ["point_cloud.ply", "point_cloud_step_000020.ply"]
    params = load_ply(tmp_path / "point_cloud.ply")
    for name, value in model.params.items():
        assert torch.equal(params[name], value.detach()), name
    assert hook.path == tmp_path / "point_cloud.ply"


def test_model_without_params_is_skipped_with_a_note(tmp_path):
    trainer = _FakeTrainer(torch.nn.Linear(2, 2), tmp_path)
    hook = _attach(PlyExportHook(PlyExportHook.Config()), trainer)
    hook.after_train()
    assert not list(tmp_path.iterdir()) and hook.path is None
    assert trainer.printed == ["PlyExportHook: Linear has no Gaussian params; no PLY written"]


@pytest.mark.parametrize("options", [{"every": -1}, {"filename": "/abs.ply"}])
def test_bad_options_are_config_errors(options):
    with pytest.raises(ConfigError, match="hooks.PlyExportHook"):  # refused by the Config itself
        PlyExportHook.Config(**options)
