"""Context Gaussians: a frozen set rendered with the model's own, never optimised, densified or exported.

Partitioned training (``partition/context.py``) gives each block the coarse model's Gaussians of the rest of
the scene: a training view that looks across the block's border then finds its neighbours' content already
drawn, instead of painting it with the block's own Gaussians (floaters in front of the border that the merge
would keep). ``model.context`` names their PLY; the model holds them activated, as buffers outside its
state dict (a resumed run reads the file again, and checkpoints stay the size of the block's own model).
"""

from __future__ import annotations

import math
from pathlib import Path

from torch import Tensor

from ..config import OptionError

CONTEXT_KEYS = ("means", "quats", "scales", "opacities", "colors")


def _read(path: str | Path, sh_degree: int, key: str) -> dict[str, Tensor]:
    """The raw parameters of the 3DGS PLY ``path``; OptionError (``model.<key>``) when missing, unreadable or of
    another SH degree than ``sh_degree``."""
    from ..errors import DataError
    from ..io.ply import load_ply

    path = Path(path)
    if not path.is_file():
        raise OptionError(key, f"file not found: {path}", "model")
    try:
        raw = load_ply(path)
    except DataError as exc:
        raise OptionError(key, str(exc), "model") from None
    degree = math.isqrt(raw["shN"].shape[1] + 1) - 1
    if degree != sh_degree:  # the rasterizer takes one K for all Gaussians
        raise OptionError(
            key, f"{path} holds SH degree {degree}, the model has sh_degree {sh_degree}: train both alike", "model"
        )
    return raw


def load_start(path: str | Path, sh_degree: int) -> dict[str, Tensor]:
    """``model.init_ply``: the raw parameters a model starts from (``GaussianModel.params``' layout)."""
    return _read(path, sh_degree, "init_ply")


def load_context(path: str | Path, sh_degree: int) -> dict[str, Tensor]:
    """The Gaussians of the 3DGS PLY ``path``, activated as ``GaussianModel.render_params`` returns them.

    Returns:
        float32 ``means [M,3]``, ``quats [M,4]``, ``scales [M,3]`` (exp), ``opacities [M]`` (sigmoid),
        ``colors [M,K,3]`` (SH coefficients, K = (sh_degree + 1)^2).

    Raises:
        OptionError (``model.context``): the file is missing or unreadable, or its SH degree is not ``sh_degree``.
    """
    from .gaussian_model import activated

    return activated(_read(path, sh_degree, "context"))
