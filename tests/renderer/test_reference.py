"""The pure-torch rasterizer against an independent dense reference, autograd and gsplat's torch code."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from pointrix_lite.errors import ConfigError
from pointrix_lite.renderer import rasterization
from pointrix_lite.renderer.options import RasterOptions
from pointrix_lite.renderer.torch_backend import rasterization_torch
from pointrix_lite.renderer.torch_backend.projection import project_gaussians
from pointrix_lite.renderer.torch_backend.sh import sh_to_color
from pointrix_lite.renderer.torch_backend.tiles import intersect_tiles

from .cuda_required import ON_CUDA, needs_cuda
from .dense_reference import dense_render, look_at, random_scene
from .native_required import require_native

# The package re-exports the function under the module's name; the module itself holds the dispatch state.
entry = importlib.import_module("pointrix_lite.renderer.rasterization")

ARGS = ("means", "quats", "scales", "opacities")


def render(scene: dict, colors: torch.Tensor, **kw):
    return rasterization(
        *(scene[k] for k in ARGS),
        colors,
        scene["viewmats"],
        scene["Ks"],
        scene["width"],
        scene["height"],
        backend="torch",
        **kw,
    )


def reference(scene: dict, colors: torch.Tensor, **kw):
    return dense_render(
        *(scene[k] for k in ARGS),
        colors,
        scene["viewmats"],
        scene["Ks"],
        scene["width"],
        scene["height"],
        return_meta=True,
        **kw,
    )


def assert_meta_matches(meta: dict, ref_meta: dict, rtol: float) -> None:
    assert meta["radii"].dtype == torch.int32
    assert torch.equal(meta["radii"].long(), ref_meta["radii"])
    vis = ref_meta["visible"]
    assert vis.any(dim=1).all(), "every camera should see some Gaussians"
    for key in ("means2d", "depths", "conics"):
        got, want = meta[key].double()[vis], ref_meta[key][vis]
        torch.testing.assert_close(got, want, rtol=rtol, atol=rtol)
        assert (meta[key][~vis] == 0).all(), f"culled {key} must be zero"
    torch.testing.assert_close(meta["opacities"].double()[vis], ref_meta["opacities"][vis], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("rasterize_mode", ["classic", "antialiased"])
@pytest.mark.parametrize("sh_degree", [0, 1, 2, 3])
def test_forward_matches_dense_reference_float32(sh_degree: int, rasterize_mode: str) -> None:
    scene = random_scene(seed=sh_degree)
    colors, alphas, meta = render(scene, scene["sh"], sh_degree=sh_degree, rasterize_mode=rasterize_mode)
    ref_colors, ref_alphas, ref_meta = reference(scene, scene["sh"], sh_degree=sh_degree, rasterize_mode=rasterize_mode)
    assert colors.shape == (3, 37, 45, 3) and alphas.shape == (3, 37, 45, 1)
    assert ref_alphas.max() > 0.9 and ref_colors.std() > 0.1, "scene too empty to test anything"
    assert (colors.double() - ref_colors).abs().max() <= 1e-5
    assert (alphas.double() - ref_alphas).abs().max() <= 1e-5
    assert_meta_matches(meta, ref_meta, rtol=1e-5)
    assert meta["width"] == 45 and meta["height"] == 37 and meta["n_cameras"] == 3 and meta["tile_size"] == 16


@pytest.mark.parametrize("backend", ["torch", "native"])
def test_culling_planes_and_radius_clip_match_dense_reference(backend: str) -> None:
    # Non-default near/far planes and radius_clip cull different Gaussians than the defaults do.
    if backend == "native":
        require_native()
    scene = random_scene(seed=5)
    kw = dict(sh_degree=3, near_plane=0.5, far_plane=8.0, radius_clip=1.5)
    colors, alphas, meta = rasterization(
        *(scene[k] for k in ARGS),
        scene["sh"],
        scene["viewmats"],
        scene["Ks"],
        scene["width"],
        scene["height"],
        backend=backend,
        **kw,
    )
    ref_colors, ref_alphas, ref_meta = reference(scene, scene["sh"], **kw)
    _, _, default_meta = reference(scene, scene["sh"], sh_degree=3)
    assert not torch.equal(ref_meta["radii"], default_meta["radii"]), "options must change what is culled"
    assert torch.equal(meta["radii"].long(), ref_meta["radii"])
    assert (colors.double() - ref_colors).abs().max() <= 1e-5
    assert (alphas.double() - ref_alphas).abs().max() <= 1e-5


@pytest.mark.parametrize("render_mode", ["RGB", "D", "ED", "RGB+D", "RGB+ED"])
def test_render_modes_with_backgrounds_float64(render_mode: str) -> None:
    scene = random_scene(seed=7, dtype=torch.float64)
    bg = torch.rand(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    kw = dict(sh_degree=2, backgrounds=bg, render_mode=render_mode, rasterize_mode="antialiased")
    colors, alphas, _ = render(scene, scene["sh"], **kw)
    ref_colors, ref_alphas, _ = reference(scene, scene["sh"], **kw)
    assert colors.shape[-1] == {"RGB": 3, "D": 1, "ED": 1, "RGB+D": 4, "RGB+ED": 4}[render_mode]
    torch.testing.assert_close(colors, ref_colors, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(alphas, ref_alphas, rtol=1e-10, atol=1e-10)
    if render_mode == "RGB":  # the background is composited with the final transmittance
        plain, _, _ = render(scene, scene["sh"], **{**kw, "backgrounds": None})
        torch.testing.assert_close(colors - plain, (1 - alphas) * bg[:, None, None, :], rtol=1e-10, atol=1e-10)
        assert (1 - alphas).max() > 0.5


@pytest.mark.parametrize("per_camera", [False, True])
def test_feature_colors_float32(per_camera: bool) -> None:
    scene = random_scene(seed=3)
    g = torch.Generator().manual_seed(4)
    n = scene["means"].shape[0]
    feats = torch.rand((3, n, 5) if per_camera else (n, 5), generator=g)
    bg = torch.rand(3, 5, generator=g)
    colors, alphas, _ = render(scene, feats, backgrounds=bg)
    ref_colors, ref_alphas, _ = reference(scene, feats, backgrounds=bg)
    assert colors.shape == (3, 37, 45, 5)
    assert (colors.double() - ref_colors).abs().max() <= 1e-5
    assert (alphas.double() - ref_alphas).abs().max() <= 1e-5


def test_single_gaussian_worked_example_from_docs() -> None:
    """docs/rasterizer.md's example, checked against the closed form."""
    colors, alphas, meta = rasterization(
        torch.tensor([[0.0, 0.0, 2.0]]),
        torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
        torch.tensor([[0.1, 0.05, 0.05]]),
        torch.tensor([0.8]),
        torch.tensor([[1.0, 0.5, 0.0]]),
        torch.eye(4)[None],
        torch.tensor([[[40.0, 0.0, 16.0], [0.0, 40.0, 12.0], [0.0, 0.0, 1.0]]]),
        32,
        24,
        backgrounds=torch.zeros(1, 3),
        render_mode="RGB+ED",
        backend="torch",
    )
    var_x, var_y = (40 * 0.1 / 2) ** 2 + 0.3, (40 * 0.05 / 2) ** 2 + 0.3  # projected variances + eps2d
    extend = min(3.33, math.sqrt(2 * math.log(0.8 * 255)))
    assert meta["radii"][0, 0].tolist() == [math.ceil(extend * math.sqrt(var_x)), math.ceil(extend * math.sqrt(var_y))]
    for i, j in ((12, 16), (14, 20), (5, 9)):
        dx, dy = j + 0.5 - 16, i + 0.5 - 12
        alpha = 0.8 * math.exp(-0.5 * (dx * dx / var_x + dy * dy / var_y))
        alpha = alpha if alpha >= 1 / 255 else 0.0  # all three pixels lie in the Gaussian's tile box
        assert alphas[0, i, j, 0].item() == pytest.approx(alpha, abs=1e-6)
        assert colors[0, i, j, :3].tolist() == pytest.approx([alpha, 0.5 * alpha, 0.0], abs=1e-6)
    assert colors[0, 12, 16, 3].item() == pytest.approx(2.0, abs=1e-5)


