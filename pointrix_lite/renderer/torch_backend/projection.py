"""EWA projection of 3D Gaussians to image-plane ellipses (gsplat ``ProjectionEWA3DGSFused.cu``).

Culled (camera, Gaussian) pairs get ``radii == 0`` and zeros in every other output; their
inputs are swapped for harmless values *before* any division or square root, so that no
inf/NaN can leak into the gradients of the Gaussians that survive.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..pipeline import Projection

# gsplat's ALPHA_THRESHOLD: the smallest alpha a pixel ever composites.
ALPHA_THRESHOLD = 1.0 / 255.0


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """Rotation matrices from (not necessarily normalised) wxyz quaternions. [..., 4] -> [..., 3, 3]"""
    quats = quats / quats.norm(dim=-1, keepdim=True)
    w, x, y, z = quats.unbind(-1)
    rows = [
        1 - 2 * (y * y + z * z),
        2 * (x * y - w * z),
        2 * (x * z + w * y),
        2 * (x * y + w * z),
        1 - 2 * (x * x + z * z),
        2 * (y * z - w * x),
        2 * (x * z - w * y),
        2 * (y * z + w * x),
        1 - 2 * (x * x + y * y),
    ]
    return torch.stack(rows, dim=-1).reshape(quats.shape[:-1] + (3, 3))


def quat_scale_to_covar(quats: Tensor, scales: Tensor) -> Tensor:
    """World-space covariance R S S^T R^T. quats [N, 4], scales [N, 3] -> [N, 3, 3]"""
    M = quat_to_rotmat(quats) * scales[..., None, :]
    return M @ M.transpose(-1, -2)


def project_gaussians(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    radius_clip: float = 0.0,
    calc_compensations: bool = False,
) -> Projection:
    """Project N Gaussians into C pinhole cameras, with gsplat's culling rules.

    Args:
        means: [N, 3] world centres.  quats: [N, 4] wxyz.  scales: [N, 3] activated.
        opacities: [N] activated; used for culling and the opacity-aware bounding box.
        viewmats: [C, 4, 4] world-to-camera.  Ks: [C, 3, 3].
        calc_compensations: antialiased mode; the culling/box then uses ``opacity * compensation``.
    """
    R = viewmats[:, None, :3, :3]  # [C, 1, 3, 3]
    t = viewmats[:, None, :3, 3]  # [C, 1, 3]
    means_c = (R @ means[None, :, :, None])[..., 0] + t  # [C, N, 3]
    covars_c = R @ quat_scale_to_covar(quats, scales)[None] @ R.transpose(-1, -2)  # [C, N, 3, 3]

    x, y, z = means_c.unbind(-1)
    in_depth = (z >= near_plane) & (z <= far_plane)
    z = torch.where(in_depth, z, torch.ones_like(z))  # keep culled pairs finite

    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]  # [C, 1]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    # gsplat clamps the Jacobian's x/z, y/z to 1.3x the field of view: Gaussians far outside
    # the frustum would otherwise get huge, wrongly stretched 2D footprints.
    tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
    lim_x_pos, lim_x_neg = (width - cx) / fx + 0.3 * tan_fovx, cx / fx + 0.3 * tan_fovx
    lim_y_pos, lim_y_neg = (height - cy) / fy + 0.3 * tan_fovy, cy / fy + 0.3 * tan_fovy
    tx = z * torch.clamp(x / z, min=-lim_x_neg, max=lim_x_pos)
    ty = z * torch.clamp(y / z, min=-lim_y_neg, max=lim_y_pos)
    zero = torch.zeros_like(z)
    J = torch.stack([fx / z, zero, -fx * tx / (z * z), zero, fy / z, -fy * ty / (z * z)], dim=-1).reshape(
        z.shape + (2, 3)
    )
    cov2d = J @ covars_c @ J.transpose(-1, -2)  # [C, N, 2, 2]
    means2d = torch.stack([fx * x / z + cx, fy * y / z + cy], dim=-1)

    a, b, c = cov2d[..., 0, 0], cov2d[..., 0, 1], cov2d[..., 1, 1]
    det_orig = a * c - b * b
    a, c = a + eps2d, c + eps2d  # low-pass filter: every splat covers at least ~a pixel
    det = a * c - b * b
    ok = in_depth & (det > 0)
    det = torch.where(ok, det, torch.ones_like(det))
    conics = torch.stack([c / det, -b / det, a / det], dim=-1)

    opac = opacities[None].expand_as(z)
    compensations = None
    if calc_compensations:
        ratio = det_orig / det
        pos = ratio > 0
        compensations = torch.where(pos, torch.sqrt(torch.where(pos, ratio, torch.ones_like(ratio))), zero)
        opac = opac * compensations

    with torch.no_grad():
        ok = ok & (opac >= ALPHA_THRESHOLD)
        # Opacity-aware box (arXiv 2402.00525 B.2): beyond this the splat's alpha is < 1/255.
        o = torch.where(ok, opac, torch.ones_like(opac))
        extend = torch.clamp(torch.sqrt(2.0 * torch.log(o / ALPHA_THRESHOLD)), max=3.33)
        radius = torch.stack(
            [torch.ceil(extend * torch.sqrt(a.clamp(min=0))), torch.ceil(extend * torch.sqrt(c.clamp(min=0)))],
            dim=-1,
        )
        ok = ok & ~((radius[..., 0] <= radius_clip) & (radius[..., 1] <= radius_clip))
        mx, my = means2d[..., 0], means2d[..., 1]
        rx, ry = radius[..., 0], radius[..., 1]
        off_image = (mx + rx <= 0) | (mx - rx >= width) | (my + ry <= 0) | (my - ry >= height)
        ok = ok & ~off_image
        radii = torch.where(ok[..., None], radius, torch.zeros_like(radius)).to(torch.int32)

    def keep(v: Tensor) -> Tensor:
        return torch.where(ok.reshape(ok.shape + (1,) * (v.dim() - ok.dim())), v, torch.zeros_like(v))

    return Projection(
        radii=radii,
        means2d=keep(means2d),
        depths=keep(means_c[..., 2]),
        conics=keep(conics),
        compensations=None if compensations is None else keep(compensations),
    )
