"""The native extension is built while the trainer is set up, announced by one line only when it
compiles, and its build time stays out of ``train_seconds`` (issue 11 item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pointrix_lite.renderer import native
from tests.reliability.cli_helpers import REPO, train_cmd, write_config
from tests.reliability.scene import real_raw_config, write_tiny_scene

from .native_required import require_native

require_native(allow_module_level=True)

PROBE = "from pointrix_lite.renderer.native._build import build_pending; print(build_pending())"


def _env(ext_dir: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    if ext_dir is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
    return env


def test_build_pending_tells_a_cold_cache_from_a_warm_one(tmp_path):
    # this process already loaded the extension from the usual cache, so that cache is warm
    warm = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_env(None), timeout=120)
    cold = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=_env(tmp_path), timeout=120
    )
    assert (warm.returncode, cold.returncode) == (0, 0), warm.stderr + cold.stderr
    assert warm.stdout.strip() == "False"
    assert cold.stdout.strip() == "True"
    assert not list(tmp_path.rglob("*.so"))  # the probe itself built nothing


def _train(cfg: Path, ext_dir: Path) -> tuple[list[tuple[float, str]], int]:
    """Run train.py; every stdout line with the wall-clock time it arrived."""
    proc = subprocess.Popen(
        train_cmd("--config", str(cfg)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(ext_dir),
        cwd=REPO,
    )
    lines = [(time.time(), line.rstrip("\n")) for line in proc.stdout]
    return lines, proc.wait(timeout=600)


@pytest.mark.slow
def test_first_run_builds_before_training_and_says_so_once(tmp_path):
    scene = write_tiny_scene(tmp_path / "scene")
    ext_dir = tmp_path / "torch_ext"
    reports = []
    outputs = []
    for run in ("cold", "warm"):
        raw = real_raw_config(tmp_path / run, scene, backend="auto", max_steps=4, test_at_end=True)
        lines, rc = _train(write_config(tmp_path / f"{run}.yaml", raw), ext_dir)
        text = "\n".join(line for _, line in lines)
        assert rc == 0, text[-3000:]
        outputs.append(lines)
        (metrics,) = (tmp_path / run).rglob("metrics.json")
        reports.append(json.loads(metrics.read_text()))

    cold, warm = outputs
    announced = [t for t, line in cold if line.strip() == native.BUILD_MESSAGE]
    assert len(announced) == 1, "\n".join(line for _, line in cold)[-3000:]
    assert not any(native.BUILD_MESSAGE in line for _, line in warm)
    (library,) = ext_dir.rglob("pointrix_lite_native_*.so")
    build_seconds = library.stat().st_mtime - announced[0]
    assert build_seconds > 5  # a real compile happened after the line (it takes about a minute)
    # had the build landed inside the training loop, train_seconds would include it
    assert reports[0]["steps"] == 4
    assert reports[0]["train_seconds"] < build_seconds