def test_empty_scene_renders_background() -> None:
    scene = random_scene(seed=0)
    empty = {k: (v[:0] if k in ARGS + ("sh",) else v) for k, v in scene.items()}
    bg = torch.tensor([[0.1, 0.2, 0.3]] * 3)
    colors, alphas, meta = render(empty, empty["sh"], sh_degree=3, backgrounds=bg, render_mode="RGB+ED")
    assert colors.shape == (3, 37, 45, 4)
    assert (alphas == 0).all() and (colors[..., 3] == 0).all()
    assert torch.equal(colors[..., :3], bg[:, None, None, :].expand(3, 37, 45, 3))
    assert meta["means2d"].shape == (3, 0, 2) and meta["radii"].shape == (3, 0, 2)


def opaque_stack(n: int = 60, dtype: torch.dtype = torch.float64) -> dict:
    """Many overlapping near-opaque Gaussians: most pixels hit the transmittance stop."""
    g = torch.Generator().manual_seed(11)
    means = torch.randn(n, 3, generator=g, dtype=dtype) * 0.3
    return dict(
        means=means,
        quats=torch.randn(n, 4, generator=g, dtype=dtype),
        scales=torch.full((n, 3), 0.35, dtype=dtype) * torch.rand(n, 3, generator=g, dtype=dtype).add(0.5),
        opacities=0.9 + 0.09 * torch.rand(n, generator=g, dtype=dtype),
        sh=torch.randn(n, 16, 3, generator=g, dtype=dtype) * 0.3,
        viewmats=torch.stack([look_at([0.0, 0.0, -3.0]), look_at([1.0, 2.0, -2.5])]).to(dtype),
        Ks=torch.tensor([[[30.0, 0, 17.0], [0, 30.0, 19.0], [0, 0, 1]]] * 2, dtype=dtype),
        width=35,
        height=38,
    )


