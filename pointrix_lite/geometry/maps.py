"""Per-view geometry of a trained model: expected depth, and normals two ways.

- **Expected depth** is gsplat's ``RGB+ED``: the blend weights' average of the Gaussians' camera-space depth,
  divided by the accumulated alpha (``GaussianRenderer`` returns it as ``"depth"``). Where alpha is small the
  value is a guess; :func:`view_maps` keeps alpha beside it so callers can mask.
- **Median depth** (``median_depth``): the depth of the Gaussian that takes a pixel's accumulated alpha past
  one half (2DGS's and GOF's), 0 where alpha stays below it. One surface's depth where expected depth
  averages the surfaces a pixel sees through, so a depth edge stays an edge instead of a ramp. gsplat's
  kernels have no such output: it is composited by the torch backend's walk (a third rasterization), on
  any device, in the order and with the alphas of the renders.
- **Normals from depth** (``normal_depth``): the cross product of the back-projected depth map's central
  differences, a surface's normal wherever the depth is smooth; what 2DGS/PGSR call the depth normal.
- **Normals of the Gaussians** (``normal_gaussians``): each Gaussian's shortest axis, the normal of the disc
  it flattens to, turned towards the camera and blended like a colour (``sh_degree=None``). The two agree
  where the Gaussians lie flat on the surface; the depth-normal consistency loss of the surface methods
  pulls them together.

Normals are in the camera's frame (OpenCV: x right, y down, z forward), unit length, pointing towards the
camera (z < 0 on a surface seen head on); zero where undefined.

:func:`save_maps` writes them as files (``render.py --outputs``): ``depth/<view>.png`` 16-bit, the depth
x 1000 (millimetres for a scene in metres, the TUM / Open3D convention; 0 = no surface), ``normal/`` and
``normal_depth/<view>.png`` 8-bit, ``(n + 1) / 2`` per axis; each also as ``<view>.npy`` float32 (depth
``[H, W]``, normals ``[H, W, 3]``), the exact values; ``median_depth/`` as ``depth/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..io.images import write_png, write_png16
from ..renderer.rasterization import rasterize
from ..renderer.torch_backend import median_depth as composite_median_depth
from ..renderer.torch_backend.projection import quat_to_rotmat

# what save_maps writes; "normal" is the Gaussians' normals
MAP_KINDS = ("depth", "median_depth", "normal", "normal_depth")
DEPTH_PNG_SCALE = 1000.0


def gaussian_normals(quats: Tensor, scales: Tensor) -> Tensor:
    """``[N, 3]`` world-frame unit normals: each Gaussian's axis of least scale (sign arbitrary)."""
    R = quat_to_rotmat(quats)
    axis = scales.argmin(dim=-1)
    return R.gather(2, axis.view(-1, 1, 1).expand(-1, 3, 1)).squeeze(-1)


def backproject(depth: Tensor, K: Tensor) -> Tensor:
    """``[H, W]`` depth (camera z) and ``[3, 3]`` intrinsics -> ``[H, W, 3]`` camera-frame points
    (pixel centres at +0.5, as the rasterizer's)."""
    H, W = depth.shape
    v, u = torch.meshgrid(
        torch.arange(H, dtype=depth.dtype) + 0.5, torch.arange(W, dtype=depth.dtype) + 0.5, indexing="ij"
    )
    x = (u - K[0, 2]) / K[0, 0] * depth
    y = (v - K[1, 2]) / K[1, 1] * depth
    return torch.stack([x, y, depth], dim=-1)


def normals_from_depth(depth: Tensor, K: Tensor) -> Tensor:
    """``[H, W, 3]`` camera-frame unit normals of the depth map's surface, towards the camera; zero on the
    border and wherever the depth or a neighbour's is not positive."""
    P = backproject(depth, K)
    n = torch.zeros_like(P)
    du = P[1:-1, 2:] - P[1:-1, :-2]
    dv = P[2:, 1:-1] - P[:-2, 1:-1]
    inner = torch.cross(dv, du, dim=-1)  # y down, x right: dv x du points towards the camera
    n[1:-1, 1:-1] = inner
    valid = depth > 0
    ok = torch.zeros_like(valid)
    ok[1:-1, 1:-1] = valid[1:-1, 1:-1] & valid[1:-1, 2:] & valid[1:-1, :-2] & valid[2:, 1:-1] & valid[:-2, 1:-1]
    n = F.normalize(n, dim=-1) * ok[..., None]
    flip = (n * P).sum(-1, keepdim=True) > 0  # facing away: the difference went the other way round
    return torch.where(flip, -n, n)


