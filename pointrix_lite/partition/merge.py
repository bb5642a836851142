"""Join the blocks' trained Gaussians into one model of the whole scene.

Each block trained its cell plus a margin; in the margin its Gaussians are its neighbour's business
(the neighbour saw that ground from its own cell's views too, and a block's outer edge is where it
has the fewest views), so each block keeps the Gaussians whose centres lie in its own cell. The
cells tile the plane (``cells.py``), so every Gaussian of the merged model comes from exactly one
block and none is doubled, wherever densification moved it. The blocks trained in COLMAP's world
frame (``dataset.orientation=none``; ``ColmapDataset`` does not re-centre or rescale), so the kept
Gaussians are concatenated as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DataError
from ..io.atomic import atomic_write_text as write_text
from .cells import Rect
from .manifest import Block, Manifest, block_digest
from .runner import PLY_NAME
from .status import read_status, stale_reason


@dataclass
class Kept:
    block: str
    total: int
    kept: int


def block_ply(runs: Path, block: Block, manifest: Manifest) -> Path:
    """The block's trained PLY; DataError naming the block when it did not finish."""
    ply = runs / block.name / PLY_NAME
    status = read_status(runs, block.name)
    if status is not None and status.state != "done":
        why = status.message or status.state
        raise DataError(
            f"{block.name}: training {status.state} ({why}; log {status.log}); rerun it with "
            f"scripts/train_blocks.py --manifest {manifest.path} --config X --only {block.name} --resume"
        )
    if not ply.is_file():
        raise DataError(f"{ply}: {block.name} has no trained model (train it with scripts/train_blocks.py)")
    stale = stale_reason(status, block_digest(manifest, block), runs / block.name, block.name, manifest.path)
    if stale is not None:  # a finished run, of the partition before a re-partition
        raise DataError(stale)
    return ply


def keep_in(params: dict[str, torch.Tensor], rect: Rect, rotation: np.ndarray) -> dict[str, torch.Tensor]:
    """The rows of ``params`` whose centre lies in the ground rectangle ``rect`` (a cell or a margin region)."""
    xy = params["means"].double().numpy() @ rotation[:2].T
    mask = torch.from_numpy(rect.contains(xy))
    return {k: v[mask] for k, v in params.items()}


def keep_in_cell(params: dict[str, torch.Tensor], block: Block, rotation: np.ndarray) -> dict[str, torch.Tensor]:
    """The rows of ``params`` whose centre lies in ``block``'s cell."""
    return keep_in(params, block.cell, rotation)


def merge_blocks(manifest: Manifest, runs: Path, out: Path, say=print) -> tuple[Path, list[Kept]]:
    """Write ``out/point_cloud.ply`` (+ ``config.yaml``, ``merge.json``); returns the PLY and per-block counts."""
    from ..io.ply import load_ply, save_ply

    rotation = manifest.ground_rotation()
    parts, counts, degree_of = [], [], {}
    for block in manifest.blocks:
        params = load_ply(block_ply(runs, block, manifest))
        degree_of[block.name] = params["shN"].shape[1]
        kept = keep_in_cell(params, block, rotation)
        counts.append(Kept(block.name, len(params["means"]), len(kept["means"])))
        say(f"  {block.name}: kept {counts[-1].kept:,} of {counts[-1].total:,} Gaussians (the rest lie in its margin)")
        parts.append(kept)
    if len(set(degree_of.values())) > 1:
        raise DataError(
            f"blocks were trained with different SH degrees ({degree_of}: f_rest per channel); "
            "train every block with the same config"
        )
    merged = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    ply = save_ply(merged, out / PLY_NAME)
    write_text(out / "config.yaml", merged_config(manifest, runs))
    write_text(
        out / "merge.json",
        json.dumps(
            {
                "manifest": str(manifest.path),
                "runs": str(runs),
                "gaussians": len(merged["means"]),
                "blocks": [c.__dict__ for c in counts],
            },
            indent=1,
        )
        + "\n",
    )
    return ply, counts


def merged_config(manifest: Manifest, runs: Path) -> str:
    """A block's resolved config turned to the whole scene: what ``render.py --ply`` reads beside the
    PLY (``dataset.scale``: the size the blocks trained at) and a record of how they were trained."""
    import yaml

    source = runs / manifest.blocks[0].name / "config.yaml"
    try:
        cfg: dict[str, Any] = yaml.safe_load(source.read_text()) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    dataset = dict(cfg.get("dataset") or {"type": "ColmapDataset"})
    dataset.update(data_path=manifest.scene, eval=manifest.test_every > 0, test_every=max(manifest.test_every, 1))
    cfg.update(name="merged", dataset=dataset)
    cfg.pop("exp_dir", None)
    return yaml.safe_dump(cfg, sort_keys=False)
