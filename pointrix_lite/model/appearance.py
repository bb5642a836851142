"""Per-image appearance: a learnable colour transform per training view (AppearanceOptHook).

Photos of one scene differ in exposure and white balance. Each training view ``i`` owns a map
from the scene's canonical colours (what the model renders) to its photo's colours, applied to the
composited render (background included: a camera's exposure scales that too):

* ``gain_bias`` (6 numbers): ``rgb * exp(log_gain) + bias``, per channel. The gain is stored as
  its log so that it stays positive and so that zero is the identity.
* ``affine`` (12 numbers): ``(I + D) @ rgb + bias`` with a 3x3 ``D``, which also mixes channels
  (white balance in another colour basis).

As in :class:`~pointrix_lite.model.pose.PoseCorrection`, all zeros is the identity, so weight
decay pulls the transforms towards the identity, not towards black.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# Numbers per view of each mode.
MODES: dict[str, int] = {"gain_bias": 6, "affine": 12}


class AppearanceCorrection(nn.Module):
    """``n_views`` colour transforms, all starting at the identity.

    Args:
        n_views: Number of training views; view ``i`` (``View.index``) uses row ``i``.
        mode: ``"gain_bias"`` or ``"affine"`` (module docstring).
    """

    def __init__(self, n_views: int, mode: str = "gain_bias") -> None:
        super().__init__()
        if n_views < 1:
            raise ValueError(f"AppearanceCorrection needs at least one view, got {n_views}")
        if mode not in MODES:
            raise ValueError(f"AppearanceCorrection mode must be one of {sorted(MODES)}, got {mode!r}")
        self.mode = mode
        self.delta = nn.Parameter(torch.zeros(n_views, MODES[mode]))  # [V, 6] or [V, 12]

    def matrices(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """[C] view indices -> ``[C, 3, 3]`` colour matrices and ``[C, 3]`` biases."""
        d = self.delta[ids]
        if self.mode == "gain_bias":
            return torch.diag_embed(d[:, :3].exp()), d[:, 3:]
        eye = torch.eye(3, dtype=d.dtype, device=d.device)
        return eye + d[:, :9].reshape(-1, 3, 3), d[:, 9:]

    def forward(self, rgb: Tensor, ids: Tensor) -> Tensor:
        """``rgb [C, H, W, 3]`` of views ``ids [C]`` in canonical colours -> in their photos' colours."""
        d = self.delta[ids].to(rgb.dtype)
        if self.mode == "gain_bias":  # elementwise: a diagonal matrix product would cost 3x
            return rgb * d[:, None, None, :3].exp() + d[:, None, None, 3:]
        M, b = self.matrices(ids)
        return torch.einsum("cij,chwj->chwi", M.to(rgb.dtype), rgb) + b.to(rgb.dtype)[:, None, None, :]

    def apply_one(self, rgb: Tensor, index: int) -> Tensor:
        """``rgb [H, W, 3]`` of view ``index`` -> its photo's colours (a ``View.color_transform``)."""
        ids = torch.tensor([index], device=self.delta.device)
        return self(rgb[None], ids)[0]
