"""Native CPU rasterizer: a C++17/OpenMP torch extension with hand-written backward passes.

Compiled on first use (see ``_build.py``); ``is_available()`` triggers that build and never
raises, ``unavailable_reason()`` explains a False. Design and figures: docs/native.md.
"""

from __future__ import annotations

from typing import Optional

from ._build import load_extension
from ._build import unavailable_reason as _reason
from .api import rasterization_native

__all__ = ["rasterization_native", "is_available", "unavailable_reason"]


def is_available() -> bool:
    """True when the extension is built (building it now if needed, ~1 min the first time)."""
    return load_extension() is not None


def unavailable_reason() -> Optional[str]:
    """Why ``is_available()`` is False (compiler error summary), else None."""
    return _reason()
