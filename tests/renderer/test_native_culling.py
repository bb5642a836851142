"""Exact tile/row culling and the contributor-only backward of the native rasterizer.

The native binning keeps a (Gaussian, tile) pair only where the Gaussian's alpha can reach 1/255
at one of the tile's pixel centres, and the forward visits only the rows it can reach; the
backward replays only the rows the forward blended. None of that may change what is blended:
thin rotated ellipses, whose radius box covers many tiles they never reach, must render and
differentiate exactly like the torch backend and the dense float64 reference, while the number
of kept pairs drops below the radius-box count (gsplat's binning).
"""

from __future__ import annotations

import math

import pytest
import torch

from .dense_reference import dense_render
from .native_required import require_native
from .test_native import ARGS, assert_forward_close, assert_grad_close, run_with_grads
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)

from pointrix_lite.renderer.native import rasterization_native  # noqa: E402
from pointrix_lite.renderer.torch_backend import rasterization_torch  # noqa: E402


def z_rotation(deg: float) -> list[float]:
    """wxyz quaternion of a rotation by ``deg`` about the camera's viewing axis."""
    h = math.radians(deg) / 2
    return [math.cos(h), 0.0, 0.0, math.sin(h)]


def thin_scene(size: int, thin: list[tuple[float, float, float, float, float]], n_background: int = 40) -> dict:
    """One camera at the origin looking along +z; ``thin`` = (x, y, length, angle deg, opacity).

    Each thin Gaussian is a needle (length x 0.02 x 0.02) turned in the image plane, so its
    axis-aligned radius box covers tiles far from the needle; small background Gaussians make
    every gradient non-trivial.
    """
    g = torch.Generator().manual_seed(size + len(thin))
    means = [[x, y, 3.0] for x, y, _, _, _ in thin]
    scales = [[length, 0.02, 0.02] for _, _, length, _, _ in thin]
    quats = [z_rotation(angle) for _, _, _, angle, _ in thin]
    opacities = [o for *_, o in thin]
    bg_means = torch.rand(n_background, 3, generator=g) * torch.tensor([2.0, 2.0, 1.0]) - torch.tensor([1.0, 1.0, -3.5])
    return dict(
        means=torch.cat([torch.tensor(means), bg_means]),
        quats=torch.cat([torch.tensor(quats), torch.randn(n_background, 4, generator=g)]),
        scales=torch.cat([torch.tensor(scales), torch.exp(torch.randn(n_background, 3, generator=g) * 0.3 - 3.0)]),
        opacities=torch.cat([torch.tensor(opacities), torch.rand(n_background, generator=g) * 0.8 + 0.1]),
        colors=torch.rand(len(thin) + n_background, 3, generator=g),
        viewmats=torch.eye(4)[None],
        Ks=torch.tensor([[[float(size), 0.0, size / 2], [0.0, float(size), size / 2], [0.0, 0.0, 1.0]]]),
        width=size,
        height=size,
    )


def box_tiles(meta: dict) -> torch.Tensor:
    """[C, N] tiles of each Gaussian's radius box, with gsplat's float arithmetic (IntersectTile.cu)."""
    ts = float(meta["tile_size"])
    m, r = meta["means2d"].detach(), meta["radii"].float()
    lo = torch.floor(m / ts - r / ts)
    hi = torch.ceil(m / ts + r / ts)
    limit = torch.tensor([meta["tile_width"], meta["tile_height"]], dtype=torch.float32)
    lo, hi = torch.minimum(lo.clamp_min(0), limit), torch.minimum(hi.clamp_min(0), limit)
    n = ((hi - lo)[..., 0] * (hi - lo)[..., 1]).long()
    return torch.where((meta["radii"] > 0).all(-1), n, torch.zeros_like(n))


