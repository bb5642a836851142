"""Exact resume with the CPU recipe's options on: Gaussian budget, SH-rest interval, resolution schedule.

One run straight through 16 steps, one stopped after step 7 (checkpoint) and resumed in a fresh
trainer. The resolution schedule trains at 16x16 until step 4 and at 32x32 after, shN trains on steps
0, 3, 6, ..., the position lr holds until step 4, and the budget caps growth: all three depend on the step (and the checkpointed
budget start), so the resumed run must end bit for bit where the straight one does.
"""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer, TrainingInterrupted

from .scene import real_raw_config, stop_after
from .test_exact_resume import _tensors_equal

STOP, CAP = 7, 200


def _trainer(tmp_path, name: str, scene, backend: str) -> DefaultTrainer:
    raw = real_raw_config(tmp_path / name, scene, backend)
    raw["model"].update(sh_degree_interval=2, sh_rest_update_every=3)
    # The budget ramps over the refine window: end it within the run so growth happens in 16 steps.
    raw["strategy"].update(cap_max=CAP, refine_stop_iter=15)
    raw["hooks"] = [{"type": "ResolutionScheduleHook", "start_factor": 2, "full_res_at": 0.5, "hold_means_lr": True}]
    raw["writers"] = []
    cfg = load_experiment(None, data=raw)
    return DefaultTrainer(cfg, tmp_path / name / "exp", "cpu")


def test_resume_with_recipe_options_equals_uninterrupted_run(tmp_path, tiny_scene, backend) -> None:
    sizes: list[tuple[int, int]] = []
    straight = _trainer(tmp_path, "straight", tiny_scene, backend)
    original = straight.train_step
    means_lrs: list[float] = []

    def step(batch):
        sizes.append((batch[0].camera.width, straight.global_step))
        out = original(batch)
        means_lrs.append(next(g["lr"] for g in straight.optimizer.param_groups if g["name"] == "means"))
        return out

    straight.train_step = step
    straight.run()

    stopped = _trainer(tmp_path, "stopped", tiny_scene, backend)
    stopped.register_hook(stop_after(STOP))
    with pytest.raises(TrainingInterrupted) as info:
        stopped.run()
    resumed = _trainer(tmp_path, "stopped", tiny_scene, backend)
    resumed.run(resume_from=info.value.checkpoint)

    assert resumed.global_step == straight.global_step == 16
    assert [w for w, _ in sizes] == [16] * 4 + [32] * 12  # coarse to fine: 2x down until step 4
    # hold_means_lr: the position lr keeps its start value until the first full-resolution step (4),
    # then decays exponentially over steps 4..16 to means_lr_final_factor of it.
    base, final = means_lrs[0], straight.model.config.means_lr_final_factor
    assert means_lrs[:5] == [base] * 5
    for i in range(4, 16):
        assert means_lrs[i] == pytest.approx(base * final ** ((i - 4) / 12), rel=1e-6)
    assert 150 < straight.model.num_gaussians <= CAP  # grew, within the budget
    _tensors_equal(resumed.model.state_dict(), straight.model.state_dict(), "model")
    _tensors_equal(resumed.optimizer.state_dict()["state"], straight.optimizer.state_dict()["state"], "adam")
    _tensors_equal(resumed.strategy.state_dict(), straight.strategy.state_dict(), "strategy")
    # shN trained on steps 0, 3, ..., 15 only: 6 Adam steps, against 16 for the DC band.
    state = straight.optimizer.state
    assert int(state[straight.model.params["shN"]]["step"]) == 6
    assert int(state[straight.model.params["sh0"]]["step"]) == 16
    assert torch.isfinite(straight.model.params["means"]).all()
