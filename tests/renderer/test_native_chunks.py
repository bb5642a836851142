"""The native forward's chunked tile lists and the backward's reused workspaces.

The 16px forward gathers, block-tests and blends a tile's depth-sorted list a chunk of 64
Gaussians at a time and stops gathering once every 4x4 block of the tile has spent its
transmittance; a block that is still blending carries its state into the next chunk. The
backward writes gradient rows only for pairs that blended somewhere, into blocks kept from
earlier calls (scratch.h), so nothing a previous render left there may reach a result.
"""

from __future__ import annotations

import pytest
import torch

from .native_required import require_native
from .test_native import ARGS, compare, run_with_grads
from .variants import native_variant  # noqa: F401 (autouse: every test runs once per build variant)

require_native(allow_module_level=True)

from pointrix_lite.renderer.native import rasterization_native  # noqa: E402

CHUNK = 64  # rasterize_fwd.cpp kChunk


def pixel_gaussians(uv: torch.Tensor, z: torch.Tensor, sigma_px: torch.Tensor, f: float, c: float) -> dict:
    """Round Gaussians at pixel positions ``uv`` [N, 2], depth ``z``, ``sigma_px`` pixels wide,
    seen by a camera at the origin looking along +z with focal ``f`` and principal point (c, c)."""
    xy = (uv - c) * z[:, None] / f
    s = sigma_px * z / f
    return dict(
        means=torch.cat([xy, z[:, None]], 1),
        scales=torch.stack([s, s, 0.1 * s], 1),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(len(z), 1),
    )


def holed_wall_scene(wall_opacity: float = 0.98) -> dict:
    """A 32x16 image (two 16px tiles): a wall of small near-opaque Gaussians, three layers deep,
    covers everything but an 8x8 window at pixels 2..9 of tile 0 (around its block 5), in front of
    ~300 translucent Gaussians. Every block of the wall is spent within the first chunks; the
    window's block keeps blending Gaussians from far down the list."""
    g = torch.Generator().manual_seed(5)
    f, c = 30.0, 16.0
    ys, xs = torch.meshgrid(torch.arange(0.5, 16, 1.0), torch.arange(0.5, 32, 1.0), indexing="ij")  # pixel centres
    grid = torch.stack([xs.flatten(), ys.flatten() + 8.0], 1)  # image rows 8..24 of a 32x32 frame, cropped below
    hole = (grid[:, 0] > 2) & (grid[:, 0] < 10) & (grid[:, 1] - 8.0 > 2) & (grid[:, 1] - 8.0 < 10)
    wall = grid[~hole]
    layers = [
        pixel_gaussians(wall, torch.full((len(wall),), z), torch.full((len(wall),), 1.0), f, c) for z in (2.0, 2.1, 2.2)
    ]
    n_back = 300
    back_uv = torch.rand(n_back, 2, generator=g) * torch.tensor([32.0, 16.0]) + torch.tensor([0.0, 8.0])
    back = pixel_gaussians(
        back_uv, 3.0 + 2.0 * torch.rand(n_back, generator=g), 1.0 + 3.0 * torch.rand(n_back, generator=g), f, c
    )
    parts = layers + [back]
    n_wall = 3 * len(wall)
    opacities = torch.cat([torch.full((n_wall,), wall_opacity), 0.2 + 0.5 * torch.rand(n_back, generator=g)])
    return dict(
        **{k: torch.cat([p[k] for p in parts]) for k in ("means", "scales", "quats")},
        opacities=opacities,
        colors=torch.rand(n_wall + n_back, 3, generator=g),
        viewmats=torch.eye(4)[None],
        Ks=torch.tensor([[[f, 0.0, c], [0.0, f, c - 8.0], [0.0, 0.0, 1.0]]]),
        width=32,
        height=16,
    )


