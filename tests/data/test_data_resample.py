"""Coarse-to-fine training views: box-filtered images, exactly scaled intrinsics, the factor schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.data.resample import downscale_view, downscale_views
from pointrix_lite.engine.hooks import ResolutionScheduleHook
from pointrix_lite.errors import ConfigError


def view(w: int = 13, h: int = 10, seed: int = 0) -> View:
    g = torch.Generator().manual_seed(seed)
    image = torch.randint(0, 256, (h, w, 3), generator=g, dtype=torch.uint8)
    cam = Camera(fx=20.5, fy=19.0, cx=6.3, cy=4.9, width=w, height=h, viewmat=torch.eye(4), name="v")
    return View(camera=cam, image=image, name="v", index=0)


@pytest.mark.parametrize("s", [2, 3, 4])
def test_downscaled_view_is_the_block_mean_with_exact_intrinsics(s: int) -> None:
    v = view()
    small = downscale_view(v, s)
    h, w = 10 // s, 13 // s
    # Independent reference in float64 numpy: crop right/bottom, average each s x s block.
    ref = v.image.numpy()[: h * s, : w * s].astype(np.float64).reshape(h, s, w, s, 3).mean(axis=(1, 3)) / 255.0
    np.testing.assert_allclose(small.float_image().numpy(), ref, rtol=0, atol=1e-6)
    c = small.camera
    assert (c.width, c.height) == (w, h)
    expected = (20.5 / s, 19.0 / s, 6.3 / s, 4.9 / s)
    assert (c.fx, c.fy, c.cx, c.cy) == pytest.approx(expected, rel=1e-15)  # x (1/s) vs / s in float64
    k = torch.tensor([[expected[0], 0, expected[2]], [0, expected[1], expected[3]], [0, 0, 1]], dtype=torch.float32)
    assert torch.equal(c.K, k)  # what the rasterizer receives: bit-identical
    assert torch.equal(c.viewmat, v.camera.viewmat) and small.name == v.name


def test_factor_one_and_bad_factors() -> None:
    v = view()
    assert downscale_view(v, 1) is v
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="positive integer"):
            downscale_view(v, bad)
    with pytest.raises(ValueError, match="smaller than"):
        downscale_view(v, 11)


def test_cache_reuses_downscaled_views() -> None:
    views, cache = [view(seed=1), view(seed=2)], {}
    first = downscale_views(views, 2, cache)
    again = downscale_views(views, 2, cache)
    assert all(a is b for a, b in zip(first, again)) and len(cache) == 2


class _Trainer:
    """What the hook reads from the trainer: the step and trainer.max_steps."""

    def __init__(self, max_steps: int) -> None:
        self.global_step = 0
        self.cfg = type("Cfg", (), {"trainer": type("T", (), {"max_steps": max_steps})()})()


def test_resolution_schedule_follows_max_steps_and_swaps_only_the_batch() -> None:
    hook = ResolutionScheduleHook(ResolutionScheduleHook.Config(start_factor=4, full_res_at=0.5))
    for max_steps in (1000, 4000):
        factors = [hook.factor(t, max_steps) for t in range(max_steps)]
        assert factors[0] == 4 and all(a >= b for a, b in zip(factors, factors[1:]))  # coarse to fine
        assert factors.index(1) <= max_steps // 2 and set(factors[max_steps // 2 :]) == {1}
        assert {2, 3} <= set(factors)
        assert factors.index(2) / max_steps == pytest.approx(0.5 * (1 - np.log(2.5) / np.log(4)), abs=2e-3)
    trainer = _Trainer(1000)
    hook.trainer = trainer
    views = [view(w=40, h=32, seed=3)]
    batch = list(views)
    hook.before_train_iter(batch_idx=0, batch=batch)
    assert batch[0].camera.width == 10 and views[0].camera.width == 40  # the dataset's view is untouched
    trainer.global_step = 600
    batch = list(views)
    hook.before_train_iter(batch_idx=0, batch=batch)
    assert batch[0] is views[0]


def test_resolution_schedule_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="start_factor"):
        ResolutionScheduleHook(ResolutionScheduleHook.Config(start_factor=0))
    with pytest.raises(ConfigError, match="full_res_at"):
        ResolutionScheduleHook(ResolutionScheduleHook.Config(full_res_at=0.0))