def reachable_tiles(meta: dict) -> torch.Tensor:
    """[C, N] tiles where the Gaussian's alpha reaches 1/255 at some pixel centre, in float64
    from the projected means2d / conics / opacities (the pairs culling must keep)."""
    ts, W, H = meta["tile_size"], meta["width"], meta["height"]
    py, px = torch.meshgrid(
        torch.arange(H, dtype=torch.float64) + 0.5, torch.arange(W, dtype=torch.float64) + 0.5, indexing="ij"
    )
    m, con = meta["means2d"].detach().double(), meta["conics"].detach().double()
    opac = meta["opacities"].detach().double()
    out = torch.zeros(m.shape[:2], dtype=torch.long)
    for c, g in ((meta["radii"] > 0).all(-1)).nonzero().tolist():
        dx, dy = m[c, g, 0] - px, m[c, g, 1] - py
        sigma = 0.5 * (con[c, g, 0] * dx * dx + con[c, g, 2] * dy * dy) + con[c, g, 1] * dx * dy
        hit = (sigma >= 0) & (opac[c, g] * torch.exp(-sigma) >= 1 / 255)
        pad = torch.zeros(meta["tile_height"] * ts, meta["tile_width"] * ts, dtype=torch.bool)
        pad[:H, :W] = hit
        out[c, g] = pad.view(meta["tile_height"], ts, meta["tile_width"], ts).any(3).any(1).sum()
    return out


def assert_same_render(scene: dict, reference, **kw) -> dict:
    """Colours, alphas and every gradient of the native backend against ``reference`` at
    test_native.py's tolerances. (The projected conics of a needle are ill-conditioned, so they
    differ between float32 implementations by more than test_native's 1e-5 meta check; what they
    render must not.) Returns the native run."""
    ours = run_with_grads(rasterization_native, scene, "colors", **kw)
    ref = run_with_grads(reference, scene, "colors", **kw)
    assert_forward_close(ours["colors"], ref["colors"])
    assert_forward_close(ours["alphas"], ref["alphas"])
    assert torch.equal(ours["meta"]["radii"], ref["meta"]["radii"].to(ours["meta"]["radii"].dtype))
    for name in ARGS + ("colors", "means2d"):
        assert_grad_close(ours["grads"][name], ref["grads"][name], name)
    return ours


def dense64(*args, **kw):
    """The dense float64 reference renderer (independent of both backends' float32 code)."""
    return dense_render(*(a.double() if torch.is_tensor(a) else a for a in args), **kw, return_meta=True)


NEEDLES = [(0.0, 0.0, 0.8, 45.0, 0.05), (0.3, -0.2, 0.6, -30.0, 0.02), (-0.4, 0.3, 0.5, 60.0, 0.9)]


@pytest.mark.parametrize("tile_size", [16, 8])
def test_needles_render_like_the_torch_backend_with_fewer_tile_pairs(tile_size: int) -> None:
    scene = thin_scene(96, NEEDLES)
    ours = assert_same_render(scene, rasterization_torch, tile_size=tile_size)
    kept, box = ours["meta"]["tiles_per_gauss"], box_tiles(ours["meta"])
    assert (kept <= box).all() and (kept >= reachable_tiles(ours["meta"])).all()
    # each needle's box holds many tiles it never reaches: at least a third are dropped
    for i in range(len(NEEDLES)):
        assert kept[0, i] <= box[0, i] * 2 // 3, (i, int(kept[0, i]), int(box[0, i]))
        assert kept[0, i] > 0
    assert kept.sum() < box.sum()


def test_needles_match_the_dense_float64_reference() -> None:
    scene = thin_scene(64, [(0.0, 0.0, 0.6, 40.0, 0.03), (0.2, 0.25, 0.4, -50.0, 0.5)], n_background=15)
    assert_same_render(scene, dense64)


