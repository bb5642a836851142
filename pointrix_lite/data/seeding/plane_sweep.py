"""Plane-sweep depth maps of the training views, at a reduced size (``model.seeding.mvs``).

Each view is matched against the few views that share most of the cloud's points from a useful angle
(:func:`choose_neighbours`): for each of ``mvs_depths`` fronto-parallel planes the neighbours' images
are warped into the view (bilinear, gsplat's pixel-centre convention) and compared by colour NCC over a
``WINDOW`` x ``WINDOW`` patch. A pixel's cost at a depth is the mean of its best half of neighbours, so a
neighbour that sees something else in front (an occlusion) does not veto the right depth. The lowest
cost wins, refined between planes by a parabola; pixels on a textureless patch, with a poor best match,
or whose best depth is the first or last plane (a minimum at the range's end is no minimum: the sky
matches there) get no depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..cameras import View

WINDOW = 5  # NCC patch side, px of the reduced view (7: more edge fattening, 1.3x the error)
MIN_STD = 0.02  # patch standard deviation below which NCC is noise (0..1 colours)
MAX_COST = 0.5  # 1 - NCC: a best match worse than NCC 0.5 gives no depth
MIN_ANGLE, GOOD_ANGLE, MAX_ANGLE = 1.0, 5.0, 45.0  # degrees of triangulation angle for a neighbour


@dataclass
class SweepView:
    """A training view at the sweep's size.

    Attributes:
        image: [3, H, W] float32 colours in [0, 1]. K: [3, 3]. R: [3, 3], t: [3] world to camera.
        valid: [H, W] bool, False where the view's mask ignores the pixel.
    """

    image: Tensor
    K: Tensor
    R: Tensor
    t: Tensor
    valid: Tensor

    @property
    def center(self) -> Tensor:
        return -self.R.T @ self.t

    def project(self, xyz: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(u [M], v [M], z [M])``: pixel coordinates (pixel i spans [i, i + 1)) and depth of ``xyz [M, 3]``."""
        cam = xyz @ self.R.T + self.t
        z = cam[:, 2]
        uvw = cam @ self.K.T
        zs = z.clamp_min(1e-9)
        return uvw[:, 0] / zs, uvw[:, 1] / zs, z

    def rays(self) -> Tensor:
        """[H * W, 3] camera-frame rays through the pixel centres, z = 1."""
        _, h, w = self.image.shape
        v, u = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
        pix = torch.stack([u.reshape(-1), v.reshape(-1), torch.ones(h * w)], -1)
        return pix @ torch.linalg.inv(self.K).T


def sweep_view(view: View, long_side: int) -> SweepView:
    """``view`` reduced to at most ``long_side`` px on its long side (never enlarged)."""
    cam = view.camera
    factor = max(1.0, max(cam.width, cam.height) / long_side)
    small = cam.scaled(factor)
    image = view.float_image(torch.device("cpu")).permute(2, 0, 1)[None]
    # Antialiased bilinear keeps pixel centres where Camera.scaled puts them at any ratio ("area" pools
    # uneven bins when the ratio is not a whole number, shifting pixels by up to half a photo pixel).
    size = (small.height, small.width)
    image = F.interpolate(image, size=size, mode="bilinear", antialias=True, align_corners=False)[0]
    if view.mask is not None:  # a reduced pixel counts only when every photo pixel in it does
        keep = view.mask.to("cpu", torch.float32)[None, None]
        valid = F.interpolate(keep, size=size, mode="area")[0, 0] > 0.999
    else:
        valid = torch.ones(small.height, small.width, dtype=torch.bool)
    vm = small.viewmat.detach().to("cpu", torch.float32)
    return SweepView(image.contiguous(), small.K, vm[:3, :3].contiguous(), vm[:3, 3].contiguous(), valid)


def visible(view: SweepView, xyz: Tensor) -> Tensor:
    """[M] bool: the points in front of ``view`` that project inside its image (occlusion not tested)."""
    u, v, z = view.project(xyz)
    _, h, w = view.image.shape
    return (z > 1e-6) & (u >= 0) & (u < w) & (v >= 0) & (v < h)


def choose_neighbours(views: list[SweepView], xyz: Tensor, k: int) -> list[list[int]]:
    """The ``k`` views each view is matched against: most cloud points seen by both, weighted down
    below ``GOOD_ANGLE`` of median triangulation angle (too little parallax to tell depths apart) and
    excluded below ``MIN_ANGLE`` or above ``MAX_ANGLE`` (the surfaces look too different)."""
    seen = torch.stack([visible(v, xyz) for v in views])  # [V, M]
    centers = torch.stack([v.center for v in views])
    rays = F.normalize(xyz[None] - centers[:, None], dim=-1)  # [V, M, 3]: from each camera to each point
    out = []
    for r in range(len(views)):
        both = seen[r] & seen  # [V, M]
        cos = (rays[r][None] * rays).sum(-1).clamp(-1, 1)
        angle = torch.rad2deg(torch.acos(cos)).masked_fill(~both, float("nan")).nanmedian(1).values  # [V]
        count = both.sum(1).float()
        usable = (count >= 8) & (angle >= MIN_ANGLE) & (angle <= MAX_ANGLE)
        usable[r] = False
        scores = torch.where(usable, count * (angle / GOOD_ANGLE).clamp(max=1.0), torch.zeros_like(count))
        order = torch.argsort(scores, descending=True)[:k]
        out.append([int(n) for n in order if scores[n] > 0])
    return out


