"""The native C++ rasterizer against the pure-torch reference backend and the dense float64 reference.

Forward: colours/alphas within 1e-5 absolute (depth channels 1e-5 relative); gradients within
1e-4 of the reference gradient's largest magnitude. The first test run compiles the extension
(~40 s on 2 cores), later runs load it from torch's extension cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from pointrix_lite.renderer.torch_backend import rasterization_torch

from .dense_reference import dense_render, look_at, random_scene
from .native_required import require_native
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)  # compiles on first use

from pointrix_lite.renderer.native import rasterization_native  # noqa: E402

ARGS = ("means", "quats", "scales", "opacities")
FWD_ATOL = 1e-5
GRAD_RTOL = 1e-4


def call(fn, p: dict, colors_key: str = "colors", **kw):
    return fn(*(p[k] for k in ARGS), p[colors_key], p["viewmats"], p["Ks"], p["width"], p["height"], **kw)


def run_with_grads(fn, scene: dict, colors_key: str, seed: int = 0, **kw) -> dict:
    """Render, backprop a random linear read-out of colours and alphas, return outputs and grads."""
    p = {
        k: (v.detach().clone().requires_grad_(True) if torch.is_tensor(v) and k != "Ks" else v)
        for k, v in scene.items()
    }
    colors, alphas, meta = call(fn, p, colors_key, **kw)
    meta["means2d"].retain_grad()
    g = torch.Generator().manual_seed(seed)
    w_c = torch.randn(colors.shape, generator=g, dtype=torch.float64).to(colors)  # colours' dtype and device
    w_a = torch.randn(alphas.shape, generator=g, dtype=torch.float64).to(alphas)
    ((colors * w_c).sum() + (alphas * w_a).sum()).backward()
    grads = {k: p[k].grad for k in ARGS + (colors_key, "viewmats")}
    grads["means2d"] = meta["means2d"].grad
    return dict(colors=colors.detach(), alphas=alphas.detach(), meta=meta, grads=grads)


def assert_forward_close(got: torch.Tensor, want: torch.Tensor, depth_channels: int = 0) -> None:
    got, want = got.double(), want.double()
    D = got.shape[-1]
    n_plain = D - depth_channels
    if n_plain:
        assert (got[..., :n_plain] - want[..., :n_plain]).abs().max() <= FWD_ATOL
    if depth_channels:  # depths are ~1-10 scene units: compare relatively
        d_got, d_want = got[..., n_plain:], want[..., n_plain:]
        assert ((d_got - d_want).abs() / d_want.abs().clamp_min(1.0)).max() <= FWD_ATOL


def assert_grad_close(got: torch.Tensor, want: torch.Tensor, name: str) -> None:
    scale = want.abs().max().item()
    assert scale > 0, f"{name}: reference gradient is all zero, the test would prove nothing"
    err = (got.double() - want.double()).abs().max().item()
    assert err <= GRAD_RTOL * scale, f"{name}: max error {err:.3g} vs scale {scale:.3g}"


def compare(scene: dict, colors_key: str, grads: bool = True, **kw) -> tuple[dict, dict]:
    ours = run_with_grads(rasterization_native, scene, colors_key, **kw)
    ref = run_with_grads(rasterization_torch, scene, colors_key, **kw)
    n_depth = 1 if kw.get("render_mode", "RGB") != "RGB" else 0
    assert_forward_close(ours["colors"], ref["colors"], n_depth)
    assert_forward_close(ours["alphas"], ref["alphas"])
    assert torch.equal(ours["meta"]["radii"], ref["meta"]["radii"])
    vis = (ref["meta"]["radii"] > 0).all(-1)
    for key in ("means2d", "depths", "conics", "opacities"):
        torch.testing.assert_close(ours["meta"][key][vis], ref["meta"][key][vis], rtol=1e-5, atol=1e-5)
    if grads:
        for name, want in ref["grads"].items():
            if want is None or want.abs().max() == 0:
                assert ours["grads"][name] is None or ours["grads"][name].abs().max() == 0, name
                continue
            assert_grad_close(ours["grads"][name], want, name)
    return ours, ref


@pytest.mark.parametrize("sh_degree", [None, 0, 1, 2, 3])
def test_matches_reference_all_sh_degrees(sh_degree) -> None:
    scene = random_scene(seed=10 + (sh_degree or 0))
    ours, ref = compare(scene, "colors" if sh_degree is None else "sh", sh_degree=sh_degree)
    assert ours["colors"].shape == (3, 37, 45, 3)
    assert ref["alphas"].max() > 0.9 and ref["colors"].std() > 0.1, "scene too empty to test anything"


@pytest.mark.parametrize("render_mode", ["RGB", "D", "ED", "RGB+D", "RGB+ED"])
def test_render_modes_with_backgrounds_antialiased(render_mode: str) -> None:
    scene = random_scene(seed=3)
    bg = torch.tensor([[0.2, 0.5, 0.9], [1.0, 1.0, 1.0], [0.0, 0.3, 0.1]])
    ours, ref = compare(scene, "sh", sh_degree=2, render_mode=render_mode, rasterize_mode="antialiased", backgrounds=bg)
    D = ours["colors"].shape[-1]
    assert D == {"RGB": 3, "D": 1, "ED": 1, "RGB+D": 4, "RGB+ED": 4}[render_mode]


def test_backgrounds_receive_gradients() -> None:
    scene = random_scene(seed=4)
    out = {}
    for name, fn in (("native", rasterization_native), ("torch", rasterization_torch)):
        bg = torch.tensor([[0.2, 0.5, 0.9]] * 3, requires_grad=True)
        colors, alphas, _ = call(fn, scene, backgrounds=bg)
        (colors * torch.linspace(-1, 1, colors.numel()).view(colors.shape)).sum().backward()
        out[name] = bg.grad
    assert_grad_close(out["native"], out["torch"], "backgrounds")


@pytest.mark.parametrize("rasterize_mode", ["classic", "antialiased"])
def test_matches_dense_float64_reference(rasterize_mode: str) -> None:
    """Independent check: the dense float64 renderer, forward and gradients (RGB+ED, SH 3)."""
    scene = random_scene(seed=21)
    kw = dict(sh_degree=3, render_mode="RGB+ED", rasterize_mode=rasterize_mode)
    ours = run_with_grads(rasterization_native, scene, "sh", **kw)
    scene64 = {k: (v.double() if torch.is_tensor(v) else v) for k, v in scene.items()}
    ref = run_with_grads(lambda *a, **k: dense_render(*a, **k, return_meta=True), scene64, "sh", **kw)
    assert_forward_close(ours["colors"], ref["colors"], depth_channels=1)
    assert_forward_close(ours["alphas"], ref["alphas"])
    for name in ARGS + ("sh", "means2d"):
        assert_grad_close(ours["grads"][name], ref["grads"][name], name)


def opaque_stack(n: int = 80) -> dict:
    """Overlapping near-opaque Gaussians, so most pixels hit the T <= 1e-4 stop."""
    g = torch.Generator().manual_seed(11)
    return dict(
        means=torch.randn(n, 3, generator=g) * 0.3,
        quats=torch.randn(n, 4, generator=g),
        scales=0.35 * torch.rand(n, 3, generator=g).add(0.5),
        opacities=0.9 + 0.09 * torch.rand(n, generator=g),
        colors=torch.rand(n, 3, generator=g),
        viewmats=torch.stack([look_at([0.0, 0.0, -3.0]), look_at([1.0, 2.0, -2.5])]).float(),
        Ks=torch.tensor([[[30.0, 0, 17.0], [0, 30.0, 19.0], [0, 0, 1]]] * 2),
        width=35,
        height=38,
    )


def test_early_termination_and_saturated_pixels() -> None:
    scene = opaque_stack()
    ours, ref = compare(scene, "colors", render_mode="RGB+D")
    assert (ref["alphas"] > 0.9998).float().mean() > 0.1, "scene must saturate pixels"


@pytest.mark.parametrize("tile_size, n_features", [(8, 3), (16, 2), (16, 5), (16, 7), (13, 1)])
def test_generic_tile_sizes_and_channel_counts(tile_size: int, n_features: int) -> None:
    """Paths not specialised at compile time (tile 16 with D in {1,3,4} is); 7 channels do not fit the
    packed record (kPackedColors = 5 in tile.h) and are read from the colour array."""
    scene = random_scene(seed=30 + tile_size)
    g = torch.Generator().manual_seed(1)
    scene["colors"] = torch.rand(3, scene["means"].shape[0], n_features, generator=g)  # per-camera features
    compare(scene, "colors", tile_size=tile_size)


def test_absgrad_matches_reference() -> None:
    scene = random_scene(seed=12)
    out = {}
    for name, fn in (("native", rasterization_native), ("torch", rasterization_torch)):
        p = dict(scene, means=scene["means"].clone().requires_grad_(True))
        colors, alphas, meta = call(fn, p, "sh", sh_degree=1, absgrad=True)
        meta["means2d"].retain_grad()
        g = torch.Generator().manual_seed(3)
        (colors * torch.randn(colors.shape, generator=g)).sum().backward()
        out[name] = (meta["means2d"].grad, meta["means2d"].absgrad)
    assert_grad_close(out["native"][0], out["torch"][0], "means2d")
    assert_grad_close(out["native"][1], out["torch"][1], "absgrad")
    assert (out["native"][1] >= out["native"][0].abs() - 1e-6).all()
    assert (out["native"][1] > out["native"][0].abs() + 1e-4).any(), "absgrad should differ from |grad|"


def test_empty_scene_renders_background() -> None:
    scene = random_scene(seed=1)
    empty = {k: (v[:0] if k in ARGS + ("colors",) else v) for k, v in scene.items()}
    bg = torch.tensor([[0.1, 0.2, 0.3]] * 3)
    colors, alphas, meta = call(rasterization_native, empty, backgrounds=bg, render_mode="RGB+D")
    assert colors.shape == (3, 37, 45, 4) and (alphas == 0).all()
    assert torch.equal(colors[..., :3], bg[:, None, None, :].expand(3, 37, 45, 3))
    assert meta["means2d"].shape == (3, 0, 2) and meta["radii"].shape == (3, 0, 2)


def test_float64_inputs_are_computed_in_float32_with_float64_grads() -> None:
    scene = random_scene(seed=5, dtype=torch.float64)
    ours = run_with_grads(rasterization_native, scene, "colors")
    ref = run_with_grads(
        rasterization_native, {k: (v.float() if torch.is_tensor(v) else v) for k, v in scene.items()}, "colors"
    )
    assert ours["colors"].dtype == torch.float32
    assert ours["grads"]["means"].dtype == torch.float64
    assert torch.equal(ours["colors"], ref["colors"])
    torch.testing.assert_close(ours["grads"]["means"].float(), ref["grads"]["means"])


def test_results_do_not_depend_on_thread_count() -> None:
    """Gradients are reduced in a fixed order (no atomics), so 1 and 2 threads agree bit for bit."""
    scene = random_scene(seed=6)
    before = torch.get_num_threads()
    try:
        runs = []
        for n in (1, 2):
            torch.set_num_threads(n)
            runs.append(run_with_grads(rasterization_native, scene, "sh", sh_degree=3))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(runs[0]["colors"], runs[1]["colors"])
    for k, v in runs[0]["grads"].items():
        assert torch.equal(v, runs[1]["grads"][k]), k


THREADS_STARTED = textwrap.dedent(
    """
    import os
    import torch  # first: libgomp reads OMP_WAIT_POLICY when torch loads it

    from pointrix_lite.renderer.native import rasterization_native
    from tests.renderer.dense_reference import random_scene
    from tests.renderer.test_native import run_with_grads

    torch.set_num_threads(2)
    x = torch.rand(1 << 20, requires_grad=True)
    (x * 2).sum().backward()  # torch's own workers (intra-op, autograd) are up now
    before = set(os.listdir("/proc/self/task"))
    out = run_with_grads(rasterization_native, random_scene(seed=6), "sh", sh_degree=3)
    assert out["colors"].abs().sum() > 0
    print(len(set(os.listdir("/proc/self/task")) - before))
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
@pytest.mark.parametrize("policy", ["", "PASSIVE"])
def test_native_helpers_are_torchs_threads_while_those_spin(policy: str, native_variant: str) -> None:  # noqa: F811 (the fixture, by name)
    """torch's OpenMP workers spin between ops unless OMP_WAIT_POLICY=PASSIVE; the native stages
    then run on them (helpers of their own would share the cores with the spinning ones), and
    otherwise on a pool of their own (bindings.cpp, pool.h)."""
    if native_variant != "native":
        pytest.skip("a subprocess that never loads a variant: once is enough")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", THREADS_STARTED], env=env, cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    started = int(out.stdout.strip().splitlines()[-1])
    assert started == (1 if policy else 0), f"OMP_WAIT_POLICY={policy!r}: the native stages started {started} threads"


