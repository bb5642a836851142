"""Whether this CPU can run a build for an explicit target (``POINTRIX_NATIVE_ARCH``), asked before loading it.

A compiler accepts ``-march=x86-64-v4`` on an AVX2-only CPU and the module loads, and then the first
AVX-512 instruction kills the process with SIGILL and no message. So before a target's module is
built or loaded, the instruction sets it may use -- read from the compiler's own predefined macros for
that ``-march`` (``__AVX512F__``, ``__AMX_TILE__``, ...) -- are compared with the CPU's flags
(``/proc/cpuinfo``), and a missing one is a one-line error naming the target and the flags. The
``-march=native`` build needs no check: it is made for the CPU it runs on (its module name carries a
hash of that CPU's flags).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

# Predefined macro -> the flag Linux lists in /proc/cpuinfo for the same instructions.
MACRO_FLAGS = {
    "__SSE3__": "pni",
    "__SSSE3__": "ssse3",
    "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2",
    "__POPCNT__": "popcnt",
    "__AVX__": "avx",
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__BMI__": "bmi1",
    "__BMI2__": "bmi2",
    "__LZCNT__": "abm",
    "__MOVBE__": "movbe",
    "__AVX512F__": "avx512f",
    "__AVX512CD__": "avx512cd",
    "__AVX512BW__": "avx512bw",
    "__AVX512DQ__": "avx512dq",
    "__AVX512VL__": "avx512vl",
    "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2",
    "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq",
    "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16",
    "__AVXVNNI__": "avx_vnni",
    "__AMX_TILE__": "amx_tile",
    "__AMX_INT8__": "amx_int8",
    "__AMX_BF16__": "amx_bf16",
    "__AMX_FP16__": "amx_fp16",
    "__AVX512VP2INTERSECT__": "avx512_vp2intersect",
    "__GFNI__": "gfni",
    "__VAES__": "vaes",
    "__VPCLMULQDQ__": "vpclmulqdq",
    "__ARM_FEATURE_SVE": "sve",
    "__ARM_FEATURE_SVE2": "sve2",
    "__ARM_FEATURE_DOTPROD": "asimddp",
    "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC": "asimdhp",
}
_DEFINE = re.compile(r"#define (\w+) ")


def compiler() -> str:
    """The C++ compiler torch's extension builder uses (``$CXX``, else ``c++``)."""
    return os.environ.get("CXX", "c++")


@functools.cache
def target_flags(arch: str, cxx: str | None = None) -> tuple[str, ...]:
    """The CPU flags a ``-march=arch`` build may use (none for ``scalar``), sorted.

    Raises:
        ValueError: the compiler rejects the target (one line naming ``POINTRIX_NATIVE_ARCH`` and
            the compiler's first error line) or cannot be run.
    """
    if arch == "scalar":
        return ()
    cxx = cxx or compiler()
    try:
        out = subprocess.run(
            [cxx, f"-march={arch}", "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"POINTRIX_NATIVE_ARCH={arch}: cannot run the compiler {cxx} ({exc})") from None
    if out.returncode != 0:
        first = next((line.strip() for line in out.stderr.splitlines() if "error" in line), out.stderr.strip()[:200])
        raise ValueError(f"POINTRIX_NATIVE_ARCH={arch}: the compiler rejects -march={arch}: {first}")
    macros = set(_DEFINE.findall(out.stdout))
    return tuple(sorted({flag for macro, flag in MACRO_FLAGS.items() if macro in macros}))


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (``flags`` on x86, ``Features`` on Arm, from /proc/cpuinfo); empty
    where the kernel does not list them (then nothing is checked)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def check_target(arch: str) -> tuple[str, ...]:
    """The flags ``arch`` needs, after checking that this CPU has them all.

    Raises:
        ValueError: one line naming the target and the flags this CPU lacks (or the compiler's rejection).
    """
    return check_flags(arch, target_flags(arch))


def check_flags(arch: str, needed: tuple[str, ...]) -> tuple[str, ...]:
    """``needed`` (the flags code built for ``arch`` may use), after checking that this CPU has them all.

    Raises:
        ValueError: one line naming the target and the flags this CPU lacks.
    """
    have = cpu_flags()
    missing = [f for f in needed if f not in have] if have else []
    if missing:
        raise ValueError(
            f"POINTRIX_NATIVE_ARCH={arch}: this CPU lacks {', '.join(missing)}, which code built for -march={arch} "
            "may use (it would stop with an illegal instruction); unset it for -march=native, or pick a target this CPU has"
        )
    return needed
