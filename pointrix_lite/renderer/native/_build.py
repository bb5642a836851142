"""Just-in-time build of the C++ extension with ``torch.utils.cpp_extension.load``.

Built once per source version, CPU kind and target ISA into torch's extensions cache
(``TORCH_EXTENSIONS_DIR`` or ``~/.cache/torch_extensions``), then only imported.
Every failure is caught: ``is_available()`` turns False and ``unavailable_reason()``
says why, so callers can fall back to the pure-torch backend.

``POINTRIX_NATIVE_ARCH`` picks the target instead of ``-march=native``: a GCC/Clang
``-march`` value (``x86-64-v3``, ``x86-64-v2``, ``armv8-a``, ...) or ``scalar`` (no vector
extensions, the compiler's default target). Each target is its own module, so benchmarks
and tests can load several side by side (``load_extension(arch)``).

An installed wheel's prebuilt modules (``prebuilt.py``) come first: with the variable unset, the
highest level this CPU runs; with a target the wheel has, that one. ``POINTRIX_NATIVE_ARCH=native``
asks for the source build with ``-march=native`` even then.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import re
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .prebuilt import Target

_SOURCES = (
    "bindings.cpp",
    "pool.cpp",
    "scratch.cpp",
    "projection.cpp",
    "sh.cpp",
    "binning.cpp",
    "rasterize_fwd.cpp",
    "rasterize_bwd.cpp",
    "ssim.cpp",
    "mcmc_noise.cpp",
)
_HEADERS = ("common.h", "kernels.h", "lanes.h", "pool.h", "scratch.h", "simd.h", "tile.h")
# -ffp-contract=off: no path may be fused differently in the forward and the
# backward (the backward replays the forward's threshold tests), nor in one
# build and another (every ISA computes bit-identical alphas). -march=native is safe because the build happens
# on the machine that runs it (the CPU kind is part of the module name, so a
# shared cache never serves another CPU's binary). Threads: pool.h, our own or,
# while torch's OpenMP workers spin, those through at::parallel_for, whose
# pragma compiles into bindings.cpp: hence _openmp_flags().
_BASE_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-pthread"]
_ATTEMPTS = (
    (["-march=native"], ["-pthread"]),
    ([], ["-pthread"]),
    (["-DPLR_SCALAR"], ["-pthread"]),  # no vector extensions: slower but portable
)
ARCH_ENV = "POINTRIX_NATIVE_ARCH"
_ARCH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")

_lock = threading.RLock()  # load_extension() calls load_variant() under it
_module: ModuleType | None = None
_error: str | None = None
_tried = False
# arch -> loaded module, or the error string of its failed build (explicit targets only)
_variants: dict[str, ModuleType | str] = {}
_default: ModuleType | None = None  # what load_extension() built, whatever use_module() swapped in
_wheel_note: str | None = None  # why an installed wheel's prebuilt modules were passed over


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
    """One line for a failed build: the compiler's first ``error:`` line when the log has one (a failed
    compile ends with ninja's "build stopped: subcommand failed", which says nothing), else the last line."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln and not ln.startswith("ninja:")]
    return f"{type(exc).__name__}: {errors[0] if errors else lines[-1] if lines else ''}"[:500]


def _disabled() -> bool:
    return os.environ.get("POINTRIX_NATIVE_DISABLE", "") not in ("", "0")


def _module_name(src_dir: Path, level: int) -> str:
    return f"pointrix_lite_native_{_source_tag(src_dir)}_{_cpu_tag()}_{level}"


def requested_arch() -> str | None:
    """``$POINTRIX_NATIVE_ARCH`` (None when unset, empty or ``native``: build with -march=native).

    Raises ValueError with a one-line message naming the variable for a malformed value."""
    value = os.environ.get(ARCH_ENV, "").strip()
    if value in ("", "native"):
        return None
    if not _ARCH_RE.fullmatch(value):
        raise ValueError(f"{ARCH_ENV}={value!r}: expected native, scalar or a -march value such as x86-64-v3")
    return value


def _wheel_target(arch: str | None) -> Target | None:
    """The installed wheel's prebuilt target for ``arch`` (None: the best this CPU runs), or None when
    there is none to use (no wheel, or one that does not fit: the reason is kept for ``wheel_note()``)."""
    global _wheel_note
    from . import prebuilt
    from .cpu_check import cpu_flags

    try:
        manifest = prebuilt.read_manifest()
        if manifest is None:
            return None
        import torch

        why = prebuilt.unusable(manifest, _source_tag(Path(__file__).resolve().parent), torch.__version__)
        target = None if why else prebuilt.choose(manifest, cpu_flags(), arch)
        if why is None and target is None and arch is None:
            why = "this CPU lacks the flags of every target it has"
    except ValueError as exc:
        why, target = str(exc), None
    _wheel_note = f"prebuilt modules not used: {why}" if why else None
    return target


