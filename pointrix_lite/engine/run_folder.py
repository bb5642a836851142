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

# Any of these means a run started here (config.yaml is written before the data set loads).
RUN_MARKERS = ("config.yaml", "checkpoints", "metrics.json", "log.jsonl")
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
    return [exp_dir / name for name in RUN_MARKERS if (exp_dir / name).exists()]


def clear_run(exp_dir: Path) -> list[Path]:
    """Remove what a run wrote in ``exp_dir`` (``--overwrite``); returns what was removed."""
    removed = []
    for pattern in RUN_OUTPUTS:
        for path in sorted(exp_dir.glob(pattern)):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            removed.append(path)
    return removed
