"""Native CPU rasterizer: a C++17/OpenMP torch extension with hand-written backward passes.

Compiled on first use (see ``_build.py``); ``is_available()`` triggers that build and never
raises, ``unavailable_reason()`` explains a False. Design and figures: docs/native.md.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._build import build_pending, load_extension
from ._build import unavailable_reason as _reason
from .api import rasterization_native

__all__ = ["rasterization_native", "is_available", "unavailable_reason", "prepare", "BUILD_MESSAGE"]

BUILD_MESSAGE = "building the native CPU rasterizer (first run only) ..."


def is_available() -> bool:
    """True when the extension is built (building it now if needed, ~1 min the first time)."""
    return load_extension() is not None


def unavailable_reason() -> Optional[str]:
    """Why ``is_available()`` is False (compiler error summary), else None."""
    return _reason()


def prepare(announce: Optional[Callable[[str], object]] = print) -> bool:
    """Build or load the extension now (before training, so the build is not timed as a step).

    ``announce(BUILD_MESSAGE)`` is called first only when this will actually compile, not when
    it loads a cached build. Returns ``is_available()``.
    """
    if announce is not None and build_pending():
        announce(BUILD_MESSAGE)
    return is_available()