def _load_wheel(target: Target) -> ModuleType | None:
    """``target``'s prebuilt module, or None (the reason kept for ``wheel_note()``)."""
    global _wheel_note
    from . import prebuilt

    try:
        module = prebuilt.load(target)
    except ImportError as exc:
        _wheel_note = f"prebuilt module {target.arch} did not load: {exc}"
        return None
    return module


def wheel_note() -> str | None:
    """Why an installed wheel's prebuilt modules were passed over (then the sources are compiled); None
    when they were used or there are none."""
    return _wheel_note


def is_prebuilt(module: ModuleType | None = None) -> bool:
    """True when ``module`` (default: the loaded one) came prebuilt from a wheel (was loaded from its folder)."""
    from . import prebuilt

    module = module or _module
    # the spec, not __file__: a module of a name loaded before gets that first load's __file__ back
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.origin is not None and Path(spec.origin).parent == prebuilt.PREBUILT_DIR


def _wheel_first() -> bool:
    # unset: the wheel's best module; "native" said explicitly: the source build for this CPU
    return os.environ.get(ARCH_ENV, "").strip() == ""


def arch_flags(arch: str) -> list[str]:
    """Compiler flags of an explicit target: ``scalar`` or a ``-march`` value."""
    return ["-DPLR_SCALAR"] if arch == "scalar" else [f"-march={arch}"]


def arch_module_name(src_dir: Path, arch: str, needed: tuple[str, ...] = ()) -> str:
    # No CPU tag: an explicit target does not depend on the build machine's CPU. The flags it needs
    # (cpu_check.target_flags) are in the name, so a cache shared by unlike nodes keys what it serves
    # by what that code may execute, and each node checks them before loading.
    tag = re.sub(r"[^A-Za-z0-9]", "_", arch)
    if needed:
        tag += "_" + hashlib.sha1(" ".join(needed).encode()).hexdigest()[:6]
    return f"pointrix_lite_native_{_source_tag(src_dir)}_{tag}"


