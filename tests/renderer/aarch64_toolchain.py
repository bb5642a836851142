"""Cross-compiling the native sources for aarch64 (Debian's ``g++-aarch64-linux-gnu``).

Sources and flags come from ``_build`` (``_SOURCES``, ``_BASE_FLAGS``, ``arch_flags``), so this
compiles what the extension build compiles. Kernels are compiled to objects (the qemu test links
them into ``native_driver.cpp``); ``bindings.cpp`` only with ``-fsyntax-only``: its torch headers
take ~25 s to parse, code generation would double that, and it holds no ISA-specific code (it
includes ``kernels.h`` only), so parsing shows what can break there, a torch header that does not
build for aarch64.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pointrix_lite.renderer.native import _build

CXX = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64"
TARGET = "armv8-a"  # the baseline every aarch64 CPU runs, NEON included
NATIVE_DIR = Path(_build.__file__).resolve().parent
DRIVER = Path(__file__).resolve().parent / "native_driver.cpp"
KERNELS = tuple(s for s in _build._SOURCES if s != "bindings.cpp")
# torch's extension build compiles with C++20 (its headers need it); the kernels are plain C++17
KERNEL_STD, TORCH_STD = "-std=c++17", "-std=c++20"


@dataclass
class Job:
    """One compiler run; ``error`` is None on success, else the command and its stderr."""

    label: str
    cmd: list[str]
    error: str | None = None


def target_flags(arch: str = TARGET) -> list[str]:
    return _build._BASE_FLAGS + _build.arch_flags(arch)


def python_includes(scratch: Path) -> list[str]:
    """``-I`` flags for Python.h in an aarch64 compile.

    Debian's ``/usr/include/python3.X/pyconfig.h`` only redirects to a per-architecture file
    (``<aarch64-linux-gnu/python3.X/pyconfig.h>`` on aarch64), which needs ``libpython3.X-dev:arm64``.
    Without it, a one-line stand-in in ``scratch`` includes the host's: both are LP64 Linux, so the
    type sizes it defines are the same, which is all that parsing bindings.cpp depends on.
    """
    include = Path(sysconfig.get_paths()["include"])
    flags = [f"-I{include}"]
    multiarch = sysconfig.get_config_var("MULTIARCH")  # e.g. x86_64-linux-gnu on Debian's python
    host = include.parent / str(multiarch) / include.name / "pyconfig.h"
    if multiarch and host.is_file():
        shim = scratch / "pyconfig-shim"
        target = shim / "aarch64-linux-gnu" / include.name / "pyconfig.h"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'#include "{host}"\n')
        flags.append(f"-I{shim}")
    return flags


def compile_jobs(out_dir: Path) -> list[Job]:
    """Every source of ``_build._SOURCES`` for aarch64 (kernels to ``out_dir/<name>.o``), plus a
    ``-DPLR_SCALAR`` syntax pass over the kernels (cheap: no code generation); slowest first."""
    from torch.utils.cpp_extension import include_paths

    torch_inc = [f"-I{p}" for p in include_paths()] + python_includes(out_dir)
    # the defines torch's extension build adds
    defines = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=pointrix_lite_native_aarch64"]
    bindings = [
        CXX,
        TORCH_STD,
        *target_flags(),
        *torch_inc,
        *defines,
        "-fsyntax-only",
        str(NATIVE_DIR / "bindings.cpp"),
    ]
    jobs = [Job("bindings.cpp", bindings)]
    for name in sorted(KERNELS, key=lambda s: -(NATIVE_DIR / s).stat().st_size):
        obj = out_dir / f"{Path(name).stem}.o"
        jobs.append(Job(name, [CXX, KERNEL_STD, *target_flags(), "-c", str(NATIVE_DIR / name), "-o", str(obj)]))
    for name in KERNELS:
        cmd = [CXX, KERNEL_STD, *target_flags("scalar"), "-fsyntax-only", str(NATIVE_DIR / name)]
        jobs.append(Job(f"{name} (scalar)", cmd))
    return jobs


def run_jobs(jobs: list[Job]) -> list[Job]:
    """Runs the compiler commands in parallel (one per core), filling in each ``error``."""

    def run(job: Job) -> Job:
        proc = subprocess.run(job.cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            job.error = f"$ {' '.join(job.cmd)}\n{proc.stderr.strip()}"
        return job

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(run, jobs))


def link_driver(objects: list[Path], out: Path) -> Path:
    """``native_driver.cpp`` (C++20: designated initialisers) linked statically with the kernel
    objects, so that qemu needs no aarch64 sysroot."""
    cmd = [
        CXX,
        TORCH_STD,
        *target_flags(),
        f"-I{NATIVE_DIR}",
        str(DRIVER),
        *map(str, objects),
        "-static",
        "-pthread",
        "-o",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"$ {' '.join(cmd)}\n{proc.stderr.strip()}"
    return out


def missing(*tools: str) -> str | None:
    """A skip reason naming the first absent tool, or None."""
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install g++-aarch64-linux-gnu qemu-user; .ci/run installs them)"
    return None
