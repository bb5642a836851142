"""A wheel with the native rasterizer prebuilt installs and trains on a machine without a compiler (issue 67).

scripts/build_wheel.py builds it for two levels (x86-64-v2 and the highest this CPU runs: the choice is
between several), it is installed into a fresh venv, and the demo-sized tiny scene trains from a PATH
that holds no compiler and an empty torch extensions cache: the module for this CPU loads, nothing
compiles, and the trained model is bit for bit the source build's (``-march=native``: the same simd.h
code paths, no fused operations, ``-ffp-contract=off``).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from pointrix_lite.renderer import native
from pointrix_lite.renderer.native.cpu_check import check_target
from tests.reliability.cli_helpers import REPO, run_train, write_config
from tests.reliability.scene import real_raw_config, write_tiny_scene

from .native_required import require_native

require_native(allow_module_level=True)
pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "setup.py", "README.md", "pointrix_lite")


def _top_level() -> str:
    for arch in ("x86-64-v4", "x86-64-v3"):
        try:
            check_target(arch)
            return arch
        except ValueError:
            continue
    pytest.skip("this CPU runs neither x86-64-v3 nor x86-64-v4")


def _tensors(value, prefix: str = ""):
    """Every tensor in a checkpoint, by its key path."""
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors(v, f"{prefix}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{prefix}/{i}")


def test_wheel_trains_without_a_compiler_bit_identical_to_the_source_build(tmp_path: Path) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the wheel's levels are x86-64's")
    top = _top_level()
    src = tmp_path / "src"  # a copy: the build leaves build/ and egg-info behind
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "prebuilt"))
        else:
            shutil.copy(REPO / name, src / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_wheel.py"),
            "--targets",
            f"x86-64-v2,{top}",
            "--out",
            str(dist),
            "--source",
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("*.whl")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert re.fullmatch(rf"pointrix_lite-[\d.]+-{tag}-{tag}-manylinux_\d+_\d+_x86_64\.whl", wheel.name), wheel.name

    # A fresh venv: the wheel installed into it, the dependencies seen through a .pth line (not a site
    # folder, so the test environment's editable pointrix_lite is not), nothing of the checkout on the path.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(
        subprocess.run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    installed = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr

    ext_cache = tmp_path / "torch_extensions"
    ext_cache.mkdir()
    # the PATH: the venv's commands only
    env = {
        "PATH": str(venv / "bin"),
        "HOME": str(tmp_path),
        "TORCH_EXTENSIONS_DIR": str(ext_cache),
        "PYTHONUNBUFFERED": "1",
    }
    assert shutil.which("c++", path=env["PATH"]) is None and shutil.which("g++", path=env["PATH"]) is None
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import pointrix_lite; print(pointrix_lite.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr

    scene = write_tiny_scene(tmp_path / "scene")
    runs = {}
    for label in ("wheel", "source"):
        raw = real_raw_config(tmp_path / label, scene, backend="native", test_at_end=True)
        cfg = write_config(tmp_path / f"{label}.yaml", raw)
        if label == "wheel":
            proc = subprocess.run(
                [str(venv / "bin" / "pointrix-train"), "--config", str(cfg)],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=600,
            )
        else:
            with_native = {k: v for k, v in os.environ.items() if k != "POINTRIX_NATIVE_ARCH"}
            proc = run_train("--config", str(cfg), env=with_native, timeout=600)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        runs[label] = proc.stdout
    assert f"native rasterizer: {top} " in runs["wheel"] and ", prebuilt" in runs["wheel"], runs["wheel"][-2000:]
    assert native.BUILD_MESSAGE not in runs["wheel"]
    assert not any(ext_cache.iterdir()), "the wheel's run compiled something"

    metrics = {label: json.loads(next((tmp_path / label).rglob("metrics.json")).read_text()) for label in runs}
    assert metrics["wheel"]["per_view"] == metrics["source"]["per_view"]
    ckpts = {
        label: torch.load(sorted((tmp_path / label).rglob("step_*.pth"))[-1], map_location="cpu", weights_only=False)
        for label in runs
    }
    wheel_tensors, source_tensors = dict(_tensors(ckpts["wheel"])), dict(_tensors(ckpts["source"]))
    assert wheel_tensors.keys() == source_tensors.keys() and wheel_tensors
    for key, value in wheel_tensors.items():
        assert torch.equal(value, source_tensors[key]), key