def test_long_needle_where_float_sigma_cancels() -> None:
    """Needles ~100 px long and a pixel thin: sigma's terms are ~1e4 and cancel, so every float32
    renderer rounds alpha far more than usual (both backends are ~3e-4 off the float64 reference
    here, with or without culling) and the culling's float allowance must still keep every pair
    that can blend. Forward within 1e-3 of the float64 reference (a dropped blend costs a pixel
    alpha * T >= 1/255 * T) and no reachable tile dropped."""
    scene = thin_scene(256, [(0.1, -0.1, 1.2, 30.0, 0.9), (-0.2, 0.2, 1.0, -75.0, 0.01)], n_background=10)
    ours = run_with_grads(rasterization_native, scene, "colors")
    ref = run_with_grads(dense64, scene, "colors")
    assert (ours["colors"].double() - ref["colors"]).abs().max() <= 1e-3
    assert (ours["alphas"].double() - ref["alphas"]).abs().max() <= 1e-3
    kept, box = ours["meta"]["tiles_per_gauss"], box_tiles(ours["meta"])
    assert (kept >= reachable_tiles(ours["meta"])).all()
    assert (kept[0, :2] < box[0, :2] // 2).all(), (kept[0, :2], box[0, :2])


def wide_scene() -> dict:
    """A 512x128 view (32x8 tiles of 16 px) whose radius boxes take every path of the tile test:
    needles lying almost along x span more than 16 tiles in a row (tested in row segments), a round
    blob's box holds 17-64 tiles and one long needle's more than 64 (tested a few rows at a time)."""
    scene = thin_scene(
        128, [(0.0, 0.0, 1.5, 8.0, 0.6), (0.5, 0.2, 1.2, -5.0, 0.05), (-0.6, -0.1, 0.9, 35.0, 0.9)], n_background=20
    )
    blob = dict(means=[[0.8, -0.3, 3.0]], quats=[[1.0, 0.0, 0.0, 0.0]], scales=[[0.3, 0.3, 0.3]], opacities=[0.5])
    for k, v in blob.items():
        scene[k] = torch.cat([scene[k], torch.tensor(v)])
    scene["colors"] = torch.cat([scene["colors"], torch.tensor([[0.2, 0.9, 0.4]])])
    scene["width"] = 512
    scene["Ks"] = torch.tensor([[[128.0, 0.0, 256.0], [0.0, 128.0, 64.0], [0.0, 0.0, 1.0]]])
    return scene


def box_shapes(meta: dict) -> torch.Tensor:
    """[N, 2] (tiles wide, tiles high) of camera 0's radius boxes, as box_tiles counts them."""
    ts = float(meta["tile_size"])
    m, r = meta["means2d"].detach()[0], meta["radii"][0].float()
    limit = torch.tensor([meta["tile_width"], meta["tile_height"]], dtype=torch.float32)
    lo = torch.minimum(torch.floor(m / ts - r / ts).clamp_min(0), limit)
    hi = torch.minimum(torch.ceil(m / ts + r / ts).clamp_min(0), limit)
    return (hi - lo).long()


def test_boxes_wider_than_a_vector_keep_every_reachable_tile() -> None:
    # Forward only: this scene's needle gradients are conditioned too poorly for test_native's
    # tolerances in some float32 builds (x86-64-v3's scales gradient is 1.7e-4 off torch's, with
    # or without this test's tile paths); the needle tests above check gradients.
    scene = wide_scene()
    ours, ref = (run_with_grads(fn, scene, "colors") for fn in (rasterization_native, rasterization_torch))
    assert_forward_close(ours["colors"], ref["colors"])
    assert_forward_close(ours["alphas"], ref["alphas"])
    kept, box = ours["meta"]["tiles_per_gauss"], box_tiles(ours["meta"])
    shape = box_shapes(ours["meta"])
    area = shape[:, 0] * shape[:, 1]
    assert (shape[:3, 0] > 16).any(), shape[:3]  # a row longer than one vector
    assert ((area > 16) & (area <= 64) & (shape[:, 0] <= 16) & (shape[:, 1] > 1)).any(), shape
    assert (area > 64).any(), shape  # beyond the 64-bit hit mask: tested again in the fill passes
    assert (kept <= box).all() and (kept >= reachable_tiles(ours["meta"])).all()
    assert (kept[0, :3] < box[0, :3]).all(), (kept[0, :3], box[0, :3])


def test_contributor_only_backward_is_thread_count_independent_on_needles() -> None:
    scene = thin_scene(96, NEEDLES)
    before = torch.get_num_threads()
    try:
        runs = []
        for n in (1, 2):
            torch.set_num_threads(n)
            runs.append(run_with_grads(rasterization_native, scene, "colors", absgrad=True))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(runs[0]["colors"], runs[1]["colors"])
    for k, v in runs[0]["grads"].items():
        assert torch.equal(v, runs[1]["grads"][k]), k


def _rect_min_sigma(a: float, b: float, c: float, dxl, dxh, dyl, dyh):
    """Exact minimum of sigma(dx, dy) = 0.5 a dx^2 + b dx dy + 0.5 c dy^2 (positive definite) over each
    rectangle [dxl, dxh] x [dyl, dyh] (float64 tensors): 0 with the centre inside, else on an edge at
    the clamped stationary point of the free coordinate."""

    def sig(dx, dy):
        return 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy

    edges = [sig(x, (-b * x / c).clamp(dyl, dyh)) for x in (dxl, dxh)]
    edges += [sig((-b * y / a).clamp(dxl, dxh), y) for y in (dyl, dyh)]
    best = torch.stack(edges).min(0).values
    inside = (dxl <= 0) & (dxh >= 0) & (dyl <= 0) & (dyh >= 0)
    return torch.where(inside, torch.zeros_like(best), best)


def reachable_blocks(meta: dict, slack: bool, bw: int = 4, bh: int = 4) -> int:
    """bw x bh-pixel blocks (aligned to the image origin, as the 16-px tiles' blocks are) where a
    Gaussian's sigma is at most ln(255 o) at some pixel centre, summed over Gaussians, in float64.
    ``slack``: what the culling may keep: blocks whose pixel-centre *rectangle* (the kernel tests the
    continuous rectangle) comes within the culling's level ln(255 o) + 1e-4 (1 + |ln(255 o)|) plus its
    float allowance."""
    W, H = meta["width"], meta["height"]
    py, px = torch.meshgrid(
        torch.arange(H, dtype=torch.float64) + 0.5, torch.arange(W, dtype=torch.float64) + 0.5, indexing="ij"
    )
    by, bx = torch.meshgrid(
        torch.arange(0, H, bh, dtype=torch.float64), torch.arange(0, W, bw, dtype=torch.float64), indexing="ij"
    )
    m, con = meta["means2d"].detach().double(), meta["conics"].detach().double()
    opac = meta["opacities"].detach().double()
    total = 0
    for g in ((meta["radii"][0] > 0).all(-1)).nonzero().flatten().tolist():
        a, b, c = con[0, g].tolist()
        level = math.log(255 * float(opac[0, g]))
        if slack:
            dxl, dxh = m[0, g, 0] - (bx + bw - 0.5), m[0, g, 0] - (bx + 0.5)
            dyl, dyh = m[0, g, 1] - (by + bh - 0.5), m[0, g, 1] - (by + 0.5)
            lowest = _rect_min_sigma(a, b, c, dxl, dxh, dyl, dyh)
            # Reach's float allowance (2 kReachSlack = 4e-5 of the terms' magnitude), generously bounded
            far = (
                torch.stack([d.abs() for d in (dxl, dxh)]).max(0).values,
                torch.stack([d.abs() for d in (dyl, dyh)]).max(0).values,
            )
            terms = 0.5 * (abs(a) * far[0] ** 2 + abs(c) * far[1] ** 2) + abs(b) * far[0] * far[1]
            total += int((lowest <= level + 1e-4 * (1 + abs(level)) + 4e-5 * terms + 1e-6).sum())
        else:
            dx, dy = m[0, g, 0] - px, m[0, g, 1] - py
            sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
            total += int((sigma <= level).view(H // bh, bh, W // bw, bw).any(3).any(1).sum())
    return total


def test_the_16px_path_evaluates_only_the_4x4_blocks_a_gaussian_reaches(native_variant: str) -> None:  # noqa: F811 (the fixture, by name)
    """The 16-px tile path sweeps 4x4-pixel blocks (one 16-lane vector each) and visits, per
    (Gaussian, tile), only the blocks where its alpha can reach 1/255: n_evaluations is 16 per
    visited block, so it must lie between 16x the blocks a float64 evaluation finds reachable and
    16x those within the culling's slack, and render like the torch backend. Small sparse
    Gaussians, so no pixel saturates and stops early."""
    if native_variant == "scalar":
        pytest.skip("the scalar build has no 4x4-block path (it sweeps rows)")
    g = torch.Generator().manual_seed(5)
    n = 24
    scene = dict(
        means=torch.cat([torch.rand(n, 2, generator=g) * 1.6 - 0.8, torch.full((n, 1), 3.0)], dim=1),
        quats=torch.randn(n, 4, generator=g),
        scales=torch.exp(torch.randn(n, 3, generator=g) * 0.3 - 3.6),
        opacities=torch.rand(n, generator=g) * 0.5 + 0.05,
        colors=torch.rand(n, 3, generator=g),
        viewmats=torch.eye(4)[None],
        Ks=torch.tensor([[[64.0, 0.0, 32.0], [0.0, 64.0, 32.0], [0.0, 0.0, 1.0]]]),
        width=64,
        height=64,
    )
    ours = assert_same_render(scene, rasterization_torch)
    meta = ours["meta"]
    assert (ours["alphas"] < 0.999).all()  # no pixel close to the stop, so every listed pair is swept
    lower, upper = reachable_blocks(meta, slack=False), reachable_blocks(meta, slack=True)
    assert 16 * lower <= meta["n_evaluations"] <= 16 * upper, (lower, upper, meta["n_evaluations"])
    # 16x1 rows, the unit before, would have cost more even without any slack
    assert meta["n_evaluations"] < 16 * reachable_blocks(meta, slack=False, bw=16, bh=1)


@pytest.mark.parametrize("margin", [1e-3, 1e-4, -1e-3])
def test_a_pixel_at_the_edge_of_the_reach_level_blends_iff_its_alpha_does(margin: float) -> None:
    """The culling level keeps only float-rounding slack above ln(255 o): a Gaussian whose alpha at one
    pixel centre is (1 + margin) / 255, the only pixel of the next tile it can reach (the pixel
    nearest to it there), must blend there exactly when that alpha passes 1/255, as in the torch
    backend, which culls nothing."""
    size = 32
    scene = dict(
        means=torch.tensor([[-0.375, -0.703, 3.0]]),  # projects to about (12.0, 8.5): tile 0, 4.5 px left of tile 1
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
        scales=torch.full((1, 3), 0.165),  # ~1.8 px: sigma ~3 at the nearest pixel centre of tile 1
        opacities=torch.tensor([0.5]),
        colors=torch.tensor([[1.0, 0.5, 0.25]]),
        viewmats=torch.eye(4)[None],
        Ks=torch.tensor([[[float(size), 0.0, size / 2], [0.0, float(size), size / 2], [0.0, 0.0, 1.0]]]),
        width=size,
        height=size,
    )
    _, _, meta = rasterization_native(
        *(scene[k] for k in ARGS), scene["colors"], scene["viewmats"], scene["Ks"], size, size
    )
    (mx, my), (a, b, c) = meta["means2d"][0, 0].double().tolist(), meta["conics"][0, 0].double().tolist()
    assert 11.0 < mx < 13.0 and 8.0 < my < 9.0  # the layout the docstring describes
    ys, xs = torch.meshgrid(
        torch.arange(size, dtype=torch.float64) + 0.5, torch.arange(size, dtype=torch.float64) + 0.5, indexing="ij"
    )
    dx, dy = mx - xs, my - ys
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    tile1 = sigma[:16, 16:]
    y, x = divmod(int(tile1.argmin()), 16)
    x += 16
    opacity = math.exp(float(sigma[y, x])) * (1.0 + margin) / 255.0
    assert 0.0 < opacity < 1.0
    scene["opacities"] = torch.tensor([opacity])
    native = rasterization_native(
        *(scene[k] for k in ARGS), scene["colors"], scene["viewmats"], scene["Ks"], size, size
    )
    ref = rasterization_torch(*(scene[k] for k in ARGS), scene["colors"], scene["viewmats"], scene["Ks"], size, size)
    alpha_native, alpha_ref = float(native[1][0, y, x, 0]), float(ref[1][0, y, x, 0])
    if margin > 0:
        assert alpha_native == pytest.approx((1 + margin) / 255, rel=1e-5)  # blended: culling kept the pair
    else:
        assert alpha_native == 0.0
    assert alpha_native == pytest.approx(alpha_ref, abs=1e-7)
    # Every other pixel of tile 1 is further out, below 1/255: nothing blends there.
    others = native[1][0, :16, 16:, 0].clone()
    others[y, x - 16] = 0.0
    assert float(others.abs().max()) == 0.0
