"""What makes an experiment folder hold a run, and what a run writes there.

``train.py`` refuses to start a new run in a folder that holds one unless asked (``--resume`` continues
it, ``--overwrite`` replaces it): a second run would otherwise replace the first one's PLY, metrics and
config, append to its ``log.jsonl`` and leave both runs' checkpoints side by side for ``--resume`` to
pick from. ``--overwrite`` removes only what a run writes (:data:`RUN_OUTPUTS`), never other files kept
there. The same convention holds for every command that writes an output (``export.py``,
``process.py``, ``render.py``, ``merge_blocks.py``, ``train_blocks.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

# Any of these means a run here got somewhere: it saved a checkpoint, tested or exported.
RUN_MARKERS = ("checkpoints/latest.txt", "checkpoints/*.pth", "metrics.json", "point_cloud.ply")
# What a run writes before its first checkpoint: left by a run that stopped in its set-up (a config error
# found late, a busy viewer port), removed when a new run starts so it never appends to them.
SETUP_FILES = ("config.yaml", "log.jsonl", "tensorboard", "end_phases.json")
DATA_MARKERS = ("sparse", "transforms.json", "transforms_train.json")
# Everything the built-in hooks and writers write into exp_dir (names, and glob patterns).
RUN_OUTPUTS = (
    "config.yaml",
    "checkpoints",
    "metrics.json",
    "log.jsonl",
    "tensorboard",
    "renders",
    "images",
    "report.html",
    "end_phases.json",
    "seed_points.npz",
    "orientation.json",
    "profile",
    "trajectory",
    "point_cloud*",
)


def earlier_run(exp_dir: Path) -> list[Path]:
    """The markers of a run already in ``exp_dir`` (empty for a new or empty folder)."""
    return [path for pattern in RUN_MARKERS for path in sorted(exp_dir.glob(pattern))]


def clear_run(exp_dir: Path, patterns: tuple[str, ...] = RUN_OUTPUTS) -> list[Path]:
    """Remove what a run wrote in ``exp_dir`` (``--overwrite``; ``patterns``: which of it); returns what was
    removed. A data set's folder is never cleared: ``images/`` there is the user's photos, not a writer's.

    Raises:
        ConfigError: ``exp_dir`` holds a data set (``sparse/``, ``transforms*.json``).
    """
    from ..errors import ConfigError

    if any((exp_dir / name).exists() for name in DATA_MARKERS):
        raise ConfigError(f"exp_dir: {exp_dir} holds a data set (sparse/ or transforms.json); write runs elsewhere")
    removed = []
    for pattern in patterns:
        for path in sorted(exp_dir.glob(pattern)):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            removed.append(path)
    return removed
