"""The one place pycolmap is imported.

pycolmap's wheel carries its own zlib: importing it before Pillow's PNG encoder has loaded the
system zlib makes a later PNG write (ours, imageio's) abort the process with
``free(): invalid pointer`` (measured with pycolmap 4.2.1). Loading zlib and Pillow's PNG plugin
first avoids it, so every pycolmap user goes through :func:`import_pycolmap`.
"""

from __future__ import annotations

from types import ModuleType


def import_pycolmap() -> ModuleType:
    """Import pycolmap after zlib and Pillow's PNG codec (see module docstring)."""
    import zlib  # noqa: F401

    import PIL.Image  # noqa: F401
    import PIL.PngImagePlugin  # noqa: F401
    import pycolmap

    return pycolmap
