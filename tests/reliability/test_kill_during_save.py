"""SIGKILL in the middle of writing a checkpoint: the previous one and latest.txt stay usable."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.errors import CheckpointError

from .cli_helpers import FAULT_PLUGIN, REPO, run_train, train_cmd, write_config
from .scene import real_raw_config


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigkill_mid_save_keeps_previous_checkpoint_and_resumes(tmp_path, tiny_scene, backend):
    marker = tmp_path / "second_save_half_written"
    raw = real_raw_config(tmp_path / "out", tiny_scene, backend)  # saves after steps 8 and 16
    # The second save (step 16) trickles out 4 KiB every 0.2 s; the marker appears after 8 KiB.
    raw["hooks"].append(
        {"type": "DiskFaultHook", "chunk_delay": 0.2, "slow_from_save": 2, "writing_marker": str(marker)}
    )
    config = write_config(tmp_path / "run.yaml", raw)
    proc = subprocess.Popen(
        train_cmd("--config", str(config), "--plugin", str(FAULT_PLUGIN)),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the second save never started"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)  # no handler, no cleanup: what the OOM killer or a scheduler does
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    exp_dir = tmp_path / "out" / "tiny"
    ckpt_dir = exp_dir / "checkpoints"
    partial = [p for p in ckpt_dir.iterdir() if p.name.startswith(".step_000016.pth.")]
    assert len(partial) == 1 and partial[0].stat().st_size > 0  # killed while really writing it ...
    with pytest.raises(CheckpointError, match="truncated"):  # ... so that file is cut off
        load_checkpoint_file(partial[0])
    assert not (ckpt_dir / "step_000016.pth").exists()
    assert (ckpt_dir / "latest.txt").read_text().strip() == "step_000008.pth"
    assert find_latest(exp_dir) == ckpt_dir / "step_000008.pth"
    assert load_checkpoint_file(ckpt_dir / "step_000008.pth")["step"] == 8

    # The run goes on from there (the resumed process's first save is fast: slow_from_save counts per process).
    res = run_train("--config", str(exp_dir / "config.yaml"), "--resume", "--plugin", str(FAULT_PLUGIN))
    assert res.returncode == 0, res.stderr
    assert load_checkpoint_file(find_latest(exp_dir))["step"] == 16
    assert not partial[0].exists()  # rewriting step_000016.pth removed the killed write's leftover
