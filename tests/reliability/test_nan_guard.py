"""NaN/Inf with the real model: training stops at the bad step and the last good checkpoint survives."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.cli.plugins import load_plugin
from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.hooks import NonFiniteLossError
from pointrix_lite.engine.trainer import DefaultTrainer

from .cli_helpers import FAULT_PLUGIN, logged
from .scene import real_raw_config

load_plugin(FAULT_PLUGIN)  # registers CorruptParamHook


def _trainer(tmp_path, scene, backend, corrupt: dict, guard: dict | None = None) -> DefaultTrainer:
    raw = real_raw_config(tmp_path, scene, backend, max_steps=12)
    raw["hooks"][1]["interval"] = 4
    raw["hooks"] += [{"type": "NaNGuardHook", **(guard or {})}, {"type": "CorruptParamHook", "step": 10, **corrupt}]
    cfg = load_experiment(None, data=raw)
    return DefaultTrainer(cfg, cfg.exp_dir, "cpu")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        # Every colour NaN: the rendered image and so the loss are NaN.
        ({"param": "sh0", "count": 0}, r"step 10: non-finite loss \(loss=nan, l1=nan, ssim=nan\)"),
        # One Gaussian's position NaN: the rasterizer culls it, the loss stays finite -- only the
        # parameter check sees it (without it every later checkpoint would carry the NaN).
        ({"param": "means", "count": 1}, r"step 10: non-finite model parameters \(params\.means: 3 of \d+ values\)"),
    ],
)
def test_stops_at_bad_step_and_keeps_last_good_checkpoint(tmp_path, tiny_scene, backend, corrupt, message):
    trainer = _trainer(tmp_path, tiny_scene, backend, corrupt)
    with pytest.raises(NonFiniteLossError, match=message) as exc:
        trainer.run()
    ckpt_dir = trainer.exp_dir / "checkpoints"
    assert str(exc.value).endswith(f"training stopped; last good checkpoint: {ckpt_dir / 'step_000008.pth'}")
    assert sorted(p.name for p in ckpt_dir.iterdir()) == ["latest.txt", "step_000004.pth", "step_000008.pth"]
    good = load_checkpoint_file(find_latest(trainer.exp_dir))
    assert good["step"] == 8
    assert all(torch.isfinite(v).all() for k, v in good["model"].items() if isinstance(v, torch.Tensor))
    assert trainer.writer.writers[0]._file.closed and max(logged(trainer.exp_dir)) == 9  # step 10 never logged
