"""strategy.min_views: Gaussians too few training views have in frame are relocated (MCMC) or pruned."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pointrix_lite.config import OptionError
from pointrix_lite.data.cameras import Camera, look_at
from pointrix_lite.registry import STRATEGIES
from pointrix_lite.strategy.visibility import Frusta, views_in_frame
from tests.model.helpers import adam_rows_match, make_model, take_adam_step

from .test_default_strategy import fake_render, run_step


def ring(n: int = 12, radius: float = 3.0, width: int = 40, height: int = 30) -> list[Camera]:
    """``n`` cameras on a circle at height 1 looking at the origin (a 60 deg wide view)."""
    cams = []
    for i in range(n):
        a = 2 * np.pi * i / n
        eye = (radius * np.cos(a), radius * np.sin(a), 1.0)
        fx = width / 2 / np.tan(np.radians(30))
        viewmat = torch.from_numpy(look_at(eye, (0.0, 0.0, 0.0))).float()
        cams.append(
            Camera(fx=fx, fy=fx, cx=width / 2 + 0.3, cy=height / 2 - 0.2, width=width, height=height, viewmat=viewmat)
        )
    return cams


def reference_count(xyz: torch.Tensor, cams: list[Camera]) -> torch.Tensor:
    """Per camera in float64, with the division: u = fx X / Z + cx in [0, width), Z beyond the near plane."""
    count = torch.zeros(len(xyz), dtype=torch.int32)
    for c in cams:
        m = c.viewmat.double()
        p = xyz.double() @ m[:3, :3].T + m[:3, 3]
        z = p[:, 2]
        u, v = c.fx * p[:, 0] / z + c.cx, c.fy * p[:, 1] / z + c.cy
        count += ((z > 0.01) & (u >= 0) & (u < c.width) & (v >= 0) & (v < c.height)).int()
    return count


def test_views_in_frame_matches_a_per_camera_projection() -> None:
    cams = ring()
    g = torch.Generator().manual_seed(0)
    xyz = (torch.rand(5000, 3, generator=g) * 2 - 1) * 4  # inside, beside and behind the cameras
    got = views_in_frame(xyz, Frusta.from_cameras(cams), chunk=777)  # chunks that do not divide N
    torch.testing.assert_close(got, reference_count(xyz, cams), rtol=0, atol=0)
    assert got.min() == 0 and got.max() >= 10  # both ends occur: the test is not vacuous


def build(kind: str, **cfg):
    return STRATEGIES.build({"type": kind, **cfg}, "strategy", scene_extent=1.0, max_steps=30_000)


def _model_with_floaters(n: int = 60, floaters: int = 4):
    """``n`` opaque Gaussians within 0.5 of the origin (every camera of :func:`ring` sees them) and, as
    the first ``floaters`` rows, Gaussians high above them (in no camera's frame)."""
    torch.manual_seed(0)
    model = make_model(n, extent=1.0)
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    with torch.no_grad():
        model.params["means"].mul_(0.5)
        model.params["means"][:floaters] = torch.tensor([[0.1 * i, 0.0, 6.0] for i in range(floaters)])
        model.params["opacities"][:] = torch.logit(torch.tensor(0.8))
    return model, opt


def test_mcmc_relocates_what_no_view_sees() -> None:
    model, opt = _model_with_floaters()
    strategy = build("MCMCStrategy", noise_lr=0.0, cap_max=60, min_views=2)
    strategy.bind_cameras(ring())
    assert views_in_frame(model.params["means"], strategy.frusta)[:4].eq(0).all()
    strategy.step_post_backward(model, opt, 600, {})
    assert strategy.last_stats == {"relocated": 4, "added": 0, "unseen": 4}
    adam_rows_match(model, opt)
    means = model.params["means"].detach()
    assert views_in_frame(means, strategy.frusta).min() >= 2
    # relocated onto live Gaussians: each former floater now sits on one of the others
    assert (means[:4, None] - means[None, 4:]).norm(dim=-1).min(dim=1).values.max() < 1e-6


def test_mcmc_without_min_views_keeps_them() -> None:
    model, opt = _model_with_floaters()
    strategy = build("MCMCStrategy", noise_lr=0.0, cap_max=60)
    strategy.bind_cameras(ring())
    strategy.step_post_backward(model, opt, 600, {})
    assert strategy.frusta is None and strategy.last_stats == {"relocated": 0, "added": 0}
    assert model.params["means"][:4, 2].detach().eq(6.0).all()


def test_default_strategy_prunes_what_no_view_sees() -> None:
    model, opt = _model_with_floaters()
    strategy = build("DefaultStrategy", min_views=1)
    strategy.bind_cameras(ring())
    kept = model.params["means"].detach()[4:].clone()
    run_step(strategy, model, opt, 600, fake_render(60, torch.zeros(1, 60, 2)))
    assert strategy.last_stats == {"duplicated": 0, "split": 0, "pruned": 4, "unseen": 4}
    torch.testing.assert_close(model.params["means"].detach(), kept, rtol=0, atol=0)
    adam_rows_match(model, opt)


def test_the_test_runs_once_per_period_at_a_refinement() -> None:
    model, opt = _model_with_floaters()
    strategy = build("MCMCStrategy", noise_lr=0.0, cap_max=60, min_views=2, min_views_every=250)
    strategy.bind_cameras(ring())
    strategy.step_post_backward(model, opt, 700, {})  # the period 501-750 holds 750, not this refinement's 601-700
    assert "unseen" not in strategy.last_stats and model.params["means"][0, 2].item() == 6.0
    strategy.step_post_backward(model, opt, 800, {})  # 701-800 holds 750
    assert strategy.last_stats["unseen"] == 4


def test_cameras_that_see_nothing_take_nothing() -> None:
    model, opt = _model_with_floaters()
    strategy = build("MCMCStrategy", noise_lr=0.0, cap_max=60, min_views=1)
    strategy.bind_cameras([Camera(fx=10, fy=10, cx=5, cy=5, width=10, height=10, viewmat=torch.eye(4))])
    with torch.no_grad():
        model.params["means"][:, 2] = -1.0
    strategy.step_post_backward(model, opt, 600, {})
    assert strategy.last_stats == {"relocated": 0, "added": 0}


@pytest.mark.parametrize("key, value", [("min_views", -1), ("min_views_every", 0)])
def test_bad_options_name_the_key(key: str, value: int) -> None:
    with pytest.raises(OptionError, match=f"strategy.{key}"):
        build("MCMCStrategy", **{key: value})
