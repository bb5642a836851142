"""The depth-normal consistency term of the surface methods (2DGS, PGSR, GOF): the Gaussians' normals,
blended per pixel, pulled towards the normals of the rendered depth map.

A Gaussian lying flat on the surface has its shortest axis along the surface normal; the expected depth's
own normals (``geometry.maps.normals_from_depth``) are the surface the render shows. Where the two disagree
the Gaussians are blobs or stand at an angle to the surface they paint, which is what a TSDF of the depth
maps then fuses as noise. The term is 2DGS's: ``1 - <n_gaussians, n_depth * alpha>`` averaged over pixels,
with the blended (unnormalised) normals, so pixels the Gaussians barely cover count for little, and the
depth normals scaled by the detached alpha (2DGS's ``surf_normal * alpha.detach()``).

One extra rasterization of 4 channels per step (the normals and the camera depth as features, through
``render_out["render_features"]``): the expected depth is the depth channel over alpha, as gsplat's
``RGB+ED``. Gradients reach the means (depth), the rotations (normals, footprints), scales and opacities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ..geometry.maps import gaussian_normals, normals_from_depth


def camera_normals_and_depth(params: dict[str, Tensor], viewmats: Tensor) -> Tensor:
    """``[C, N, 4]``: each Gaussian's shortest axis in each camera's frame, turned towards that camera, and
    its camera-space depth (z), the features the term blends."""
    normals = gaussian_normals(params["quats"], params["scales"])
    R, t = viewmats[:, :3, :3], viewmats[:, :3, 3]
    n_cam = torch.einsum("cij,nj->cni", R, normals)
    centres = torch.einsum("cij,nj->cni", R, params["means"]) + t[:, None, :]
    n_cam = torch.where((n_cam * centres).sum(-1, keepdim=True) > 0, -n_cam, n_cam)
    return torch.cat([n_cam, centres[..., 2:3]], dim=-1)


def depth_normal_consistency(
    render_features: Callable[[Tensor], tuple[Tensor, Tensor]], params: dict[str, Tensor], cameras: Sequence[Any]
) -> Tensor:
    """The mean over the ``C`` cameras' pixels of ``1 - <n_gaussians, n_depth * alpha>`` (module docstring).

    Args:
        render_features: ``render_out["render_features"]`` of the step's render (``GaussianRenderer._features``).
        params: ``means``, ``quats`` and ``scales`` (only which axis is smallest is read: log scales will do).
        cameras: The ``C`` cameras rendered (``viewmat [4,4]``, ``K [3,3]``).

    Returns:
        A scalar tensor, 0 where blended normals and depth normals agree on fully covered pixels.
    """
    means = params["means"]
    viewmats = torch.stack([torch.as_tensor(c.viewmat) for c in cameras]).to(means)
    blended, alpha = render_features(camera_normals_and_depth(params, viewmats))
    return consistency(blended, alpha, [torch.as_tensor(c.K).to(means) for c in cameras])


def consistency(blended: Tensor, alpha: Tensor, Ks: Sequence[Tensor]) -> Tensor:
    """The term from the blended features ``[C, H, W, 4]`` (normal, depth) and ``alpha [C, H, W, 1]``."""
    terms = []
    for c, K in enumerate(Ks):
        a = alpha[c, ..., 0]
        depth = torch.where(a > 1e-4, blended[c, ..., 3] / a.clamp_min(1e-4), torch.zeros_like(a))
        n_depth = normals_from_depth(depth, K) * a.detach()[..., None]
        terms.append(1.0 - (blended[c, ..., :3] * n_depth).sum(-1))
    return torch.stack(terms).mean()
