"""Where exported Gaussians come from: a checkpoint of an experiment folder, or a 3DGS PLY."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from ..errors import CheckpointError, DataError
from ..model.gaussian_model import PARAM_NAMES


def gaussians_from_checkpoint(path: str | Path) -> dict[str, Tensor]:
    """The raw Gaussian parameters (float32, CPU) a checkpoint's model holds, without building a
    trainer or reading the data set.

    Raises:
        CheckpointError: unreadable checkpoint, or its model has no Gaussian parameters.
    """
    from ..engine.checkpoint import load_checkpoint_file

    ckpt = load_checkpoint_file(path)
    state = ckpt.get("model") or {}
    missing = [name for name in PARAM_NAMES if f"params.{name}" not in state]
    if missing:
        model_type = (ckpt.get("config") or {}).get("model", {}).get("type", "?")
        raise CheckpointError(
            f"{path}: model {model_type} has no Gaussian parameter(s) {', '.join(missing)}; nothing to export"
        )
    return {name: state[f"params.{name}"].detach().float().cpu() for name in PARAM_NAMES}


def gaussians_from_ply(path: str | Path) -> dict[str, Tensor]:
    """The raw Gaussian parameters of a full-precision 3DGS PLY.

    Raises:
        DataError: missing file, or not a 3D Gaussian PLY (e.g. a mesh, a point cloud or a
            compressed PLY, which this reads only as the export's output).
    """
    from ..io.ply import load_ply

    path = Path(path)
    if not path.is_file():
        raise DataError(f"--ply: file not found: {path}")
    return load_ply(path)
