"""Per-image appearance: a learnable colour transform per training view (AppearanceOptHook).

Photos of one scene differ in exposure and white balance. Each training view ``i`` owns a map
from the scene's canonical colours (what the model renders) to its photo's colours, applied to the
composited render (background included: a camera's exposure scales that too):

* ``gain_bias`` (6 numbers): ``rgb * exp(log_gain) + bias``, per channel. The gain is stored as
  its log so that it stays positive and so that zero is the identity.
* ``affine`` (12 numbers): ``(I + D) @ rgb + bias`` with a 3x3 ``D``, which also mixes channels
  (white balance in another colour basis).
* ``bilagrid`` (12 x 8 x 16 x 16 numbers): a bilateral grid (Wang et al. 2024, "Bilateral Guided
  Radiance Field Processing"; gsplat's examples use the same sizes): an ``affine`` map per cell of a
  16 x 16 grid over the image and 8 bins of the render's luminance, interpolated trilinearly at each
  pixel, so exposure may vary across the image (vignetting) and with brightness (tone curves).

As in :class:`~pointrix_lite.model.pose.PoseCorrection`, all zeros is the identity, so weight
decay pulls the transforms towards the identity, not towards black.

With ``vignetting``, each view also owns a radial falloff ``1 + k1 r^2 + k2 r^4`` (``r``: distance
from the image centre over the half-diagonal), applied to the render before its colour map, as a
lens darkens the light before the camera's exposure and white balance see it. Its gauge needs no
centring: the falloff is 1 at the centre, and a surface seen at the centre of one photo and in a
corner of another tells the two apart, which a per-view colour map (a grid included, centred over
the views) cannot: the average vignetting of the photos would stay in the scene's colours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .per_view import index_rows

# Numbers per view of each mode.
BILAGRID = (8, 16, 16)  # luminance bins, rows, columns of a view's bilateral grid
MODES: dict[str, int] = {"gain_bias": 6, "affine": 12, "bilagrid": 12 * math.prod(BILAGRID)}
LUMA = (0.299, 0.587, 0.114)  # the grid's guide: Rec. 601 luminance of the render


class AppearanceCorrection(nn.Module):
    """``n_views`` colour transforms, all starting at the identity.

    Args:
        n_views: Number of training views; view ``i`` (``View.index``) uses row ``i``.
        mode: ``"gain_bias"``, ``"affine"`` or ``"bilagrid"`` (module docstring).
        grid: ``bilagrid``: luminance bins, rows and columns of the grid (each >= 2).
        vignetting: Also a radial falloff per view (module docstring), ``falloff [V, 2]`` (k1, k2).
    """

    def __init__(
        self, n_views: int, mode: str = "gain_bias", grid: tuple[int, int, int] = BILAGRID, vignetting: bool = False
    ) -> None:
        super().__init__()
        if n_views < 1:
            raise ValueError(f"AppearanceCorrection needs at least one view, got {n_views}")
        if mode not in MODES:
            raise ValueError(f"AppearanceCorrection mode must be one of {sorted(MODES)}, got {mode!r}")
        if min(grid) < 2:
            raise ValueError(f"AppearanceCorrection grid needs >= 2 cells per axis, got {grid}")
        self.mode, self.grid = mode, tuple(grid)
        size = 12 * math.prod(self.grid) if mode == "bilagrid" else MODES[mode]
        self.delta = nn.Parameter(torch.zeros(n_views, size))  # [V, 6], [V, 12] or [V, 12 * L * GH * GW]
        self.falloff = nn.Parameter(torch.zeros(n_views, 2)) if vignetting else None
        # Every view's index, kept where the transforms are: a step's indices are slices of it
        # (per_view.index_rows), not a blocking host copy.
        self.register_buffer("view_index", torch.arange(n_views), persistent=False)
        self.register_buffer("luma_weights", torch.tensor(LUMA), persistent=False)  # likewise: built once, not per step

    def matrices(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """[C] view indices -> ``[C, 3, 3]`` colour matrices and ``[C, 3]`` biases (not ``bilagrid``)."""
        if self.mode == "bilagrid":
            raise ValueError("a bilateral grid has a colour matrix per pixel, not one per view")
        d = self.delta[ids]
        if self.mode == "gain_bias":
            return torch.diag_embed(d[:, :3].exp()), d[:, 3:]
        eye = torch.eye(3, dtype=d.dtype, device=d.device)
        return eye + d[:, :9].reshape(-1, 3, 3), d[:, 9:]

    def forward(self, rgb: Tensor, ids: Tensor) -> Tensor:
        """``rgb [C, H, W, 3]`` of views ``ids [C]`` in canonical colours -> in their photos' colours."""
        if self.falloff is not None:
            rgb = rgb * self._falloff(ids, *rgb.shape[1:3], rgb.dtype)[..., None]
        d = self.delta[ids].to(rgb.dtype)
        if self.mode == "gain_bias":  # elementwise: a diagonal matrix product would cost 3x
            return rgb * d[:, None, None, :3].exp() + d[:, None, None, 3:]
        if self.mode == "bilagrid":
            return self._slice(rgb, d)
        M, b = self.matrices(ids)
        return torch.einsum("cij,chwj->chwi", M.to(rgb.dtype), rgb) + b.to(rgb.dtype)[:, None, None, :]

    def _slice(self, rgb: Tensor, d: Tensor) -> Tensor:
        """``rgb [C, H, W, 3]`` through the grids ``d [C, 12 * L * GH * GW]`` (rows of ``delta``).

        The trilinear lookup of a 3-D ``grid_sample`` (x, y: the pixel; z: its luminance), done as the
        grid's rows interpolated to each image row first (a small matrix product: a pixel's y weights
        depend on its row alone), then a 2-D ``grid_sample`` per image row over (x, luminance). Same
        weights and corners, another summation order; the 3-D call's backward scattered every pixel
        into one grid (on the CPU on one thread, on a GPU with atomics on 24k cells), and took 30 ms
        of a 400x300 CPU step and 7.5 ms of a 1536x1024 GPU step (docs/model.md, "The slice's cost").
        """
        C, H, W, _ = rgb.shape
        L, GH, GW = self.grid
        # Cell values are the 3 x 4 map's rows [I | 0] + delta: zero is the identity, as in the other modes.
        identity = torch.eye(3, 4, dtype=rgb.dtype, device=rgb.device).reshape(1, 12, 1, 1, 1)
        grids = d.reshape(C, 12, L, GH, GW) + identity
        # grid_sample's (x, y, z) in [-1, 1] with align_corners: -1 and 1 are the first and last cells'
        # centres; pixel centres (j + 0.5) / W span the grid as gsplat's bilateral grid does.
        x = (torch.arange(W, dtype=rgb.dtype, device=rgb.device) + 0.5) / W * 2 - 1
        y = (torch.arange(H, dtype=rgb.dtype, device=rgb.device) + 0.5) / H * 2 - 1
        rows = torch.einsum("hj,cmljw->chmlw", self._row_weights(y, GH), grids).reshape(C * H, 12, L, GW)
        luma = (rgb @ self.luma_weights.to(rgb.dtype)).clamp(0.0, 1.0) * 2 - 1  # [C, H, W]
        coords = torch.stack([x.expand(C, H, W), luma], dim=-1).reshape(C * H, 1, W, 2)
        cells = F.grid_sample(rows, coords, mode="bilinear", padding_mode="border", align_corners=True)
        A = cells.view(C, H, 3, 4, W)  # [C*H, 12, 1, W]: rows [A | b] per pixel
        planes = rgb.permute(0, 1, 3, 2)  # [C, H, 3, W], the layout of the cells: no copy of the 12
        return ((A[:, :, :, :3] * planes[:, :, None]).sum(dim=3) + A[:, :, :, 3]).permute(0, 1, 3, 2).contiguous()

    @staticmethod
    def _row_weights(y: Tensor, cells: int) -> Tensor:
        """``[H, cells]``: linear interpolation weights of normalised rows ``y [H]`` over ``cells`` grid
        rows, computed as ``grid_sample`` does with ``align_corners`` (rows strictly inside the grid)."""
        iy = (y + 1) / 2 * (cells - 1)
        j0 = iy.floor().clamp(0, cells - 1)
        fy = (iy - j0)[:, None]
        j0 = j0.long()[:, None]
        w = torch.zeros(len(y), cells, dtype=y.dtype, device=y.device).scatter_(1, j0, 1 - fy)
        return w.scatter_add_(1, (j0 + 1).clamp(max=cells - 1), fy)

    def _falloff(self, ids: Tensor, height: int, width: int, dtype: torch.dtype) -> Tensor:
        """``[C, H, W]``: ``1 + k1 r^2 + k2 r^4`` of views ``ids`` at the pixel centres."""
        assert self.falloff is not None
        device = self.falloff.device
        x = torch.arange(width, dtype=dtype, device=device) + 0.5 - width / 2
        y = torch.arange(height, dtype=dtype, device=device) + 0.5 - height / 2
        r2 = (y[:, None] ** 2 + x[None, :] ** 2) / ((width / 2) ** 2 + (height / 2) ** 2)  # [H, W], 1 at a corner
        k = self.falloff[ids].to(dtype)
        return 1 + k[:, 0, None, None] * r2 + k[:, 1, None, None] * r2**2

    def total_variation(self, ids: Tensor | None = None) -> Tensor:
        """``bilagrid``: mean squared difference of neighbouring cells along each of the three axes,
        summed, over the grids of views ``ids`` (default: all); 0 for any other mode. The smoothness
        the grids are held to (``tv_weight``)."""
        if self.mode != "bilagrid":
            return self.delta.new_zeros(())
        g = (self.delta if ids is None else self.delta[ids]).reshape(-1, 12, *self.grid)
        return sum(((g.narrow(a, 1, n - 1) - g.narrow(a, 0, n - 1)) ** 2).mean() for a, n in zip((2, 3, 4), self.grid))

    def ids(self, indices: Sequence[int]) -> Tensor:
        """``[C]`` view indices where the transforms are (``per_view.index_rows``: no host copy)."""
        return index_rows(self.view_index, indices)

    def apply_one(self, rgb: Tensor, index: int) -> Tensor:
        """``rgb [H, W, 3]`` of view ``index`` -> its photo's colours (a ``View.color_transform``)."""
        return self(rgb[None], self.ids([index]))[0]


def fit_transform(rgb: Tensor, target: Tensor, mode: str = "gain_bias") -> tuple[Tensor, Tensor]:
    """The least-squares colour transform of ``mode`` (``gain_bias`` or ``affine``) that maps ``rgb [N, 3]``
    onto ``target [N, 3]``.

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
        raise ValueError(f"fit_transform mode must be one of ['affine', 'gain_bias'], got {mode!r}")
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], 1)  # [N, 4]
    solution = torch.linalg.lstsq(design, y).solution  # [4, 3]
    return solution[:3].T, solution[3]
