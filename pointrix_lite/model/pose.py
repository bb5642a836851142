"""Camera pose refinement: a learnable SE(3) correction per training view (gsplat's ``pose_opt``).

Each view ``i`` owns 9 numbers: a translation ``dt [3]`` and a 6D rotation offset ``dr [6]`` (the
first two columns of the rotation minus those of the identity, Zhou et al. 2019: continuous, and
zero means no correction). The corrected world-to-camera matrix is ``T(dt, dr) @ viewmat``, i.e. the
correction acts in the camera's own frame, so its scale does not depend on where the camera is.
All zeros is the identity, which is also where weight decay pulls the corrections back to.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .. import device_policy
from .per_view import index_rows


def rotation_6d_to_matrix(d6: Tensor) -> Tensor:
    """[..., 6] two (unnormalised) columns -> [..., 3, 3] rotation via Gram-Schmidt."""
    a1, a2 = d6[..., :3], d6[..., 3:]
    b1 = nn.functional.normalize(a1, dim=-1)
    b2 = nn.functional.normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1, dim=-1)
    b3 = torch.cross(b1, b2, dim=-1)
    return torch.stack((b1, b2, b3), dim=-1)


_IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


class PoseCorrection(nn.Module):
    """``n_views`` SE(3) corrections, all starting at the identity.

    Args:
        n_views: Number of training views; view ``i`` (``View.index``) uses row ``i``.
    """

    def __init__(self, n_views: int) -> None:
        super().__init__()
        if n_views < 1:
            raise ValueError(f"PoseCorrection needs at least one view, got {n_views}")
        self.delta = nn.Parameter(torch.zeros(n_views, 9))  # [V, 9]: dt (3), dr (6)
        self.register_buffer("identity_6d", torch.tensor(_IDENTITY_6D), persistent=False)
        self.register_buffer("view_index", torch.arange(n_views), persistent=False)  # per_view.index_rows

    def transforms(self, ids: Tensor) -> Tensor:
        """[C] view indices -> [C, 4, 4] correction matrices (camera frame)."""
        d = self.delta[ids]
        R = rotation_6d_to_matrix(d[:, 3:] + self.identity_6d)
        T = torch.eye(4, dtype=d.dtype, device=d.device).repeat(len(ids), 1, 1)  # a copy: written below
        T[:, :3, :3] = R
        T[:, :3, 3] = d[:, :3]
        return T

    def forward(self, viewmats: Tensor, ids: Tensor) -> Tensor:
        """Corrected [C, 4, 4] world-to-camera matrices for ``viewmats [C, 4, 4]`` of views ``ids [C]``."""
        T = self.transforms(ids)
        return T @ device_policy.upload(viewmats, T.device, T.dtype)

    def ids(self, indices: Sequence[int]) -> Tensor:
        """``[C]`` view indices where the corrections are (``per_view.index_rows``: no host copy)."""
        return index_rows(self.view_index, indices)

    @torch.no_grad()
    def set_transforms(self, T: Tensor) -> None:
        """Make the corrections of all views equal ``T [V, 4, 4]`` (rigid), the inverse of :meth:`transforms`.

        The 6D rotation is written as the rotation's first two columns, which Gram-Schmidt maps back to
        the same rotation; the translation is ``T``'s.
        """
        T = T.to(self.delta)
        self.delta[:, :3] = T[:, :3, 3]
        self.delta[:, 3:] = torch.cat((T[:, :3, 0], T[:, :3, 1]), dim=-1) - self.identity_6d


def _project_to_rotation(m: Tensor) -> Tensor:
    """Nearest rotation to ``m [3, 3]`` (Frobenius): the chordal mean when ``m`` is a sum of rotations."""
    u, _, vt = torch.linalg.svd(m)
    d = torch.sign(torch.linalg.det(u @ vt))
    return u @ torch.diag(torch.stack((torch.ones_like(d), torch.ones_like(d), d))) @ vt


def remove_common_motion(corrected: Tensor, viewmats: Tensor) -> Tensor:
    """Corrected world-to-camera matrices with the set's common similarity motion taken out.

    Pose refinement has a gauge freedom: moving, turning or scaling *all* training cameras together
    (and the Gaussians with them) explains the images as well as before, so Adam lets the refined
    set drift as a whole, and test cameras, which keep the given poses, no longer see the scene
    where it is. This finds that common motion of the camera set, from ``viewmats`` to ``corrected``
    (rotation: chordal mean of each camera's world-frame turn; scale: ratio of the centres' RMS
    spreads; translation: the centroid's move), and undoes it, so only each camera's motion
    *relative to the others* remains: the centroid, the spread and the mean orientation of the set
    stay those of the given poses.

    Args:
        corrected: ``[V, 4, 4]`` refined world-to-camera matrices.
        viewmats: ``[V, 4, 4]`` the given ones, same order.

    Returns:
        ``[V, 4, 4]`` refined matrices in the given poses' gauge (float64).
    """
    c2w = torch.linalg.inv(viewmats.double())
    c2w_new = torch.linalg.inv(corrected.double())
    rot, rot_new = c2w[:, :3, :3], c2w_new[:, :3, :3]
    centres, centres_new = c2w[:, :3, 3], c2w_new[:, :3, 3]
    turn = _project_to_rotation((rot_new @ rot.transpose(1, 2)).sum(0))
    mean, mean_new = centres.mean(0), centres_new.mean(0)
    spread = (centres - mean).square().sum(-1).mean().sqrt()
    spread_new = (centres_new - mean_new).square().sum(-1).mean().sqrt()
    scale = spread_new / spread if float(spread) > 0.0 and float(spread_new) > 0.0 else torch.ones_like(spread)
    # camera-to-world of the fixed set: x -> turn^T (x - mean_new) / scale + mean for centres
    fixed = c2w_new.clone()
    fixed[:, :3, :3] = turn.T @ rot_new
    fixed[:, :3, 3] = ((centres_new - mean_new) @ turn) / scale + mean
    return torch.linalg.inv(fixed)
