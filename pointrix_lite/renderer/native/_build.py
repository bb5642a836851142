"""Just-in-time build of the C++ extension with ``torch.utils.cpp_extension.load``.

Built once per source version and CPU kind into torch's extensions cache
(``TORCH_EXTENSIONS_DIR`` or ``~/.cache/torch_extensions``), then only imported.
Every failure is caught: ``is_available()`` turns False and ``unavailable_reason()``
says why, so callers can fall back to the pure-torch backend.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import threading
from pathlib import Path
from types import ModuleType
from typing import Optional

_SOURCES = (
    "bindings.cpp", "pool.cpp", "projection.cpp", "sh.cpp", "binning.cpp", "rasterize_fwd.cpp", "rasterize_bwd.cpp",
    "ssim.cpp",
)
_HEADERS = ("common.h", "kernels.h", "lanes.h", "pool.h", "simd.h", "tile.h")
# -ffp-contract=off: the scalar paths must not be fused differently in the
# forward and the backward (the backward replays the forward's threshold tests);
# the SIMD path fuses explicitly. -march=native is safe because the build happens
# on the machine that runs it (the CPU kind is part of the module name, so a
# shared cache never serves another CPU's binary). Threads come from pool.cpp
# (std::thread), so no OpenMP is needed.
_BASE_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-pthread"]
_ATTEMPTS = (
    (["-march=native"], ["-pthread"]),
    ([], ["-pthread"]),
    (["-DPLR_SCALAR"], ["-pthread"]),  # no vector extensions: slower but portable
)

_lock = threading.Lock()
_module: Optional[ModuleType] = None
_error: Optional[str] = None
_tried = False


def _cpu_tag() -> str:
    """Short hash of the CPU model and feature flags (what -march=native depends on)."""
    text = platform.machine() + platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags", "Features")):
                text += line
                if line.startswith(("flags", "Features")):
                    break
    except OSError:
        pass
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _source_tag(src_dir: Path) -> str:
    h = hashlib.sha1()
    for name in _SOURCES + _HEADERS:
        h.update((src_dir / name).read_bytes())
    return h.hexdigest()[:8]


def _short(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:500]


def _disabled() -> bool:
    return os.environ.get("POINTRIX_NATIVE_DISABLE", "") not in ("", "0")


def _module_name(src_dir: Path, level: int) -> str:
    return f"pointrix_lite_native_{_source_tag(src_dir)}_{_cpu_tag()}_{level}"


def _cpp_extension() -> ModuleType:
    # Importing cpp_extension on a CPU-only machine with a CUDA toolkit folder logs a
    # "No CUDA runtime is found" warning to stderr on every run; it is irrelevant to a
    # CPU-only build and would break the one-line error output of the CLI.
    cpp_logger = logging.getLogger("torch.utils.cpp_extension")
    previous = cpp_logger.level
    cpp_logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        cpp_logger.setLevel(previous)
    return cpp_extension


def build_pending() -> bool:
    """True when ``load_extension()`` has not run yet in this process and will compile: the
    cache holds no build of these sources for this CPU, or a source is newer than that build
    (ninja then rebuilds). False when it will only load, or when that cannot be told."""
    if _tried or _disabled():
        return False
    try:
        src_dir = Path(__file__).resolve().parent
        name = _module_name(src_dir, 0)
        # torch's own rule for the folder (TORCH_EXTENSIONS_DIR, else a per-python/accelerator
        # folder under ~/.cache/torch_extensions); private, hence the broad except below
        library = Path(_cpp_extension()._get_build_directory(name, False)) / f"{name}.so"
        if not library.exists():
            return True
        built = library.stat().st_mtime
        return any((src_dir / f).stat().st_mtime > built for f in _SOURCES + _HEADERS)
    except Exception:
        return False


def is_loaded() -> bool:
    """True when the extension is already loaded in this process (never builds)."""
    return _module is not None


def load_extension() -> Optional[ModuleType]:
    """Return the compiled module (building it on first call), or None if it cannot be built."""
    global _module, _error, _tried
    with _lock:
        if _tried:
            return _module
        _tried = True
        if _disabled():
            _error = "disabled by POINTRIX_NATIVE_DISABLE"
            return None
        try:
            load = _cpp_extension().load
        except Exception as exc:  # pragma: no cover - torch without cpp_extension
            _error = _short(exc)
            return None
        src_dir = Path(__file__).resolve().parent
        verbose = os.environ.get("POINTRIX_NATIVE_VERBOSE", "") not in ("", "0")
        errors = []
        for level, (cflags, ldflags) in enumerate(_ATTEMPTS):
            name = _module_name(src_dir, level)
            try:
                _module = load(
                    name=name,
                    sources=[str(src_dir / s) for s in _SOURCES],
                    extra_cflags=_BASE_FLAGS + cflags,
                    extra_ldflags=ldflags,
                    verbose=verbose,
                )
                _error = None
                return _module
            except Exception as exc:  # compiler missing, flags unsupported, ...
                errors.append(_short(exc))
        _error = "could not build the native rasterizer: " + " | ".join(errors)
        return None


def unavailable_reason() -> Optional[str]:
    """Why the extension is unavailable (None when it loaded or was not tried yet)."""
    return _error
