"""Folders a data set derives from its inputs once and reads on later runs (the undistorted copy of a
distorted COLMAP scene, the COLMAP scene of a nerfstudio ``transforms.json``).

Each is written into a temporary folder beside it and renamed into place at the end, with ``source.json``
holding a digest of what it was made from: a run whose inputs match reads it as it is, one whose inputs
changed makes it again, and an interrupted build never leaves a half-written folder that looks complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import DataError

SOURCE = "source.json"


def derived_folder(
    root: Path, name: str, digest: str, build: Callable[[Path], None], what: str, hint: str = "make it writable"
) -> Path:
    """``root/name`` as ``build(folder)`` writes it, made again only when ``digest`` (of the inputs) changed.

    Raises:
        DataError: ``root`` cannot be written (``what`` says what was to be written there, ``hint`` the fix),
            or whatever ``build`` raises (the old folder then stays as it was).
    """
    out = root / name
    try:
        if json.loads((out / SOURCE).read_text()).get("digest") == digest:
            return out
    except (OSError, ValueError):
        pass
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=root))
    except OSError as exc:
        raise DataError(f"{root}: cannot write {what} there ({exc.strerror}); {hint}") from None
    try:
        build(tmp)
        (tmp / SOURCE).write_text(json.dumps({"digest": digest}))
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
