"""GaussianModel: initialisation, activations, schedules, loss, state round trips."""

from __future__ import annotations

import math

import pytest
import torch

from pointrix_lite.data.pointcloud import SH_C0
from pointrix_lite.errors import CheckpointError, ConfigError
from pointrix_lite.model import GaussianModel, group_by_name
from pointrix_lite.registry import MODELS

from .helpers import adam_rows_match, inria_ssim, make_dataset, make_model, make_view, take_adam_step


def test_built_from_registry_with_typed_config_and_dataset() -> None:
    ds = make_dataset(40, extent=3.5)
    model = MODELS.build({"type": "GaussianModel", "sh_degree": 2, "lr": {"means": 2e-4}}, "model", dataset=ds)
    assert model.config.lr.means == 2e-4 and model.config.lr.scales == 5e-3
    assert model.num_gaussians == 40 and model.scene_extent == 3.5
    p = model.params
    assert p["means"].shape == (40, 3) and p["scales"].shape == (40, 3) and p["quats"].shape == (40, 4)
    assert p["opacities"].shape == (40,) and p["sh0"].shape == (40, 1, 3) and p["shN"].shape == (40, 8, 3)
    torch.testing.assert_close(p["means"].detach(), ds.point_cloud.xyz)
    # DC colour decodes back to the point colour; opacity starts at init_opacity.
    torch.testing.assert_close(p["sh0"].detach()[:, 0] * SH_C0 + 0.5, ds.point_cloud.rgb)
    torch.testing.assert_close(torch.sigmoid(p["opacities"].detach()), torch.full((40,), 0.1))
    with pytest.raises(ConfigError, match="model.lr.mean"):
        MODELS.build({"type": "GaussianModel", "lr": {"mean": 1.0}}, "model")


def test_random_init_fills_the_cube() -> None:
    model = GaussianModel(GaussianModel.Config(init_num_points=500, init_extent=2.0))
    assert model.num_gaussians == 500 and model.scene_extent == 1.0
    means = model.params["means"].detach()
    assert means.abs().max() <= 2.0 and means.abs().max() > 1.8


def test_oriented_init_comes_from_the_point_cloud() -> None:
    from pointrix_lite.data.pointcloud import local_frames

    ds = make_dataset(60)
    model = MODELS.build({"type": "GaussianModel", "init_oriented": True}, "model", dataset=ds)
    torch.testing.assert_close(
        model.params["quats"].detach(), torch.from_numpy(local_frames(ds.point_cloud.xyz)).float()
    )
    assert not torch.equal(model.params["quats"].detach(), make_model(60).params["quats"].detach())
    with pytest.raises(ConfigError, match="model.init_oriented"):
        MODELS.build({"type": "GaussianModel", "init_oriented": True, "init_random_quats": True}, "model", dataset=ds)


def test_render_params_are_activated() -> None:
    model = make_model(30, sh_degree=3)
    rp = model.render_params()
    p = model.params
    torch.testing.assert_close(rp["scales"], torch.exp(p["scales"]))
    torch.testing.assert_close(rp["opacities"], torch.sigmoid(p["opacities"]))
    assert rp["colors"].shape == (30, 16, 3)
    torch.testing.assert_close(rp["colors"][:, :1], p["sh0"])
    torch.testing.assert_close(rp["colors"][:, 1:], p["shN"])
    assert rp["means"] is p["means"] and rp["quats"] is p["quats"]
    # Gradients reach the raw parameters.
    (rp["scales"].sum() + rp["opacities"].sum() + rp["colors"].sum()).backward()
    torch.testing.assert_close(p["scales"].grad, torch.exp(p["scales"].detach()))


def test_sh_degree_schedule_follows_the_step() -> None:
    model = make_model(10, sh_degree=3, sh_degree_interval=1000)
    model.create_optimizer(30_000)
    expected = {0: 0, 999: 0, 1000: 1, 2500: 2, 3000: 3, 29_999: 3}
    for step, degree in expected.items():
        model.update_learning_rate(step)
        assert model.render_params()["sh_degree"] == degree, step
    assert model.render_params(sh_degree=1)["sh_degree"] == 1


