"""Multi-view error scores (strategy/error_scores.py) and the strategy options built on them:
blend weights against one-hot renders, error maps by hand, the FastGS gate and pruning, Taming-style
ranking, MCMC's error-weighted draw, row alignment through growth, and checkpointed state."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.config import OptionError
from pointrix_lite.data.cameras import Camera, View
from pointrix_lite.registry import STRATEGIES
from pointrix_lite.renderer.rasterization import rasterization
from pointrix_lite.renderer.renderer import GaussianRenderer
from pointrix_lite.strategy.error_scores import ERROR_KEYS, accumulate_error_scores, normalised, pixel_errors
from tests.model.helpers import adam_rows_match, make_model, take_adam_step
from tests.renderer.cuda_required import CUDA_ONLY
from tests.renderer.native_required import require_native

W, H = 24, 18


def camera() -> Camera:
    return Camera(fx=20.0, fy=20.0, cx=W / 2, cy=H / 2, width=W, height=H, viewmat=torch.eye(4))


def view(image: torch.Tensor, index: int = 0, mask: torch.Tensor | None = None) -> View:
    return View(camera=camera(), image=image, name=f"v{index}", index=index, mask=mask)


def visible_model(n: int = 10, seed: int = 0):
    """Gaussians in front of ``camera()``, overlapping, with varied opacity."""
    g = torch.Generator().manual_seed(seed)
    model = make_model(n, sh_degree=0)
    with torch.no_grad():
        model.params["means"][:] = torch.rand(n, 3, generator=g) * torch.tensor([1.2, 0.9, 1.0]) - torch.tensor(
            [0.6, 0.45, -2.0]
        )
        model.params["scales"][:] = (torch.rand(n, 3, generator=g) * 0.15 + 0.05).log()
        model.params["opacities"][:] = torch.logit(torch.rand(n, generator=g) * 0.8 + 0.15)
    return model


@pytest.mark.parametrize("backend", ["torch", "native", pytest.param("gsplat", marks=CUDA_ONLY, id="gsplat-cuda")])
def test_blend_weights_equal_one_hot_renders(backend: str) -> None:
    if backend == "native":
        require_native()
    device = "cuda" if backend == "gsplat" else "cpu"
    model = visible_model().to(device)
    n = model.num_gaussians
    weights = torch.rand(1, H, W, 2, generator=torch.Generator().manual_seed(1))
    renderer = GaussianRenderer(GaussianRenderer.Config(backend=backend))
    got = renderer.blend_weights(model, [camera()], weights.to(device)).cpu()
    model = model.cpu()
    # Reference: render Gaussian i alone in a colour (the others black, still occluding); the image
    # is then alpha_i * T_i per pixel, and its weighted sum is what blend_weights returns.
    p = model.render_params()
    cam = camera()
    expected = torch.zeros(n, 2)
    for i in range(n):
        colors = torch.zeros(n, 1)
        colors[i] = 1.0
        image, _, _ = rasterization(
            p["means"].detach(),
            p["quats"].detach(),
            p["scales"].detach(),
            p["opacities"].detach(),
            colors,
            torch.as_tensor(cam.viewmat)[None].float(),
            torch.as_tensor(cam.K)[None].float(),
            W,
            H,
            backgrounds=torch.zeros(1, 1),
            backend="torch",
        )
        expected[i] = (image[0] * weights[0]).sum(dim=(0, 1))
    assert (expected[:, 0] > 0).sum() >= n - 2  # the scene really overlaps the image
    # gsplat's kernels are built with fast math (__expf): test_native's forward tolerance there.
    tol = dict(rtol=1e-4, atol=1e-5) if backend == "gsplat" else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, expected, **tol)
    assert all(param.grad is None for param in model.params.values())


def test_pixel_errors_threshold_the_view_normalised_l1() -> None:
    gt = torch.zeros(2, 3, 3, dtype=torch.uint8)
    render = torch.zeros(1, 2, 3, 3)
    render[0, 0, 0] = 0.5  # L1 0.5: the maximum
    render[0, 0, 1] = torch.tensor([0.1, 0.1, 0.1])  # 0.1: 0.2 of the range
    render[0, 1, 2] = torch.tensor([0.06, 0.0, 0.0])  # 0.02: 0.04 of the range
    maps, l1 = pixel_errors(render, [view(gt)], high_error=0.1)
    assert maps.shape == (1, 2, 3, 2)
    torch.testing.assert_close(maps[0, ..., 1], torch.tensor([[0.5, 0.1, 0.0], [0.0, 0.0, 0.02]]))
    assert maps[0, ..., 0].tolist() == [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    torch.testing.assert_close(l1, torch.tensor([0.62 / 6]))
    # A mask drops pixels from both maps and from the range and mean.
    mask = torch.tensor([[False, True, True], [True, True, True]])
    maps, l1 = pixel_errors(render, [view(gt, mask=mask)], high_error=0.1)
    assert maps[0, ..., 0].tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert maps[0, 0, 0, 1] == 0
    torch.testing.assert_close(l1, torch.tensor([0.12 / 5]))
    # A render equal to its image has no high-error pixel.
    maps, _ = pixel_errors(torch.zeros(1, 2, 3, 3), [view(gt)], high_error=0.1)
    assert maps.sum() == 0


def test_pixel_errors_measure_the_bounded_error_of_a_model_that_bounds_clipped_pixels() -> None:
    """Under ``model.bound_clipped`` the loss is content with a render beyond a photo's clipped channel;
    the error maps densification reads say the same, and stay the plain error everywhere else."""
    gt = torch.full((2, 3, 3), 128, dtype=torch.uint8)
    gt[0, :2] = 255  # two pixels clipped
    render = torch.full((1, 2, 3, 3), 128 / 255)
    render[0, 0, :2] = 1.3  # beyond the clip: no error once bounded
    render[0, 1, 0] = 0.9  # an unclipped pixel wrong by 0.9 - 128/255
    plain, _ = pixel_errors(render, [view(gt)], high_error=0.1)
    bounded, l1 = pixel_errors(render, [view(gt)], high_error=0.1, bound=True)
    torch.testing.assert_close(plain[0, 0, :2, 1], torch.full((2,), 0.3))
    assert bounded[0, 0, :2].sum() == 0
    torch.testing.assert_close(bounded[0, 1, 0, 1], torch.tensor(0.9 - 128 / 255))
    assert bounded[0, ..., 0].sum() == 1  # the one wrong pixel is the high-error one
    torch.testing.assert_close(l1, torch.tensor([(0.9 - 128 / 255) / 6]))


class ProbeRenderer:
    """Stands in for GaussianRenderer.blend_weights: Gaussian i covers pixel row i % H with weight 1."""

    def blend_weights(self, model, cameras, pixel_weights):
        n = model.num_gaussians
        return torch.stack([pixel_weights[0, i % pixel_weights.shape[1]].sum(0) for i in range(n)])


def test_accumulated_scores_sum_views() -> None:
    model = make_model(4, sh_degree=0)
    gt = torch.zeros(4, 3, 3, dtype=torch.uint8)
    rgb = torch.zeros(2, 4, 3, 3)
    rgb[0, 1] = 0.6  # view 0: row 1 wrong everywhere
    rgb[1, 2, 0] = 0.3  # view 1: one pixel of row 2
    state: dict = {}
    views = [view(gt, 0), view(gt, 1)]
    n_views = accumulate_error_scores(state, ProbeRenderer(), model, {"rgb": rgb, "views": views}, 0.1)
    assert n_views == 2 and set(state) == set(ERROR_KEYS)
    torch.testing.assert_close(state["err_hits"], torch.tensor([0.0, 3.0, 1.0, 0.0]))
    torch.testing.assert_close(state["err_mass"], torch.tensor([0.0, 1.8, 0.3, 0.0]))
    l1 = torch.tensor([1.8 / 12, 0.3 / 12])
    torch.testing.assert_close(state["err_loss"], torch.tensor([0.0, 3.0 * l1[0], l1[1], 0.0]))
    accumulate_error_scores(state, ProbeRenderer(), model, {"rgb": rgb, "views": views}, 0.1)
    torch.testing.assert_close(state["err_hits"], torch.tensor([0.0, 6.0, 2.0, 0.0]))
    torch.testing.assert_close(normalised(torch.tensor([1.0, 3.0, 2.0])), torch.tensor([0.0, 1.0, 0.5]))
    assert normalised(torch.ones(3)).eq(0).all()


def build(kind: str, **cfg):
    return STRATEGIES.build({"type": kind, **cfg}, "strategy", scene_extent=1.0, max_steps=30_000)


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"type": "DefaultStrategy", "min_error_hits": 1.0}, "min_error_hits"),
        ({"type": "DefaultStrategy", "rank_by": "error", "cap_max": 10}, "rank_by"),
        ({"type": "DefaultStrategy", "prune_error": 0.9}, "prune_error"),
        ({"type": "DefaultStrategy", "error_every": 1, "rank_by": "error"}, "rank_by"),
        ({"type": "MCMCStrategy", "error_weight": 0.5}, "error_weight"),
        ({"type": "MCMCStrategy", "relocate_error": 0.9}, "relocate_error"),
        ({"type": "MCMCStrategy", "error_every": 101}, "error_every"),
        ({"type": "DefaultStrategy", "error_every": -1}, "error_every"),
        ({"type": "DefaultStrategy", "error_every": 1, "high_error": 1.0}, "high_error"),
    ],
)
def test_options_need_scores_and_sane_values(cfg: dict, key: str) -> None:
    with pytest.raises(OptionError, match=key):
        build(cfg.pop("type"), **cfg)


def test_strategy_without_a_probe_renderer_is_refused() -> None:
    strategy = build("DefaultStrategy", error_every=1)
    with pytest.raises(ValueError, match="error_every needs a renderer with blend_weights"):
        strategy.bind_renderer(object())
    build("DefaultStrategy").bind_renderer(object())  # no scores: any renderer will do


def refine_default(strategy, model, opt, hits: torch.Tensor, mass: torch.Tensor, loss: torch.Tensor, grad: float):
    """Run DefaultStrategy's refinement at step 600 with the given error sums (one scored view)
    and the same high gradient for every Gaussian."""
    n = model.num_gaussians
    strategy.state.update(grad2d=torch.full((n,), grad), count=torch.ones(n))
    strategy.state.update(err_hits=hits.clone(), err_mass=mass.clone(), err_loss=loss.clone())
    strategy.error_views = 1
    strategy.n_start = n
    strategy._grow(model, opt, 600)
    return strategy._prune(model, opt, 600)


def small_model(n: int):
    torch.manual_seed(0)
    model = make_model(n)
    opt = model.create_optimizer(30_000)
    take_adam_step(model, opt)
    with torch.no_grad():
        model.params["scales"][:] = torch.tensor(0.005).log()  # all clone, none split
        model.params["opacities"][:] = torch.logit(torch.tensor(0.5))
    return model, opt


def test_fastgs_gate_grows_only_where_views_agree() -> None:
    model, opt = small_model(5)
    strategy = build("DefaultStrategy", error_every=1, min_error_hits=2.0)
    hits = torch.tensor([0.0, 5.0, 2.0, 2.5, 0.0])
    mass = torch.arange(5.0)
    before = model.params["means"].detach().clone()
    refine_default(strategy, model, opt, hits, mass, torch.zeros(5), grad=1.0)
    # Gaussians 1 and 3 exceed 2.0 high-error pixels per view: cloned, their sums inherited.
    assert model.num_gaussians == 7
    torch.testing.assert_close(model.params["means"][5:], before[[1, 3]])
    torch.testing.assert_close(strategy.state["err_hits"], torch.cat([hits, hits[[1, 3]]]))
    adam_rows_match(model, opt)


def test_rank_by_error_fills_the_budget_with_the_highest_error_mass() -> None:
    model, opt = small_model(6)
    mass = torch.tensor([0.5, 9.0, 0.1, 7.0, 3.0, 0.0])
    before = model.params["means"].detach().clone()
    strategy = build("DefaultStrategy", error_every=1, rank_by="error", cap_max=8)
    strategy.refine_stop_iter = 700  # the budget ramp ends at step 600: room for 2 of the 6 candidates
    refine_default(strategy, model, opt, torch.zeros(6), mass, torch.zeros(6), grad=1.0)
    assert model.num_gaussians == 8
    torch.testing.assert_close(model.params["means"][6:], before[[1, 3]])


def test_fastgs_prune_removes_the_consistently_wrong() -> None:
    model, opt = small_model(5)
    strategy = build("DefaultStrategy", error_every=1, prune_error=0.9)
    loss = torch.tensor([0.0, 1.0, 0.95, 0.5, 0.0])
    keep_means = model.params["means"].detach()[[0, 3, 4]].clone()
    n_prune = refine_default(strategy, model, opt, torch.zeros(5), torch.zeros(5), loss, grad=0.0)
    assert n_prune == 2 and model.num_gaussians == 3
    torch.testing.assert_close(model.params["means"], keep_means)
    torch.testing.assert_close(strategy.state["err_loss"], loss[[0, 3, 4]])
    adam_rows_match(model, opt)


def mcmc_refine(strategy, model, opt, mass: torch.Tensor, loss: torch.Tensor) -> None:
    n = model.num_gaussians
    strategy.state.update(err_hits=torch.zeros(n), err_mass=mass.clone(), err_loss=loss.clone())
    strategy.error_views = 1
    strategy.step_post_backward(model, opt, 600, {})  # error_every 7: step 600 scores no view


def test_mcmc_error_weight_draws_sources_by_error() -> None:
    model, opt = small_model(6)
    before = model.params["means"].detach().clone()
    mass = torch.tensor([0.0, 0.0, 5.0, 0.0, 0.0, 0.0])
    strategy = build("MCMCStrategy", error_every=7, error_weight=1.0, growth_rate=1.0, noise_lr=0.0)
    mcmc_refine(strategy, model, opt, mass, torch.zeros(6))
    # All six copies come from Gaussian 2, the only one in error (the others weigh 1e-6 as much).
    assert model.num_gaussians == 12
    torch.testing.assert_close(model.params["means"][6:], before[[2] * 6])
    assert all(v.shape[0] == 12 and v.eq(0).all() for v in strategy.state.values())  # zeroed, aligned
    assert strategy.error_views == 0
    adam_rows_match(model, opt)
    # error_weight 0 is gsplat's draw by opacity: with equal opacities every Gaussian is a source.
    torch.manual_seed(0)
    model, opt = small_model(6)
    strategy = build("MCMCStrategy", error_every=7, growth_rate=5.0, noise_lr=0.0)
    mcmc_refine(strategy, model, opt, mass, torch.zeros(6))
    sources = {tuple(m.tolist()) for m in model.params["means"][6:]}
    assert len(sources) > 3


def test_mcmc_relocates_the_consistently_wrong() -> None:
    model, opt = small_model(5)
    before = model.params["means"].detach().clone()
    strategy = build("MCMCStrategy", error_every=7, relocate_error=0.9, growth_rate=0.0, noise_lr=0.0)
    mcmc_refine(strategy, model, opt, torch.zeros(5), torch.tensor([0.0, 1.0, 0.2, 0.3, 0.1]))
    assert strategy.last_stats["relocated"] == 1
    moved = (model.params["means"] != before).any(dim=1)
    assert moved.tolist() == [False, True, False, False, False]
    assert any(torch.equal(model.params["means"][1], before[j]) for j in (0, 2, 3, 4))


@pytest.mark.parametrize("kind", ["DefaultStrategy", "MCMCStrategy"])
def test_error_state_round_trips(kind: str) -> None:
    strategy = build(kind, error_every=1)
    strategy.state.update(err_hits=torch.rand(4), err_mass=torch.rand(4), err_loss=torch.rand(4))
    strategy.error_views = 3
    saved = strategy.state_dict()
    other = build(kind, error_every=1)
    other.load_state_dict(saved)
    assert other.error_views == 3
    for key in ERROR_KEYS:
        assert torch.equal(other.state[key], strategy.state[key])
