"""The CPU recipe's options: Gaussian budget, SH-rest update interval, schedules sized to max_steps."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.errors import ConfigError
from pointrix_lite.model.gaussian_model import GaussianModel
from pointrix_lite.registry import STRATEGIES
from tests.model.helpers import adam_rows_match, make_model, take_adam_step

from .test_default_strategy import fake_render, run_step


def build(max_steps: int = 30_000, **cfg):
    return STRATEGIES.build({"type": "DefaultStrategy", **cfg}, "strategy", scene_extent=1.0, max_steps=max_steps)


def test_budget_is_never_exceeded_and_adam_rows_follow() -> None:
    n0, cap = 20, 48
    model = make_model(n0)
    opt = model.create_optimizer(200)
    take_adam_step(model, opt)
    # Refine after steps 2, 4, ..., 18; the budget ramps from 20 (step 1) to 48 (step 18).
    strategy = build(
        cap_max=cap,
        refine_start_iter=1,
        refine_every=2,
        refine_stop_iter=20,
        reset_every=10_000,
        grow_grad2d=1e-9,
        prune_opa=0.0,
    )
    g = torch.Generator().manual_seed(1)
    counts = []
    for step in range(0, 24):
        n = model.num_gaussians
        run_step(strategy, model, opt, step, fake_render(n, torch.rand(1, n, 2, generator=g) * 1e-3))
        take_adam_step(model, opt, seed=step)  # moments in every row, so misaligned rows would show
        adam_rows_match(model, opt)
        assert model.num_gaussians <= strategy.budget(step) <= cap
        counts.append(model.num_gaussians)
    # Every Gaussian is a candidate (threshold ~0): growth is limited by the budget alone, which
    # rises steadily and reaches the cap only at the end of the refine window.
    assert counts[2] < counts[10] < counts[16] < cap == counts[18] == counts[-1]
    assert strategy.budget(11) == n0 + (cap - n0) * 10 // 17


def test_budget_grows_the_highest_gradients_first() -> None:
    model = make_model(10)
    opt = model.create_optimizer(100)
    strategy = build(
        cap_max=13,
        refine_start_iter=0,
        refine_every=1,
        refine_stop_iter=2,
        reset_every=10_000,
        grow_grad2d=1e-6,
        grow_scale3d=1e9,
        prune_opa=0.0,
    )  # every candidate is cloned
    grads = torch.zeros(1, 10, 2)
    scores = torch.tensor([5.0, 1, 9, 3, 7, 2, 8, 4, 6, 0.5]) * 1e-4  # top 3: Gaussians 2, 6, 4
    grads[0, :, 0] = scores
    before = model.params["means"].detach().clone()
    strategy.state["grad2d"] = None
    run_step(strategy, model, opt, 1, fake_render(10, grads))
    assert model.num_gaussians == 13  # cap reached at the last refinement (step 1)
    # Clones are appended: the new rows are exact copies of Gaussians 2, 4 and 6.
    new = model.params["means"].detach()[10:]
    assert torch.equal(new, before[[2, 4, 6]])


def test_budget_start_survives_a_checkpoint() -> None:
    model = make_model(30)
    opt = model.create_optimizer(100)
    a = build(cap_max=100, refine_start_iter=0, refine_every=10, refine_stop_iter=50)
    run_step(a, model, opt, 0, fake_render(30, torch.zeros(1, 30, 2)))
    b = build(cap_max=100, refine_start_iter=0, refine_every=10, refine_stop_iter=50)
    b.load_state_dict(a.state_dict())
    assert b.n_start == 30 and [b.budget(s) for s in (0, 20, 40, 99)] == [30, 65, 100, 100]


def test_cap_max_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="strategy.cap_max"):
        build(cap_max=-1)


@pytest.mark.parametrize("max_steps", [2000, 7000])
def test_schedules_follow_max_steps(max_steps: int) -> None:
    s = build(max_steps=max_steps, scale_steps_to_max_steps=True, cap_max=1000)
    f = max_steps / 30_000  # gsplat's defaults are for 30k steps
    assert (s.refine_start_iter, s.refine_stop_iter) == (int(500 * f), int(15_000 * f))
    assert (s.refine_every, s.reset_every) == (max(int(100 * f), 1), int(3000 * f))
    s.n_start = 10
    last = s.refine_stop_iter - s.refine_every  # the last refinement reaches the cap
    assert s.budget(last) == 1000 > s.budget(last - 1)
    model = make_model(5)
    opt = model.create_optimizer(max_steps)
    lr0 = next(g["lr"] for g in opt.param_groups if g["name"] == "means")
    for step, expected in ((0, 1.0), (max_steps // 2, 0.1), (max_steps, 0.01)):
        model.update_learning_rate(step)
        lr = next(g["lr"] for g in opt.param_groups if g["name"] == "means")
        assert lr == pytest.approx(lr0 * expected)


def test_sh_rest_updates_only_every_k_steps() -> None:
    model = make_model(8, sh_degree=1, sh_degree_interval=1, sh_rest_update_every=3)
    opt = model.create_optimizer(100)
    target = torch.randn(8, 4, 3, generator=torch.Generator().manual_seed(0))
    for step in range(1, 10):
        model.update_learning_rate(step)
        sh0, shN = model.params["sh0"].detach().clone(), model.params["shN"].detach().clone()
        colors = model.render_params()["colors"]
        ((colors - target) ** 2).sum().backward()
        trained = step % 3 == 0
        assert (model.params["shN"].grad is not None) == trained
        opt.step()
        opt.zero_grad(set_to_none=True)
        assert not torch.equal(sh0, model.params["sh0"])  # the DC band trains every step
        assert torch.equal(shN, model.params["shN"]) != trained
    # Adam's step count for shN only counts the steps it was trained on (3, 6, 9).
    assert int(opt.state[model.params["shN"]]["step"]) == 3


def test_sh_rest_update_every_is_checked() -> None:
    with pytest.raises(ConfigError, match="model.sh_rest_update_every"):
        GaussianModel.Config(sh_rest_update_every=0)
