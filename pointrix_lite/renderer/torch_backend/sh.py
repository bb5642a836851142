"""Real spherical harmonics -> RGB, gsplat's basis order and constants (Sloan, JCGT 2013).

Coefficients are laid out ``[..., K, 3]`` with K >= (degree + 1)^2; band l occupies the
indices l^2 .. (l+1)^2 - 1, the layout of gsplat/Inria ``sh0`` (K=1) followed by ``shN``.
"""

from __future__ import annotations

import torch
from torch import Tensor

MAX_SH_DEGREE = 4


def sh_bases(degree: int, dirs: Tensor) -> Tensor:
    """SH basis values at unit directions. dirs [..., 3] -> [..., (degree + 1)^2]"""
    out = [torch.full_like(dirs[..., 0], 0.2820947917738781)]
    if degree >= 1:
        x, y, z = dirs.unbind(-1)
        out += [-0.48860251190292 * y, 0.48860251190292 * z, -0.48860251190292 * x]
    if degree >= 2:
        z2 = z * z
        fC1, fS1 = x * x - y * y, 2 * x * y
        p6 = 0.9461746957575601 * z2 - 0.3153915652525201
        out += [
            0.5462742152960395 * fS1,
            -1.092548430592079 * z * y,
            p6,
            -1.092548430592079 * z * x,
            0.5462742152960395 * fC1,
        ]
    if degree >= 3:
        fC2, fS2 = x * fC1 - y * fS1, x * fS1 + y * fC1
        tmpC = -2.285228997322329 * z2 + 0.4570457994644658
        p12 = z * (1.865881662950577 * z2 - 1.119528997770346)
        out += [
            -0.5900435899266435 * fS2,
            1.445305721320277 * z * fS1,
            tmpC * y,
            p12,
            tmpC * x,
            1.445305721320277 * z * fC1,
            -0.5900435899266435 * fC2,
        ]
    if degree >= 4:
        fC3, fS3 = x * fC2 - y * fS2, x * fS2 + y * fC2
        tmpD = z * (-4.683325804901025 * z2 + 2.007139630671868)
        tmpC1 = 3.31161143515146 * z2 - 0.47308734787878
        tmpB2 = -1.770130769779931 * z
        out += [
            0.6258357354491763 * fS3,
            tmpB2 * fS2,
            tmpC1 * fS1,
            tmpD * y,
            1.984313483298443 * z * p12 - 1.006230589874905 * p6,
            tmpD * x,
            tmpC1 * fC1,
            tmpB2 * fC2,
            0.6258357354491763 * fC3,
        ]
    return torch.stack(out, dim=-1)


def sh_to_color(degree: int, dirs: Tensor, coeffs: Tensor) -> Tensor:
    """Evaluate SH colours; like gsplat ``rasterization``, shifted by +0.5 and clamped at 0.

    Args:
        degree: bands to use, 0..4.
        dirs: [..., 3] view directions (Gaussian centre minus camera centre), any length.
        coeffs: [..., K, 3], K >= (degree + 1)^2; extra bases are ignored.

    Returns:
        [..., 3] colours >= 0.
    """
    n = (degree + 1) ** 2
    dirs = torch.nn.functional.normalize(dirs, dim=-1)
    raw = (sh_bases(degree, dirs)[..., None] * coeffs[..., :n, :]).sum(dim=-2)
    return torch.clamp_min(raw + 0.5, 0.0)
