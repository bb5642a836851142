"""3D Gaussian PLY files in INRIA 3DGS's layout (what splat viewers read).

One ``vertex`` element, binary little-endian float32 properties in this order::

    x y z  nx ny nz  f_dc_0..2  f_rest_0..3(K-1)-1  opacity  scale_0..2  rot_0..3

``nx..nz`` are zeros (INRIA writes them; viewers expect them). ``f_rest`` is channel-major:
all red coefficients, then green, then blue (``shN [N,K-1,3]`` transposed to ``[N,3,K-1]``).
``opacity`` is the logit, ``scale_*`` the log scale, ``rot_*`` the quaternion w, x, y, z --
the model's raw parameters, so a round trip is exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from plyfile import PlyData, PlyElement
from torch import Tensor

from ..errors import DataError


def ply_property_names(num_rest: int) -> list[str]:
    """Property names in file order for ``num_rest`` = K - 1 higher SH coefficients per channel."""
    return (
        ["x", "y", "z", "nx", "ny", "nz"]
        + [f"f_dc_{i}" for i in range(3)]
        + [f"f_rest_{i}" for i in range(3 * num_rest)]
        + ["opacity"]
        + [f"scale_{i}" for i in range(3)]
        + [f"rot_{i}" for i in range(4)]
    )


def _as_params(params_or_model: Any) -> Mapping[str, Tensor]:
    return params_or_model.params if hasattr(params_or_model, "params") else params_or_model


def ply_data(params_or_model: Any) -> PlyData:
    """The Gaussians as a binary little-endian ``PlyData`` in the layout above (not yet written)."""
    p = {k: v.detach().float().cpu() for k, v in _as_params(params_or_model).items()}
    n = p["means"].shape[0]
    num_rest = p["shN"].shape[1]
    columns = torch.cat(
        [
            p["means"],
            torch.zeros(n, 3),
            p["sh0"].transpose(1, 2).reshape(n, 3),
            p["shN"].transpose(1, 2).reshape(n, 3 * num_rest),
            p["opacities"].reshape(n, 1),
            p["scales"],
            p["quats"],
        ],
        dim=1,
    ).numpy()
    names = ply_property_names(num_rest)
    data = np.empty(n, dtype=[(name, "<f4") for name in names])
    for i, name in enumerate(names):
        data[name] = columns[:, i]
    return PlyData([PlyElement.describe(data, "vertex")], text=False, byte_order="<")


def ply_file_size(num_gaussians: int, num_rest: int) -> int:
    """Bytes :func:`save_ply` writes for ``num_gaussians`` with ``num_rest`` = K - 1 (no file written)."""
    names = ply_property_names(num_rest)
    header = PlyData(
        [PlyElement.describe(np.empty(0, dtype=[(n, "<f4") for n in names]), "vertex")], byte_order="<"
    ).header
    # The header of an empty element says "element vertex 0"; the real count has more digits.
    return len(header) + 1 + len(str(num_gaussians)) - 1 + 4 * len(names) * num_gaussians


def save_ply(params_or_model: Any, path: str | Path) -> Path:
    """Write Gaussians to ``path`` atomically (temporary file in the same folder, then rename).

    Args:
        params_or_model: A ``GaussianModel`` or a mapping with ``means [N,3]``, ``scales [N,3]``,
            ``quats [N,4]``, ``opacities [N]``, ``sh0 [N,1,3]``, ``shN [N,K-1,3]`` (raw values).
        path: Output file.

    Returns:
        ``path`` as a Path.

    Raises:
        CheckpointWriteError: the folder or file cannot be written (an existing ``path`` is intact).
    """
    from .atomic import atomic_write

    path = Path(path)
    atomic_write(path, ply_data(params_or_model).write)
    return path


def load_ply(path: str | Path) -> dict[str, Tensor]:
    """Read a 3DGS PLY written by :func:`save_ply` (or INRIA 3DGS / gsplat) back into raw parameters.

    Returns:
        float32 CPU tensors ``means [N,3]``, ``scales [N,3]``, ``quats [N,4]``, ``opacities [N]``,
        ``sh0 [N,1,3]``, ``shN [N,K-1,3]``.

    Raises:
        DataError: not a readable PLY, no ``vertex`` element, missing properties, or an ``f_rest``
            count that is not 3 (K - 1) for a whole SH degree.
    """
    path = Path(path)
    try:
        vertex = PlyData.read(str(path))["vertex"]
    except KeyError:
        raise DataError(f"{path}: PLY has no 'vertex' element") from None
    except Exception as exc:  # plyfile raises assorted types for missing, truncated or non-PLY files
        raise DataError(f"{path}: cannot read as PLY ({type(exc).__name__}: {exc})") from None
    present = {prop.name for prop in vertex.properties}
    num_rest3 = sum(1 for name in present if name.startswith("f_rest_"))
    num_rest = num_rest3 // 3
    degree = math.isqrt(num_rest + 1) - 1
    if num_rest3 % 3 or (degree + 1) ** 2 != num_rest + 1:
        raise DataError(f"{path}: {num_rest3} f_rest properties is not 3*((d+1)^2-1) for any SH degree d")
    names = [name for name in ply_property_names(num_rest) if name not in ("nx", "ny", "nz")]
    missing = [name for name in names if name not in present]
    if missing:
        raise DataError(
            f"{path}: 3D Gaussian PLY lacks propert{'y' if len(missing) == 1 else 'ies'} {', '.join(missing[:6])}"
        )

    n = len(vertex.data)

    def cols(*keys: str) -> Tensor:
        if not keys:  # sh_degree 0 has no f_rest
            return torch.zeros(n, 0)
        return torch.from_numpy(np.stack([np.asarray(vertex[k], dtype=np.float32) for k in keys], axis=1))

    return {
        "means": cols("x", "y", "z"),
        "scales": cols("scale_0", "scale_1", "scale_2"),
        "quats": cols("rot_0", "rot_1", "rot_2", "rot_3"),
        "opacities": cols("opacity")[:, 0].contiguous(),
        "sh0": cols("f_dc_0", "f_dc_1", "f_dc_2").reshape(n, 3, 1).transpose(1, 2).contiguous(),
        "shN": cols(*[f"f_rest_{i}" for i in range(3 * num_rest)]).reshape(n, 3, num_rest).transpose(1, 2).contiguous(),
    }
