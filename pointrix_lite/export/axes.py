"""Axis conventions of the export formats, and the sign flips that move Gaussians between them.

The model is trained in the PLY / COLMAP / OpenCV frame, RDF (x right, y down, z forward). glTF is
LUF (x left, y up, z forward). SPZ is stored in RDF by default, as the web readers expect (PLY's
frame: docs/export.md, "SPZ coordinates"), or in RUB (x right, y up, z back: OpenGL / three.js),
the frame nianticlabs/spz documents, with ``--spz-frame rub``. Each conversion is a 180-degree
turn about one axis (an even number of flipped axes, so no mirror): a sign flip per axis, which is
exact in floating point.

The rules are nianticlabs/spz's ``coordinateConverter`` for a within-family conversion
(``src/cc/splat-types.h``): positions ``p_i * s_i``; quaternion x, y, z times
``(s_y s_z, s_x s_z, s_x s_y)`` with w unchanged (``R' = S R S``); each SH coefficient times the
parity of its basis polynomial under the flip (``Y_k(S d) = sign_k Y_k(d)``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

RDF_TO_RUB = (1.0, -1.0, -1.0)  # 180 degrees about x
RDF_TO_LUF = (-1.0, -1.0, 1.0)  # glTF: 180 degrees about z
# The frames an SPZ file can be written in (``--spz-frame``), first the default, as flips from RDF.
SPZ_FRAMES: dict[str, tuple[float, float, float]] = {"rdf": (1.0, 1.0, 1.0), "rub": RDF_TO_RUB}

# For SH coefficients 1..15 (degrees 1-3, gsplat / INRIA order): the axes whose coordinate
# appears an odd number of times in the basis polynomial (e.g. xy for Y_2,-2 = xy, "" for 3z^2-1).
_SH_ODD_AXES = ("y", "z", "x", "xy", "yz", "", "xz", "", "y", "xyz", "y", "z", "x", "z", "x")


def sh_signs(signs: tuple[float, float, float], num_rest: int) -> Tensor:
    """``[num_rest]`` factors (+-1) for the higher SH coefficients under the axis flip ``signs``."""
    if num_rest > len(_SH_ODD_AXES):
        raise ValueError(f"axis flips are defined up to SH degree 3, got {num_rest} higher coefficients")
    s = dict(zip("xyz", signs))
    return torch.tensor([torch.tensor([s[a] for a in axes]).prod().item() for axes in _SH_ODD_AXES[:num_rest]])


def flip_axes(params: Mapping[str, Tensor], signs: tuple[float, float, float]) -> dict[str, Tensor]:
    """float32 CPU params with every axis ``i`` multiplied by ``signs[i]`` (quats stay wxyz, unnormalised)."""
    p = {k: v.detach().float().cpu() for k, v in params.items()}
    sx, sy, sz = signs
    p["means"] = p["means"] * torch.tensor(signs)
    p["quats"] = p["quats"] * torch.tensor([1.0, sy * sz, sx * sz, sx * sy])
    p["shN"] = p["shN"] * sh_signs(signs, p["shN"].shape[1])[None, :, None]
    return p
