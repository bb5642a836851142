"""Every build variant of the native extension blends the same alphas, bit for bit.

The alpha math (common.h's ``exp_minus_t`` / ``gauss_sigma``) is one unfused operation sequence for
the scalar code and every vector width, so the scalar, x86-64-v2, x86-64-v3 and native builds, and
the 4x4-block (tile 16) and per-pixel (other tile sizes) paths of one build, decide every threshold
alike. Colours may differ in the last bits (fused colour sums on FMA targets); gradients are checked
per variant against the references in test_native*.py.
"""

from __future__ import annotations

import pytest
import torch

from pointrix_lite.renderer.native import _build

from .dense_reference import random_scene
from .native_required import require_native
from .test_native import ARGS, opaque_stack
from .test_native_culling import NEEDLES, thin_scene, wide_scene
from .variants import load, runnable_variants

require_native(allow_module_level=True)

from pointrix_lite.renderer.native import rasterization_native  # noqa: E402


def render_all(scene: dict, colors_key: str, **kw) -> dict:
    """variant -> (colors, alphas) for tile sizes 16 and 8."""
    out = {}
    previous = _build.load_extension()
    try:
        for variant in runnable_variants():
            _build.use_module(load(variant))
            for tile in (16, 8):
                colors, alphas, _ = rasterization_native(
                    *(scene[k] for k in ARGS),
                    scene[colors_key],
                    scene["viewmats"],
                    scene["Ks"],
                    scene["width"],
                    scene["height"],
                    tile_size=tile,
                    **kw,
                )
                out[(variant, tile)] = (colors, alphas)
    finally:
        _build.use_module(previous)
    return out


@pytest.mark.parametrize("name", ["random_sh3", "opaque_stack", "needles", "wide"])
def test_alphas_are_bit_identical_across_variants_and_paths(name: str) -> None:
    if name == "random_sh3":
        scene, key, kw = random_scene(seed=21), "sh", dict(sh_degree=3, render_mode="RGB+ED")
    elif name == "opaque_stack":
        scene, key, kw = opaque_stack(), "colors", {}
    elif name == "needles":
        scene, key, kw = thin_scene(128, NEEDLES), "colors", {}
    else:  # boxes wider than a vector and beyond the 64-bit hit mask (binning's row-segment tests)
        scene, key, kw = wide_scene(), "colors", {}
    out = render_all(scene, key, **kw)
    (ref_colors, ref_alphas) = out[("native", 16)]
    assert ref_alphas.max() > 0.5, "scene too empty to test anything"
    for (variant, tile), (colors, alphas) in out.items():
        assert torch.equal(alphas, ref_alphas), f"{variant}, tile {tile}: alphas differ from native tile 16"
        assert (colors - ref_colors).abs().max() <= 1e-5 * max(1.0, ref_colors.abs().max().item()), (variant, tile)