def test_optimizer_groups_and_means_lr_schedule() -> None:
    model = make_model(10, extent=2.5)
    opt = model.create_optimizer(max_steps=1000)
    assert [g["name"] for g in opt.param_groups] == ["means", "scales", "quats", "opacities", "sh0", "shN"]
    assert opt.defaults["eps"] == 1e-15
    lr0 = 1.6e-4 * 2.5
    assert group_by_name(opt, "means")["lr"] == pytest.approx(lr0)
    assert group_by_name(opt, "scales")["lr"] == pytest.approx(5e-3)
    assert group_by_name(opt, "quats")["lr"] == pytest.approx(1e-3)
    assert group_by_name(opt, "opacities")["lr"] == pytest.approx(5e-2)
    assert group_by_name(opt, "sh0")["lr"] == pytest.approx(2.5e-3)
    assert group_by_name(opt, "shN")["lr"] == pytest.approx(2.5e-3 / 20)
    model.update_learning_rate(0)
    assert group_by_name(opt, "means")["lr"] == pytest.approx(lr0)
    model.update_learning_rate(500)
    assert group_by_name(opt, "means")["lr"] == pytest.approx(lr0 * 0.1)  # halfway in log space
    model.update_learning_rate(1000)
    assert group_by_name(opt, "means")["lr"] == pytest.approx(lr0 * 0.01)
    assert group_by_name(opt, "scales")["lr"] == pytest.approx(5e-3)  # only means decays
    # Same curve as gsplat's ExponentialLR(gamma = 0.01 ** (1 / max_steps)) stepped each iteration.
    ref_opt = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=lr0)
    sched = torch.optim.lr_scheduler.ExponentialLR(ref_opt, gamma=0.01 ** (1 / 1000))
    for _ in range(137):
        ref_opt.step()
        sched.step()
    model.update_learning_rate(137)
    assert group_by_name(opt, "means")["lr"] == pytest.approx(sched.get_last_lr()[0], rel=1e-9)


def test_batch_size_scaling_like_gsplat() -> None:
    model = make_model(10)
    opt = model.create_optimizer(100, batch_size=4)
    assert group_by_name(opt, "scales")["lr"] == pytest.approx(5e-3 * 2)
    assert opt.defaults["eps"] == pytest.approx(1e-15 / 2)
    assert opt.defaults["betas"] == pytest.approx((1 - 4 * 0.1, 1 - 4 * 0.001))


def test_loss_by_formula() -> None:
    model = make_model(10, ssim_lambda=0.2)
    g = torch.Generator().manual_seed(0)
    images = (torch.rand(2, 20, 24, 3, generator=g) * 255).round().to(torch.uint8)
    views = [make_view(images[i], i) for i in range(2)]
    rgb = torch.rand(2, 20, 24, 3, generator=g, requires_grad=True)
    out = model.get_loss_dict({"rgb": rgb}, views)
    gt = images.float() / 255
    l1 = (rgb.detach() - gt).abs().mean()
    expected = 0.8 * l1 + 0.2 * (1 - inria_ssim(rgb.detach(), gt))
    assert float(out["loss"].detach()) == pytest.approx(float(expected), rel=1e-5)
    assert float(out["l1"]) == pytest.approx(float(l1), rel=1e-6)
    out["loss"].backward()
    assert rgb.grad is not None and rgb.grad.abs().sum() > 0


def test_flatten_weight_adds_the_smallest_scales_and_pulls_only_them() -> None:
    """model.flatten_weight: + w * mean(smallest scale) / extent; its gradient reaches each Gaussian's smallest
    log scale alone, d/ds exp(s) / (N * extent) x w, checked by finite differences."""
    w, extent = 5.0, 2.0
    plain, flat = make_model(12, extent=extent), make_model(12, extent=extent, flatten_weight=w)
    flat.params["scales"].data.copy_(plain.params["scales"].data + torch.linspace(-0.3, 0.3, 36).reshape(12, 3))
    plain.params["scales"].data.copy_(flat.params["scales"].data)
    g = torch.Generator().manual_seed(1)
    views = [make_view((torch.rand(8, 8, 3, generator=g) * 255).round().to(torch.uint8), 0)]
    rgb = torch.rand(1, 8, 8, 3, generator=g)
    out, base = flat.get_loss_dict({"rgb": rgb}, views), plain.get_loss_dict({"rgb": rgb}, views)
    scales = flat.params["scales"].detach().double()
    expected = scales.min(dim=1).values.exp().mean() / extent
    assert float(out["flatten"]) == pytest.approx(float(expected), rel=1e-6)
    assert float((out["loss"] - base["loss"]).detach()) == pytest.approx(w * float(expected), rel=1e-5)
    out["loss"].backward()
    grad = flat.params["scales"].grad.double()
    smallest = scales.argmin(dim=1)
    eps = 1e-6
    for i in range(12):
        for k in range(3):
            bumped = scales.clone()
            bumped[i, k] += eps
            numeric = w * (bumped.min(dim=1).values.exp().mean() - scales.min(dim=1).values.exp().mean()) / extent / eps
            assert float(grad[i, k]) == pytest.approx(float(numeric), rel=1e-4, abs=1e-9)
            assert (grad[i, k] != 0) == (k == int(smallest[i]))
    with pytest.raises(Exception, match="flatten_weight"):
        make_model(3, flatten_weight=-1.0)


