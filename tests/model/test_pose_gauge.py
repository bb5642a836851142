"""PoseOptHook's ``gauge: mean``: the common motion of the training cameras is taken out, the rest kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from pointrix_lite.model.pose import PoseCorrection, remove_common_motion
from tests.engine.engine_helpers import make_trainer, stop_and_resume

from .test_pose_opt import POSE_EXTRA, _pose_hook


def _c2w(rotations: np.ndarray, centres: np.ndarray) -> np.ndarray:
    m = np.tile(np.eye(4), (len(centres), 1, 1))
    m[:, :3, :3], m[:, :3, 3] = rotations, centres
    return m


def _orbit(n: int = 9, seed: int = 0) -> np.ndarray:
    """[n, 4, 4] camera-to-world matrices of cameras on a jittered circle (any orientations)."""
    rng = np.random.default_rng(seed)
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)
    centres = np.stack((3 * np.cos(a), 3 * np.sin(a), 0.5 * rng.standard_normal(n)), -1) + [1.0, -2.0, 0.5]
    return _c2w(Rotation.random(n, random_state=seed).as_matrix(), centres)


def _similarity(c2w: np.ndarray, rotvec, shift, scale: float) -> np.ndarray:
    """The whole set moved by x -> scale * R x + shift (cameras keep their place in the set)."""
    R = Rotation.from_rotvec(rotvec).as_matrix()
    return _c2w(R @ c2w[:, :3, :3], scale * c2w[:, :3, 3] @ R.T + shift)


def _relative(c2w: np.ndarray, seed: int = 1) -> np.ndarray:
    """Each camera turned and moved on its own (a few mrad, a few cm)."""
    rng = np.random.default_rng(seed)
    turns = Rotation.from_rotvec(0.01 * rng.standard_normal((len(c2w), 3))).as_matrix()
    return _c2w(turns @ c2w[:, :3, :3], c2w[:, :3, 3] + 0.03 * rng.standard_normal((len(c2w), 3)))


def _fixed(c2w_given: np.ndarray, c2w_refined: np.ndarray) -> np.ndarray:
    out = remove_common_motion(torch.tensor(np.linalg.inv(c2w_refined)), torch.tensor(np.linalg.inv(c2w_given)))
    return np.linalg.inv(out.numpy())


def _gauge(c2w_given: np.ndarray, c2w: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(centroid shift, spread ratio, angle of the mean turn) of a set against the given one."""
    shift = c2w[:, :3, 3].mean(0) - c2w_given[:, :3, 3].mean(0)

    def spread(m):
        return np.sqrt(((m[:, :3, 3] - m[:, :3, 3].mean(0)) ** 2).sum(-1).mean())

    mean_turn = Rotation.from_matrix(c2w[:, :3, :3] @ c2w_given[:, :3, :3].transpose(0, 2, 1)).mean()
    return shift, spread(c2w) / spread(c2w_given), mean_turn.magnitude()


def test_a_motion_of_the_whole_set_is_removed_entirely():
    given = _orbit()
    moved = _similarity(given, [0.05, -0.02, 0.03], [0.2, -0.1, 0.3], 1.07)
    assert np.abs(_fixed(given, moved) - given).max() < 1e-9


def test_relative_motion_is_kept_and_the_gauge_is_the_given_one():
    given = _orbit()
    relative = _relative(given)
    both = _similarity(relative, [-0.03, 0.04, 0.01], [0.1, 0.2, -0.3], 0.95)
    fixed = _fixed(given, both)
    # The same result as from the relative motion alone: the common part is gone, whatever it was.
    assert np.abs(fixed - _fixed(given, relative)).max() < 1e-9
    shift, ratio, angle = _gauge(given, fixed)
    assert np.abs(shift).max() < 1e-9 and abs(ratio - 1.0) < 1e-9 and angle < 1e-6
    # ... and the cameras still differ from the given ones by about the relative motion.
    assert 0.01 < np.abs(fixed[:, :3, 3] - given[:, :3, 3]).max() < 0.2
    # Relative poses between cameras are those of the refined set, up to the removed scale.
    rel = lambda m, i, j: np.linalg.inv(m[i]) @ m[j]  # noqa: E731
    r_fixed, r_both = rel(fixed, 0, 4), rel(both, 0, 4)
    assert np.allclose(r_fixed[:3, :3], r_both[:3, :3], atol=1e-9)
    _, removed_scale, _ = _gauge(given, both)
    assert np.allclose(r_fixed[:3, 3] * removed_scale, r_both[:3, 3], atol=1e-9)


def test_set_transforms_is_the_inverse_of_transforms():
    pc = PoseCorrection(4)
    with torch.no_grad():
        pc.delta.copy_(0.1 * torch.randn(4, 9, generator=torch.Generator().manual_seed(0)))
    T = pc.transforms(torch.arange(4)).detach()
    other = PoseCorrection(4)
    other.set_transforms(T)
    assert torch.allclose(other.transforms(torch.arange(4)), T, atol=1e-6)


def _given_and_refined(trainer) -> tuple[np.ndarray, np.ndarray]:
    hook = _pose_hook(trainer)
    views = sorted(trainer.dataset.train_views, key=lambda v: v.index)
    given = torch.stack([torch.as_tensor(v.camera.viewmat, dtype=torch.float32) for v in views])
    refined = hook.correction(given, torch.arange(len(views))).detach().double()
    return np.linalg.inv(given.double().numpy()), np.linalg.inv(refined.numpy())


def test_the_hook_holds_the_gauge_while_the_cameras_still_move(toy_config, tmp_path):
    # The toy renderer rewards moving every camera the same way: without the gauge the set drifts.
    runs = {}
    for gauge in ("none", "mean"):
        extra = {**POSE_EXTRA, "hooks": [{"type": "PoseOptHook", "lr": 0.01, "gauge": gauge}]}
        trainer = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / gauge}"]))
        trainer.run()
        runs[gauge] = _given_and_refined(trainer)
    shift, _, angle = _gauge(*runs["none"])
    assert np.abs(shift).max() > 0.01 or angle > 0.01  # the drift the gauge is there to stop
    given, refined = runs["mean"]
    shift, ratio, angle = _gauge(given, refined)
    assert np.abs(shift).max() < 1e-5 and abs(ratio - 1.0) < 1e-5 and angle < 1e-5
    assert np.abs(refined - given).max() > 1e-3  # relative corrections were still learned


def test_resume_is_exact_with_the_gauge(toy_config, tmp_path):
    extra = {
        **POSE_EXTRA,
        "hooks": [{"type": "CheckPointHook", "interval": 4}, {"type": "PoseOptHook", "lr": 0.01, "gauge": "mean"}],
    }
    straight = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()
    first, _, second = stop_and_resume(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'resumed'}"]), 6)
    assert torch.equal(_pose_hook(second).correction.delta.detach(), _pose_hook(straight).correction.delta.detach())
    assert torch.equal(second.model.params["means"].detach(), straight.model.params["means"].detach())


def test_unknown_gauge_is_a_config_error(toy_config):
    from pointrix_lite.errors import ConfigError

    with pytest.raises(ConfigError, match=r"hooks\[0\]\.gauge"):
        toy_config({"hooks": [{"type": "PoseOptHook", "gauge": "anchor"}]})
