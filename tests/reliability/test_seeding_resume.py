"""Exact resume with ``model.seeding`` on: the resumed run reads the seeded cloud back from exp_dir.

One run straight through 16 steps, one stopped after step 7 and resumed in a fresh trainer whose
seeding must not run again (it is patched to fail): the points come from ``seed_points.npz``, the
model from the checkpoint, and the resumed run ends bit for bit where the straight one does.
"""

from __future__ import annotations

import pytest

from pointrix_lite.data import seeding
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer, TrainingInterrupted

from .scene import real_raw_config, stop_after
from .test_exact_resume import _tensors_equal

STOP, SKY = 7, 64


def _trainer(tmp_path, name: str, scene, backend: str) -> DefaultTrainer:
    raw = real_raw_config(tmp_path / name, scene, backend)
    # every seen shell direction (sky_max_spread 1): the tiny scene's views agree on no colour well enough
    raw["model"]["seeding"] = {"mvs": True, "mvs_size": 32, "mvs_depths": 16, "sky": SKY, "sky_max_spread": 1.0}
    raw["writers"] = []
    return DefaultTrainer(load_experiment(None, data=raw), tmp_path / name / "exp", "cpu")


def test_resume_with_seeding_reads_the_points_back_and_equals_the_straight_run(
    tmp_path, tiny_scene, backend, monkeypatch
) -> None:
    straight = _trainer(tmp_path, "straight", tiny_scene, backend)
    seeded = straight.model.num_gaussians
    assert seeded >= 150 + SKY  # the random cloud, the shell, and what the sweep found
    straight.run()

    stopped = _trainer(tmp_path, "stopped", tiny_scene, backend)
    stopped.register_hook(stop_after(STOP))
    with pytest.raises(TrainingInterrupted) as info:
        stopped.run()
    assert (stopped.exp_dir / seeding.CACHE_NAME).is_file()

    def no_second_sweep(*args, **kwargs):
        raise AssertionError("seeding ran again on resume")

    monkeypatch.setattr(seeding, "seed_points", no_second_sweep)
    resumed = _trainer(tmp_path, "stopped", tiny_scene, backend)
    assert resumed.model.num_gaussians == seeded  # built from the kept points, before the checkpoint loads
    resumed.run(resume_from=info.value.checkpoint)

    assert resumed.global_step == straight.global_step == 16
    _tensors_equal(resumed.model.state_dict(), straight.model.state_dict(), "model")
    _tensors_equal(resumed.optimizer.state_dict()["state"], straight.optimizer.state_dict()["state"], "adam")
    _tensors_equal(resumed.strategy.state_dict(), straight.strategy.state_dict(), "strategy")
