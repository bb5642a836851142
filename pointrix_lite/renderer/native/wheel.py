"""The extension modules of a wheel that carries the native rasterizer prebuilt, one per target ISA.

``setup.py`` calls this when ``POINTRIX_WHEEL_TARGETS`` is set (docs/native.md, "Wheels"). Each target is
the same sources and flags as the source build (``_build.py``) with ``-march=TARGET``, named as the source
build names that target, so one module never passes for another. The build writes
``prebuilt/manifest.json`` beside them (``prebuilt.py`` reads it at import).
"""

from __future__ import annotations

import base64
import hashlib
import os
import platform
import sys
import zipfile
from pathlib import Path

from . import _build
from .cpu_check import target_flags
from .prebuilt import MANIFEST, Manifest, Target

TARGETS_ENV = "POINTRIX_WHEEL_TARGETS"
# ``all``: the x86-64 micro-architecture levels (psABI) the kernels have code paths for (simd.h: SSE4.2,
# AVX2+FMA, AVX-512), and the Arm baseline.
ALL_TARGETS = {"x86_64": ("x86-64-v2", "x86-64-v3", "x86-64-v4"), "aarch64": ("armv8-a",)}
_SRC_DIR = Path(__file__).resolve().parent
_PACKAGE = "pointrix_lite.renderer.native.prebuilt"


def requested_targets(value: str, machine: str | None = None, cxx: str | None = None) -> tuple[str, ...]:
    """``$POINTRIX_WHEEL_TARGETS`` (``all`` or a comma list of ``-march`` values) as targets for ``machine``
    (default: this one; a cross build names its compiler ``cxx``), highest level first (most CPU flags: the
    order ``prebuilt.choose`` tries them in).

    Raises:
        ValueError: one line naming the variable: an empty or malformed list, a target the compiler rejects.
    """
    machine = machine or platform.machine()
    if value.strip() == "all":
        if machine not in ALL_TARGETS:
            raise ValueError(
                f"{TARGETS_ENV}=all: no default targets for {machine}; list them (e.g. {TARGETS_ENV}=native)"
            )
        names = ALL_TARGETS[machine]
    else:
        names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    bad = [n for n in names if n in ("native", "scalar") or not _build._ARCH_RE.fullmatch(n)]
    if not names or bad:
        raise ValueError(f"{TARGETS_ENV}={value!r}: expected all or -march values such as x86-64-v3,x86-64-v2")
    flags = {}
    for n in names:
        try:
            flags[n] = target_flags(n, cxx)
        except ValueError as exc:
            raise ValueError(f"{TARGETS_ENV}: {str(exc).split(': ', 1)[1]}") from None
    return tuple(sorted(names, key=lambda n: -len(flags[n])))


def _sources() -> list[str]:
    # setuptools takes sources relative to setup.py's folder (the repository root)
    root = _SRC_DIR.parents[2]
    return [str((_SRC_DIR / s).relative_to(root)) for s in _build._SOURCES]


def manifest(targets: tuple[str, ...], cxx: str | None = None, machine: str | None = None) -> Manifest:
    """What the wheel's modules are: the sources' hash, this torch, the machine type (this one, or a cross
    build's ``machine`` compiled by ``cxx``), each target's module name (the source build's for that target)
    and flags."""
    import torch

    entries = tuple(
        Target(arch, _build.arch_module_name(_SRC_DIR, arch, target_flags(arch, cxx)), target_flags(arch, cxx))
        for arch in targets
    )
    return Manifest(_build._source_tag(_SRC_DIR), torch.__version__, machine or platform.machine(), entries)


def extensions(wheel: Manifest) -> list:
    """One ``CppExtension`` per target of ``wheel``, with the source build's flags for it."""
    from torch.utils.cpp_extension import CppExtension

    out = []
    for target in wheel.targets:
        cflags, ldflags = _build.build_flags(_build.arch_flags(target.arch))
        out.append(
            CppExtension(
                name=f"{_PACKAGE}.{target.module}",
                sources=_sources(),
                # Python's CFLAGS, which setuptools puts first, hold -g: debug info, most of each file
                extra_compile_args=cflags + ["-g0"],
                extra_link_args=ldflags,
            )
        )
    return out


def build_ext_class(wheel: Manifest) -> type:
    """torch's ``BuildExtension`` with a build folder per target (the targets share source file names, so
    their objects would overwrite each other's) and the manifest written beside the modules."""
    from torch.utils.cpp_extension import BuildExtension

    class BuildPrebuilt(BuildExtension):
        def build_extension(self, ext) -> None:
            shared = self.build_temp
            self.build_temp = os.path.join(shared, ext.name.rpartition(".")[2])
            try:
                super().build_extension(ext)
            finally:
                self.build_temp = shared

        def run(self) -> None:
            super().run()
            folder = Path(self.get_ext_fullpath(self.extensions[0].name)).parent
            (folder / MANIFEST).write_text(wheel.to_json())

    return BuildPrebuilt


def add_prebuilt(pure: Path, modules: list[Path], wheel_manifest: Manifest, platform_tag: str, out_dir: Path) -> Path:
    """``pure`` (this project's ``py3-none-any`` wheel) with ``modules`` and ``wheel_manifest`` added in the
    prebuilt folder, tagged ``cpXY-cpXY-<platform_tag>`` (this Python's), written into ``out_dir``.

    How a cross build makes its wheel (setuptools builds for this machine only). A wheel is a zip whose
    ``*.dist-info/WHEEL`` names its tags and whose ``RECORD`` lists every file's sha256 and size (PEP 427):
    both are rewritten, the rest copied.
    """
    folder = _PACKAGE.replace(".", "/")
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    name, version = pure.name.split("-")[:2]
    out = out_dir / f"{name}-{version}-{py}-{py}-{platform_tag}.whl"
    with zipfile.ZipFile(pure) as src:
        files = {n: src.read(n) for n in src.namelist() if not n.endswith("/RECORD")}
        info = next(n.rsplit("/", 1)[0] for n in src.namelist() if n.endswith(".dist-info/WHEEL"))
    for module in modules:
        files[f"{folder}/{module.name}"] = module.read_bytes()
    files[f"{folder}/{MANIFEST}"] = wheel_manifest.to_json().encode()
    meta = [
        ln for ln in files[f"{info}/WHEEL"].decode().splitlines() if not ln.startswith(("Tag:", "Root-Is-Purelib:"))
    ]
    files[f"{info}/WHEEL"] = "\n".join([*meta, "Root-Is-Purelib: false", f"Tag: {py}-{py}-{platform_tag}", ""]).encode()
    record = [f"{n},sha256={_digest(data)},{len(data)}" for n, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for n, data in files.items():
            dst.writestr(n, data)
    return out


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
