"""When may a test skip the native backend? Only when it cannot exist on this machine.

A skipped equivalence test on a machine that has a C++ compiler would let a broken build pass CI
unnoticed, so there a build failure fails the test. Skipping stays possible where the fallback is
the documented behaviour: no compiler, or the user disabled the backend (POINTRIX_NATIVE_DISABLE).
"""

from __future__ import annotations

import os
import shutil

import pytest

from pointrix_lite.renderer import native


def require_native(allow_module_level: bool = False) -> None:
    if native.is_available():
        return
    reason = native.unavailable_reason() or "unknown reason"
    compiler = os.environ.get("CXX", "c++")
    if os.environ.get("POINTRIX_NATIVE_DISABLE", "") not in ("", "0") or shutil.which(compiler) is None:
        pytest.skip(f"native rasterizer unavailable: {reason}", allow_module_level=allow_module_level)
    pytest.fail(f"native rasterizer failed to build although {compiler} exists: {reason}", pytrace=False)
