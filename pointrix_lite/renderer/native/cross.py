"""Prebuilt modules for another machine type (aarch64), cross-compiled on this one.

setuptools builds extensions for the machine it runs on, so ``scripts/build_wheel.py --machine aarch64``
compiles here what torch's extension build would compile there: the same sources, the command line of
``torch.utils.cpp_extension.load`` (its defines, ``-fPIC -std=c++20``) and the source build's flags
(``_build.build_flags``), with Debian's cross compiler (``g++-aarch64-linux-gnu``). torch's headers are
the same on every machine; Python's are this Python's (the same CPython release, and both machines are
little-endian LP64 Linux: the types the module's API calls use have the same sizes).

torch's libraries for the target machine are not here (the aarch64 torch wheel is ~450 MB), and the
module needs none at link time: a shared object may leave symbols undefined. It is linked against
empty stand-ins carrying torch's library names, which record the same ``NEEDED`` entries as a native
build; at import on the target machine they name the libraries ``import torch`` has already loaded.
``unresolved()`` lists what the module leaves undefined that none of the given libraries defines (the
tests hold it against this machine's torch, the same release).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import _build
from .prebuilt import Target

SRC_DIR = Path(__file__).resolve().parent
# torch.utils.cpp_extension's own: what it links (ldflags of its build.ninja) and defines
TORCH_LIBS = ("c10", "torch_cpu", "torch", "torch_python")
LANG_FLAGS = ["-fPIC", "-std=c++20"]


@dataclass(frozen=True)
class Toolchain:
    """A cross compiler for one machine type (``platform.machine()`` there) and its default target."""

    machine: str
    triplet: str
    default_arch: str

    @property
    def cxx(self) -> str:
        return f"{self.triplet}-g++"

    @property
    def ext_suffix(self) -> str:
        """The file suffix that machine's CPython gives extension modules (``.cpython-311-aarch64-linux-gnu.so``)."""
        return f".{sys.implementation.cache_tag}-{self.triplet}.so"


# armv8-a: the baseline every aarch64 CPU runs, NEON included (simd.h's Arm path)
TOOLCHAINS = {"aarch64": Toolchain("aarch64", "aarch64-linux-gnu", "armv8-a")}


@dataclass
class Job:
    """One compiler run; ``error`` is None on success, else the command and its stderr."""

    label: str
    cmd: list[str]
    error: str | None = None


def toolchain(machine: str) -> Toolchain:
    """The cross toolchain for ``machine``.

    Raises:
        ValueError: one line: no toolchain is known for it, or its compiler is not installed.
    """
    if machine not in TOOLCHAINS:
        raise ValueError(f"--machine {machine}: cross builds exist for {', '.join(TOOLCHAINS)}")
    tc = TOOLCHAINS[machine]
    if shutil.which(tc.cxx) is None:
        raise ValueError(f"--machine {machine}: {tc.cxx} not found (Debian: apt-get install g++-{tc.triplet})")
    return tc


def python_includes(scratch: Path, tc: Toolchain) -> list[str]:
    """``-I`` flags for Python.h in a compile for ``tc``'s machine.

    Debian's ``/usr/include/python3.X/pyconfig.h`` only redirects to a per-architecture file
    (``<aarch64-linux-gnu/python3.X/pyconfig.h>``), which needs ``libpython3.X-dev:arm64``. Without it, a
    one-line stand-in in ``scratch`` includes this machine's: both are LP64 Linux, so the type sizes it
    defines are the same. A Python built from source (pyenv) has a plain pyconfig.h and needs none.
    """
    include = Path(sysconfig.get_paths()["include"])
    flags = [f"-I{include}"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    host = include.parent / str(multiarch) / include.name / "pyconfig.h"
    if multiarch and host.is_file():
        shim = scratch / "pyconfig-shim"
        target = shim / tc.triplet / include.name / "pyconfig.h"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'#include "{host}"\n')
        flags.append(f"-I{shim}")
    return flags