@torch.no_grad()
def view_maps(
    model: Any,
    renderer: Any,
    camera: Any,
    background: Any,
    gaussian_normals: bool = True,
    median: bool = False,
    normals_of: str = "expected",
) -> dict[str, Tensor]:
    """The maps of one ``camera``: ``rgb [H,W,3]``, ``alpha [H,W]``, ``depth [H,W]`` (expected depth, 0 where
    alpha is 0), ``normal_depth [H,W,3]`` (of the ``normals_of`` depth: ``"expected"`` or ``"median"``); with
    ``median`` (or ``normals_of="median"``) ``median_depth [H,W]``, and with ``gaussian_normals`` (a second
    rasterization) ``normal_gaussians [H,W,3]`` (camera frame, see the module)."""
    out = renderer(model, [camera], background)
    rgb, alpha, depth = out["rgb"][0], out["alpha"][0, ..., 0], out["depth"][0, ..., 0]
    depth = torch.where(alpha > 0, depth, torch.zeros_like(depth))
    K = camera.K.to(depth)
    maps = {"rgb": rgb, "alpha": alpha, "depth": depth}
    if median or normals_of == "median":
        maps["median_depth"] = median_depth(model, renderer, camera, alpha).to(depth)
    maps["normal_depth"] = normals_from_depth(maps["median_depth" if normals_of == "median" else "depth"], K)
    if gaussian_normals:
        maps["normal_gaussians"] = blended_gaussian_normals(model, renderer, camera)
    return maps


def median_depth(model: Any, renderer: Any, camera: Any, alpha: Tensor | None = None) -> Tensor:
    """``[H, W]``: the median depth of ``model`` in ``camera`` with ``renderer``'s options (the module's
    ``median_depth``), on the model's device; ``alpha [H, W]``, the render's, makes it faster."""
    params = model.render_params()
    options = renderer.config.options(camera.width, camera.height, sh_degree=None, render_mode="RGB")
    viewmat, K = camera.viewmat.to(params["means"]), camera.K.to(params["means"])
    return composite_median_depth(
        params["means"],
        params["quats"],
        params["scales"],
        params["opacities"],
        viewmat[None],
        K[None],
        options,
        None if alpha is None else alpha[None].to(params["means"]),
    )[0]


def blended_gaussian_normals(model: Any, renderer: Any, camera: Any) -> Tensor:
    """``[H, W, 3]``: each Gaussian's shortest axis in ``camera``'s frame, turned towards it, blended as a
    colour and normalised (the module's ``normal_gaussians``)."""
    params = model.render_params()
    viewmat = camera.viewmat.to(params["means"])
    normals = gaussian_normals(params["quats"], params["scales"]) @ viewmat[:3, :3].T
    centres = params["means"] @ viewmat[:3, :3].T + viewmat[:3, 3]
    normals = torch.where((normals * centres).sum(-1, keepdim=True) > 0, -normals, normals)
    # Plain features (sh_degree None): the rasterizer blends them as they are, in this camera's frame.
    options = renderer.config.options(camera.width, camera.height, sh_degree=None, render_mode="RGB")
    blended, _, _ = rasterize(
        params["means"],
        params["quats"],
        params["scales"],
        params["opacities"],
        normals.contiguous(),
        viewmat[None],
        camera.K.to(params["means"])[None],
        None,
        options,
        renderer.config.backend,
    )
    return F.normalize(blended[0], dim=-1)


def save_maps(maps: dict[str, Tensor], folder: Path, stem: str, kinds: tuple[str, ...] = MAP_KINDS) -> None:
    """Write ``kinds`` of :func:`view_maps`'s ``maps`` as ``folder/<kind>/<stem>.png`` and ``.npy`` (module docstring)."""
    for kind in kinds:
        key = "normal_gaussians" if kind == "normal" else kind
        value = maps[key].detach().float().cpu().numpy()
        out = Path(folder) / kind
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / f"{stem}.npy", value)
        if kind in ("depth", "median_depth"):
            write_png16(out / f"{stem}.png", np.clip(np.round(value * DEPTH_PNG_SCALE), 0, 65535).astype(np.uint16))
        else:
            colour = np.where(np.linalg.norm(value, axis=-1, keepdims=True) > 0, (value + 1) * 127.5, 0)
            write_png(out / f"{stem}.png", np.clip(np.round(colour), 0, 255).astype(np.uint8))
