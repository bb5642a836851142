"""Exact resume with ``strategy.min_views`` on, through the real trainer and renderer: the test runs on a
schedule of the step alone (the first refinement of every ``min_views_every`` steps), so a run stopped
between two tests and resumed relocates what the uninterrupted run relocates."""

from __future__ import annotations

import pytest

from pointrix_lite.engine.trainer import TrainingInterrupted
from pointrix_lite.strategy.visibility import Frusta, views_in_frame

from .scene import stop_after
from .test_error_scores_resume import _trainer
from .test_exact_resume import _tensors_equal

# Refinements after 0-based steps 3, 6, 9, 12, 15; the test at those holding a multiple of 5 (6, 12, 15).
MCMC = {
    "type": "MCMCStrategy",
    "refine_start_iter": 2,
    "refine_every": 3,
    "refine_stop_iter": 1000,
    "cap_max": 400,
    "min_views_every": 5,
}


def test_resume_with_min_views_equals_uninterrupted_run(tmp_path, tiny_scene, backend) -> None:
    probe = _trainer(tmp_path, "probe", tiny_scene, backend, MCMC)
    # The tiny scene's cameras all look at its centre: ask for more views than the outer Gaussians are in
    # frame of, so that the test takes some and leaves the rest.
    seen = views_in_frame(
        probe.model.params["means"], Frusta.from_cameras([v.camera for v in probe.dataset.train_views])
    )
    strategy = {**MCMC, "min_views": int(seen.float().median())}
    assert 0 < int((seen < strategy["min_views"]).sum()) < len(seen)

    straight = _trainer(tmp_path, "straight", tiny_scene, backend, strategy)
    unseen: list[int] = []
    original = straight.train_step

    def step(batch):
        out = original(batch)
        unseen.append(straight.strategy.last_stats.get("unseen", -1))
        return out

    straight.train_step = step
    straight.run()
    assert [i for i, n in enumerate(unseen) if n >= 0] == [6, 12, 15] and unseen[6] > 0

    stopped = _trainer(tmp_path, "stopped", tiny_scene, backend, strategy)
    stopped.register_hook(stop_after(8))  # between the tests after steps 6 and 12
    with pytest.raises(TrainingInterrupted) as info:
        stopped.run()
    resumed = _trainer(tmp_path, "stopped", tiny_scene, backend, strategy)
    resumed.run(resume_from=info.value.checkpoint)

    assert resumed.global_step == straight.global_step == 16
    _tensors_equal(resumed.model.state_dict(), straight.model.state_dict(), "model")
    _tensors_equal(resumed.optimizer.state_dict()["state"], straight.optimizer.state_dict()["state"], "adam")
