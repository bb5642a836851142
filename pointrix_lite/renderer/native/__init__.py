"""Native CPU rasterizer: a C++17/OpenMP torch extension with hand-written backward passes.

Compiled on first use (see ``_build.py``); ``is_available()`` triggers that build and never
raises, ``unavailable_reason()`` explains a False. Design and figures: docs/native.md.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._build import build_pending, isa_level, load_extension
from ._build import unavailable_reason as _reason
from .api import rasterization_native, rasterize_native

__all__ = ["rasterization_native", "rasterize_native", "is_available", "unavailable_reason", "prepare", "isa_level", "isa_line",
           "BUILD_MESSAGE"]  # fmt: skip

BUILD_MESSAGE = "building the native CPU rasterizer (first run only) ..."


def is_available() -> bool:
    """True when the extension is built (building it now if needed, ~1 min the first time)."""
    return load_extension() is not None


def unavailable_reason() -> Optional[str]:
    """Why ``is_available()`` is False (compiler error summary), else None."""
    return _reason()


def isa_line() -> str:
    """The run header's line: ``native rasterizer: x86-64-v3 (AVX2+FMA)``, or why it is unavailable."""
    if not is_available():
        return f"native rasterizer: unavailable ({unavailable_reason()})"
    return f"native rasterizer: {isa_level()}"


def prepare(announce: Optional[Callable[[str], object]] = print) -> bool:
    """Build or load the extension now (before training, so the build is not timed as a step).

    ``announce(BUILD_MESSAGE)`` is called first only when this will actually compile, not when
    it loads a cached build; then ``announce(isa_line())`` on every call. Returns ``is_available()``.
    """
    if announce is not None and build_pending():
        announce(BUILD_MESSAGE)
    ok = is_available()
    if announce is not None:
        announce(isa_line())
    return ok