@pytest.mark.parametrize("pair_budget", [None, 256 * 7, 256 * 3 * 64])
def test_early_stop_and_list_segments(pair_budget) -> None:
    """Lists split into segments (carrying T and the stop flag) give the sequential result."""
    scene = opaque_stack()
    kw = dict(sh_degree=1, render_mode="RGB+D")
    extra = {} if pair_budget is None else {"pair_budget": pair_budget}
    colors, alphas, _ = rasterization_torch(
        *(scene[k] for k in ARGS),
        scene["sh"],
        scene["viewmats"],
        scene["Ks"],
        scene["width"],
        scene["height"],
        **kw,
        **extra,
    )
    ref_colors, ref_alphas, ref_meta = reference(scene, scene["sh"], **kw)
    assert 300 < ref_meta["n_stopped_pixels"] < 2 * 35 * 38, "the scene must exercise the early stop"
    torch.testing.assert_close(colors, ref_colors, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(alphas, ref_alphas, rtol=1e-10, atol=1e-10)


def grads_of(fn, inputs: dict, weights: tuple) -> dict:
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inputs.items()}
    colors, alphas = fn(leaves)[:2]
    ((colors * weights[0]).sum() + (alphas * weights[1]).sum()).backward()
    return {k: v.grad for k, v in leaves.items()}


