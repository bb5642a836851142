"""The native sources build for aarch64 (NEON), and the NEON kernels compute what the x86 builds do.

1. Every source of ``_build._SOURCES`` cross-compiles with ``aarch64-linux-gnu-g++`` at
   ``-march=armv8-a`` and the extension's own flags (also as ``-DPLR_SCALAR``, syntax only), so a
   NEON break in ``simd.h``/``lanes.h`` fails here and not on someone's ARM machine.
2. ``native_driver.cpp``, linked with those objects and run under ``qemu-aarch64``, renders a seeded
   scene forward and backward; every build variant of the extension this CPU runs (native,
   scalar, x86-64-v2/v3) renders it too. Alphas, binning, ``last_ids`` and ``contrib`` must be bit
   identical (one unfused alpha formula for every build), colours and forward floats within
   ``1e-5`` of the largest value, gradients within ``GRAD_RTOL`` of the largest gradient, the
   tolerances of test_native_variants.py and test_native.py.

Skipped without the tools (Debian: ``g++-aarch64-linux-gnu``, ``qemu-user``; ``.ci/run`` installs
them). ~40 s on 2 cores, mostly parsing torch's headers for bindings.cpp.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from . import aarch64_scene as scene_io
from .aarch64_toolchain import CXX, KERNELS, QEMU, Job, compile_jobs, link_driver, missing, run_jobs

# bit-identical across builds: what alpha thresholds decide (binning culls by the same alpha test)
EXACT = ("radii", "gauss_offsets", "tile_offsets", "flatten_ids", "slot_by_pos", "alphas", "last_ids")
# what the vector builds' 4x4-block path records; scalar builds record no rows (contrib -1) and
# count evaluations per pixel, so these are compared with the variants that take that path
BLOCK_PATH = ("contrib", "n_evaluations")
FORWARD = ("means2d", "depths", "conics", "sh_colors", "colors", "T_final")


@pytest.fixture(scope="module")
def aarch64_build(tmp_path_factory) -> tuple[Path, list[Job]]:
    reason = missing(CXX)
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("aarch64")
    return out, run_jobs(compile_jobs(out))


def test_every_native_source_compiles_for_aarch64(aarch64_build) -> None:
    _, jobs = aarch64_build
    failed = [job.error for job in jobs if job.error]
    assert not failed, "aarch64 build failed:\n\n" + "\n\n".join(failed)


def test_neon_kernels_under_qemu_match_every_x86_variant(aarch64_build) -> None:
    reason = missing(QEMU)
    if reason:
        pytest.skip(reason)
    out, jobs = aarch64_build
    if any(job.error for job in jobs if job.label in KERNELS):
        pytest.skip("the aarch64 kernels did not compile (see the compile test)")
    from .native_required import require_native
    from .test_native import assert_grad_close
    from .variants import load, runnable_variants

    require_native()
    driver = link_driver([out / f"{Path(k).stem}.o" for k in KERNELS], out / "native_driver")
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
