"""The ffmpeg binding that video reading (``process.py --video``) and writing (``render.py --video mp4``) share.

``imageio-ffmpeg`` is a dependency, but an install without it (a hand-made environment, packages
carried onto a GPU machine) otherwise fails deep inside imageio, which falls back to a TIFF writer
and reports an ``fps`` keyword error. Asked for up front, before any frame is rendered or read.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import ConfigError


def import_ffmpeg(option: str) -> ModuleType:
    """``imageio_ffmpeg``, or a one-line :class:`ConfigError` naming ``option`` (the flag that needs it)."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise ConfigError(f"{option} needs the imageio-ffmpeg package: pip install imageio-ffmpeg") from None
    return imageio_ffmpeg
