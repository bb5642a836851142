"""Camera pose refinement: a learnable SE(3) correction per training view (gsplat's ``pose_opt``).

Each view ``i`` owns 9 numbers: a translation ``dt [3]`` and a 6D rotation offset ``dr [6]`` (the
first two columns of the rotation minus those of the identity, Zhou et al. 2019: continuous, and
zero means no correction). The corrected world-to-camera matrix is ``T(dt, dr) @ viewmat``, i.e. the
correction acts in the camera's own frame, so its scale does not depend on where the camera is.
All zeros is the identity, which is also where weight decay pulls the corrections back to.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


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
        return T @ viewmats.to(dtype=T.dtype, device=T.device)
