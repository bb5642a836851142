"""MCMCStrategy: relocation, growth to the cap, regularisers, noise, gsplat parity."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.model import group_by_name
from pointrix_lite.registry import STRATEGIES
from pointrix_lite.strategy import MCMCStrategy
from pointrix_lite.strategy.ops import compute_relocation
from tests.model.helpers import adam_rows_match, make_model, take_adam_step


def build(max_steps: int = 30_000, **cfg) -> MCMCStrategy:
    return STRATEGIES.build({"type": "MCMCStrategy", **cfg}, "strategy", scene_extent=1.0, max_steps=max_steps)


def _model(n: int = 100, dead: int = 10):
    torch.manual_seed(0)
    model = make_model(n, extent=1.0)
    with torch.no_grad():
        model.params["opacities"][:] = torch.logit(torch.rand(n) * 0.8 + 0.1)
        model.params["opacities"][:dead] = torch.logit(torch.tensor(0.001))
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    return model, opt


def test_refinement_relocates_dead_and_grows_five_percent() -> None:
    model, opt = _model(100, dead=10)
    strategy = build(noise_lr=0.0)
    strategy.step_post_backward(model, opt, 600, {})
    assert strategy.last_stats == {"relocated": 10, "added": 5}
    assert model.num_gaussians == 105
    adam_rows_match(model, opt)
    assert (torch.sigmoid(model.params["opacities"].detach()) > 0.005 - 1e-7).all()


def test_growth_stops_at_the_cap() -> None:
    model, opt = _model(100, dead=0)
    strategy = build(cap_max=103, noise_lr=0.0)
    strategy.step_post_backward(model, opt, 600, {})
    assert model.num_gaussians == 103
    strategy.step_post_backward(model, opt, 700, {})
    assert model.num_gaussians == 103 and strategy.last_stats["added"] == 0


def test_no_refinement_off_schedule_but_noise_every_step() -> None:
    model, opt = _model(50, dead=50)  # all transparent: the noise gate is open
    strategy = build()
    before = model.params["means"].detach().clone()
    strategy.step_post_backward(model, opt, 650, {})
    assert model.num_gaussians == 50 and strategy.last_stats == {}
    assert not torch.equal(model.params["means"].detach(), before)


def test_noise_scales_with_the_means_learning_rate() -> None:
    deltas = []
    for lr_scale in (1.0, 0.5):
        model, opt = _model(200, dead=200)
        group_by_name(opt, "means")["lr"] *= lr_scale
        before = model.params["means"].detach().clone()
        torch.manual_seed(5)
        build().step_post_backward(model, opt, 10, {})
        deltas.append(model.params["means"].detach() - before)
    torch.testing.assert_close(deltas[1], deltas[0] * 0.5)


def test_extra_loss_has_the_regularisers() -> None:
    model, _ = _model(20)
    losses = build(opacity_reg=0.01, scale_reg=0.02).extra_loss(model, 0)
    expected_opa = 0.01 * torch.sigmoid(model.params["opacities"]).mean()
    expected_scale = 0.02 * torch.exp(model.params["scales"]).mean()
    torch.testing.assert_close(losses["opacity_reg"], expected_opa)
    torch.testing.assert_close(losses["scale_reg"], expected_scale)
    (losses["opacity_reg"] + losses["scale_reg"]).backward()
    assert model.params["opacities"].grad.abs().sum() > 0
    assert build(opacity_reg=0.0, scale_reg=0.0).extra_loss(model, 0) == {}


def test_steps_scaling() -> None:
    s = build(max_steps=3000, scale_steps_to_max_steps=True)
    assert (s.refine_start_iter, s.refine_stop_iter, s.refine_every) == (50, 2500, 10)


def test_matches_gsplat_mcmc_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    """gsplat's MCMC flow with its two CUDA kernels swapped for torch gives the same result."""
    import gsplat.strategy.ops as gops
    from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci
    from gsplat.strategy import MCMCStrategy as GsplatMCMC

    monkeypatch.setattr(gops, "compute_relocation", compute_relocation)
    monkeypatch.setattr(gops, "quat_scale_to_covar_preci", _quat_scale_to_covar_preci)
    model, opt = _model(200, dead=30)
    ref_params = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone()) for k, v in model.params.items()})
    ref_opts = {}
    for g in opt.param_groups:
        ref_opts[g["name"]] = torch.optim.Adam([ref_params[g["name"]]], lr=g["lr"], eps=1e-15)
        ref_opts[g["name"]].state[ref_params[g["name"]]] = {k: v.clone() for k, v in opt.state[g["params"][0]].items()}
    ours, ref = build(), GsplatMCMC()
    ref_state = ref.initialize_state()
    lr = group_by_name(opt, "means")["lr"]
    for step in (599, 600, 601, 700):
        torch.manual_seed(step)
        ref.step_post_backward(ref_params, ref_opts, ref_state, step, {}, lr=lr)
        torch.manual_seed(step)
        ours.step_post_backward(model, opt, step, {})
    assert model.num_gaussians == len(ref_params["means"]) > 200
    for name, p in ref_params.items():
        torch.testing.assert_close(model.params[name].detach(), p.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[model.params[name]]["exp_avg"], ref_opts[name].state[p]["exp_avg"])