def compile_jobs(tc: Toolchain, arch: str, module: str, out_dir: Path) -> list[Job]:
    """One job per source of ``_build._SOURCES``, compiled for ``tc`` at ``-march=arch`` to
    ``out_dir/<name>.o`` as the extension build compiles it; slowest first (bindings.cpp parses torch)."""
    from torch.utils.cpp_extension import include_paths

    cflags, _ = _build.build_flags(_build.arch_flags(arch))
    defines = [f"-DTORCH_EXTENSION_NAME={module}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    includes = [f"-isystem{p}" for p in include_paths()] + python_includes(out_dir, tc)
    jobs = []
    for name in sorted(_build._SOURCES, key=lambda s: (s != "bindings.cpp", -(SRC_DIR / s).stat().st_size)):
        obj = out_dir / f"{Path(name).stem}.o"
        cmd = [tc.cxx, *defines, *includes, *LANG_FLAGS, *cflags, "-g0", "-c", str(SRC_DIR / name), "-o", str(obj)]
        jobs.append(Job(name, cmd))
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


def stand_ins(tc: Toolchain, folder: Path) -> Path:
    """Empty shared libraries named as torch's (``libc10.so``, ...), built for ``tc``, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for lib in TORCH_LIBS:
        name = f"lib{lib}.so"
        cmd = [tc.cxx, "-shared", "-x", "c++", os.devnull, f"-Wl,-soname,{name}", "-o", str(folder / name)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"$ {' '.join(cmd)}\n{proc.stderr.strip()}")
    return folder


def link(tc: Toolchain, objects: list[Path], out: Path, arch: str, libs: Path) -> Path:
    """The extension module ``out`` from ``objects``, needing torch's libraries by name (``stand_ins``)."""
    _, ldflags = _build.build_flags(_build.arch_flags(arch))
    # --no-as-needed: the stand-ins define nothing, and a NEEDED entry is what this link is for
    torch_libs = ["-Wl,--no-as-needed", *(f"-l{lib}" for lib in TORCH_LIBS), "-Wl,--as-needed"]
    cmd = [tc.cxx, "-shared", *map(str, objects), *ldflags, f"-L{libs}", *torch_libs, "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"$ {' '.join(cmd)}\n{proc.stderr.strip()}")
    return out


def build_module(tc: Toolchain, target: Target, work: Path, out_dir: Path) -> Path:
    """Cross-compiles the native rasterizer for ``tc`` as the manifest's ``target`` (its ``-march`` value and
    module name) into ``out_dir/<module><suffix>`` (objects and stand-ins in ``work``).

    Raises:
        RuntimeError: a compile or the link failed (the command and the compiler's messages).
    """
    work.mkdir(parents=True, exist_ok=True)
    failed = [job.error for job in run_jobs(compile_jobs(tc, target.arch, target.module, work)) if job.error]
    if failed:
        raise RuntimeError("\n\n".join(failed))
    objects = [work / f"{Path(s).stem}.o" for s in _build._SOURCES]
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{target.module}{tc.ext_suffix}"
    return link(tc, objects, out, target.arch, stand_ins(tc, work / "stand-ins"))


# Num: Value Size Type Bind Vis Ndx Name (readelf -W writes a size above 99999 in hex)
_SYMBOL = re.compile(r"^\s*\d+:\s+\w+\s+\S+\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s+(\S+)")


def dynamic_symbols(path: Path) -> tuple[set[str], set[str]]:
    """``(defined, undefined)`` dynamic symbol names of an ELF file of any machine (``readelf`` reads them
    all), without version suffixes."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True, text=True, check=True)
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        m = _SYMBOL.match(line)
        if not m or m.group(1) not in ("FUNC", "OBJECT", "NOTYPE", "TLS", "IFUNC", "GNU_IFUNC"):
            continue
        _, bind, ndx, name = m.groups()
        name = name.split("@")[0]
        if ndx == "UND":
            if bind != "WEAK":
                undefined.add(name)
        elif name:
            defined.add(name)
    return defined, undefined


def unresolved(module: Path, providers: list[Path]) -> set[str]:
    """The symbols ``module`` needs (non-weak undefined) that none of ``providers`` defines."""
    _, needed = dynamic_symbols(module)
    for lib in providers:
        needed -= dynamic_symbols(lib)[0]
    return needed
