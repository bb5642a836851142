"""Files the project writes get the permissions a plain open() gives (0666 & ~umask), not the
0600 of a temporary file: checked on a short training run under umask 022 and an export under 027."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO_DATA = REPO / "data" / "demo" / "nerf_synthetic"  # generated on first use by the data loader


def _run(argv, umask):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.umask(umask),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}


def test_training_and_export_outputs_follow_the_umask(tmp_path):
    exp = tmp_path / "exp"
    _run(
        [
            "scripts/train.py",
            "--config",
            "configs/demo.yaml",
            f"exp_dir={exp}",
            f"dataset.data_path={DEMO_DATA}",
            "dataset.scale=4",
            "trainer.max_steps=20",
            "trainer.val_interval=0",
            "save_ckpt_after_iter=10",
            "log_show_after_iter=10",
            "hooks.0.formats=[ply, splat, ply_compressed]",
        ],
        umask=0o022,
    )
    modes = _modes(exp)
    for name in (
        "point_cloud.ply",
        "point_cloud.splat",
        "point_cloud.compressed.ply",
        "metrics.json",
        "config.yaml",
        "checkpoints/step_000010.pth",
        "checkpoints/step_000020.pth",
        "checkpoints/latest.txt",
    ):
        assert name in modes, sorted(modes)
    assert any(name.startswith("renders/test/render/") for name in modes)
    assert {name: mode for name, mode in modes.items() if mode != 0o644} == {}

    _run(
        ["scripts/export.py", "--exp-dir", str(exp), "--format", "splat", "--out", str(tmp_path / "x.splat")],
        umask=0o027,
    )
    assert stat.S_IMODE((tmp_path / "x.splat").stat().st_mode) == 0o640