def test_loss_of_downscaled_views_reads_their_float_block_means() -> None:
    """The loss takes uint8 photos as they are stored (value * 255); a resolution schedule's
    downscaled views hold float32 block means on the same 0..255 scale, not [0, 1] floats."""
    from pointrix_lite.data.resample import downscale_view
    from pointrix_lite.renderer import native

    native.is_available()  # loads the extension where it builds: the native SSIM path is the one at stake
    model = make_model(10, ssim_lambda=0.2)
    g = torch.Generator().manual_seed(2)
    images = (torch.rand(2, 40, 48, 3, generator=g) * 255).round().to(torch.uint8)
    views = [downscale_view(make_view(images[i], i), 2) for i in range(2)]
    assert views[0].image.dtype == torch.float32 and float(views[0].image.max()) > 1.0
    rgb = torch.rand(2, 20, 24, 3, generator=g)
    gt = torch.stack([v.float_image() for v in views])
    l1 = (rgb - gt).abs().mean()
    expected = 0.8 * l1 + 0.2 * (1 - inria_ssim(rgb, gt))
    out = model.get_loss_dict({"rgb": rgb}, views)
    assert float(out["loss"]) == pytest.approx(float(expected), rel=1e-5)
    # and mixed with a full-size view's uint8 photo in one batch of equal sizes
    mixed = [make_view((gt[0] * 255).round().to(torch.uint8), 0), views[1]]
    gt_mixed = torch.stack([v.float_image() for v in mixed])
    assert float(model.get_loss_dict({"rgb": rgb}, mixed)["l1"]) == pytest.approx(
        float((rgb - gt_mixed).abs().mean()), rel=1e-6
    )


def test_metric_dict_psnr_ssim() -> None:
    model = make_model(10)
    g = torch.Generator().manual_seed(1)
    images = (torch.rand(1, 16, 16, 3, generator=g) * 255).round().to(torch.uint8)
    gt = images.float() / 255
    rgb = (gt + 0.05).clamp(0, 1)
    out = model.get_metric_dict({"rgb": rgb}, [make_view(images[0])])
    mse = float(((rgb - gt) ** 2).mean())
    assert float(out["psnr"]) == pytest.approx(-10 * math.log10(mse), rel=1e-5)
    assert 0 < float(out["ssim"]) < 1


def test_state_dict_round_trip_with_different_n() -> None:
    src = make_model(37, sh_degree=2)
    src.update_learning_rate(1234)
    state = src.state_dict()
    dst = make_model(5, sh_degree=2, extent=9.0)
    opt = dst.create_optimizer(100)
    dst.load_state_dict(state)
    assert dst.num_gaussians == 37 and dst.step == 1234 and dst.scene_extent == src.scene_extent
    for name, p in src.params.items():
        torch.testing.assert_close(dst.params[name].detach(), p.detach())
        assert dst.params[name].requires_grad
    # The existing optimizer was re-pointed at the new tensors, so it still trains them.
    adam_rows_match(dst, opt)
    take_adam_step(dst, opt)
    adam_rows_match(dst, opt)


def test_state_dict_rejects_other_sh_degree_and_missing_params() -> None:
    state = make_model(8, sh_degree=3).state_dict()
    with pytest.raises(CheckpointError, match="sh_degree 3 but the model config has sh_degree 1"):
        make_model(8, sh_degree=1).load_state_dict(state)
    del state["params.quats"]
    with pytest.raises(CheckpointError, match="missing Gaussian parameter"):
        make_model(8, sh_degree=3).load_state_dict(state)


def test_optimizer_checkpoint_round_trip_with_different_n() -> None:
    src = make_model(23)
    src_opt = src.create_optimizer(100)
    take_adam_step(src, src_opt)
    model_state, opt_state = src.state_dict(), src_opt.state_dict()
    dst = make_model(4)
    dst.load_state_dict(model_state)
    dst_opt = dst.create_optimizer(100)
    dst_opt.load_state_dict(opt_state)
    adam_rows_match(dst, dst_opt)
    for name in ("means", "shN"):
        torch.testing.assert_close(
            dst_opt.state[dst.params[name]]["exp_avg"], src_opt.state[src.params[name]]["exp_avg"]
        )


def test_to_device_moves_parameters() -> None:
    model = make_model(6).to(torch.device("cpu"), dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in model.params.values())
    assert model.device == torch.device("cpu")
