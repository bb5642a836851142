"""``RasterOptions``: the non-tensor arguments of ``rasterization()``, checked once for every backend.

The render-mode, rasterize-mode and backend names are declared here once: ``rasterization()``,
the renderer's config and the backends all read them from this module, so adding a mode is one
edit. Field names and defaults are gsplat 1.5.3's, so the options pass to gsplat unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, TypeVar, get_args

from torch import Tensor

RenderMode = Literal["RGB", "D", "ED", "RGB+D", "RGB+ED"]
RasterizeMode = Literal["classic", "antialiased"]
Backend = Literal["auto", "torch", "gsplat", "native"]

RENDER_MODES: tuple[str, ...] = get_args(RenderMode)
RASTERIZE_MODES: tuple[str, ...] = get_args(RasterizeMode)
BACKENDS: tuple[str, ...] = get_args(Backend)

Result = tuple[Tensor, Tensor, dict[str, Any]]
R = TypeVar("R")


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """One-line ValueError unless ``value`` is one of ``allowed`` (the rasterizer's own argument errors)."""
    if value not in allowed:
        raise ValueError(f"rasterization: {name} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class RasterOptions:
    """What ``rasterization()`` was asked besides the tensors; valid once constructed."""

    width: int
    height: int
    near_plane: float = 0.01
    far_plane: float = 1e10
    radius_clip: float = 0.0
    eps2d: float = 0.3
    sh_degree: Optional[int] = None
    render_mode: RenderMode = "RGB"
    rasterize_mode: RasterizeMode = "classic"
    tile_size: int = 16
    absgrad: bool = False

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0 or self.tile_size <= 0:
            raise ValueError(
                "rasterization: width, height and tile_size must be positive, "
                f"got {self.width}, {self.height}, {self.tile_size}"
            )
        if self.sh_degree is not None and not 0 <= self.sh_degree <= 4:
            raise ValueError(f"rasterization: sh_degree must be in 0..4, got {self.sh_degree}")
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


_FIELDS = frozenset(f.name for f in dataclasses.fields(RasterOptions))


def gsplat_call(backend: Callable[..., R]) -> Callable[..., R]:
    """Give ``backend(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options, **extra)``
    the calling form of ``rasterization()`` without ``backend`` (tests and docs call backends that way);
    keywords that are not options (the torch backend's ``pair_budget``) pass through as ``extra``."""

    def call(
        means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor, viewmats: Tensor,
        Ks: Tensor, width: int, height: int, backgrounds: Optional[Tensor] = None, **kwargs: Any,
    ) -> R:  # fmt: skip
        options = RasterOptions(width, height, **{k: v for k, v in kwargs.items() if k in _FIELDS})
        extra = {k: v for k, v in kwargs.items() if k not in _FIELDS}
        return backend(means, quats, scales, opacities, colors, viewmats, Ks, backgrounds, options, **extra)

    call.__name__ = call.__qualname__ = backend.__name__.replace("rasterize_", "rasterization_")
    call.__doc__ = f"``{backend.__name__}`` called like ``rasterization()`` (width, height and keyword options)."
    return call
