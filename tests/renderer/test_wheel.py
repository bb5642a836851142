"""A wheel with the native rasterizer prebuilt installs and trains on a machine without a compiler (issue 67),
and the source build it replaces compiles once, announced, before training (issue 11 item 6).

scripts/build_wheel.py builds the wheel (for the highest level this CPU runs: each level costs a build;
the choice among several is test_prebuilt.py's), it is installed into a fresh venv, and the tiny scene trains from a PATH
that holds no compiler and an empty torch extensions cache: the module for this CPU loads, nothing
compiles, and the trained model is bit for bit the source build's (``-march=native``: the same simd.h
code paths, no fused operations, ``-ffp-contract=off``). That source run starts from an empty cache
too: it prints the build line once, compiles after it, and its ``train_seconds`` leave the build out;
a second run on the warm cache prints nothing. (One test: each cold build costs half a minute.)
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
import time
from pathlib import Path

import pytest
import torch

from pointrix_lite.renderer import native
from pointrix_lite.renderer.native.cpu_check import check_target
from tests.reliability.cli_helpers import REPO, train_cmd, write_config
from tests.reliability.scene import real_raw_config, write_tiny_scene
from tests.reliability.test_exact_resume import _tensors_equal

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


def _build_wheel(tmp_path: Path, targets: str) -> Path:
    src = tmp_path / "src"  # a copy: the build leaves build/ and egg-info behind
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "prebuilt"))
        else:
            shutil.copy(REPO / name, src / name)
    dist = tmp_path / "dist"
    cmd = [sys.executable, str(REPO / "scripts" / "build_wheel.py"), "--targets", targets, "--out", str(dist)]
    built = subprocess.run([*cmd, "--source", str(src)], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("*.whl")
    return wheel


def _install(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding ``wheel``; the dependencies seen through a .pth line (not a site folder, so the
    test environment's editable pointrix_lite is not). Returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    where = [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    site = Path(subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    return site


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> list[tuple[float, str]]:
    """Run ``cmd``; every stdout line with the wall-clock time it arrived. Fails the test on an error exit."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    lines = [(time.time(), line.rstrip("\n")) for line in proc.stdout]
    assert proc.wait(timeout=600) == 0, "\n".join(line for _, line in lines)[-3000:]
    return lines


def test_wheel_trains_without_a_compiler_bit_identical_to_the_source_build(tmp_path: Path) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the wheel's levels are x86-64's")
    top = _top_level()
    wheel = _build_wheel(tmp_path, top)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert re.fullmatch(rf"pointrix_lite-[\d.]+-{tag}-{tag}-manylinux_\d+_\d+_x86_64\.whl", wheel.name), wheel.name
    venv = tmp_path / "venv"
    site = _install(wheel, venv)

    scene = write_tiny_scene(tmp_path / "scene")
    configs = {
        label: write_config(tmp_path / f"{label}.yaml", real_raw_config(tmp_path / label, scene, "native", **kw))
        for label, kw in (
            ("wheel", {"test_at_end": True}),
            ("source", {"test_at_end": True}),
            ("warm", {"max_steps": 4}),
        )
    }
    caches = {label: tmp_path / f"torch_extensions_{label}" for label in ("wheel", "source")}
    for cache in caches.values():
        cache.mkdir()

    # the wheel: the venv's commands only on the PATH, no compiler there; nothing of the checkout
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "TORCH_EXTENSIONS_DIR": str(caches["wheel"])}
    assert shutil.which("c++", path=env["PATH"]) is None and shutil.which("g++", path=env["PATH"]) is None
    where = [venv / "bin" / "python", "-c", "import pointrix_lite; print(pointrix_lite.__file__)"]
    imported = subprocess.run(where, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert Path(imported.stdout.strip()).is_relative_to(site), imported.stdout + imported.stderr
    wheel_out = "\n".join(
        line
        for _, line in _run(
            [str(venv / "bin" / "pointrix-train"), "--config", str(configs["wheel"])],
            {**env, "PYTHONUNBUFFERED": "1"},
            tmp_path,
        )
    )
    assert f"native rasterizer: {top} " in wheel_out and ", prebuilt" in wheel_out, wheel_out[-2000:]
    assert native.BUILD_MESSAGE not in wheel_out
    assert not any(caches["wheel"].iterdir()), "the wheel's run compiled something"

    # the source build, from an empty cache, then warm
    source_env = {k: v for k, v in os.environ.items() if k != "POINTRIX_NATIVE_ARCH"}
    source_env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), TORCH_EXTENSIONS_DIR=str(caches["source"]))
    cold = _run(train_cmd("--config", str(configs["source"])), source_env, REPO)
    warm = _run(train_cmd("--config", str(configs["warm"])), source_env, REPO)
    announced = [t for t, line in cold if line.strip() == native.BUILD_MESSAGE]
    assert len(announced) == 1, "\n".join(line for _, line in cold)[-3000:]
    assert not any(native.BUILD_MESSAGE in line for _, line in warm)
    runs_tested = ("wheel", "source")
    (library,) = caches["source"].rglob("pointrix_lite_native_*.so")
    build_seconds = library.stat().st_mtime - announced[0]
    assert build_seconds > 5  # a real compile happened after the line
    metrics = {label: json.loads(next((tmp_path / label).rglob("metrics.json")).read_text()) for label in runs_tested}
    assert metrics["source"]["steps"] == 16
    assert metrics["source"]["train_seconds"] < build_seconds  # the build was not timed as training

    # the wheel's model is the source build's, bit for bit
    assert metrics["wheel"]["per_view"] == metrics["source"]["per_view"]
    ckpts = {
        label: torch.load(sorted((tmp_path / label).rglob("step_*.pth"))[-1], map_location="cpu", weights_only=False)
        for label in runs_tested
    }
    for part in ("model", "optimizer", "strategy", "rng"):  # every tensor a checkpoint holds is in these
        _tensors_equal(ckpts["wheel"][part], ckpts["source"][part], part)
