"""The native sources build for aarch64 (NEON), into a wheel that loads there, and the NEON kernels compute what
the x86 builds do.

1. ``scripts/build_wheel.py --machine aarch64`` cross-compiles every source of ``_build._SOURCES`` with
   ``aarch64-linux-gnu-g++`` at ``-march=armv8-a`` and the extension's own flags (and the kernels as
   ``-DPLR_SCALAR``, syntax only), so a NEON break in ``simd.h``/``lanes.h`` fails here and not on
   someone's ARM machine.
2. The wheel it writes, re-read: its tag, its RECORD's hashes, a manifest an aarch64 machine accepts, and
   a module for that machine whose ``PyInit_`` matches its file name, which needs torch's libraries by name
   and nothing that torch (this release, read from this machine's copy), CPython and the aarch64 C/C++
   runtime do not define. (Running it needs an aarch64 Python with torch: docs/native.md, "Wheels".)
3. ``native_driver.cpp``, linked with the wheel build's kernel objects and run under ``qemu-aarch64``,
   renders a seeded scene forward and backward; every build variant of the extension this CPU runs
   (native, scalar, x86-64-v2/v3) renders it too. Alphas, binning, ``last_ids`` and ``contrib`` must be bit
   identical (one unfused alpha formula for every build), colours and forward floats within
   ``1e-5`` of the largest value, gradients within ``GRAD_RTOL`` of the largest gradient, the
   tolerances of test_native_variants.py and test_native.py.

Skipped without the tools (Debian: ``g++-aarch64-linux-gnu``, ``qemu-user``; ``.ci/run`` installs
them). ~60 s on 2 cores, mostly compiling bindings.cpp (torch's headers).
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pointrix_lite.renderer.native import _build, cross, prebuilt

from . import aarch64_scene as scene_io
from .aarch64_toolchain import CXX, KERNELS, QEMU, TOOLCHAIN, build_wheel, link_driver, missing, scalar_syntax_jobs

# bit-identical across builds: what alpha thresholds decide (binning culls by the same alpha test)
EXACT = ("radii", "gauss_offsets", "tile_offsets", "flatten_ids", "slot_by_pos", "alphas", "last_ids")
# what the vector builds' 4x4-block path records; scalar builds record no rows (contrib -1) and
# count evaluations per pixel, so these are compared with the variants that take that path
BLOCK_PATH = ("contrib", "n_evaluations")
FORWARD = ("means2d", "depths", "conics", "sh_colors", "colors", "T_final")


@pytest.fixture(scope="module")
def aarch64_build(tmp_path_factory) -> dict:
    reason = missing(CXX)
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("aarch64")
    proc, wheel, objects = build_wheel(out)
    return {
        "out": out,
        "proc": proc,
        "wheel": wheel,
        "objects": objects,
        "scalar": cross.run_jobs(scalar_syntax_jobs()),
    }


def test_every_native_source_compiles_for_aarch64(aarch64_build) -> None:
    proc = aarch64_build["proc"]
    assert proc.returncode == 0, "aarch64 wheel build failed:\n" + proc.stdout[-2000:] + proc.stderr[-6000:]
    failed = [job.error for job in aarch64_build["scalar"] if job.error]
    assert not failed, "aarch64 -DPLR_SCALAR build failed:\n\n" + "\n\n".join(failed)


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[5] == 1, f"{path.name}: not a little-endian ELF file"
    return struct.unpack_from("<H", header, 18)[0]


def test_aarch64_wheel_holds_a_module_an_aarch64_machine_loads(aarch64_build, tmp_path, monkeypatch) -> None:
    wheel = aarch64_build["wheel"]
    if wheel is None:
        pytest.skip("the aarch64 wheel did not build (see the compile test)")
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert re.fullmatch(rf"pointrix_lite-[\d.]+-{py}-{py}-(many)?linux_(\d+_\d+_)?aarch64\.whl", wheel.name), wheel.name

    with zipfile.ZipFile(wheel) as z:  # the RECORD a pip install trusts: every file, its sha256 and size
        (record,) = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        rows = [line.split(",") for line in z.read(record).decode().splitlines()]
        listed = {name for name, *_ in rows}
        files = {n for n in z.namelist() if not n.endswith("/")}  # auditwheel adds folder entries
        assert listed == files, "RECORD does not list exactly the wheel's files"
        for name, digest, size in rows:
            if name != record:
                data = z.read(name)
                expect = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, int(size)) == (expect, len(data)), f"RECORD is wrong about {name}"
        z.extractall(tmp_path)
    folder = tmp_path / "pointrix_lite" / "renderer" / "native" / "prebuilt"

    manifest = prebuilt.read_manifest(folder)
    assert manifest.machine == "aarch64" and [t.arch for t in manifest.targets] == [TOOLCHAIN.default_arch]
    import torch

    src_tag = _build._source_tag(cross.SRC_DIR)
    assert "aarch64" in prebuilt.unusable(manifest, src_tag, torch.__version__)  # refused here ...
    monkeypatch.setattr(prebuilt.platform, "machine", lambda: "aarch64")
    assert prebuilt.unusable(manifest, src_tag, torch.__version__) is None  # ... taken there
    target = prebuilt.choose(manifest, frozenset({"fp", "asimd", "evtstrm", "crc32", "cpuid"}))
    assert target == manifest.targets[0]

    module = folder / f"{target.module}{TOOLCHAIN.ext_suffix}"  # the name an aarch64 CPython looks for
    assert module.is_file(), sorted(p.name for p in folder.iterdir())
    assert _elf_machine(module) == 183, "the module is not an AArch64 ELF file"  # EM_AARCH64
    dynamic = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
    assert {"libc10.so", "libtorch_cpu.so", "libtorch_python.so"} <= needed, needed
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, "the module points at a folder of this machine"
    defined, _ = cross.dynamic_symbols(module)
    assert f"PyInit_{target.module}" in defined

    torch_lib = Path(torch.__file__).resolve().parent / "lib"
    runtime = Path("/usr") / TOOLCHAIN.triplet / "lib"
    providers = [torch_lib / f"lib{name}.so" for name in cross.TORCH_LIBS]
    providers += [runtime / n for n in ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1")]
    libpython = Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("LDLIBRARY") or "")
    providers += [Path(sys.executable).resolve()] + ([libpython] if libpython.is_file() else [])
    assert not cross.unresolved(module, [p for p in providers if p.is_file()])


def test_neon_kernels_under_qemu_match_every_x86_variant(aarch64_build) -> None:
    reason = missing(QEMU)
    if reason:
        pytest.skip(reason)
    out, objects = aarch64_build["out"], aarch64_build["objects"]
    if aarch64_build["wheel"] is None:
        pytest.skip("the aarch64 build failed (see the compile test)")
    from .native_required import require_native
    from .test_native import assert_grad_close
    from .variants import load, runnable_variants

    require_native()
    driver = link_driver([objects / f"{Path(k).stem}.o" for k in KERNELS], out / "native_driver")
    scene = scene_io.make_scene(seed=29)
    scene_io.write_input(scene, out / "scene.bin")
    proc = subprocess.run(
        [QEMU, str(driver), str(out / "scene.bin"), str(out / "result.bin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"qemu-aarch64 native_driver failed ({proc.returncode}):\n{proc.stderr}"
    arm = scene_io.read_output(out / "result.bin")
    assert arm["alphas"].max() > 0.5 and (arm["alphas"] > 0.999).any(), "scene too empty to test anything"

    import torch

    for variant in runnable_variants():
        host = scene_io.run_extension(load(variant), scene)
        block_path = not (host["contrib"] == -1).all()
        for name in EXACT + (BLOCK_PATH if block_path else ()):
            assert np.array_equal(arm[name], host[name]), f"{name}: aarch64 NEON differs from {variant}"
        for name in FORWARD:
            err, scale = np.abs(arm[name] - host[name]).max(), max(1.0, np.abs(host[name]).max())
            assert err <= 1e-5 * scale, f"{name}: aarch64 NEON vs {variant}: max error {err:.3g}"
        for name in scene_io.OUTPUTS:
            if name.startswith("v_"):
                assert_grad_close(torch.from_numpy(arm[name]), torch.from_numpy(host[name]), f"{name} vs {variant}")
