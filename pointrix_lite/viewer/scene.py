"""Turn (model, camera, display options) into the uint8 image the browser shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from ..data.cameras import Camera
from ..writers.base import image_to_uint8

RenderMode = Literal["RGB", "Depth", "Alpha"]
RENDER_MODES: tuple[str, ...] = ("RGB", "Depth", "Alpha")

# A few stops of matplotlib's viridis: depth reads better in colour than in grey.
_VIRIDIS = (
    np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], dtype=np.float64) / 255.0
)


class _ShDegreeView:
    """The model as a renderer sees it, but rendering with a chosen SH degree."""

    def __init__(self, model: Any, sh_degree: int | None) -> None:
        self._model, self._sh_degree = model, sh_degree

    def render_params(self) -> dict[str, Any]:
        return self._model.render_params(sh_degree=self._sh_degree)


def colorize_depth(depth: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """[H, W] expected depth and alpha -> [H, W, 3] float in [0, 1]: near is yellow, far is purple.

    The range is the 1st..99th percentile of the covered pixels (alpha > 0.5), so a few far
    Gaussians do not flatten the picture; uncovered pixels stay black.
    """
    covered = alpha > 0.5
    out = np.zeros((*depth.shape, 3))
    if not covered.any():
        return out
    lo, hi = np.percentile(depth[covered], [1, 99])
    t = 1.0 - np.clip((depth - lo) / max(hi - lo, 1e-9), 0.0, 1.0)
    stops = np.linspace(0.0, 1.0, len(_VIRIDIS))
    rgb = np.stack([np.interp(t, stops, _VIRIDIS[:, k]) for k in range(3)], axis=-1)
    out[covered] = rgb[covered]
    return out


@dataclass
class DisplayOptions:
    """What the GUI chooses: render mode, the longest image side, SH degree (None: the model's)."""

    mode: str = "RGB"
    max_res: int = 512
    preview_res: int = 256
    sh_degree: int | None = None
    jpeg_quality: int = 85


class SceneView:
    """Renders ``model`` with ``renderer`` (the trainer's renderer or a GaussianRenderer).

    Args:
        model: exposes ``render_params(sh_degree=None)`` (GaussianModel).
        renderer: ``renderer(model, [camera], background) -> {"rgb", "depth", "alpha", ...}``.
        background: RGB in [0, 1] behind the Gaussians.
    """

    def __init__(self, model: Any, renderer: Any, background: Sequence[float]) -> None:
        self.model, self.renderer, self.background = model, renderer, tuple(float(b) for b in background)

    @property
    def max_sh_degree(self) -> int:
        config = getattr(self.model, "config", None)
        return int(getattr(config, "sh_degree", 0))

    @torch.no_grad()
    def render(self, camera: Camera, mode: str = "RGB", sh_degree: int | None = None) -> np.ndarray:
        """[H, W, 3] uint8 image of ``camera`` in ``mode`` (one of :data:`RENDER_MODES`)."""
        if mode not in RENDER_MODES:
            raise ValueError(f"render mode must be one of {', '.join(RENDER_MODES)}, got {mode!r}")
        out = self.renderer(_ShDegreeView(self.model, sh_degree), [camera], self.background)
        if mode == "RGB":
            return image_to_uint8(out["rgb"][0])
        alpha = out["alpha"][0, ..., 0].float().cpu().numpy()
        if mode == "Alpha":
            return image_to_uint8(np.repeat(alpha[..., None], 3, axis=-1))
        depth = out["depth"][0, ..., 0].float().cpu().numpy()
        return image_to_uint8(colorize_depth(depth, alpha))
