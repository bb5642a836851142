"""Independent dense reference rasterizer for tests: every Gaussian at every pixel, float64.

Written from the rules (gsplat 1.5.3 semantics) without sharing code with the renderer:
plain per-camera projection, Inria-style SH polynomials, and a sequential front-to-back
loop over depth-sorted Gaussians vectorised over pixels. The one tile rule it keeps is
gsplat's: a Gaussian reaches a pixel only if the pixel's tile lies in the Gaussian's tile box.

Public API (also used by the native-backend tests):
    dense_render(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kwargs)
        -> (render_colors [C,H,W,D'], render_alphas [C,H,W,1])
    dense_render(..., return_meta=True) -> (render_colors, render_alphas, meta)
with the keyword arguments of ``pointrix_lite.renderer.rasterization`` (minus backend/absgrad).
Inputs are promoted to float64; gradients flow back to the caller's tensors.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

ALPHA_MIN = 1.0 / 255.0
T_STOP = 1e-4

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)


def eval_sh(deg: int, sh: Tensor, d: Tensor) -> Tensor:
    """Inria-style real SH (degree <= 3). sh [..., K, 3], d [..., 3] unit -> [..., 3] (no offset)."""
    x, y, z = (d[..., i : i + 1] for i in range(3))
    r = SH_C0 * sh[..., 0, :]
    if deg >= 1:
        r = r - SH_C1 * y * sh[..., 1, :] + SH_C1 * z * sh[..., 2, :] - SH_C1 * x * sh[..., 3, :]
    if deg >= 2:
        xx, yy, zz = x * x, y * y, z * z
        r = (
            r
            + SH_C2[0] * x * y * sh[..., 4, :]
            + SH_C2[1] * y * z * sh[..., 5, :]
            + SH_C2[2] * (2 * zz - xx - yy) * sh[..., 6, :]
            + SH_C2[3] * x * z * sh[..., 7, :]
            + SH_C2[4] * (xx - yy) * sh[..., 8, :]
        )
    if deg >= 3:
        r = (
            r
            + SH_C3[0] * y * (3 * xx - yy) * sh[..., 9, :]
            + SH_C3[1] * x * y * z * sh[..., 10, :]
            + SH_C3[2] * y * (4 * zz - xx - yy) * sh[..., 11, :]
            + SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy) * sh[..., 12, :]
            + SH_C3[4] * x * (4 * zz - xx - yy) * sh[..., 13, :]
            + SH_C3[5] * z * (xx - yy) * sh[..., 14, :]
            + SH_C3[6] * x * (xx - 3 * yy) * sh[..., 15, :]
        )
    if deg >= 4:
        raise NotImplementedError("dense reference covers SH degrees 0..3")
    return r


def rotation(q: Tensor) -> Tensor:
    """Unit-quaternion (w, x, y, z) rotation matrices. [N, 4] -> [N, 3, 3]"""
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True))
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    R = torch.stack(
        [
            torch.stack([w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            torch.stack([2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)], -1),
            torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z], -1),
        ],
        dim=-2,
    )
    return R


def project_one_camera(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmat: Tensor,
    K: Tensor,
    width: int,
    height: int,
    near_plane: float,
    far_plane: float,
    radius_clip: float,
    eps2d: float,
    antialiased: bool,
) -> dict[str, Tensor]:
    """Per-Gaussian 2D footprint in one camera; culled Gaussians have visible False and radii 0."""
    Rw = rotation(quats)
    cov3 = Rw @ torch.diag_embed(scales * scales) @ Rw.transpose(1, 2)
    Rv, t = viewmat[:3, :3], viewmat[:3, 3]
    p = means @ Rv.T + t
    cov = Rv @ cov3 @ Rv.T
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    z = p[:, 2]
    zs = torch.where(z > 0, z, torch.ones_like(z))
    u = fx * p[:, 0] / zs + cx
    v = fy * p[:, 1] / zs + cy
    # The Jacobian is evaluated as if the centre projected no further than 15% of the image
    # size outside the image (gsplat's 1.3 x tan(fov/2) limits, restated in pixels).
    uc = torch.clamp(u, -0.15 * width, 1.15 * width)
    vc = torch.clamp(v, -0.15 * height, 1.15 * height)
    J = torch.stack(
        [
            torch.stack([fx / zs, torch.zeros_like(zs), -(uc - cx) / zs], -1),
            torch.stack([torch.zeros_like(zs), fy / zs, -(vc - cy) / zs], -1),
        ],
        dim=1,
    )
    cov2 = J @ cov @ J.transpose(1, 2)
    det0 = cov2[:, 0, 0] * cov2[:, 1, 1] - cov2[:, 0, 1] ** 2
    a = cov2[:, 0, 0] + eps2d
    c = cov2[:, 1, 1] + eps2d
    b = cov2[:, 0, 1]
    det = a * c - b * b
    dets = torch.where(det > 0, det, torch.ones_like(det))
    conic = torch.stack([c / dets, -b / dets, a / dets], -1)
    opac = opacities
    if antialiased:
        ratio = det0 / dets
        pos = ratio > 0
        opac = opac * torch.where(
            pos, torch.sqrt(torch.where(pos, ratio, torch.ones_like(ratio))), torch.zeros_like(ratio)
        )
    with torch.no_grad():
        visible = (z >= near_plane) & (z <= far_plane) & (det > 0) & (opac >= ALPHA_MIN)
        o = torch.where(visible, opac, torch.ones_like(opac))
        k = torch.minimum(torch.sqrt(2 * torch.log(255.0 * o)), torch.full_like(o, 3.33))
        rx = torch.ceil(k * torch.sqrt(a.clamp(min=0)))
        ry = torch.ceil(k * torch.sqrt(c.clamp(min=0)))
        visible &= (rx > radius_clip) | (ry > radius_clip)
        visible &= (u + rx > 0) & (u - rx < width) & (v + ry > 0) & (v - ry < height)
        radii = torch.stack([rx, ry], -1) * visible[:, None]
    return dict(
        means2d=torch.stack([u, v], -1), depths=z, conics=conic, opacities=opac, radii=radii.long(), visible=visible
    )


def composite_one_camera(
    proj: dict[str, Tensor], feats: Tensor, width: int, height: int, tile_size: int, background: Tensor | None
) -> tuple[Tensor, Tensor, int, Tensor]:
    """Sequential front-to-back compositing of every visible Gaussian at every pixel; also the median depth
    [H, W]: the depth of the Gaussian that takes T from above one half to one half or below (0: none does)."""
    D = feats.shape[-1]
    jj, ii = torch.meshgrid(torch.arange(width), torch.arange(height), indexing="xy")
    px, py = jj.reshape(-1).double() + 0.5, ii.reshape(-1).double() + 0.5
    tile_x, tile_y = jj.reshape(-1) // tile_size, ii.reshape(-1) // tile_size
    T = torch.ones(px.shape[0], dtype=feats.dtype)
    done = torch.zeros(px.shape[0], dtype=torch.bool)
    acc = torch.zeros(px.shape[0], D, dtype=feats.dtype)
    median = torch.zeros(px.shape[0], dtype=feats.dtype)
    order = torch.sort(proj["depths"].detach(), stable=True).indices
    for g in order.tolist():
        if not bool(proj["visible"][g]):
            continue
        mx, my = proj["means2d"][g]
        (cx, cy), (rx, ry) = proj["means2d"][g].tolist(), proj["radii"][g].tolist()
        in_box = (
            (tile_x >= math.floor((cx - rx) / tile_size))
            & (tile_x < math.ceil((cx + rx) / tile_size))
            & (tile_y >= math.floor((cy - ry) / tile_size))
            & (tile_y < math.ceil((cy + ry) / tile_size))
        )
        ca, cb, cc = proj["conics"][g]
        dx, dy = mx - px, my - py
        sigma = 0.5 * (ca * dx * dx + cc * dy * dy) + cb * dx * dy
        alpha = torch.clamp(proj["opacities"][g] * torch.exp(-sigma), max=0.999)
        use = in_box & (sigma >= 0) & (alpha >= ALPHA_MIN) & ~done
        next_T = T * (1 - alpha)
        stop = use & (next_T <= T_STOP)
        done = done | stop
        use = use & ~stop
        acc = acc + torch.where(use, alpha * T, torch.zeros_like(T))[:, None] * feats[g]
        median = torch.where(use & (T > 0.5) & (next_T <= 0.5), proj["depths"][g].detach(), median)
        T = torch.where(use, next_T, T)
    if background is not None:
        acc = acc + T[:, None] * background
    image, alpha = acc.reshape(height, width, D), (1 - T).reshape(height, width, 1)
    return image, alpha, int(done.sum()), median.reshape(height, width)


def dense_render(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    radius_clip: float = 0.0,
    eps2d: float = 0.3,
    sh_degree: int | None = None,
    backgrounds: Tensor | None = None,
    render_mode: str = "RGB",
    rasterize_mode: str = "classic",
    tile_size: int = 16,
    return_meta: bool = False,
) -> Any:
    """Render like ``rasterization`` (float64, dense). See the module docstring."""
    f = lambda t: None if t is None else t.double()  # noqa: E731
    means, quats, scales, opacities, colors = f(means), f(quats), f(scales), f(opacities), f(colors)
    viewmats, Ks, backgrounds = f(viewmats), f(Ks), f(backgrounds)
    C = viewmats.shape[0]
    projs = [
        project_one_camera(
            means,
            quats,
            scales,
            opacities,
            viewmats[ci],
            Ks[ci],
            width,
            height,
            near_plane,
            far_plane,
            radius_clip,
            eps2d,
            rasterize_mode == "antialiased",
        )
        for ci in range(C)
    ]
    # Composite from the stacked tensors so callers can differentiate w.r.t. meta["means2d"].
    meta = {k: torch.stack([p[k] for p in projs]) for k in projs[0]}
    out_c, out_a, out_m = [], [], []
    n_stopped = 0
    for ci in range(C):
        proj = {k: v[ci] for k, v in meta.items()}
        cam_colors = colors[ci] if colors.dim() == (3 if sh_degree is None else 4) else colors
        if sh_degree is None:
            feats = cam_colors
        else:
            Rv, t = viewmats[ci, :3, :3], viewmats[ci, :3, 3]
            center = -Rv.T @ t
            d = means - center
            d = d / torch.sqrt((d * d).sum(-1, keepdim=True))
            feats = torch.clamp(eval_sh(sh_degree, cam_colors, d) + 0.5, min=0.0)
        bg = None if backgrounds is None else backgrounds[ci]
        depth = proj["depths"][:, None]
        if render_mode in ("RGB+D", "RGB+ED"):
            feats = torch.cat([feats, depth], -1)
            bg = None if bg is None else torch.cat([bg, bg.new_zeros(1)])
        elif render_mode in ("D", "ED"):
            feats, bg = depth, None
        img, alpha, stopped, median = composite_one_camera(proj, feats, width, height, tile_size, bg)
        n_stopped += stopped
        out_m.append(median)
        if render_mode in ("ED", "RGB+ED"):
            img = torch.cat([img[..., :-1], img[..., -1:] / alpha.clamp(min=1e-10)], -1)
        out_c.append(img)
        out_a.append(alpha)
    colors_out, alphas_out = torch.stack(out_c), torch.stack(out_a)
    if not return_meta:
        return colors_out, alphas_out
    meta["n_stopped_pixels"] = n_stopped
    meta["median_depth"] = torch.stack(out_m)  # [C, H, W]
    return colors_out, alphas_out, meta


# ---------------------------------------------------------------------------------------------
# Scene builders shared by the renderer tests (torch and native backends).


def look_at(eye: Any, target: Any = (0.0, 0.0, 0.0)) -> Tensor:
    """World-to-camera [4, 4] float64, OpenCV axes (x right, y down, z towards ``target``)."""
    eye_t, target_t = torch.tensor(eye, dtype=torch.float64), torch.tensor(target, dtype=torch.float64)
    fwd = (target_t - eye_t) / (target_t - eye_t).norm()
    right = torch.linalg.cross(fwd, torch.tensor([0.0, -1.0, 0.0], dtype=torch.float64))
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    R = torch.stack([right, down, fwd])
    V = torch.eye(4, dtype=torch.float64)
    V[:3, :3], V[:3, 3] = R, -R @ eye_t
    return V


def random_scene(
    seed: int, n: int = 120, width: int = 45, height: int = 37, dtype: torch.dtype = torch.float32
) -> dict:
    """Random Gaussians seen by 3 cameras, plus hand-placed awkward cases.

    The awkward ones: behind camera 0, between its centre and the near plane, on its z = 0
    plane, partly off-image, far outside the frustum but huge (Jacobian clamp), huge, tiny,
    below the 1/255 opacity cull, just above it, very far, and two at the same depth.
    Returns a dict of rasterization() arguments with SH coefficients ``sh`` [N, 16, 3]
    (``colors`` [N, 3] too).
    """
    g = torch.Generator().manual_seed(seed)
    viewmats = torch.stack([look_at([0.2, -0.3, -4.0]), look_at([3.0, 1.0, -3.0]), look_at([-2.5, -2.0, 2.5])])
    Ks = torch.tensor(
        [
            [[40.0, 0, 22.0], [0, 42.0, 18.0], [0, 0, 1]],
            [[55.0, 0, 20.0], [0, 50.0, 20.5], [0, 0, 1]],
            [[35.0, 0, 25.0], [0, 35.0, 16.0], [0, 0, 1]],
        ],
        dtype=torch.float64,
    )
    means = torch.randn(n, 3, generator=g, dtype=torch.float64) * 0.8
    scales = torch.exp(torch.randn(n, 3, generator=g, dtype=torch.float64) * 0.7 - 2.5)
    opacities = torch.rand(n, generator=g, dtype=torch.float64)

    cam0 = torch.linalg.inv(viewmats[0])
    centre, right, fwd = cam0[:3, 3], cam0[:3, 0], cam0[:3, 2]
    special = [  # (mean, scale, opacity)
        (centre - 1.0 * fwd, 0.3, 0.9),  # behind camera 0
        (centre + 0.005 * fwd, 0.1, 0.9),  # closer than the near plane
        (centre + 0.5 * right, 0.1, 0.9),  # on the camera plane z = 0
        (centre + 4.0 * fwd - 2.35 * right, 0.15, 0.8),  # centre just left of the image
        (centre + 3.0 * fwd + 9.0 * right, 2.5, 0.7),  # far outside the frustum, huge
        (torch.zeros(3, dtype=torch.float64), 2.0, 0.3),  # huge
        (torch.tensor([0.1, 0.1, 0.1], dtype=torch.float64), 1e-4, 0.9),  # tiny
        (torch.tensor([0.2, -0.1, 0.0], dtype=torch.float64), 0.2, 0.003),  # opacity < 1/255: culled
        (torch.tensor([-0.2, 0.1, 0.0], dtype=torch.float64), 0.2, 0.0045),  # just above the cull
        (centre + 1000.0 * fwd, 5.0, 0.9),  # very far
        (torch.tensor([0.3, 0.3, -0.3], dtype=torch.float64), 0.25, 0.5),  # same depth as the next
        (torch.tensor([0.3, 0.3, -0.3], dtype=torch.float64), 0.25, 0.6),
    ]
    means = torch.cat([means, torch.stack([s[0] for s in special])])
    scales = torch.cat([scales, torch.tensor([[s[1]] * 3 for s in special], dtype=torch.float64)])
    opacities = torch.cat([opacities, torch.tensor([s[2] for s in special], dtype=torch.float64)])
    n_all = means.shape[0]
    quats = torch.randn(n_all, 4, generator=g, dtype=torch.float64)
    sh = torch.randn(n_all, 16, 3, generator=g, dtype=torch.float64) * 0.4
    colors = torch.rand(n_all, 3, generator=g, dtype=torch.float64)
    cast = lambda t: t.to(dtype)  # noqa: E731
    return dict(
        means=cast(means),
        quats=cast(quats),
        scales=cast(scales),
        opacities=cast(opacities),
        sh=cast(sh),
        colors=cast(colors),
        viewmats=cast(viewmats),
        Ks=cast(Ks),
        width=width,
        height=height,
    )
