"""Checks run before training starts, so a run fails in seconds instead of after hours.

``check_output_dir`` (before anything is written), ``check_resume_file`` (before the dataset is
loaded) and ``check_free_space`` (once the model exists, so its size is known). Each raises a
one-line :class:`~pointrix_lite.errors.PointrixError`. docs/errors.md lists the messages.

Free-space estimate (documented in docs/errors.md): one checkpoint holds every model tensor three
times (the value and Adam's two moment buffers, same shapes), up to three float32 strategy
statistics per Gaussian and a little metadata: ``S = 3 * model_bytes + 12 * N + 64 KiB``. At the peak of a save the disk holds the
kept checkpoints plus the temporary file of the new one, so the run needs ``(K + 1) * S`` free,
K = checkpoints kept at once (``CheckPointHook.max_keep``, or the number of saves the run makes
when it keeps all; +1 for ``best.pth``). The size is taken at the start: densification grows a
model (typically 10-30x), so this is a lower bound. It catches a disk that is already too full;
a disk that fills later is handled by the atomic writes (the previous checkpoint survives).
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..engine.checkpoint import check_checkpoint_file
from ..errors import ConfigError, PointrixError
from ..io.atomic import DISK_FULL_ERRNOS

CHECKPOINT_OVERHEAD_BYTES = 64 * 1024  # config, RNG states (~10 KiB), hook states, zip headers
ADAM_COPIES = 3  # parameter + exp_avg + exp_avg_sq
STRATEGY_BYTES_PER_GAUSSIAN = 12  # DefaultStrategy: grad2d, count, radii (float32)


class DiskFullError(PointrixError):
    """Not enough free space for the checkpoints of a run, or the disk filled up while writing."""


def check_output_dir(exp_dir: str | Path) -> Path:
    """Create ``exp_dir`` if needed and prove a file can be written there.

    Raises:
        ConfigError: the folder cannot be created or written (permissions, read-only disk, a file
            in the way); names the folder and the OS reason.
    """
    exp_dir = Path(exp_dir)
    try:
        exp_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=exp_dir, prefix=".write_test"):
            pass
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(f"exp_dir: output folder {exp_dir} is on a full disk ({exc.strerror})") from None
        reason = exc.strerror or type(exc).__name__
        if exc.errno == errno.EEXIST or (exp_dir.exists() and not exp_dir.is_dir()):
            reason = "a file with that name exists"
        raise ConfigError(
            f"exp_dir: cannot write to output folder {exp_dir} ({reason}); set output_dir=... or exp_dir=..."
        ) from None
    return exp_dir


def check_resume_file(path: str | Path) -> Path:
    """A ``--resume`` file exists and is a complete zip archive (see ``check_checkpoint_file``)."""
    return check_checkpoint_file(path)


def estimate_checkpoint_bytes(model: torch.nn.Module) -> int:
    """Bytes of one checkpoint of ``model`` at its current size: ``3 * tensor bytes + 12 * N + 64 KiB``.

    ``N = model.num_gaussians`` (0 for a model without it).
    """
    tensor_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values() if isinstance(t, torch.Tensor))
    n = int(getattr(model, "num_gaussians", 0) or 0)
    return ADAM_COPIES * tensor_bytes + STRATEGY_BYTES_PER_GAUSSIAN * n + CHECKPOINT_OVERHEAD_BYTES


def checkpoints_on_disk_at_once(hooks: list[Any], max_steps: int) -> int:
    """How many checkpoint files exist at the peak of a save, the temporary one included."""
    kept = 1  # a run without CheckPointHook still saves on Ctrl-C
    for hook in hooks:
        if type(hook).__name__ != "CheckPointHook" or hook.config is None:
            continue
        cfg = hook.config
        periodic = max_steps // cfg.interval if cfg.interval > 0 else 0
        # The final save reuses the periodic file name when max_steps is a multiple of interval.
        saves = periodic + int(cfg.save_last and (periodic == 0 or max_steps % cfg.interval != 0))
        kept = max(1, saves if cfg.max_keep is None else min(cfg.max_keep, saves))
        kept += int(cfg.best_metric is not None)
    return kept + 1


def check_free_space(exp_dir: str | Path, model: torch.nn.Module, hooks: list[Any], max_steps: int) -> int:
    """Raise :class:`DiskFullError` if ``exp_dir``'s disk lacks room for the run's checkpoints.

    Returns:
        The number of bytes required (the estimate in this module's docstring).
    """
    one = estimate_checkpoint_bytes(model)
    need = checkpoints_on_disk_at_once(hooks, max_steps) * one
    free = shutil.disk_usage(exp_dir).free
    if free < need:
        raise DiskFullError(
            f"exp_dir: disk full: {exp_dir} has {_mib(free)} free, the checkpoints of this run need at least "
            f"{_mib(need)} ({_mib(one)} each); free space or set output_dir=... to another disk"
        )
    return need


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def os_error_message(exc: OSError) -> str | None:
    """One line for an OSError a user can fix (disk full, permissions, read-only disk), else None."""
    # A failed buffered write carries no file name; say what was being written instead.
    where = f"{exc.filename}: " if exc.filename is not None else ""
    if exc.errno in DISK_FULL_ERRNOS:
        return f"{where}disk full ({exc.strerror}) while writing outputs; files written before it are intact"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{where}{exc.strerror}" if where else f"{exc.strerror} while writing outputs"
    return None