def test_a_block_still_blending_sees_the_gaussians_of_later_chunks() -> None:
    scene = holed_wall_scene()
    ours, ref = compare(scene, "colors")
    meta = ours["meta"]
    pairs = int(meta["tiles_per_gauss"].sum())
    assert pairs > 6 * CHUNK, f"the tiles' lists must span many chunks ({pairs} pairs)"
    a = ref["alphas"][0, :, :, 0]
    window, wall = a[4:8, 4:8], torch.cat([a[:, 12:].flatten(), a[12:, :].flatten()])
    assert (wall > 0.999).all(), "the wall must spend every pixel's transmittance"
    wall_only = dict(scene, opacities=torch.cat([scene["opacities"][:-300], torch.zeros(300)]))
    _, wall_alphas, _ = rasterization_native(*(wall_only[k] for k in ARGS + ("colors", "viewmats", "Ks")), 32, 16)
    assert (wall_alphas[0, 4:8, 4:8] < 0.99).all(), "the wall alone must leave the window translucent"
    assert (window - wall_alphas[0, 4:8, 4:8, 0] > 0.01).all(), "the window must see the Gaussians behind"
    # Gaussians far down the list reach the image only through the window, and get gradients from it
    back = slice(len(scene["opacities"]) - 300, None)
    seen = ours["grads"]["opacities"][back].abs() > 0
    assert seen.sum() > 5, "Gaussians behind the wall must receive gradients through the window"
    # the wall's blocks stop early: far fewer evaluations than behind a wall that lets light through
    _, _, thin = rasterization_native(*(holed_wall_scene(0.2)[k] for k in ARGS + ("colors", "viewmats", "Ks")), 32, 16)
    assert meta["n_evaluations"] < 0.5 * thin["n_evaluations"]


def cube(seed: int, n: int, size: int) -> dict:
    """``n`` small random Gaussians filling a cube 3 units in front of one ``size`` x ``size`` camera."""
    from .dense_reference import look_at

    g = torch.Generator().manual_seed(seed)
    return dict(
        means=torch.rand(n, 3, generator=g) * 2 - 1,
        quats=torch.randn(n, 4, generator=g),
        scales=torch.exp(torch.randn(n, 3, generator=g) * 0.3 - 3.2),
        opacities=torch.rand(n, generator=g),
        colors=torch.rand(n, 3, generator=g),
        viewmats=look_at([0.0, 0.0, -3.0])[None].float(),
        Ks=torch.tensor([[[size * 0.9, 0.0, size / 2], [0.0, size * 0.9, size / 2], [0.0, 0.0, 1.0]]]),
        width=size,
        height=size,
    )


def test_results_do_not_depend_on_what_an_earlier_render_left_behind() -> None:
    """Blocks over 2 MB (gradient rows, packed records, outputs) are kept between calls and handed to
    the next call that fits, with whatever the last user wrote; rows of pairs that blended nowhere are
    never written. A render before and after a different one of the same size (which gets the same
    blocks, full of its own rows) gives the same bits."""
    scene, other = cube(1, 40_000, 192), cube(2, 40_000, 192)
    first = run_with_grads(rasterization_native, scene, "colors", seed=3, absgrad=True)
    assert int(first["meta"]["tiles_per_gauss"].sum()) * 11 * 4 > 2 << 20, "rows must come from kept blocks"
    run_with_grads(rasterization_native, other, "colors", seed=4, absgrad=True)
    again = run_with_grads(rasterization_native, scene, "colors", seed=3, absgrad=True)
    assert torch.equal(first["colors"], again["colors"])
    assert torch.equal(first["alphas"], again["alphas"])
    for name in ARGS + ("colors", "means2d"):
        assert torch.equal(first["grads"][name], again["grads"][name]), name
    assert torch.equal(first["meta"]["means2d"].absgrad, again["meta"]["means2d"].absgrad)


def test_kept_blocks_of_sizes_no_longer_asked_for_go_back(native_variant: str) -> None:  # noqa: F811 (the fixture, by name)
    """A model that grows, or a resolution schedule, changes the sizes asked for: blocks no request
    took for a while are freed, so what is kept comes back to what the current renders use."""
    if native_variant != "native":  # ~260 renders: tens of seconds on the scalar build
        pytest.skip("scratch.cpp's ageing is the same code in every build; the native build checks it")
    from pointrix_lite.renderer.native._build import load_extension

    ext = load_extension()
    small, large = cube(1, 40_000, 192), cube(2, 200_000, 480)
    for _ in range(3):
        run_with_grads(rasterization_native, small, "colors")
    _, small_bytes, _ = ext.scratch_kept()
    run_with_grads(rasterization_native, large, "colors")
    _, with_large, requests = ext.scratch_kept()
    assert with_large > small_bytes + (20 << 20), "the large render must leave larger blocks behind"
    for _ in range(400):  # until kMaxAge (256) requests have passed
        run_with_grads(rasterization_native, small, "colors")
        _, after, now = ext.scratch_kept()
        if now - requests > 260:
            break
    assert now - requests > 260
    # what is left serves the small renders (a kept block may be up to twice the size asked)
    assert after < with_large / 4 and after <= 4 * small_bytes, (small_bytes, with_large, after)
