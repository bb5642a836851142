"""The aarch64 cross build the tests share: ``scripts/build_wheel.py --machine aarch64`` (``renderer/native/cross.py``,
Debian's ``g++-aarch64-linux-gnu``), run once per session with its objects kept, plus what only tests build.

The wheel's build compiles every source of ``_build._SOURCES`` as the extension build does; the kernel
objects it leaves are linked here into ``native_driver.cpp`` for qemu. The ``-DPLR_SCALAR`` pass over the
kernels is syntax only (no code generation): what it catches is a portable path that stopped compiling.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pointrix_lite.renderer.native import _build, cross

TOOLCHAIN = cross.TOOLCHAINS["aarch64"]
CXX = TOOLCHAIN.cxx
QEMU = "qemu-aarch64"
TARGET = TOOLCHAIN.default_arch
NATIVE_DIR = cross.SRC_DIR
DRIVER = Path(__file__).resolve().parent / "native_driver.cpp"
REPO = Path(__file__).resolve().parents[2]
KERNELS = tuple(s for s in _build._SOURCES if s != "bindings.cpp")


def build_wheel(out: Path) -> tuple[subprocess.CompletedProcess, Path | None, Path]:
    """``scripts/build_wheel.py --machine aarch64`` into ``out/dist``, objects kept in ``out/work``.
    Returns the finished process, the wheel (None when the build failed) and the kernel objects' folder."""
    dist, work = out / "dist", out / "work"
    cmd = [sys.executable, str(REPO / "scripts" / "build_wheel.py"), "--machine", "aarch64", "--out", str(dist)]
    proc = subprocess.run([*cmd, "--work", str(work)], capture_output=True, text=True, timeout=900)
    wheels = sorted(dist.glob("*.whl")) if proc.returncode == 0 else []
    return proc, (wheels[0] if wheels else None), work / "objects" / TARGET


def scalar_syntax_jobs() -> list[cross.Job]:
    """Each kernel as the portable (``-DPLR_SCALAR``) build compiles it, syntax only."""
    flags = _build._BASE_FLAGS + _build.arch_flags("scalar")
    return [
        cross.Job(f"{name} (scalar)", [CXX, "-std=c++20", *flags, "-fsyntax-only", str(NATIVE_DIR / name)])
        for name in KERNELS
    ]


def link_driver(objects: list[Path], out: Path) -> Path:
    """``native_driver.cpp`` (C++20: designated initialisers) linked statically with the kernel
    objects, so that qemu needs no aarch64 sysroot."""
    flags = _build._BASE_FLAGS + _build.arch_flags(TARGET)
    cmd = [CXX, "-std=c++20", *flags, f"-I{NATIVE_DIR}", str(DRIVER), *map(str, objects), "-static", "-pthread"]
    proc = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, f"$ {' '.join(cmd)}\n{proc.stderr.strip()}"
    return out


def missing(*tools: str) -> str | None:
    """A skip reason naming the first absent tool, or None."""
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install g++-aarch64-linux-gnu qemu-user; .ci/run installs them)"
    return None
