"""``RasterOptions``: the non-tensor arguments of ``rasterization()``, checked once for every backend.

The render-mode, rasterize-mode and backend names are declared here once: ``rasterization()``,
the renderer's config and the backends all read them from this module, so adding a mode is one
edit. Field names and defaults are gsplat 1.5.3's, so the options pass to gsplat unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

from torch import Tensor

RenderMode = Literal["RGB", "D", "ED", "RGB+D", "RGB+ED"]
RasterizeMode = Literal["classic", "antialiased"]
Backend = Literal["auto", "torch", "gsplat", "native"]

RENDER_MODES: tuple[str, ...] = get_args(RenderMode)
RASTERIZE_MODES: tuple[str, ...] = get_args(RasterizeMode)
BACKENDS: tuple[str, ...] = get_args(Backend)

Result = tuple[Tensor, Tensor, dict[str, Any]]
R = TypeVar("R")


class RasterOptionError(ValueError):
    """A refused rasterizer option, one line. ``key`` and ``problem`` let ``GaussianRenderer.Config``
    name the YAML key (``renderer.tile_size: must be >= 1, got 0``) from the same rule."""

    def __init__(self, key: str, problem: str, message: str | None = None) -> None:
        self.key, self.problem, self.message = key, problem, message
        super().__init__(f"rasterization: {message or f'{key} {problem}'}")

    def __reduce__(self) -> tuple:  # pickles (a viewer worker, a torchrun rank) with its three arguments
        return type(self), (self.key, self.problem, self.message)


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """One-line ValueError unless ``value`` is one of ``allowed`` (the rasterizer's own argument errors)."""
    if value not in allowed:
        raise RasterOptionError(name, f"must be one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class RasterOptions:
    """What ``rasterization()`` was asked besides the tensors; valid once constructed."""

    width: int
    height: int
    near_plane: float = 0.01
    far_plane: float = 1e10
    radius_clip: float = 0.0
    eps2d: float = 0.3
    sh_degree: int | None = None
    render_mode: RenderMode = "RGB"
    rasterize_mode: RasterizeMode = "classic"
    tile_size: int = 16
    absgrad: bool = False

    def __post_init__(self) -> None:
        # The one place these rules live: GaussianRenderer.Config builds a RasterOptions to check its keys.
        sizes = {"width": self.width, "height": self.height, "tile_size": self.tile_size}
        for key, value in sizes.items():
            if value < 1:
                raise RasterOptionError(
                    key,
                    f"must be >= 1, got {value}",
                    "width, height and tile_size must be positive, got {width}, {height}, {tile_size}".format(**sizes),
                )
        for key in ("eps2d", "radius_clip"):
            if not getattr(self, key) >= 0.0:  # `not >=`: NaN is refused too
                raise RasterOptionError(key, f"must be >= 0, got {getattr(self, key)}")
        if not 0.0 < self.near_plane < self.far_plane:
            raise RasterOptionError(
                "near_plane / far_plane", f"must satisfy 0 < near < far, got {self.near_plane} / {self.far_plane}"
            )
        if self.sh_degree is not None and not 0 <= self.sh_degree <= 4:
            raise RasterOptionError("sh_degree", f"must be in 0..4, got {self.sh_degree}")
        check_choice("render_mode", self.render_mode, RENDER_MODES)
        check_choice("rasterize_mode", self.rasterize_mode, RASTERIZE_MODES)

    @property
    def antialiased(self) -> bool:
        return self.rasterize_mode == "antialiased"

    @property
    def appends_depth(self) -> bool:
        """RGB+D / RGB+ED: a depth channel follows the colour channels."""
        return self.render_mode in ("RGB+D", "RGB+ED")

    @property
    def depth_only(self) -> bool:
        return self.render_mode in ("D", "ED")

    @property
    def expected_depth(self) -> bool:
        """ED / RGB+ED: the depth channel is divided by alpha after compositing."""
        return self.render_mode in ("ED", "RGB+ED")

    def keywords(self) -> dict[str, Any]:
        """The options as gsplat's keyword arguments (everything but width and height)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del out["width"], out["height"]
        return out


def gsplat_call(backend: Callable[..., R], name: str) -> Callable[..., R]:
    """Give ``backend(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options)`` the
    calling form of ``rasterization()`` without ``backend`` (tests and docs call backends that way)."""

    def call(
        means: Tensor,
        quats: Tensor,
        scales: Tensor,
        opacities: Tensor,
        colors: Tensor,
        viewmats: Tensor,
        Ks: Tensor,
        width: int,
        height: int,
        backgrounds: Tensor | None = None,
        **keywords: Any,
    ) -> R:
        options = RasterOptions(width, height, **keywords)
        return backend(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options)

    call.__name__ = call.__qualname__ = name
    backend_name = name.removeprefix("rasterization_")
    call.__doc__ = f"``rasterization()`` on the {backend_name} backend (width, height and keyword options)."
    return call