def test_culled_gaussians_get_zero_gradients_and_meta() -> None:
    scene = random_scene(seed=2)
    out = run_with_grads(rasterization_native, scene, "sh", sh_degree=3, rasterize_mode="antialiased")
    culled = (out["meta"]["radii"] == 0).all(-1)  # [C, N]
    for key in ("means2d", "depths", "conics"):
        assert (out["meta"][key][culled] == 0).all(), key
    everywhere = culled.all(0)
    assert everywhere.sum() >= 2
    for k, g in out["grads"].items():
        assert torch.isfinite(g).all(), k
        if k not in ("viewmats", "means2d"):
            assert (g[everywhere] == 0).all(), k


def test_evaluation_counter_and_argument_errors() -> None:
    scene = random_scene(seed=7)
    _, _, meta = call(rasterization_native, scene)
    assert 0 < meta["n_evaluations"] <= 3 * 37 * 45 * scene["means"].shape[0]
    with pytest.raises(ValueError, match="render_mode"):
        call(rasterization_native, scene, render_mode="RGBD")


def test_unavailable_build_is_reported_not_raised(native_variant: str) -> None:  # noqa: F811 (the fixture, by name)
    if native_variant != "native":
        pytest.skip("a subprocess that never loads a variant: once is enough")
    code = textwrap.dedent(
        """
        import warnings
        from pointrix_lite.renderer import native
        print(native.is_available(), native.unavailable_reason())
        """
    )
    env = dict(os.environ, POINTRIX_NATIVE_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False disabled by POINTRIX_NATIVE_DISABLE"


def test_sh_degree_4_with_per_camera_coefficients() -> None:
    scene = random_scene(seed=14)
    g = torch.Generator().manual_seed(4)
    scene["sh4"] = torch.randn(3, scene["means"].shape[0], 25, 3, generator=g) * 0.3  # [C, N, K, 3]
    compare(scene, "sh4", sh_degree=4)


def test_expanded_output_gradients_are_read_in_place() -> None:
    """sum() hands the backward stride-0 gradients; the kernel reads them without a copy."""
    scene = random_scene(seed=15)
    grads = {}
    for name, fn in (("native", rasterization_native), ("torch", rasterization_torch)):
        means = scene["means"].clone().requires_grad_(True)
        colors, alphas, _ = call(fn, dict(scene, means=means), "sh", sh_degree=2)
        (colors.sum() + 3.0 * alphas.sum()).backward()
        grads[name] = means.grad
    assert_grad_close(grads["native"], grads["torch"], "means")