@pytest.mark.parametrize("rasterize_mode", ["classic", "antialiased"])
def test_gradients_match_dense_reference(rasterize_mode: str) -> None:
    scene = random_scene(seed=5, dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    weights = (
        torch.randn(3, 37, 45, 4, generator=g, dtype=torch.float64),
        torch.randn(3, 37, 45, 1, generator=g, dtype=torch.float64),
    )
    inputs = {k: scene[k] for k in ARGS + ("sh",)}
    kw = dict(sh_degree=3, render_mode="RGB+ED", rasterize_mode=rasterize_mode)

    def ours(p):
        return rasterization(
            p["means"],
            p["quats"],
            p["scales"],
            p["opacities"],
            p["sh"],
            scene["viewmats"],
            scene["Ks"],
            45,
            37,
            backend="torch",
            **kw,
        )

    def ref(p):
        return dense_render(
            p["means"], p["quats"], p["scales"], p["opacities"], p["sh"], scene["viewmats"], scene["Ks"], 45, 37, **kw
        )

    got, want = grads_of(ours, inputs, weights), grads_of(ref, inputs, weights)
    for k in inputs:
        assert want[k].abs().max() > 0, k
        torch.testing.assert_close(got[k], want[k], rtol=1e-8, atol=1e-8 * float(want[k].abs().max()), msg=k)


def smooth_scene() -> dict:
    """Tiny float64 scene away from discontinuities: Gaussians wider than the 20x14 image, so no
    alpha threshold contour, tile-box edge, Jacobian clamp or transmittance stop is nearby."""
    g = torch.Generator().manual_seed(3)
    n = 4
    d = torch.float64
    return dict(
        means=torch.tensor([[0.0, 0.0, 0.0], [0.1, -0.05, 0.3], [-0.1, 0.05, -0.2], [0.05, 0.1, 0.5]], dtype=d),
        quats=torch.randn(n, 4, generator=g, dtype=d),
        scales=torch.tensor([[2.0, 1.5, 1.8], [1.5, 2.2, 1.3], [1.6, 1.8, 2.4], [1.4, 1.3, 2.0]], dtype=d),
        opacities=torch.tensor([0.35, 0.5, 0.6, 0.4], dtype=d),
        colors=torch.rand(n, 3, generator=g, dtype=d),
        sh=torch.randn(n, 16, 3, generator=g, dtype=d) * 0.3,
        viewmats=torch.stack([look_at([0.0, 0.0, -3.0]), look_at([0.8, -0.5, -2.8])]),
        Ks=torch.tensor([[[20.0, 0, 10.0], [0, 20.0, 7.0], [0, 0, 1]]] * 2, dtype=d),
        width=20,
        height=14,
    )


@pytest.mark.parametrize(
    "wrt, color_key, mode",
    [
        ("means", "sh", "classic"),
        ("quats", "sh", "classic"),
        ("scales", "sh", "classic"),
        ("opacities", "colors", "classic"),
        ("colors", "colors", "classic"),
        ("sh", "sh", "classic"),
        ("scales", "colors", "antialiased"),
        ("means", "colors", "antialiased"),
    ],
)
def test_gradcheck(wrt: str, color_key: str, mode: str) -> None:
    scene = smooth_scene()
    g = torch.Generator().manual_seed(9)
    proj = torch.randn(6, 2, 14, 20, 5, generator=g, dtype=torch.float64)  # 6 random read-outs of RGB+D+alpha
    sh_degree = 3 if color_key == "sh" else None

    def f(x: torch.Tensor) -> torch.Tensor:
        p = {**scene, wrt: x}
        colors, alphas, _ = rasterization(
            *(p[k] for k in ARGS),
            p[color_key],
            p["viewmats"],
            p["Ks"],
            20,
            14,
            sh_degree=sh_degree,
            render_mode="RGB+D",
            rasterize_mode=mode,
            backend="torch",
        )
        assert alphas.min() > 0.1, "scene must cover every pixel"
        out = torch.cat([colors, alphas], dim=-1)
        return (proj * out).flatten(1).sum(-1)

    x = scene[wrt].clone().requires_grad_(True)
    # SH enters linearly and has 192 entries: a random-direction check (fast_mode) suffices there.
    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6, rtol=1e-5, fast_mode=wrt == "sh")