def _compiler_version() -> str:
    """The first line of ``$CXX --version`` (what a remembered failure is valid for)."""
    import subprocess

    from .cpu_check import compiler

    try:
        out = subprocess.run([compiler(), "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout.strip().splitlines() or [""])[0]
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _failure_file(name: str) -> Path:
    return Path(_cpp_extension()._get_build_directory(name, False)) / "build_failed.txt"


def _remembered_failure(name: str) -> str | None:
    """The reason a build of ``name`` failed before with this compiler (sources changing change the
    name), so a run does not spend a minute compiling what is known to fail; None otherwise."""
    try:
        compiler_line, reason = _failure_file(name).read_text().split("\n", 1)
    except (OSError, ValueError):
        return None
    if compiler_line != _compiler_version():
        return None
    return (
        f"{reason.strip()} (remembered from an earlier run with this compiler; delete {_failure_file(name)} to retry)"
    )


def _forget_failure(name: str) -> None:
    try:
        _failure_file(name).unlink(missing_ok=True)
    except OSError:
        pass


def _remember_failure(name: str, reason: str) -> None:
    try:
        path = _failure_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{_compiler_version()}\n{reason}\n")
    except OSError:
        pass


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
        arch = requested_arch()
        if (_wheel_first() or arch is not None) and _wheel_target(arch) is not None:
            return False  # an installed wheel's prebuilt module serves it
        if arch is None:
            name = _module_name(src_dir, 0)
        else:
            from .cpu_check import target_flags

            name = arch_module_name(src_dir, arch, target_flags(arch))
        # torch's own rule for the folder (TORCH_EXTENSIONS_DIR, else a per-python/accelerator
        # folder under ~/.cache/torch_extensions); private, hence the broad except below
        if _remembered_failure(name) is not None:
            return False  # it will not try: the failure is remembered for this compiler (said instead)
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


def _openmp_flags(flags: list[str]) -> list[str]:
    # The same soname as the libgomp torch loaded, so the dynamic linker reuses that one. The
    # portable fallback goes without, so that a compiler lacking OpenMP still builds it (its
    # helpers are then always pool.cpp's).
    import torch

    return ["-fopenmp"] if torch._C.has_openmp and "-DPLR_SCALAR" not in flags else []


def build_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """``(compiler flags, linker flags)`` of a build with the target flags ``flags`` (``arch_flags``, or
    ``_ATTEMPTS``'), the same for the source build and a wheel's prebuilt modules."""
    omp = _openmp_flags(flags)
    return _BASE_FLAGS + omp + flags, ["-pthread"] + omp


def _load(load, name: str, flags: list[str], src_dir: Path) -> ModuleType:
    verbose = os.environ.get("POINTRIX_NATIVE_VERBOSE", "") not in ("", "0")
    cflags, ldflags = build_flags(flags)
    return load(
        name=name,
        sources=[str(src_dir / s) for s in _SOURCES],
        extra_cflags=cflags,
        extra_ldflags=ldflags,
        verbose=verbose,
    )


def load_variant(arch: str) -> ModuleType | str:
    """The module built for the explicit target ``arch`` (``scalar`` or a ``-march`` value), or
    the one-line reason its build failed. Several variants can be loaded in one process (each is
    its own module); this does not change what ``load_extension()`` returns."""
    with _lock:
        if arch in _variants:
            return _variants[arch]
        _variants[arch] = _build_variant(arch)
        return _variants[arch]


def _build_variant(arch: str) -> ModuleType | str:
    if not _ARCH_RE.fullmatch(arch):
        return f"{ARCH_ENV}={arch!r}: expected native, scalar or a -march value"
    from .cpu_check import check_flags, check_target

    target = _wheel_target(arch)
    if target is not None:  # checked against the flags the wheel recorded: there may be no compiler to ask
        try:
            check_flags(arch, target.flags)
        except ValueError as exc:
            return str(exc)
        module = _load_wheel(target)
        if module is not None:
            return module
    try:
        needed = check_target(arch)  # before anything is built or loaded: a missing flag would be SIGILL
    except ValueError as exc:
        return str(exc)
    src_dir = Path(__file__).resolve().parent
    name = arch_module_name(src_dir, arch, needed)
    remembered = _remembered_failure(name)
    if remembered is not None:
        return remembered
    try:
        module = _load(_cpp_extension().load, name, arch_flags(arch), src_dir)
        _forget_failure(name)
        return module
    except Exception as exc:  # compiler missing, -march unknown to it, ...
        reason = f"{ARCH_ENV}={arch}: could not build the native rasterizer: {_short(exc)}"
        _remember_failure(name, reason)
        return reason


def load_extension() -> ModuleType | None:
    """Return the compiled module (building it on first call), or None if it cannot be built.

    Built for ``$POINTRIX_NATIVE_ARCH`` when set (no fallback: a failure names the variable),
    else with -march=native, retrying without it and then as scalar code."""
    global _module, _error, _tried, _default
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
        try:
            arch = requested_arch()
        except ValueError as exc:
            _error = str(exc)
            return None
        if arch is None and _wheel_first():
            target = _wheel_target(None)
            module = _load_wheel(target) if target is not None else None
            if module is not None:
                _module = _default = module
                _error = None
                return _module
        if arch is not None:
            variant = load_variant(arch)
            _module, _error = (variant, None) if isinstance(variant, ModuleType) else (None, variant)
            _default = _module
            return _module
        src_dir = Path(__file__).resolve().parent
        first = _module_name(src_dir, 0)
        remembered = _remembered_failure(first)  # every attempt failed last time, with this compiler
        if remembered is not None:
            _error = remembered
            return None
        errors = []
        for level, (cflags, _ldflags) in enumerate(_ATTEMPTS):
            try:
                _module = _default = _load(load, _module_name(src_dir, level), cflags, src_dir)
                _error = None
                _forget_failure(first)
                return _module
            except Exception as exc:  # compiler missing, flags unsupported, ...
                errors.append(_short(exc))
        # each attempt's line once: a broken toolchain fails all three alike
        _error = "could not build the native rasterizer: " + " | ".join(dict.fromkeys(errors))
        _remember_failure(first, _error)
        return None


def default_module() -> ModuleType | None:
    """The module ``load_extension()`` builds (building it now if needed), even while
    ``use_module()`` has swapped in another."""
    if not _tried:
        load_extension()
    return _default


def use_module(module: ModuleType | None) -> ModuleType | None:
    """Make ``module`` what ``load_extension()`` returns (tests run one process over several
    variants); returns the previous one."""
    global _module, _tried, _error
    with _lock:
        previous = _module
        _module, _tried, _error = module, True, None if module is not None else _error
        return previous


def isa_level(module: ModuleType | None = None) -> str | None:
    """What the loaded extension (or ``module``) was compiled for, e.g. ``x86-64-v3 (AVX2+FMA)``;
    None when it is not loaded. Read from the binary's own preprocessor macros."""
    module = module or _module
    return module.isa() if module is not None and hasattr(module, "isa") else None


def unavailable_reason() -> str | None:
    """Why the extension is unavailable (None when it loaded or was not tried yet)."""
    return _error
