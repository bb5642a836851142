"""The tiny block config the partition's end-to-end tests train with (20 steps on the test street)."""

from __future__ import annotations

from pathlib import Path

import yaml


def block_config(path: Path, *hooks: dict, max_points: int = 800) -> Path:
    """Write the config to ``path``: PlyExportHook and ``hooks``, a checkpoint every 10 steps."""
    cfg = {
        "name": "block",
        "seed": 0,
        "device": "cpu",
        "trainer": {"max_steps": 20},
        "dataset": {"type": "ColmapDataset", "data_path": "set-by-train_blocks", "max_points": max_points},
        "model": {"type": "GaussianModel", "sh_degree": 1, "sh_degree_interval": 10},
        "renderer": {"type": "GaussianRenderer", "backend": "auto"},
        "strategy": {"type": "DefaultStrategy", "refine_start_iter": 5, "refine_every": 5},
        "hooks": [{"type": "PlyExportHook"}, *hooks],
        "writers": [{"type": "JsonlWriter"}],
        "save_ckpt_after_iter": 10,
        "log_show_after_iter": 10,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path