def test_absgrad_is_sum_of_per_pixel_absolute_gradients() -> None:
    scene = random_scene(seed=8, n=10, dtype=torch.float64)
    scene["viewmats"], scene["Ks"] = (
        scene["viewmats"][:1],
        scene["Ks"][:1] * torch.tensor([[0.45], [0.45], [1.0]], dtype=torch.float64),
    )
    g = torch.Generator().manual_seed(5)
    w = torch.randn(1, 18, 21, 3, generator=g, dtype=torch.float64)
    v = torch.randn(1, 18, 21, 1, generator=g, dtype=torch.float64)
    means = scene["means"].clone().requires_grad_(True)
    colors, alphas, meta = rasterization(
        means,
        *(scene[k] for k in ARGS[1:]),
        scene["sh"],
        scene["viewmats"],
        scene["Ks"],
        21,
        18,
        sh_degree=2,
        absgrad=True,
        backend="torch",
    )
    means2d = meta["means2d"]
    assert not means2d.is_leaf
    means2d.retain_grad()
    ((colors * w).sum() + (alphas * v).sum()).backward()

    ref_means = scene["means"].clone().requires_grad_(True)
    ref_c, ref_a, ref_meta = dense_render(
        ref_means,
        *(scene[k] for k in ARGS[1:]),
        scene["sh"],
        scene["viewmats"],
        scene["Ks"],
        21,
        18,
        sh_degree=2,
        return_meta=True,
    )
    per_pixel = ((ref_c * w).sum(-1, keepdim=True) + ref_a * v).reshape(-1)
    ref_m2d = ref_meta["means2d"]
    expected_abs = torch.zeros_like(ref_m2d)
    expected = torch.zeros_like(ref_m2d)
    for loss in per_pixel:
        if loss.requires_grad:
            (gp,) = torch.autograd.grad(loss, ref_m2d, retain_graph=True, allow_unused=True)
            if gp is not None:
                expected_abs += gp.abs()
                expected += gp
    vis = ref_meta["visible"]
    assert expected_abs[vis].abs().max() > 0
    assert (expected_abs[vis] > expected[vis].abs() + 1e-6).any(), "absgrad must differ from |grad| somewhere"
    torch.testing.assert_close(means2d.grad[vis], expected[vis], rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(means2d.absgrad[vis], expected_abs[vis], rtol=1e-8, atol=1e-10)
    assert (means2d.absgrad[~vis] == 0).all()


def test_culled_gaussians_get_zero_finite_gradients() -> None:
    scene = random_scene(seed=2)
    params = {k: scene[k].clone().requires_grad_(True) for k in ARGS + ("sh",)}
    colors, alphas, meta = rasterization(
        *(params[k] for k in ARGS),
        params["sh"],
        scene["viewmats"],
        scene["Ks"],
        45,
        37,
        sh_degree=3,
        render_mode="RGB+ED",
        rasterize_mode="antialiased",
        backend="torch",
    )
    (colors.sum() + alphas.sum()).backward()
    culled_everywhere = (meta["radii"] == 0).all(dim=-1).all(dim=0)
    assert culled_everywhere.sum() >= 2  # below 1/255 opacity; behind/near/on-plane of all cameras is scene-dependent
    for k, p in params.items():
        assert torch.isfinite(p.grad).all(), k
        assert (p.grad[culled_everywhere] == 0).all(), k


@pytest.mark.parametrize("backend", ["torch", "native"])
def test_all_gaussians_culled_still_backpropagates_zero_gradients(backend: str) -> None:
    # A view that sees nothing (all Gaussians behind it) must not crash loss.backward() in training.
    if backend == "native":
        require_native()
    g = torch.Generator().manual_seed(0)
    n = 12
    params = {
        "means": (torch.rand(n, 3, generator=g) - 0.5) * 2 + torch.tensor([0.0, 0.0, -4.0]),  # all at z < 0
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.rand(n, 3, generator=g) * 0.3 + 0.05,
        "opacities": torch.rand(n, generator=g) * 0.5 + 0.5,
        "sh": torch.randn(n, 16, 3, generator=g) * 0.3,
    }
    params = {k: v.requires_grad_(True) for k, v in params.items()}
    viewmats = torch.eye(4)[None]
    Ks = torch.tensor([[[40.0, 0.0, 22.5], [0.0, 40.0, 18.5], [0.0, 0.0, 1.0]]])
    colors, alphas, meta = rasterization(
        *(params[k] for k in ARGS), params["sh"], viewmats, Ks, 45, 37, sh_degree=3, backend=backend
    )
    assert (meta["radii"] == 0).all()
    assert (alphas == 0).all()
    (colors.sum() + alphas.sum()).backward()
    for k, p in params.items():
        assert p.grad is not None and (p.grad == 0).all(), k


def test_projection_sh_and_tiles_match_gsplat_torch_impl() -> None:
    gs = pytest.importorskip("gsplat.cuda._torch_impl")
    scene = random_scene(seed=4, n=40)
    s = scene
    W, H = s["width"], s["height"]
    ours = project_gaussians(
        s["means"], s["quats"], s["scales"], s["opacities"], s["viewmats"], s["Ks"], W, H, calc_compensations=True
    )
    covars, _ = gs._quat_scale_to_covar_preci(s["quats"], s["scales"], compute_preci=False)
    _, means2d, depths, conics, comps = gs._fully_fused_projection(
        s["means"], covars, s["viewmats"], s["Ks"], W, H, calc_compensations=True
    )
    vis = (ours.radii > 0).all(-1)
    assert vis.sum() > 60
    for mine, theirs in (
        (ours.means2d, means2d),
        (ours.depths, depths),
        (ours.conics, conics),
        (ours.compensations, comps),
    ):
        torch.testing.assert_close(mine[vis], theirs[vis], rtol=1e-5, atol=1e-5)

    dirs = torch.randn(50, 3, generator=torch.Generator().manual_seed(0))
    coeffs = torch.randn(50, 25, 3, generator=torch.Generator().manual_seed(1))
    for degree in range(5):
        want = torch.clamp_min(gs._spherical_harmonics(degree, dirs, coeffs) + 0.5, 0.0)
        torch.testing.assert_close(sh_to_color(degree, dirs * 3.0, coeffs), want, rtol=1e-5, atol=1e-6)

    # Tile lists, including the two Gaussians at exactly the same depth. gsplat's CUDA path sorts
    # the keys with cub's (stable) radix sort; its torch twin uses an unstable sort, so sort here.
    tiles = intersect_tiles(ours.means2d, ours.radii, ours.depths, W, H, 16)
    _, isect_ids, flatten_ids = gs._isect_tiles(
        ours.means2d, ours.radii, ours.depths, 16, tiles.tile_width, tiles.tile_height, sort=False
    )
    isect_ids, perm = torch.sort(isect_ids, stable=True)
    flatten_ids = flatten_ids[perm]
    n = s["means"].shape[0]
    pair = (tiles.flat_ids % n) >= n - 2  # the last two Gaussians of random_scene share a depth
    assert pair.sum() >= 2
    offsets = gs._isect_offset_encode(isect_ids, 3, tiles.tile_width, tiles.tile_height).flatten()
    assert torch.equal(tiles.flat_ids, flatten_ids.long())
    assert torch.equal(tiles.offsets[:-1], offsets.long())


def test_argument_errors_are_one_line_value_errors() -> None:
    s = random_scene(seed=0, n=5)
    base = [s[k] for k in ARGS] + [s["colors"], s["viewmats"], s["Ks"], 45, 37]
    cases = [
        (dict(), 1, s["quats"][:, :3], "quats must be [17, 4]"),
        (dict(sh_degree=3), 4, s["colors"], "SH colors must be"),
        (dict(sh_degree=3), 4, s["sh"][:, :9], "needs K >= 16"),
        (dict(render_mode="RGBD"), None, None, "render_mode must be one of"),
        (dict(backend="cuda"), None, None, "backend must be one of"),
        (dict(backgrounds=torch.zeros(2, 3)), None, None, "backgrounds must be [C, D]"),
    ]
    for kw, idx, value, msg in cases:
        args = list(base)
        if idx is not None:
            args[idx] = value
        with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")) as err:
            rasterization(*args, **kw)
        assert "\n" not in str(err.value)


def test_auto_backend_on_cpu_falls_back_to_torch_with_one_warning(monkeypatch) -> None:
    s = random_scene(seed=0, n=5)
    monkeypatch.setattr(entry, "_native_available", lambda: False)
    monkeypatch.setattr(entry, "_warned_torch_fallback", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = [render_auto(s) for _ in range(3)]
    assert sum("pure-torch" in str(w.message) for w in caught) == 1
    ref, _ = dense_render(*(s[k] for k in ARGS), s["colors"], s["viewmats"], s["Ks"], 45, 37)
    assert (out[0][0].double() - ref).abs().max() <= 1e-5


def render_auto(s: dict):
    return rasterization(*(s[k] for k in ARGS), s["colors"], s["viewmats"], s["Ks"], 45, 37)


def test_native_and_auto_dispatch_to_the_native_module(monkeypatch) -> None:
    s = random_scene(seed=0, n=5)
    calls = []

    class FakeNative:
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def STAGES(*args, **kwargs):  # the native backend's pipeline.Stages, called as the pipeline
            calls.append((args, kwargs))
            return "native-result"

    monkeypatch.setitem(sys.modules, "pointrix_lite.renderer.native", FakeNative)
    assert (
        rasterization(*(s[k] for k in ARGS), s["colors"], s["viewmats"], s["Ks"], 45, 37, backend="native")
        == "native-result"
    )
    assert render_auto(s) == "native-result"
    args, kwargs = calls[0]
    # tensors as given, then backgrounds and one options object with gsplat's defaults
    assert args[0] is s["means"] and args[-2] is None and not kwargs
    assert args[-1] == RasterOptions(45, 37, render_mode="RGB", eps2d=0.3)


def test_gsplat_backend_needs_cuda() -> None:
    s = random_scene(seed=0, n=5)
    with pytest.raises(ConfigError, match="needs CUDA"):
        rasterization(*(s[k] for k in ARGS), s["colors"], s["viewmats"], s["Ks"], 45, 37, backend="gsplat")


@pytest.mark.parametrize("device", ["meta", ON_CUDA])
def test_native_backend_off_the_cpu_names_the_config_keys(device: str) -> None:
    """``renderer.backend: native`` beside ``device: cuda``: one line naming both keys, no traceback."""
    require_native()
    s = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in random_scene(seed=0, n=5).items()}
    with pytest.raises(ConfigError, match="backend 'native' needs CPU tensors.*device: cpu"):
        rasterization(*(s[k] for k in ARGS), s["colors"], s["viewmats"], s["Ks"], 45, 37, backend="native")


@needs_cuda
def test_gsplat_backend_matches_torch_backend() -> None:  # pragma: no cover - no GPU on the dev machine
    s = {k: (v.cuda() if torch.is_tensor(v) else v) for k, v in random_scene(seed=1).items()}
    a = rasterization(*(s[k] for k in ARGS), s["sh"], s["viewmats"], s["Ks"], 45, 37, sh_degree=3, backend="gsplat")
    b = rasterization(*(s[k] for k in ARGS), s["sh"], s["viewmats"], s["Ks"], 45, 37, sh_degree=3, backend="torch")
    torch.testing.assert_close(a[0], b[0], rtol=1e-4, atol=1e-4)
    assert torch.equal(a[2]["radii"], b[2]["radii"])


MEMORY_SCRIPT = textwrap.dedent(
    """
    import resource, time, torch
    from pointrix_lite.renderer.torch_backend import rasterization_torch
    torch.manual_seed(0)
    N, W, H = 50000, 160, 160
    means = torch.stack([torch.rand(N) * 2 - 1, torch.rand(N) * 2 - 1, torch.rand(N) * 2 + 2], -1)
    params = [means, torch.randn(N, 4), torch.exp(torch.randn(N, 3) * 0.5 - 4.0), torch.rand(N), torch.randn(N, 16, 3) * 0.3]
    for p in params:
        p.requires_grad_(True)
    Ks = torch.tensor([[[160.0, 0, 80], [0, 160, 80], [0, 0, 1]]])
    for _ in range(2):  # the second pass is the warm timing
        t0 = time.perf_counter()
        colors, alphas, meta = rasterization_torch(*params, torch.eye(4)[None], Ks, W, H, sh_degree=3)
        t1 = time.perf_counter()
        (colors.sum() + alphas.sum()).backward()
        t2 = time.perf_counter()
    assert torch.isfinite(params[0].grad).all() and alphas.mean() > 0.5
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, (t1 - t0) * 1e3, (t2 - t0) * 1e3)
    """
)


@pytest.mark.slow
def test_memory_bound_160x160_50k_forward_backward() -> None:
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    peak_mb, fwd_ms, total_ms = map(float, out.stdout.split())
    print(f"160x160, 50k Gaussians: peak RSS {peak_mb:.0f} MB, warm fwd {fwd_ms:.0f} ms, fwd+bwd {total_ms:.0f} ms")
    assert peak_mb < 4096
