"""Checkpoint files: atomic writes (``io/atomic.py``), safe loads, RNG state capture.

A checkpoint is one ``torch.save`` dict holding only tensors and plain Python data, so it loads
with ``weights_only=True`` (no arbitrary unpickling of a file someone sent you). Writes go to a
temporary file in the same directory, are fsynced and then ``os.replace``d over the target: a
crash or a full disk mid-write leaves the previous checkpoint intact, never a truncated one.

Layout under ``<exp_dir>/checkpoints/``: ``step_000500.pth`` files and ``latest.txt`` holding the
file name of the newest one (a text pointer rather than a ``latest.pth`` copy: no doubled disk
use, and it is updated atomically like the checkpoints).
"""

from __future__ import annotations

import contextlib
import pickle
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import CheckpointError
from ..io.atomic import atomic_write, atomic_write_text

CHECKPOINT_DIR = "checkpoints"
LATEST_POINTER = "latest.txt"
FORMAT_VERSION = 1


def checkpoint_name(step: int) -> str:
    return f"step_{step:06d}.pth"


def save_checkpoint_file(checkpoint: dict[str, Any], path: str | Path) -> Path:
    """Atomically write ``checkpoint`` to ``path``."""
    path = Path(path)
    atomic_write(path, lambda f: torch.save(checkpoint, f))
    return path


def write_latest_pointer(ckpt_dir: str | Path, filename: str) -> None:
    atomic_write_text(Path(ckpt_dir) / LATEST_POINTER, filename + "\n")


def find_latest(exp_dir: str | Path) -> Path | None:
    """The checkpoint ``latest.txt`` points at, or the highest ``step_*.pth`` if the pointer is gone."""
    ckpt_dir = Path(exp_dir) / CHECKPOINT_DIR
    pointer = ckpt_dir / LATEST_POINTER
    if pointer.is_file():
        target = ckpt_dir / pointer.read_text().strip()
        if target.is_file():
            return target
    candidates = sorted(ckpt_dir.glob("step_*.pth"))
    return candidates[-1] if candidates else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def check_checkpoint_file(path: str | Path) -> Path:
    """Cheap up-front check (before a dataset is loaded): the file exists and ends like a zip archive.

    ``torch.save`` writes a zip whose directory is at the very end, so a file cut off by a crash or
    a partial copy fails here after reading a few kilobytes, not after minutes of loading data.

    Raises:
        CheckpointError: missing, or truncated / not a torch zip checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path}: unreadable checkpoint (truncated or corrupt?): not a complete torch zip archive"
        )
    return path


def load_checkpoint_file(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint_file`.

    Raises:
        CheckpointError: missing, truncated/corrupt, or not a pointrix_lite checkpoint.
    """
    path = check_checkpoint_file(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only load failed" in str(exc).lower():
            # The file names Python callables (e.g. a __reduce__ payload); torch refused to import them.
            raise CheckpointError(
                f"{path}: refused to load: the file contains Python objects, not only tensors and plain data "
                "(weights_only=True); it is not a pointrix_lite checkpoint and may run code if unpickled"
            ) from None
        raise CheckpointError(f"{path}: unreadable checkpoint (truncated or corrupt?): {_first_line(exc)}") from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
        # torch reports a cut-off zip as RuntimeError or OSError(EINVAL) depending on where it ends.
        raise CheckpointError(f"{path}: unreadable checkpoint (truncated or corrupt?): {_first_line(exc)}") from None
    if not isinstance(ckpt, dict) or "format" not in ckpt or "step" not in ckpt:
        raise CheckpointError(f"{path}: not a pointrix_lite checkpoint (no 'format'/'step' keys)")
    if ckpt["format"] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {ckpt['format']} is not supported (expected {FORMAT_VERSION})"
        )
    return ckpt


def rng_state() -> dict[str, Any]:
    """RNG states of torch, numpy and ``random`` as weights_only-safe data (tensors, lists, numbers)."""
    np_state = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),  # uint32 values fit in int64
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": {"version": py_version, "internal": list(py_internal), "gauss_next": py_gauss},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    torch.set_rng_state(state["torch"].cpu())
    npst = state["numpy"]
    np.random.set_state(
        (
            npst["kind"],
            npst["keys"].cpu().numpy().astype(np.uint32),
            npst["pos"],
            npst["has_gauss"],
            npst["cached_gaussian"],
        )
    )
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def check_model_type(ckpt: dict[str, Any], model_type: str | None, path: Path) -> None:
    """Raise :class:`CheckpointError` when ``ckpt`` was saved by another ``model.type`` than the config's."""
    saved_type = (ckpt.get("config") or {}).get("model", {}).get("type")
    if saved_type is not None and saved_type != model_type:
        raise CheckpointError(
            f"{path}: checkpoint is from model type {saved_type!r}, this config has model.type {model_type!r}"
        )


@contextlib.contextmanager
def mismatch_is_checkpoint_error(path: Path) -> Iterator[None]:
    """Report a state dict that does not fit the built model/optimizer as one CheckpointError line."""
    try:
        yield
    except (CheckpointError, RuntimeError, KeyError, ValueError) as exc:  # CheckpointError: the model's own check
        detail = " ".join(str(exc).split())[:300]  # torch's message spans lines; keep its gist
        raise CheckpointError(f"{path}: checkpoint does not match this config's model/optimizer: {detail}") from None
