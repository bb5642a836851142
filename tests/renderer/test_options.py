"""RasterOptions: gsplat's option names and defaults, checked once, handed unchanged to every backend."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pointrix_lite.renderer import rasterization
from pointrix_lite.renderer.options import RasterOptions

OPTION_NAMES = [f.name for f in dataclasses.fields(RasterOptions) if f.name not in ("width", "height")]


def test_options_are_gsplat_keywords_with_gsplat_defaults() -> None:
    """What the gsplat backend forwards must be keywords gsplat 1.5.3 takes, defaulting as there,
    and rasterization()'s own defaults must be the options' (its signature is gsplat's)."""
    gsplat = pytest.importorskip("gsplat")
    theirs = inspect.signature(gsplat.rasterization).parameters
    ours = inspect.signature(rasterization).parameters
    defaults = RasterOptions(1, 1).keywords()
    assert list(defaults) == OPTION_NAMES
    for name, value in defaults.items():
        assert theirs[name].default == value, name
        assert ours[name].default == value, name


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(render_mode="RGBD"), "render_mode must be one of RGB, D, ED, RGB+D, RGB+ED, got 'RGBD'"),
        (dict(rasterize_mode="aa"), "rasterize_mode must be one of classic, antialiased, got 'aa'"),
        (dict(sh_degree=5), "sh_degree must be in 0..4, got 5"),
        (dict(tile_size=0), "width, height and tile_size must be positive, got 4, 3, 0"),
    ],
)
def test_bad_options_are_one_line_value_errors(options, message) -> None:
    with pytest.raises(ValueError) as err:
        RasterOptions(4, 3, **options)
    assert str(err.value) == f"rasterization: {message}"


def test_options_are_frozen_and_answer_the_mode_questions() -> None:
    o = RasterOptions(4, 3, render_mode="RGB+ED", rasterize_mode="antialiased")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.tile_size = 8  # type: ignore[misc]
    assert o.appends_depth and o.expected_depth and o.antialiased and not o.depth_only
    d = RasterOptions(4, 3, render_mode="D")
    assert d.depth_only and not d.expected_depth and not d.appends_depth and not d.antialiased


@pytest.mark.parametrize(
    "options, key, problem",
    [
        (dict(tile_size=0), "tile_size", "must be >= 1, got 0"),
        (dict(eps2d=-1.0), "eps2d", "must be >= 0, got -1.0"),
        (dict(radius_clip=float("nan")), "radius_clip", "must be >= 0, got nan"),
        (dict(near_plane=2.0, far_plane=1.0), "near_plane / far_plane", "must satisfy 0 < near < far, got 2.0 / 1.0"),
        (dict(rasterize_mode="aa"), "rasterize_mode", "must be one of classic, antialiased, got 'aa'"),
    ],
)
def test_the_renderer_config_refuses_by_the_same_rules(options, key, problem) -> None:
    """One rule per option (RasterOptions); the config only names the key where the user wrote it."""
    import pickle

    from pointrix_lite.config import OptionError
    from pointrix_lite.renderer.options import RasterOptionError
    from pointrix_lite.renderer.renderer import GaussianRenderer

    with pytest.raises(OptionError) as err:
        GaussianRenderer.Config(**options)
    assert str(err.value) == f"renderer.{key}: {problem}"
    with pytest.raises(RasterOptionError) as raw:
        RasterOptions(4, 3, **options)
    assert (raw.value.key, raw.value.problem) == (key, problem)
    assert str(pickle.loads(pickle.dumps(raw.value))) == str(raw.value)


def test_the_renderer_config_hands_its_keys_to_the_options() -> None:
    from pointrix_lite.renderer.renderer import GaussianRenderer

    config = GaussianRenderer.Config(
        backend="torch", eps2d=0.1, tile_size=8, absgrad=True, rasterize_mode="antialiased"
    )
    assert config.options(40, 30, sh_degree=3) == RasterOptions(
        40, 30, eps2d=0.1, tile_size=8, absgrad=True, rasterize_mode="antialiased", sh_degree=3
    )
