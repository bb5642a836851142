"""Context Gaussians (model/context.py, renderer/context.py): a model with a frozen context renders, and
hands the strategy gradients, exactly as one model holding both sets, while only its own rows train."""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.config import ConfigError
from pointrix_lite.data.cameras import Camera
from pointrix_lite.io.ply import load_ply, save_ply
from pointrix_lite.model import GaussianModel
from pointrix_lite.renderer.renderer import GaussianRenderer
from tests.model.helpers import make_model
from tests.renderer.native_required import require_native

W, H = 24, 18


def cameras() -> list[Camera]:
    turned = torch.eye(4)
    turned[0, 3] = 0.3  # a second view, shifted: the context covers different pixels there
    return [
        Camera(fx=20.0, fy=20.0, cx=W / 2, cy=H / 2, width=W, height=H, viewmat=view) for view in (torch.eye(4), turned)
    ]


def scene(n: int, seed: int, sh_degree: int = 1) -> GaussianModel:
    """Overlapping Gaussians in front of the cameras, varied opacity and colour."""
    g = torch.Generator().manual_seed(seed)
    model = make_model(n, sh_degree=sh_degree)
    with torch.no_grad():
        p = model.params
        p["means"][:] = torch.rand(n, 3, generator=g) * torch.tensor([1.2, 0.9, 1.0]) - torch.tensor([0.6, 0.45, -2.0])
        p["scales"][:] = (torch.rand(n, 3, generator=g) * 0.15 + 0.05).log()
        p["opacities"][:] = torch.logit(torch.rand(n, generator=g) * 0.8 + 0.15)
        p["sh0"][:] = torch.rand(p["sh0"].shape, generator=g)
        p["shN"][:] = torch.rand(p["shN"].shape, generator=g) * 0.2
    return model


def pair(tmp_path, backend: str, n_own: int = 8, n_context: int = 7):
    """(model with context, one model holding own + context rows in that order)."""
    own, context = scene(n_own, 0), scene(n_context, 1)
    ply = save_ply(context, tmp_path / "context.ply")
    with_context = GaussianModel(GaussianModel.Config(sh_degree=1, context=str(ply)))
    with_context.load_params({k: v.detach() for k, v in own.params.items()})
    joined = GaussianModel(GaussianModel.Config(sh_degree=1))
    joined.load_params({k: torch.cat([own.params[k], context.params[k]]).detach() for k in own.params})
    for m in (with_context, joined):
        m.step = 10_000  # full SH degree
    return with_context, joined, GaussianRenderer(GaussianRenderer.Config(backend=backend, absgrad=True))


@pytest.mark.parametrize("backend", ["torch", "native"])
def test_render_and_gradients_equal_one_joined_model(tmp_path, backend: str) -> None:
    if backend == "native":
        require_native()
    model, joined, renderer = pair(tmp_path, backend)
    n = model.num_gaussians
    weights = torch.rand(2, H, W, 3, generator=torch.Generator().manual_seed(3))
    outs = []
    for m in (model, joined):
        out = renderer(m, cameras(), (0.1, 0.2, 0.3), depth=False)
        (out["rgb"] * weights).sum().backward()
        outs.append(out)
    got, want = outs
    assert torch.equal(got["rgb"], want["rgb"]) and torch.equal(got["alpha"], want["alpha"])
    assert (got["rgb"] - renderer(scene(8, 0), cameras(), (0.1, 0.2, 0.3))["rgb"]).abs().max() > 0.05  # context shows
    assert got["means2d"].shape == (2, n, 2) and torch.equal(got["radii"], want["radii"][:, :n])
    assert torch.equal(got["visibility"], want["visibility"][:, :n])
    torch.testing.assert_close(got["means2d"].grad, want["means2d"].grad[:, :n])
    torch.testing.assert_close(got["means2d"].absgrad, want["means2d"].absgrad[:, :n])
    for key in model.params:
        torch.testing.assert_close(model.params[key].grad, joined.params[key].grad[:n])
    assert got["means2d"].grad.abs().sum() > 0 and "render_features" not in got


def test_blend_weights_score_own_rows_with_context_occluding(tmp_path) -> None:
    model, joined, renderer = pair(tmp_path, "torch")
    weights = torch.rand(2, H, W, 2, generator=torch.Generator().manual_seed(4))
    got = renderer.blend_weights(model, cameras(), weights)
    torch.testing.assert_close(got, renderer.blend_weights(joined, cameras(), weights)[: model.num_gaussians])


def test_context_is_frozen_and_never_saved_or_exported(tmp_path) -> None:
    model, _, _ = pair(tmp_path, "torch")
    context = model.context_params()
    assert context["means"].shape == (7, 3) and context["colors"].shape == (7, 4, 3)
    assert not any(t.requires_grad for t in context.values())
    assert not any("context" in name for name in model.state_dict())
    assert len(list(model.parameters())) == 6
    exported = load_ply(save_ply(model, tmp_path / "own.ply"))
    assert exported["means"].shape == (8, 3)
    torch.testing.assert_close(exported["means"], model.params["means"].detach())


def test_bad_context_is_one_line_naming_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"model\.context: file not found: .*nothing\.ply"):
        GaussianModel(GaussianModel.Config(context=str(tmp_path / "nothing.ply")))
    ply = save_ply(scene(3, 0, sh_degree=0), tmp_path / "degree0.ply")
    with pytest.raises(ConfigError, match=r"model\.context: .*SH degree 0, the model has sh_degree 1"):
        GaussianModel(GaussianModel.Config(sh_degree=1, context=str(ply)))
    with pytest.raises(ConfigError, match=r"model\.context: normal_consistency_weight"):
        GaussianModel.Config(context=str(ply), normal_consistency_weight=0.1)


def test_a_step_leaves_nothing_behind_without_the_garbage_collector(tmp_path) -> None:
    """The gradient hook must not tie the step's tensors in a cycle through the autograd graph: with the
    collector off, dropping the render output frees its means2d at once (else every step's would stay)."""
    import gc
    import weakref

    model, _, renderer = pair(tmp_path, "torch")
    gc.disable()
    try:
        out = renderer(model, cameras(), (0.0, 0.0, 0.0), depth=False)
        out["rgb"].sum().backward()
        own = weakref.ref(out["means2d"])
        full = weakref.ref(out["means2d"].context_full)
        del out
        assert own() is None and full() is None
    finally:
        gc.enable()


def test_init_ply_starts_the_model_from_those_gaussians(tmp_path) -> None:
    from types import SimpleNamespace

    from pointrix_lite.engine.build import _seed

    start = scene(5, 2)
    ply = save_ply(start, tmp_path / "start.ply")
    model = make_model(9, sh_degree=1, init_ply=str(ply))  # the data set's 9 points are not used
    for key, value in load_ply(ply).items():
        torch.testing.assert_close(model.params[key].detach(), value)
    with pytest.raises(ConfigError, match=r"model\.init_ply: .*SH degree 1, the model has sh_degree 2"):
        make_model(9, sh_degree=2, init_ply=str(ply))
    dataset = SimpleNamespace(point_cloud="untouched")  # seeding would add points the model does not start from
    _seed(SimpleNamespace(model={"init_ply": str(ply), "seeding": {"sky": 100}}), dataset, None)
    assert dataset.point_cloud == "untouched"
