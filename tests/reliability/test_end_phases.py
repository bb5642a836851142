"""Ctrl-C after training finished (export, test) keeps what was done; ``--resume`` does only the rest.

The real command line on the tiny scene, with a real SIGINT sent by ``SigintAtHook`` at a
reproducible place: in the export (after the PLY, before the last checkpoint) or after the second
test view. Each run is then resumed with the command it printed, and what the first run wrote is
checked to be there, unchanged (same inode: not written again) where that phase had finished.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from PIL import Image

from pointrix_lite.engine.checkpoint import CHECKPOINT_DIR, checkpoint_name, find_latest, load_checkpoint_file
from pointrix_lite.io.ply import load_ply

from .cli_helpers import FAULT_PLUGIN, run_train, write_config
from .scene import real_raw_config

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

STEPS = 12  # no checkpoint of step 12 before the export: CheckPointHook saves every 8 and last


def _config(tmp_path: Path, scene: Path, backend: str, sigint: dict) -> Path:
    raw = real_raw_config(tmp_path / "out", scene, backend, max_steps=STEPS, test_at_end=True)
    raw["hooks"] += [
        {"type": "PlyExportHook"},
        {"type": "SigintAtHook", **sigint, "once_file": str(tmp_path / "fired")},
    ]
    return write_config(tmp_path / "run.yaml", raw)


def _inodes(exp_dir: Path) -> dict[str, int]:
    return {p.relative_to(exp_dir).as_posix(): p.stat().st_ino for p in exp_dir.rglob("*") if p.is_file()}


def _resume(exp_dir: Path) -> tuple[str, str]:
    res = run_train("--config", str(exp_dir / "config.yaml"), "--resume", "--plugin", str(FAULT_PLUGIN))
    assert res.returncode == 0, res.stderr
    return res.stdout, res.stderr


def _interrupted_run(tmp_path: Path, scene: Path, backend: str, sigint: dict, phase: str) -> tuple[Path, Path]:
    """Train with ``SigintAtHook(**sigint)``; check the exit status and the message naming ``phase``.

    Returns the experiment folder and the checkpoint of the last step the message names.
    """
    res = run_train("--config", str(_config(tmp_path, scene, backend, sigint)), "--plugin", str(FAULT_PLUGIN))
    assert res.returncode == 128 + signal.SIGINT, res.stderr
    exp_dir = tmp_path / "out" / "tiny"
    ckpt = exp_dir / CHECKPOINT_DIR / checkpoint_name(STEPS)
    assert f"interrupted during {phase} (training finished at step {STEPS}); checkpoint saved to {ckpt}" in res.stderr
    assert f"--resume --plugin {FAULT_PLUGIN}  # redoes the {phase} and what follows;" in res.stderr
    assert "Traceback" not in res.stderr
    return exp_dir, ckpt


def test_ctrl_c_in_test_keeps_export_and_renders_then_resume_tests_only(tmp_path, tiny_scene, backend):
    exp_dir, ckpt = _interrupted_run(tmp_path, tiny_scene, backend, {"site": "after_test_iter", "view": 0}, "test")
    # Every finished file is there and whole: the PLY re-read, the checkpoint loads, the first
    # view's renders decode; the test's metrics and the report are not written yet.
    assert find_latest(exp_dir) == ckpt and load_checkpoint_file(ckpt)["step"] == STEPS
    n_gaussians = load_ply(exp_dir / "point_cloud.ply")["means"].shape[0]
    assert n_gaussians > 0
    renders = sorted((exp_dir / "renders" / "test" / "render").glob("*.png"))
    assert len(renders) == 1 and Image.open(renders[0]).size == (32, 32)
    assert not (exp_dir / "metrics.json").exists() and not (exp_dir / "report.html").exists()
    assert not list(exp_dir.rglob("*.tmp")), "a temp file of an interrupted write was left"
    before = _inodes(exp_dir)

    out, _ = _resume(exp_dir)
    assert f"export: done at step {STEPS} before this resume, kept (" in out
    after = _inodes(exp_dir)
    for kept in ("point_cloud.ply", f"{CHECKPOINT_DIR}/{checkpoint_name(STEPS)}"):
        assert after[kept] == before[kept], f"{kept} was written again"
    assert not any(name.startswith(f"{CHECKPOINT_DIR}/step_") and name not in before for name in after)
    metrics = json.loads((exp_dir / "metrics.json").read_text())
    assert metrics["steps"] == STEPS and len(metrics["per_view"]) == 2
    assert metrics["num_gaussians"] == n_gaussians
    assert (exp_dir / "report.html").is_file()

    # Everything done: a second resume keeps every phase and rewrites nothing of them.
    out, _ = _resume(exp_dir)
    for phase in ("export", "test", "report"):
        assert f"{phase}: done at step {STEPS} before this resume" in out
    again = _inodes(exp_dir)
    for name in ("metrics.json", "report.html", "point_cloud.ply"):
        assert again[name] == after[name], f"{name} was written again"

    # A deleted output is a phase not done: resuming writes it again, and only it.
    (exp_dir / "metrics.json").unlink()
    out, _ = _resume(exp_dir)
    assert "test: done" not in out and "export: done" in out
    assert json.loads((exp_dir / "metrics.json").read_text())["per_view"] == metrics["per_view"]


def test_ctrl_c_in_export_saves_the_last_step_then_resume_exports_and_tests(tmp_path, tiny_scene, backend):
    # Between PlyExportHook (LOW, 70) and CheckPointHook (VERY_LOW, 90): the PLY is written, the
    # last checkpoint is not, so the trainer must save it before stopping.
    exp_dir, ckpt = _interrupted_run(tmp_path, tiny_scene, backend, {"site": "after_train", "priority": 80}, "export")
    assert load_checkpoint_file(ckpt)["step"] == STEPS  # the steps after the step-8 checkpoint are kept
    assert (exp_dir / "point_cloud.ply").is_file() and not (exp_dir / "metrics.json").exists()

    out, _ = _resume(exp_dir)
    assert "export: done" not in out  # not recorded: it was cut short, so it runs again
    assert json.loads((exp_dir / "metrics.json").read_text())["steps"] == STEPS
    record = json.loads((exp_dir / "end_phases.json").read_text())
    assert record["step"] == STEPS and set(record["phases"]) == {"export", "test", "report"}
    assert "point_cloud.ply" in record["phases"]["export"]["files"]
    assert "metrics.json" in record["phases"]["test"]["files"]
