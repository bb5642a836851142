"""Fit one camera's pose to its image under a frozen model: Gauss-Newton on the rendered image.

Test-time alignment used to take Adam steps on an SE(3) correction: each step a full render plus
its backward pass, ~50 per view before the loss stopped falling, which made alignment the largest
cost outside training (29 s for 7 test views of the 400x300 photo scene, 44% of training time).

Here each iteration is one forward render. Its expected depth says where every pixel's surface
sits, so the motion of each pixel under a small camera motion is known in closed form, and with
the render's spatial gradient this linearises the whole image in the 6 pose numbers (direct image
alignment, as photometric trackers such as LSD-SLAM and DSO do). A damped 6x6 least-squares
system (Levenberg-Marquardt) gives the step; a step is kept only when the next render explains the
image better (mean squared error over every pixel, so the aligned PSNR is never below the given
pose's). The linearisation ignores occlusion changes and semi-transparent mixtures; the
acceptance test on real renders is what keeps those approximations from costing accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..metrics.ssim import gaussian_window_1d, separable_blur

# (viewmat [4, 4]) -> the renderer's output for that one camera: at least rgb [1, H, W, 3], expected
# depth [1, H, W, 1] and alpha [1, H, W, 1] (GaussianRenderer's keys); no autograd needed.
RenderOut = Mapping[str, Any]
RenderFn = Callable[[Tensor], RenderOut]

MIN_ALPHA = 0.5  # pixels less opaque than this have no surface whose depth could move them
INITIAL_DAMPING = 1e-3  # Marquardt damping, relative to the diagonal of J^T J
MAX_REJECTS = 4  # consecutive rejected steps (damping x8 each) that end a level
BLUR_LEVELS = (0.0,)  # coarse-to-fine Gaussian sigmas (pixels) of render and target; sharp only: see docs/data.md


@dataclass
class Alignment:
    """Result of :func:`align_pose`."""

    viewmat: Tensor  # [4, 4] best pose evaluated (the given one if nothing explained the image better)
    render_out: RenderOut  # its render, so the caller can score it without rendering it again
    mse: float  # mean squared error of its render
    initial_mse: float  # that of the given pose
    renders: int  # forward renders spent (not counting ``given_render``)


def se3_exp(xi: Tensor) -> Tensor:
    """[6] camera-frame motion ``(v, w)`` -> [4, 4] ``p -> R(w) p + v`` (Rodrigues rotation)."""
    v, w = xi[:3], xi[3:]
    theta = torch.linalg.norm(w)
    W = torch.zeros(3, 3, dtype=xi.dtype, device=xi.device)
    W[0, 1], W[0, 2], W[1, 2] = -w[2], w[1], -w[0]
    W = W - W.T
    if float(theta) < 1e-12:
        R = torch.eye(3, dtype=xi.dtype, device=xi.device) + W
    else:
        R = torch.eye(3, dtype=xi.dtype, device=xi.device) + torch.sin(theta) / theta * W
        R = R + (1.0 - torch.cos(theta)) / theta**2 * (W @ W)
    T = torch.eye(4, dtype=xi.dtype, device=xi.device)
    T[:3, :3], T[:3, 3] = R, v
    return T


def normal_equations(
    rgb: Tensor, depth: Tensor, alpha: Tensor, residual: Tensor, K: Tensor, weight: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``J^T J [6, 6]`` and ``J^T r [6]`` (float64) of the image w.r.t. a camera-frame motion ``(v, w)``.

    Row ``(pixel, channel)`` of ``J`` is how that pixel's colour changes when the camera moves by
    ``p -> p + v + w x p``: the surface at pixel ``u`` (back-projected with its expected depth,
    pixel centres at ``+0.5`` as the rasterizer samples them) moves to ``u + du``, so the render
    at ``u`` becomes ``rgb(u - du)``: ``J = -grad(rgb) . du/d(v, w)``. Border pixels (no central
    difference), pixels with ``alpha < MIN_ALPHA`` or no positive depth, and pixels with ``weight``
    0 (``[H, W, 1]``, e.g. a mask) add nothing.

    Args:
        rgb, residual: ``[H, W, 3]`` render and render minus target.
        depth, alpha: ``[H, W, 1]`` expected depth and opacity of the render.
        K: ``[3, 3]`` intrinsics.
    """
    H, W = rgb.shape[:2]
    dev = rgb.device
    gx = (rgb[1:-1, 2:] - rgb[1:-1, :-2]) * 0.5  # [H-2, W-2, 3]
    gy = (rgb[2:, 1:-1] - rgb[:-2, 1:-1]) * 0.5
    Z = depth[1:-1, 1:-1, 0]
    ok = (alpha[1:-1, 1:-1, 0] >= MIN_ALPHA) & (Z > 0) & torch.isfinite(Z)
    if weight is not None:
        ok &= weight[1:-1, 1:-1, 0] > 0
    fx, fy, cx, cy = (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]))
    u = torch.arange(1, W - 1, device=dev, dtype=rgb.dtype) + 0.5
    v = torch.arange(1, H - 1, device=dev, dtype=rgb.dtype) + 0.5
    Z = Z[ok]
    x = ((u[None, :] - cx) / fx).expand(H - 2, W - 2)[ok]  # X / Z
    y = ((v[:, None] - cy) / fy).expand(H - 2, W - 2)[ok]  # Y / Z
    inv_z = 1.0 / Z
    zero = torch.zeros_like(Z)
    # d(pixel)/d(v, w) for p -> p + v + w x p (the standard pinhole motion Jacobian).
    du = torch.stack((fx * inv_z, zero, -fx * x * inv_z, -fx * x * y, fx * (1 + x * x), -fx * y), dim=-1)
    dv = torch.stack((zero, fy * inv_z, -fy * y * inv_z, -fy * (1 + y * y), fy * x * y, fy * x), dim=-1)
    gx, gy, r = gx[ok], gy[ok], residual[1:-1, 1:-1][ok]  # [M, 3]
    A = torch.zeros(6, 6, dtype=torch.float64, device=dev)
    b = torch.zeros(6, dtype=torch.float64, device=dev)
    for c in range(rgb.shape[-1]):
        J = -(gx[:, c, None] * du + gy[:, c, None] * dv)  # [M, 6]
        A += (J.T @ J).double()
        b += (J.T @ r[:, c]).double()
    return A, b


