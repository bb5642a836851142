"""What makes an experiment folder hold a run, and what a run writes there.

``train.py`` refuses to start a new run in a folder that holds one unless asked (``--resume`` continues
it, ``--overwrite`` replaces it): a second run would otherwise replace the first one's PLY, metrics and
config, append to its ``log.jsonl`` and leave both runs' checkpoints side by side for ``--resume`` to
pick from. ``--overwrite`` removes only what a run writes (:data:`RUN_OUTPUTS`, and the files its writers and
hooks are configured to write: :func:`run_outputs`), never other files kept there. The same convention holds
for every command that writes an output (``export.py``, ``process.py``, ``render.py``, ``merge_blocks.py``,
``train_blocks.py``).
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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


# Options naming where a built-in writer or hook writes inside exp_dir: a run that names its own log file, image
# or TensorBoard folder leaves its files there, not under the default names above.
OUTPUT_OPTIONS = {
    "JsonlWriter": ("filename", "image_dir"),
    "TensorboardWriter": ("subdir",),
    "ProfilerHook": ("out_dir",),
}
# Of those, what a new run appends to (the JSON log, TensorBoard's event files): cleared with SETUP_FILES too.
APPENDED_OPTIONS = ("filename", "subdir")


def configured_outputs(
    exp_dir: Path, components: Iterable[Mapping[str, Any]], options: Iterable[str] | None = None
) -> tuple[str, ...]:
    """The glob patterns (relative to ``exp_dir``) of the files and folders that ``components`` (the config's
    writers and hooks) are set to write, by :data:`OUTPUT_OPTIONS` (only ``options`` of them when given).

    A path that leaves ``exp_dir`` (``../shared.jsonl``) or is ``exp_dir`` itself is left out: clearing a run
    never reaches beyond its own folder.
    """
    root = exp_dir.resolve()
    patterns = []
    for component in components:
        for option in OUTPUT_OPTIONS.get(str(component.get("type")), ()):
            value = component.get(option)
            if (options is not None and option not in options) or not isinstance(value, str) or not value:
                continue
            target = Path(os.path.normpath(root / value))  # `..` folded, a symlink itself left as it is
            if target != root and target.is_relative_to(root):
                patterns.append(glob.escape(target.relative_to(root).as_posix()))
    return tuple(patterns)


def run_outputs(exp_dir: Path, cfg: Any) -> tuple[str, ...]:
    """What ``--overwrite`` removes for the run ``cfg`` (an ``ExperimentConfig``): :data:`RUN_OUTPUTS` and the
    writers' and hooks' own names for theirs."""
    return RUN_OUTPUTS + configured_outputs(exp_dir, [*cfg.writers, *cfg.hooks])


def setup_files(exp_dir: Path, cfg: Any) -> tuple[str, ...]:
    """What a new run ``cfg`` clears from a folder holding no run: :data:`SETUP_FILES` and the log and
    TensorBoard folder under the names its writers use, so it never appends to a stopped run's."""
    return SETUP_FILES + configured_outputs(exp_dir, [*cfg.writers, *cfg.hooks], APPENDED_OPTIONS)


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
