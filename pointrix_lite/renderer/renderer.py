"""GaussianRenderer: renders a model's Gaussians into a batch of cameras (the trainer's renderer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

from .. import device_policy
from ..config import OptionError
from ..errors import DataError
from ..registry import RENDERERS
from .context import own_means2d, with_context
from .options import Backend, RasterizeMode, RasterOptionError, RasterOptions
from .rasterization import rasterize

_RASTER_KEYS = frozenset(f.name for f in fields(RasterOptions))


class RenderOutput(dict):
    """The renderer's output dict; reading a key that was not rendered says why in one line."""

    def __missing__(self, key: str) -> Any:
        if key == "depth":
            raise KeyError(
                "render_out has no 'depth': training steps render it only for a model whose train_depth is True "
                "(set it on a model whose get_loss_dict reads depth)"
            )
        raise KeyError(key)


def _camera_matrices(cameras: Sequence[Any], device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """``viewmats [C,4,4]`` and ``Ks [C,3,3]`` of the cameras, on ``device`` in ``dtype``."""
    viewmats = device_policy.upload(torch.stack([torch.as_tensor(c.viewmat) for c in cameras]), device, dtype)
    Ks = device_policy.upload(torch.stack([torch.as_tensor(c.K) for c in cameras]), device, dtype)
    return viewmats, Ks


@RENDERERS.register()
class GaussianRenderer:
    """Renders RGB, expected depth and alpha for a list of same-sized cameras.

    The output dict (``docs/architecture.md``): ``rgb [C,H,W,3]``, ``depth [C,H,W,1]``
    (expected depth), ``alpha [C,H,W,1]``, ``means2d [C,N,2]`` (gradient retained for the
    densification strategy), ``radii [C,N,2]``, ``visibility [C,N]``, ``width``, ``height``,
    ``n_cameras``, and ``render_features``, a function that blends other per-Gaussian values into the
    same cameras (``_features``). A model with context Gaussians (``model.context``) is rendered with them;
    ``means2d``, ``radii`` and ``visibility`` then hold its own N rows only, and there is no ``render_features``.
    """

    @dataclass
    class Config:
        backend: Backend = "auto"
        rasterize_mode: RasterizeMode = "classic"
        eps2d: float = 0.3
        near_plane: float = 0.01
        far_plane: float = 1e10
        radius_clip: float = 0.0
        tile_size: int = 16
        absgrad: bool = False

        def __post_init__(self) -> None:
            try:  # RasterOptions holds the rules; here they only get the key's name in the config
                self.options(1, 1)
            except RasterOptionError as err:
                raise OptionError(err.key, err.problem, "renderer") from None

        def options(self, width: int, height: int, **per_call: Any) -> RasterOptions:
            """The rasterizer options of these keys (those ``RasterOptions`` has: not ``backend``, nor a
            subclass's own) for one render, with ``per_call`` (``sh_degree``, ``render_mode``, ...) on top."""
            keys = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _RASTER_KEYS}
            return RasterOptions(width, height, **{**keys, **per_call})

    def __init__(self, config: GaussianRenderer.Config | None = None, **_: Any) -> None:
        self.config = config or GaussianRenderer.Config()

    def prepare(self, device: str | torch.device, announce: Callable[[str], object] | None = None) -> None:
        """Build or load, before training, what rendering on ``device`` will need, so that no first
        step hides a compile: the native CPU extension for backend auto/native on the CPU (about a
        minute on its first build); gsplat's CUDA kernels for auto/gsplat on CUDA (1-2 minutes on
        their first build) and the Triton kernels of the CUDA step (``kernels/``). ``announce`` gets
        a line for each thing that compiles; what only the other device needs is not touched."""
        if self.config.backend in ("auto", "native") and device_policy.native_kernels_run_on(device):
            from . import native
            from .rasterization import fallback_announced

            if not native.prepare(announce):
                native.check_usable(self.config.backend)  # asked for it: a one-line error, no slow fallback
                if announce is not None:
                    announce(native.FALLBACK_LINE)
                fallback_announced()
        # The device itself, not gsplat_runs_on: tests/renderer/gsplat_on_cpu.py runs gsplat's path on
        # CPU tensors with its CUDA entry points replaced, where there is nothing to build.
        if self.config.backend in ("auto", "gsplat") and torch.device(device).type == "cuda":
            from .gsplat_backend import prepare_gsplat

            prepare_gsplat(announce)
        from .. import kernels

        kernels.warm_up(torch.device(device), announce)

    def __call__(
        self, model: Any, cameras: Sequence[Any], background: Sequence[float] | Tensor, depth: bool = True
    ) -> dict[str, Any]:
        """Render ``model.render_params()`` into ``cameras`` (objects with viewmat, K, width, height).

        ``depth=False`` leaves out the expected depth (no ``"depth"`` key): the trainer's steps ask for
        that when the model's loss does not read it, since it costs a fourth blended channel and its
        division by alpha in every forward and backward. RGB and alpha are the same bits either way.
        """
        if not cameras:
            raise DataError("renderer: got an empty list of cameras")
        width, height = int(cameras[0].width), int(cameras[0].height)
        for cam in cameras:
            if (int(cam.width), int(cam.height)) != (width, height):
                name = getattr(cam, "name", "") or "?"
                raise DataError(
                    f"renderer: camera {name} is {cam.width}x{cam.height}, expected {width}x{height}; "
                    "cameras in one batch must share their image size"
                )
        params, n_own = with_context(model, model.render_params())
        means = params["means"]
        device, dtype = means.device, means.dtype
        viewmats, Ks = _camera_matrices(cameras, device, dtype)
        bg = device_policy.upload(torch.as_tensor(background), device, dtype).reshape(1, 3).expand(len(cameras), 3)
        options = self.config.options(
            width, height, sh_degree=params["sh_degree"], render_mode="RGB+ED" if depth else "RGB"
        )
        colors, alphas, meta = rasterize(
            means,
            params["quats"],
            params["scales"],
            params["opacities"],
            params["colors"],
            viewmats,
            Ks,
            bg,
            options,
            self.config.backend,
        )
        means2d, radii = meta["means2d"], meta["radii"]
        if n_own < means.shape[0]:  # the strategy sees the model's own Gaussians only (renderer/context.py)
            means2d, radii = own_means2d(means2d, n_own), radii[:, :n_own]
        elif means2d.requires_grad:
            means2d.retain_grad()
        out = RenderOutput(
            # the whole tensor when it is RGB only: a slice's backward allocates and copies a full-size gradient
            rgb=colors if colors.shape[-1] == 3 else colors[..., :3],
            alpha=alphas,
            means2d=means2d,
            radii=radii,
            visibility=(radii > 0).any(dim=-1),
            width=width,
            height=height,
            n_cameras=len(cameras),
        )
        if depth:
            out["depth"] = colors[..., 3:4]
        if n_own == means.shape[0]:  # blending features needs them for the context too (model.context refuses it)
            out["render_features"] = lambda features: self._features(params, viewmats, Ks, width, height, features)
        return out

    def _features(
        self, params: dict[str, Tensor], viewmats: Tensor, Ks: Tensor, width: int, height: int, features: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Per-Gaussian ``features`` (``[N, D]``, or ``[C, N, D]`` per camera) blended into the cameras of one
        ``__call__`` as colours are, without SH and on a zero background, through the same backend and
        options: ``([C, H, W, D], alpha [C, H, W, 1])``, differentiable in the features and the Gaussians.

        A loss that needs another per-pixel quantity than colour (a normal, a depth) renders it through
        ``render_out["render_features"]`` and pays for the pass only on the steps that use it."""
        C, D = viewmats.shape[0], features.shape[-1]
        options = self.config.options(width, height, sh_degree=None, render_mode="RGB", absgrad=False)
        image, alpha, _ = rasterize(
            params["means"],
            params["quats"],
            params["scales"],
            params["opacities"],
            features,
            viewmats,
            Ks,
            torch.zeros(C, D, device=features.device, dtype=features.dtype),
            options,
            self.config.backend,
        )
        return image, alpha

    def blend_weights(self, model: Any, cameras: Sequence[Any], pixel_weights: Tensor) -> Tensor:
        """Per Gaussian, the sum over pixels of ``pixel_weights`` times its blend weight there.

        For Gaussian ``i`` and channel ``d``: ``sum_c sum_p pixel_weights[c, p, d] * alpha_ip * T_ip``,
        the share of each pixel's colour it renders (the weights FastGS and Taming-3DGS score
        Gaussians by, e.g. with a map of high-error pixels). Computed as the gradient of the weighted
        image of zero-valued ``D``-channel colours, so one forward and one backward of the backend in
        use give it exactly, with the same thresholds as the RGB render; no parameter gets a gradient.

        Args:
            model: As for ``__call__``.
            cameras: C same-sized cameras.
            pixel_weights: ``[C, H, W, D]`` weights per pixel and channel.

        Returns:
            ``[N, D]`` float32.
        """
        params, n = with_context(model, model.render_params())
        means = params["means"].detach()
        device, dtype = means.device, means.dtype
        C, H, W, D = pixel_weights.shape
        if C != len(cameras) or (W, H) != (int(cameras[0].width), int(cameras[0].height)):
            raise ValueError(
                f"renderer.blend_weights: pixel_weights {list(pixel_weights.shape)} do not match "
                f"{len(cameras)} camera(s) of {cameras[0].width}x{cameras[0].height}"
            )
        viewmats, Ks = _camera_matrices(cameras, device, dtype)
        probe = torch.zeros(n, D, device=device, dtype=dtype, requires_grad=True)
        options = self.config.options(W, H, absgrad=False)  # RGB of the probe's D channels, no SH
        with torch.enable_grad():
            # context Gaussians (after the first n) occlude as they do in the render but are not scored
            colors = torch.cat([probe, probe.new_zeros(means.shape[0] - n, D)]) if n < means.shape[0] else probe
            image, _, _ = rasterize(
                means,
                params["quats"].detach(),
                params["scales"].detach(),
                params["opacities"].detach(),
                colors,
                viewmats,
                Ks,
                torch.zeros(C, D, device=device, dtype=dtype),
                options,
                self.config.backend,
            )
            (grad,) = torch.autograd.grad(image, probe, grad_outputs=pixel_weights.to(device=device, dtype=dtype))
        return grad
