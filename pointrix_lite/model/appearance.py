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


def fit_transform(rgb: Tensor, target: Tensor, mode: str = "gain_bias") -> tuple[Tensor, Tensor]:
    """The least-squares colour transform of ``mode`` that maps ``rgb [N, 3]`` onto ``target [N, 3]``.

    Closed form (both modes are linear in their numbers): ``gain_bias`` a line per channel, ``affine``
    one 4 x 3 least-squares solve. Used for NeRF-W's test protocol, where a test photo's appearance is
    fitted on half of it (:class:`~pointrix_lite.model.appearance_hook.AppearanceOptHook`).

    Returns:
        ``[3, 3]`` colour matrix (diagonal for ``gain_bias``) and ``[3]`` bias, float64:
        ``out = rgb @ M.T + b``.
    """
    x, y = rgb.double(), target.double()
    if mode == "gain_bias":
        mx, my = x.mean(0), y.mean(0)
        var = ((x - mx) ** 2).mean(0)
        gain = torch.where(var > 1e-12, ((x - mx) * (y - my)).mean(0) / var.clamp_min(1e-12), torch.ones_like(var))
        return torch.diag(gain), my - gain * mx
    if mode != "affine":
        raise ValueError(f"fit_transform mode must be one of {sorted(MODES)}, got {mode!r}")
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], 1)  # [N, 4]
    solution = torch.linalg.lstsq(design, y).solution  # [4, 3]
    return solution[:3].T, solution[3]