def _box(x: Tensor) -> Tensor:
    """[B, 1, H, W] mean of ``x [B, 1, H, W]`` over each pixel's patch, the patches cut at the image
    border (not padded). Running sums along each axis: ~6x faster on a CPU than ``avg_pool2d``."""
    r = WINDOW // 2
    h, w = x.shape[-2:]
    s = F.pad(x, (0, 0, r + 1, r)).cumsum(-2)
    s = s[..., WINDOW:, :] - s[..., :-WINDOW, :]
    s = F.pad(s, (r + 1, r, 0, 0)).cumsum(-1)
    s = s[..., WINDOW:] - s[..., :-WINDOW]
    return s / (_count(h, r)[:, None] * _count(w, r)[None, :]).to(x.dtype)


def _count(n: int, r: int) -> Tensor:
    """[n] how many of the 2r + 1 positions around each index lie inside 0..n-1."""
    i = torch.arange(n)
    return (i + r).clamp(max=n - 1) - (i - r).clamp(min=0) + 1


def _patch_var(x: Tensor) -> Tensor:
    """[B, 1, H, W] variance of each patch of ``x [B, 3, H, W]``, the three channels taken as one patch."""
    m = _box(x.mean(1, keepdim=True))
    return (_box((x * x).mean(1, keepdim=True)) - m * m).clamp_min(0)


def _ncc_cost(ref: Tensor, mr: Tensor, var_r: Tensor, warped: Tensor) -> Tensor:
    """[D, H, W] 1 - NCC of ``ref [1, 3, H, W]`` (its patch means ``mr`` and variances ``var_r``,
    [1, 1, H, W], the same for every source) against each ``warped [D, 3, H, W]`` over the patch, the
    three channels taken as one patch (a colour edge between equal greys still matches).
    Channel means come before the box filter (both are linear): a third of the filtering."""
    mw = _box(warped.mean(1, keepdim=True))
    var_w = (_box((warped * warped).mean(1, keepdim=True)) - mw * mw).clamp_min(0)
    cov = _box((warped * ref).mean(1, keepdim=True)) - mr * mw
    return (1.0 - cov / (var_r * var_w + 1e-8).sqrt())[:, 0]


def depth_map(ref: SweepView, sources: list[SweepView], near: float, far: float, planes: int) -> Tensor:
    """[H, W] depth of ``ref`` along its optical axis (0 where there is none), swept against ``sources``."""
    _, h, w = ref.image.shape
    image = ref.image[None]
    mr, var_r = _box(image.mean(1, keepdim=True)), _patch_var(image)
    inv = torch.linspace(1.0 / near, 1.0 / far, planes)
    depths = (1.0 / inv)[:, None].expand(planes, h * w)
    agg = _cost_volume(ref, sources, ref.rays(), depths, torch.ones_like(depths, dtype=torch.bool), mr, var_r)
    cost, k = agg.min(0)
    # Parabola through the best plane and its neighbours, in plane index (inverse depth is linear in it).
    kk = k.clamp(1, planes - 2)
    c0, c1, c2 = (agg.gather(0, (kk + d)[None])[0] for d in (-1, 0, 1))
    curve = c0 - 2 * c1 + c2
    offset = torch.where(curve > 1e-9, 0.5 * (c0 - c2) / curve.clamp_min(1e-9), torch.zeros_like(c1)).clamp(-0.5, 0.5)
    step = (inv[-1] - inv[0]) / (planes - 1)
    depth = 1.0 / (inv[0] + (kk.float() + offset) * step)
    textured = var_r[0, 0] > MIN_STD**2
    good = (cost < MAX_COST) & (k > 0) & (k < planes - 1) & textured & ref.valid
    return torch.where(good, depth, torch.zeros_like(depth))


def _cost_volume(
    ref: SweepView, sources: list[SweepView], rays: Tensor, depths: Tensor, usable: Tensor, mr: Tensor, var_r: Tensor
) -> Tensor:
    """[D, H, W] matching cost of ``ref``'s pixels at ``depths [D, H * W]`` (``usable`` [D, H * W]):
    the mean of the best half of ``sources``' 1 - NCC, 2 where no source sees the point."""
    _, h, w = ref.image.shape
    planes = len(depths)
    image = ref.image[None]
    costs = []
    for src in sources:
        R_rel = src.R @ ref.R.T
        t_rel = src.t - R_rel @ ref.t
        # A pixel at depth d lands at K_s (d R_rel ray + t_rel): per pixel a line in d, two divisions per plane.
        KA, Kt = rays @ R_rel.T @ src.K.T, src.K @ t_rel  # [P, 3], [3]
        z = depths * KA[:, 2] + Kt[2]  # [D, P]
        zs = z.clamp_min(1e-9)
        _, hs, ws = src.image.shape
        gx = (depths * KA[:, 0] + Kt[0]) / zs * (2.0 / ws) - 1
        gy = (depths * KA[:, 1] + Kt[1]) / zs * (2.0 / hs) - 1
        inside = usable & (z > 1e-6) & (gx.abs() < 1) & (gy.abs() < 1)
        grid = torch.stack([gx, gy], -1).reshape(1, planes * h, w, 2)
        warped = F.grid_sample(src.image[None], grid, align_corners=False)  # [1, 3, D * H, W]
        warped = warped.reshape(3, planes, h, w).transpose(0, 1)
        costs.append(_ncc_cost(image, mr, var_r, warped).masked_fill_(~inside.reshape(planes, h, w), float("inf")))
    stacked = torch.stack(costs).sort(0).values  # [S, D, H, W], best neighbour first
    best_half = stacked[: (len(sources) + 1) // 2]
    return torch.where(torch.isfinite(best_half), best_half, torch.full_like(best_half, 2.0)).mean(0)
