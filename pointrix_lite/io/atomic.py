"""Writing a file so that a crash or a full disk never leaves a truncated one: :func:`atomic_write`.

Checkpoints (``engine/checkpoint.py``), every export (``export/``), PNGs (``images.py``) and PLY
files (``ply.py``) write through it; it lives below all of them so that none reaches into another for it.
"""

from __future__ import annotations

import errno
import glob
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CheckpointError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class CheckpointWriteError(CheckpointError, OSError):
    """Writing a checkpoint failed (disk full, read-only or vanished folder); the previous files are intact.

    Also an ``OSError`` (with the original ``errno``) so code that handles I/O failures still sees one.
    """


def describe_write_error(path: Path, exc: OSError) -> str:
    """One line for a failed write of ``path``: "disk full" for ENOSPC/EDQUOT, else the OS reason."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in DISK_FULL_ERRNOS:
        return f"{path}: disk full ({reason}) while writing; files written before it are intact"
    return f"{path}: cannot write ({reason})"


def _read_umask() -> int:
    mask = os.umask(0)  # the only portable way to read it; set straight back
    os.umask(mask)
    return mask


# Read once at import: setting the umask, even briefly, would race with other threads creating files.
_UMASK = _read_umask()


def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb", durable: bool = True) -> None:
    """Write via a temp file in the same folder, flush + fsync, then ``os.replace`` over ``path``.

    ``durable=False`` skips the two fsyncs: the file is still never seen half written (a Ctrl-C
    or a crash of the process), but a power loss may lose it. For many small outputs (test renders)
    where an fsync each would cost more than the write.

    Every file the project writes with a temp-file-and-rename goes through here (checkpoints,
    PLY and other exports), so all get the same permissions as a plain ``open()`` would give.

    Raises:
        CheckpointWriteError: the folder or file could not be written (disk full, permissions); the
            temp file is removed and an existing ``path`` is untouched.
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp creates 0600; give the file the permissions a plain open() would (shared clusters).
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        # BaseException: a Ctrl-C during the write must not leave the temp file behind either.
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, CheckpointError):
            err = CheckpointWriteError(describe_write_error(path, exc))
            err.errno = exc.errno
            raise err from exc
        raise
    # Temp files of earlier writes of this same file were left by a killed process (SIGKILL skips
    # the cleanup above); one writer per file, so any other one is stale now.
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)
    if not durable:
        return
    try:  # make the rename itself durable; not possible on every platform/filesystem
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of ``text`` (UTF-8): the small JSON/YAML/pointer files a run rewrites."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
