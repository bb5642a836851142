"""Build variants of the native extension that this machine can compile and run.

The native equivalence tests run once per variant (``native_variant``, autouse where imported):
the default ``-march=native`` build, the portable ``scalar`` build, and on x86-64 the ``x86-64-v2``
(SSE4.2) and ``x86-64-v3`` (AVX2+FMA) builds when the CPU executes them and they are below the
native build's level (an AVX-512 CPU tests all four; an AVX2 one native, scalar and x86-64-v2). Each variant is its own
cached module (``POINTRIX_NATIVE_ARCH``), built once per source version, so CI compiles each once.
``POINTRIX_TEST_NATIVE_VARIANTS=native,scalar`` restricts the list (a one-line error for an unknown name).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator

import pytest

from pointrix_lite.renderer.native import _build
from pointrix_lite.renderer.native.cpu_check import cpu_flags

ENV = "POINTRIX_TEST_NATIVE_VARIANTS"
# -march level -> CPU flags (/proc/cpuinfo) it needs
_X86_LEVELS = {
    "x86-64-v2": {"sse4_2", "popcnt", "ssse3"},
    "x86-64-v3": {"avx2", "fma", "bmi2", "f16c", "movbe"},
}


def runnable_variants() -> list[str]:
    """``native`` first, then the explicit targets this CPU can execute below the native build's level.

    The level ``-march=native`` reaches is not built again (on an AVX2 CPU the native build *is* the
    x86-64-v3 code: the same ``simd.h`` branches; only instruction scheduling differs), which saves
    CI a compile and a pass of every native test.
    """
    out = ["native", "scalar"]
    if platform.machine() in ("x86_64", "AMD64"):
        flags = cpu_flags()
        levels = [level for level, need in _X86_LEVELS.items() if need <= flags]
        runnable = out + levels
        out += levels if "avx512f" in flags else levels[:-1]  # the highest runnable level is native's own
    else:
        runnable = list(out)
    wanted = os.environ.get(ENV, "").strip()
    if wanted:
        names = [w.strip() for w in wanted.split(",") if w.strip()]
        unknown = [n for n in names if n not in runnable]
        if unknown:
            raise pytest.UsageError(f"{ENV}: {', '.join(unknown)} cannot run here (runnable: {', '.join(runnable)})")
        out = names
    return out


def load(variant: str):
    """The module of ``variant`` (``native``: the default build); fails the test if it does not build."""
    if variant == "native":
        module = _build.default_module()
        reason = _build.unavailable_reason()
    else:
        module = _build.load_variant(variant)
        reason = module if isinstance(module, str) else None
    if module is None or isinstance(module, str):
        pytest.fail(f"native variant {variant} failed to build: {reason}", pytrace=False)
    return module


@pytest.fixture(autouse=True, params=runnable_variants())
def native_variant(request) -> Iterator[str]:
    """Runs the test with ``load_extension()`` returning the module of one build variant."""
    module = load(request.param)
    previous = _build.use_module(module)
    try:
        yield request.param
    finally:
        _build.use_module(previous)
