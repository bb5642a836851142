"""GaussianRenderer: the registered component the trainer calls, against the dense reference."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from pointrix_lite.errors import ConfigError, DataError
from pointrix_lite.registry import RENDERERS
from pointrix_lite.renderer import GaussianRenderer

from .dense_reference import dense_render, random_scene


@dataclass
class StandInCamera:
    """The fields of pointrix_lite.data.cameras.Camera that the renderer reads."""

    viewmat: torch.Tensor
    K: torch.Tensor
    width: int
    height: int
    name: str = ""


class StandInModel:
    """Raw parameters stored like GaussianModel (log scales, logit opacities, sh0 + shN)."""

    def __init__(self, scene: dict, sh_degree: int = 2) -> None:
        sh = scene["sh"][:, : (sh_degree + 1) ** 2]
        self.params = {
            "means": scene["means"].clone().requires_grad_(True),
            "quats": scene["quats"].clone().requires_grad_(True),
            "scales": scene["scales"].log().requires_grad_(True),
            "opacities": torch.logit(scene["opacities"].clamp(1e-6, 1 - 1e-6)).requires_grad_(True),
            "sh0": sh[:, :1].clone().requires_grad_(True),
            "shN": sh[:, 1:].clone().requires_grad_(True),
        }
        self.sh_degree = sh_degree

    def render_params(self) -> dict:
        p = self.params
        return dict(
            means=p["means"],
            quats=p["quats"],
            scales=torch.exp(p["scales"]),
            opacities=torch.sigmoid(p["opacities"]),
            colors=torch.cat([p["sh0"], p["shN"]], 1),
            sh_degree=self.sh_degree,
        )


def cameras_of(scene: dict) -> list[StandInCamera]:
    return [
        StandInCamera(scene["viewmats"][i], scene["Ks"][i], scene["width"], scene["height"], f"cam{i}")
        for i in range(scene["viewmats"].shape[0])
    ]


def test_builds_from_config_and_matches_reference() -> None:
    scene = random_scene(seed=6)
    model = StandInModel(scene)
    renderer = RENDERERS.build(
        {"type": "GaussianRenderer", "backend": "torch", "rasterize_mode": "antialiased"}, "renderer"
    )
    assert isinstance(renderer, GaussianRenderer) and renderer.config.backend == "torch"
    out = renderer(model, cameras_of(scene), (1.0, 1.0, 1.0))

    p = model.render_params()
    ref_c, ref_a = dense_render(
        p["means"],
        p["quats"],
        p["scales"],
        p["opacities"],
        p["colors"],
        scene["viewmats"],
        scene["Ks"],
        45,
        37,
        sh_degree=2,
        backgrounds=torch.ones(3, 3),
        render_mode="RGB+ED",
        rasterize_mode="antialiased",
    )
    assert (
        out["rgb"].shape == (3, 37, 45, 3)
        and out["depth"].shape == (3, 37, 45, 1)
        and out["alpha"].shape == (3, 37, 45, 1)
    )
    assert (out["rgb"].double() - ref_c[..., :3]).abs().max() <= 1e-5
    assert (out["alpha"].double() - ref_a).abs().max() <= 1e-5
    covered = ref_a[..., 0] > 0.2  # expected depth is ill-conditioned where almost nothing was drawn
    torch.testing.assert_close(out["depth"][covered].double(), ref_c[..., 3:][covered], rtol=1e-5, atol=1e-5)
    n = scene["means"].shape[0]
    assert out["radii"].shape == (3, n, 2) and out["radii"].dtype == torch.int32
    assert out["visibility"].dtype == torch.bool and torch.equal(out["visibility"], (out["radii"] > 0).any(-1))
    assert 0 < out["visibility"].sum() < 3 * n
    assert (out["width"], out["height"], out["n_cameras"]) == (45, 37, 3)


def test_means2d_gradient_is_retained_for_densification() -> None:
    scene = random_scene(seed=1)
    model = StandInModel(scene)
    out = GaussianRenderer(GaussianRenderer.Config(backend="torch", absgrad=True))(
        model, cameras_of(scene), (0.0, 0.0, 0.0)
    )
    out["rgb"].square().mean().backward()
    grad = out["means2d"].grad
    assert grad is not None and grad.shape == (3, scene["means"].shape[0], 2)
    assert grad[out["visibility"]].abs().sum() > 0
    assert (grad[~out["visibility"]] == 0).all()
    assert (out["means2d"].absgrad >= grad.abs() - 1e-7).all()
    assert model.params["means"].grad.abs().sum() > 0 and model.params["shN"].grad.abs().sum() > 0


def test_background_tensor_equals_tuple_and_no_grad_works() -> None:
    scene = random_scene(seed=2)
    model = StandInModel(scene, sh_degree=0)
    renderer = GaussianRenderer(GaussianRenderer.Config(backend="torch"))
    with torch.no_grad():
        a = renderer(model, cameras_of(scene), (0.2, 0.4, 0.6))
        b = renderer(model, cameras_of(scene), torch.tensor([0.2, 0.4, 0.6]))
        black = renderer(model, cameras_of(scene), (0.0, 0.0, 0.0))
    assert not a["means2d"].requires_grad
    assert torch.equal(a["rgb"], b["rgb"])
    assert (1 - a["alpha"]).max() > 0.5
    torch.testing.assert_close(a["rgb"], black["rgb"] + (1 - a["alpha"]) * torch.tensor([0.2, 0.4, 0.6]))


def test_bad_config_and_mixed_camera_sizes_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match=r"renderer\.backend"):
        RENDERERS.build({"type": "GaussianRenderer", "backend": "cuda"}, "renderer")
    with pytest.raises(ConfigError, match=r"renderer\.eps_2d: unknown key"):
        RENDERERS.build({"type": "GaussianRenderer", "eps_2d": 0.1}, "renderer")
    scene = random_scene(seed=0, n=4)
    cams = cameras_of(scene)
    cams[1].width = 44
    with pytest.raises(DataError, match="cam1 is 44x37") as err:
        GaussianRenderer()(StandInModel(scene), cams, (0.0, 0.0, 0.0))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("backend", ["torch", "native"])
def test_without_depth_rgb_alpha_and_every_gradient_are_the_same_bits(backend: str) -> None:
    """The trainer's steps render ``depth=False`` for a model whose loss reads no depth: that must be
    a pure saving, the same RGB, alpha and parameter gradients bit for bit, and a clear error for a
    loss that reads depth anyway."""
    if backend == "native":
        from .native_required import require_native

        require_native()
    scene = random_scene(seed=11)
    renderer = GaussianRenderer(GaussianRenderer.Config(backend=backend, absgrad=True))
    runs = []
    for depth in (True, False):
        model = StandInModel(scene)
        out = renderer(model, cameras_of(scene), (0.1, 0.2, 0.3), depth=depth)
        w = torch.linspace(-1.0, 1.0, out["rgb"].numel()).view_as(out["rgb"])
        ((out["rgb"] * w).sum() + out["alpha"].square().sum()).backward()
        runs.append((out, {k: v.grad for k, v in model.params.items()}))
    (with_d, grads_d), (without, grads) = runs
    assert "depth" in with_d and "depth" not in without
    with pytest.raises(KeyError, match="train_depth"):
        without["depth"]
    assert torch.equal(with_d["rgb"], without["rgb"]) and torch.equal(with_d["alpha"], without["alpha"])
    assert torch.equal(with_d["means2d"].grad, without["means2d"].grad)
    assert torch.equal(with_d["means2d"].absgrad, without["means2d"].absgrad)
    for name, g in grads_d.items():
        assert g is not None and g.abs().sum() > 0, name
        assert torch.equal(g, grads[name]), name