def blur(image: Tensor, sigma: float) -> Tensor:
    """``image [H, W, C]`` convolved with a Gaussian of ``sigma`` pixels (edges replicated); 0: as is."""
    if sigma <= 0.0:
        return image
    radius = max(1, int(math.ceil(3.0 * sigma)))
    img = F.pad(image.permute(2, 0, 1)[None], (radius,) * 4, mode="replicate")  # [1, C, H + 2r, W + 2r]
    taps = gaussian_window_1d(2 * radius + 1, sigma, image.device).to(image.dtype)
    return separable_blur(img, taps, 0)[0].permute(1, 2, 0)


def align_pose(
    render: RenderFn,
    viewmat: Tensor,
    K: Tensor,
    target: Tensor,
    max_renders: int,
    mask: Tensor | None = None,
    min_gain: float = 1e-4,
    blur_levels: tuple[float, ...] = BLUR_LEVELS,
    given_render: RenderOut | None = None,
) -> Alignment:
    """Levenberg-Marquardt fit of ``viewmat [4, 4]`` so that ``render`` explains ``target [H, W, 3]``.

    Coarse to fine when ``blur_levels`` (Gaussian sigmas in pixels, the last one 0) has several:
    at each level the render and the target are blurred alike, which widens the basin of the
    linearisation; every level renders at full size, so no level's optimum is biased by
    resampling, and the last level is the sharp image itself. A level ends when an accepted step
    lowers its error by less than ``min_gain`` (relative) or after :data:`MAX_REJECTS` rejected
    steps in a row; the fit ends after the last level or ``max_renders`` renders. The result is the
    pose with the lowest *sharp* error among all renders, the given pose included. ``mask``
    (``[H, W, 1]``, 0 = ignore) leaves pixels out of the fit and the error. ``given_render``: the
    render of ``viewmat`` when the caller has one already (the test pass renders every view once).
    """
    best_vm = torch.as_tensor(viewmat).detach().clone()
    n = target.numel() if mask is None else float(mask.sum()) * target.shape[-1]

    def error(residual: Tensor) -> float:
        sq = residual.square() if mask is None else residual.square() * mask
        return float(sq.sum()) / max(n, 1.0)

    def evaluate(vm: Tensor, made: RenderOut | None = None) -> tuple[float, tuple[Tensor, Tensor, Tensor], Tensor]:
        """Render ``vm`` (unless ``made``): its sharp error (the result keeps the lowest), rgb/depth/alpha, residual."""
        nonlocal best_vm, best_out, best, renders
        if made is None:
            made = render(vm)
            renders += 1
        out = (made["rgb"][0], made["depth"][0], made["alpha"][0])
        residual = out[0] - target
        value = error(residual)
        if best_out is None or value < best:  # the first render stands until a better one
            best, best_vm, best_out = value, vm, made
        return value, out, residual

    best, best_out, renders = float("inf"), given_render, 0
    sharp = evaluate(best_vm, given_render)
    initial = best
    level_vm = best_vm
    for sigma in blur_levels:
        blurred_target = blur(target, sigma)

        def at_level(
            value: float,
            out: tuple[Tensor, Tensor, Tensor],
            residual: Tensor,
            sigma: float = sigma,
            blurred_target: Tensor = blurred_target,
        ) -> tuple[float, Tensor, Tensor]:
            """A render's error, residual and rgb at this level: the sharp ones at sigma 0."""
            if sigma <= 0.0:
                return value, residual, out[0]
            rgb = blur(out[0], sigma)
            residual = rgb - blurred_target
            return error(residual), residual, rgb

        out = sharp[1]
        current, residual, rgb = at_level(*sharp)
        damping, rejects, A, b = INITIAL_DAMPING, 0, None, None
        while renders < max_renders and rejects < MAX_REJECTS and current > 0.0:
            if A is None:
                A, b = normal_equations(rgb, out[1], out[2], residual, K, mask)
                if not bool(torch.isfinite(A).all()) or float(A.diagonal().max()) <= 0.0:
                    break  # nothing in view moves with the camera
            damped = A + damping * torch.diag(A.diagonal().clamp_min(1e-12 * float(A.diagonal().max())))
            candidate = se3_exp(torch.linalg.solve(damped, -b)).to(level_vm) @ level_vm  # dtype and device of the pose
            cand = evaluate(candidate)
            value, cand_residual, cand_rgb = at_level(*cand)
            if value < current:
                gain = (current - value) / current
                current, level_vm, sharp, residual, rgb = value, candidate, cand, cand_residual, cand_rgb
                out = cand[1]
                A = None  # relinearise at the new pose
                damping, rejects = max(damping / 4.0, 1e-7), 0
                if gain < min_gain:
                    break
            else:
                damping, rejects = damping * 8.0, rejects + 1
    return Alignment(best_vm, best_out, best, initial, renders)
