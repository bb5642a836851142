"""Native CPU rasterizer: a C++17/OpenMP torch extension with hand-written backward passes.

Loaded prebuilt from an installed wheel (``prebuilt.py``), else compiled on first use (see
``_build.py``); ``is_available()`` triggers that build and never
raises, ``unavailable_reason()`` explains a False. Design and figures: docs/native.md.
"""

from __future__ import annotations

from collections.abc import Callable

from ._build import build_pending, is_prebuilt, isa_level, load_extension, wheel_note
from ._build import unavailable_reason as _reason
from .api import STAGES, rasterization_native

__all__ = [
    "STAGES",
    "rasterization_native",
    "is_available",
    "unavailable_reason",
    "prepare",
    "isa_level",
    "isa_line",
    "BUILD_MESSAGE",
    "FALLBACK_LINE",
    "check_usable",
]

BUILD_MESSAGE = "building the native CPU rasterizer (first run only) ..."
COMPILER_FIX = "install a C++ compiler (Debian/Ubuntu: apt-get install g++; Fedora: dnf install gcc-c++; macOS: xcode-select --install)"
# What a run on `renderer.backend: auto` prints when it trains without the extension (the pure-torch
# rasterizer measured 30-80x slower per step on 2 cores, issue 47).
FALLBACK_LINE = (
    "training on the pure-torch rasterizer instead, 30-80x slower: " + COMPILER_FIX + ", or set "
    "renderer.backend: torch to choose it"
)


def is_available() -> bool:
    """True when the extension is built (building it now if needed, ~1 min the first time)."""
    return load_extension() is not None


def unavailable_reason() -> str | None:
    """Why ``is_available()`` is False (compiler error summary), else None."""
    return _reason()


def isa_line() -> str:
    """The run header's line: ``native rasterizer: x86-64-v3 (AVX2+FMA)``, or why it is unavailable."""
    if not is_available():
        return f"native rasterizer: unavailable ({unavailable_reason()})"
    return f"native rasterizer: {isa_level()}" + (", prebuilt" if is_prebuilt() else "")


def check_usable(backend: str) -> None:
    """After a failed build: refuse when the user asked for the extension -- ``renderer.backend:
    native``, or a target in ``POINTRIX_NATIVE_ARCH`` (then even under ``auto``: a rejected or
    unrunnable target is a mistake to fix, not a reason to train 30-80x slower).

    Raises:
        ConfigError: one line naming the variable or the key, and why.
    """
    import os

    from ...errors import ConfigError
    from ._build import ARCH_ENV

    if is_available():
        return
    if os.environ.get(ARCH_ENV, "").strip() not in ("", "native"):
        raise ConfigError(unavailable_reason() or f"{ARCH_ENV}: the native rasterizer did not build")
    if backend == "native":
        raise ConfigError(
            f"renderer.backend: native, but the native rasterizer is unavailable ({unavailable_reason()}); "
            f"{COMPILER_FIX}, or use renderer.backend: auto"
        )


def prepare(announce: Callable[[str], object] | None = print) -> bool:
    """Build or load the extension now (before training, so the build is not timed as a step).

    ``announce(BUILD_MESSAGE)`` is called first only when this will actually compile, not when
    it loads a cached build; then ``announce(isa_line())`` on every call. Returns ``is_available()``.
    """
    if announce is not None and build_pending():
        announce(BUILD_MESSAGE)
        if wheel_note() is not None:  # a wheel was installed, yet this compiles: say why
            announce(f"  ({wheel_note()})")
    ok = is_available()
    if announce is not None:
        announce(isa_line())
    return ok
