"""Exact resume with multi-view error scores on (strategy/error_scores.py), through the real trainer,
renderer and both strategies: the stop after 8 steps falls between the refinements of 0-based steps
6 and 9, so the checkpoint must carry the error sums of step 7 and their view count."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer, TrainingInterrupted

from .scene import real_raw_config, stop_after
from .test_exact_resume import _tensors_equal

STOP = 8

STRATEGIES = {
    "fastgs": {
        "type": "DefaultStrategy",
        "refine_start_iter": 2,
        "refine_every": 3,
        "reset_every": 1000,
        "grow_grad2d": 0.003,
        "refine_stop_iter": 16,
        "error_every": 1,
        "min_error_hits": 4.0,
        "rank_by": "error",
        "cap_max": 400,
        "prune_error": 0.95,
    },
    "mcmc": {
        "type": "MCMCStrategy",
        "refine_start_iter": 2,
        "refine_every": 3,
        "refine_stop_iter": 1000,
        "cap_max": 400,
        "error_every": 1,
        "error_weight": 1.0,
        "relocate_error": 0.9,
    },
}


def _trainer(tmp_path, name: str, scene, backend: str, strategy: dict) -> DefaultTrainer:
    raw = real_raw_config(tmp_path / name, scene, backend)
    raw["strategy"] = dict(strategy)
    raw["hooks"], raw["writers"] = [], []
    return DefaultTrainer(load_experiment(None, data=raw), tmp_path / name / "exp", "cpu")


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_resume_with_error_scores_equals_uninterrupted_run(tmp_path, tiny_scene, backend, kind: str) -> None:
    straight = _trainer(tmp_path, "straight", tiny_scene, backend, STRATEGIES[kind])
    stats: list[dict] = []
    original = straight.train_step

    def step(batch):
        out = original(batch)
        stats.append(dict(straight.strategy.last_stats))
        return out

    straight.train_step = step
    straight.run()

    stopped = _trainer(tmp_path, "stopped", tiny_scene, backend, STRATEGIES[kind])
    stopped.register_hook(stop_after(STOP))
    with pytest.raises(TrainingInterrupted) as info:
        stopped.run()
    saved = torch.load(info.value.checkpoint, map_location="cpu", weights_only=False)["strategy"]
    assert saved["error_views"] == 1 and saved["err_mass"].abs().sum() > 0  # step 7's view, mid-interval
    resumed = _trainer(tmp_path, "stopped", tiny_scene, backend, STRATEGIES[kind])
    resumed.run(resume_from=info.value.checkpoint)

    assert resumed.global_step == straight.global_step == 16
    grown = [s.get("duplicated", 0) + s.get("split", 0) + s.get("added", 0) for s in stats]
    assert sum(grown) > 0 and straight.model.num_gaussians <= 400
    # Opacities start at 0.1, far above the opacity tests: what is pruned or relocated is the error test's.
    removed = sum(s.get("pruned", 0) + s.get("relocated", 0) for s in stats)
    assert removed > 0
    if kind == "fastgs":  # the gate holds gradient candidates back (without it the model doubles)
        assert straight.model.num_gaussians < 250  # 199 with the gate, 323 without it
    _tensors_equal(resumed.model.state_dict(), straight.model.state_dict(), "model")
    _tensors_equal(resumed.optimizer.state_dict()["state"], straight.optimizer.state_dict()["state"], "adam")
    _tensors_equal(resumed.strategy.state_dict(), straight.strategy.state_dict(), "strategy")
