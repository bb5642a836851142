"""DefaultStrategy: gradient statistics, clone/split/prune rules, opacity reset, gsplat parity."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.errors import ConfigError
from pointrix_lite.registry import STRATEGIES
from pointrix_lite.strategy import DefaultStrategy
from tests.model.helpers import adam_rows_match, make_model, take_adam_step

W, H = 40, 30


def fake_render(n: int, grads: torch.Tensor, radii: torch.Tensor | None = None) -> dict:
    """Renderer output whose means2d receives exactly ``grads [C,N,2]`` on backward."""
    c = grads.shape[0]
    means2d = torch.zeros(c, n, 2, requires_grad=True)
    if radii is None:
        radii = torch.full((c, n, 2), 3, dtype=torch.int32)
    return {"means2d": means2d, "radii": radii, "width": W, "height": H, "n_cameras": c, "_grads": grads}


def backward(out: dict) -> None:
    (out["means2d"] * out["_grads"]).sum().backward()


def run_step(strategy, model, opt, step: int, out: dict) -> None:
    strategy.step_pre_backward(model, opt, step, out)
    backward(out)
    strategy.step_post_backward(model, opt, step, out)


def build(**cfg) -> DefaultStrategy:
    return STRATEGIES.build({"type": "DefaultStrategy", **cfg}, "strategy", scene_extent=1.0, max_steps=30_000)


def test_gradient_statistics_use_gsplat_normalisation() -> None:
    model = make_model(4)
    opt = model.create_optimizer(100)
    strategy = build()
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(2, 4, 2, generator=g) * 1e-4
    radii = torch.full((2, 4, 2), 2, dtype=torch.int32)
    radii[1, 3] = 0  # Gaussian 3 is not visible in camera 1
    radii[0, 2, 1] = 0  # a zero radius on either axis means not visible
    out = fake_render(4, grads, radii)
    run_step(strategy, model, opt, 7, out)
    expected = torch.zeros(4)
    count = torch.zeros(4)
    for c in range(2):
        for i in range(4):
            if (radii[c, i] > 0).all():
                gx, gy = grads[c, i, 0] * W / 2 * 2, grads[c, i, 1] * H / 2 * 2
                expected[i] += (gx**2 + gy**2).sqrt()
                count[i] += 1
    torch.testing.assert_close(strategy.state["grad2d"], expected)
    torch.testing.assert_close(strategy.state["count"], count)


def test_clone_split_prune_at_a_refinement_step() -> None:
    torch.manual_seed(0)
    model = make_model(5)
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    with torch.no_grad():
        model.params["scales"][:] = torch.tensor(0.005).log()  # small: <= 0.01 * extent
        model.params["scales"][1] = torch.tensor([0.05, 0.02, 0.01]).log()  # large
        model.params["opacities"][:] = torch.logit(torch.tensor(0.5))
        model.params["opacities"][3] = torch.logit(torch.tensor(0.001))  # transparent
    before = {k: v.detach().clone() for k, v in model.params.items()}
    strategy = build()
    # Normalised gradient norm: |g| * W/2 (one camera). Gaussians 0 and 1 above 2e-4, 2 below.
    grads = torch.zeros(1, 5, 2)
    grads[0, 0, 0] = 3e-4 / (W / 2)
    grads[0, 1, 1] = 3e-4 / (H / 2)
    grads[0, 2, 0] = 1e-4 / (W / 2)
    run_step(strategy, model, opt, 600, fake_render(5, grads))
    assert strategy.last_stats == {"duplicated": 1, "split": 1, "pruned": 1}
    # Order: survivors [0, 2, 3, 4] minus pruned 3, then the clone of 0, then the two halves of 1.
    means = model.params["means"].detach()
    assert model.num_gaussians == 5 + 1 + 1 - 1
    torch.testing.assert_close(means[:3], before["means"][[0, 2, 4]])
    torch.testing.assert_close(means[3], before["means"][0])
    torch.testing.assert_close(
        model.params["scales"][4:].detach(), (torch.tensor([0.05, 0.02, 0.01]) / 1.6).log().expand(2, 3)
    )
    assert not torch.equal(means[4], before["means"][1]) and not torch.equal(means[4], means[5])
    assert ((means[4:] - before["means"][1]).abs() < 0.05 * 5).all()
    adam_rows_match(model, opt)
    state_m = opt.state[model.params["means"]]["exp_avg"]
    assert (state_m[3:] == 0).all() and (state_m[:3] != 0).all()
    # Statistics restart after a refinement.
    assert strategy.state["grad2d"].shape == (6,) and (strategy.state["grad2d"] == 0).all()


def test_no_refinement_outside_the_schedule() -> None:
    model = make_model(3)
    opt = model.create_optimizer(30_000)
    strategy = build()
    grads = torch.full((1, 3, 2), 1.0)
    for step in (500, 601, 15_000):  # not > start; not a multiple of refine_every; at stop
        run_step(strategy, model, opt, step, fake_render(3, grads))
        assert model.num_gaussians == 3


def test_too_big_pruned_only_after_first_reset() -> None:
    for step, expected_n in ((600, 3), (3100, 2)):
        model = make_model(3)
        opt = model.create_optimizer(30_000)
        with torch.no_grad():
            model.params["scales"][:] = torch.tensor(0.05).log()
            model.params["scales"][2, 0] = torch.tensor(0.2).log()  # > prune_scale3d * extent
            model.params["opacities"][:] = torch.logit(torch.tensor(0.5))
        strategy = build()
        run_step(strategy, model, opt, step, fake_render(3, torch.zeros(1, 3, 2)))
        assert model.num_gaussians == expected_n, step


def test_opacity_reset_clamps_to_twice_prune_opa() -> None:
    model = make_model(4)
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    with torch.no_grad():
        model.params["opacities"][:] = torch.logit(torch.tensor([0.9, 0.5, 0.008, 0.006]))
        model.params["scales"][:] = torch.tensor(0.001).log()
    strategy = build(refine_start_iter=5000)  # isolate the reset from refinement
    run_step(strategy, model, opt, 3000, fake_render(4, torch.zeros(1, 4, 2)))
    opa = torch.sigmoid(model.params["opacities"].detach())
    torch.testing.assert_close(opa, torch.tensor([0.01, 0.01, 0.008, 0.006]))
    assert (opt.state[model.params["opacities"]]["exp_avg"] == 0).all()
    assert strategy.last_stats == {"opacity_reset": 1}


def test_steps_scaling() -> None:
    s = build(steps_scaler=0.1)
    assert (s.refine_start_iter, s.refine_stop_iter, s.refine_every, s.reset_every) == (50, 1500, 10, 300)
    auto = STRATEGIES.build({"type": "DefaultStrategy", "scale_steps_to_max_steps": True}, "strategy", max_steps=3000)
    assert (auto.refine_start_iter, auto.refine_stop_iter, auto.refine_every, auto.reset_every) == (50, 1500, 10, 300)
    tiny = build(steps_scaler=0.001)
    assert tiny.refine_every == 1 and tiny.reset_every == 3
    with pytest.raises(ConfigError, match="not both"):
        build(steps_scaler=0.5, scale_steps_to_max_steps=True)


def test_state_dict_round_trip() -> None:
    model = make_model(4)
    opt = model.create_optimizer(100)
    s = build()
    run_step(s, model, opt, 3, fake_render(4, torch.rand(1, 4, 2)))
    s2 = build()
    s2.load_state_dict(s.state_dict())
    torch.testing.assert_close(s2.state["grad2d"], s.state["grad2d"])
    assert s2.state["radii"] is None


def test_check_rejects_a_mismatched_optimizer() -> None:
    model = make_model(4)
    opt = model.create_optimizer(100)
    build().check(model, opt)
    foreign = torch.optim.Adam([{"params": [torch.zeros(1, requires_grad=True)], "name": "means"}])
    with pytest.raises(ValueError, match="one per trainable parameter"):
        build().check(model, foreign)


def test_matches_gsplat_default_strategy() -> None:
    """Same parameters, gradients and random draws -> same Gaussians and moments as gsplat 1.5.3."""
    from gsplat.strategy import DefaultStrategy as GsplatDefault

    torch.manual_seed(3)
    n = 300
    model = make_model(n, extent=1.0)
    with torch.no_grad():
        model.params["scales"][:] = (torch.rand(n, 3) * 0.03).log()
        model.params["opacities"][:] = torch.logit(torch.rand(n) * 0.99 + 0.001)
        model.params["opacities"][:20] = torch.logit(torch.tensor(0.002))
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    ref_params = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone()) for k, v in model.params.items()})
    ref_opts = {}
    for g in opt.param_groups:
        ref_opts[g["name"]] = torch.optim.Adam([ref_params[g["name"]]], lr=g["lr"], eps=1e-15)
        ref_opts[g["name"]].state[ref_params[g["name"]]] = {k: v.clone() for k, v in opt.state[g["params"][0]].items()}
    ours = build()
    ref = GsplatDefault()
    ref_state = ref.initialize_state(scene_scale=1.0)
    totals: dict[str, int] = {}
    for step in (598, 599, 600, 601, 700):  # refinements at 600 and 700
        g = torch.Generator().manual_seed(step)
        cur = model.num_gaussians
        grads = torch.randn(2, cur, 2, generator=g) * 1e-5
        radii = torch.randint(0, 3, (2, cur, 2), generator=g, dtype=torch.int32)
        out = fake_render(cur, grads, radii)
        info = {**fake_render(cur, grads, radii), "gaussian_ids": None}
        ref.step_pre_backward(ref_params, ref_opts, ref_state, step, info)
        backward(info)
        ours.step_pre_backward(model, opt, step, out)
        backward(out)
        torch.manual_seed(step)
        ref.step_post_backward(ref_params, ref_opts, ref_state, step, info)
        torch.manual_seed(step)
        ours.step_post_backward(model, opt, step, out)
        assert model.num_gaussians == len(ref_params["means"])
        for key, value in ours.last_stats.items():
            totals[key] = totals.get(key, 0) + value
    assert min(totals.get(k, 0) for k in ("duplicated", "split", "pruned")) > 0, totals
    for name, p in ref_params.items():
        torch.testing.assert_close(model.params[name].detach(), p.detach())
        torch.testing.assert_close(opt.state[model.params[name]]["exp_avg_sq"], ref_opts[name].state[p]["exp_avg_sq"])
