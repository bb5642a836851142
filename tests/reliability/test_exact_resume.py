"""Ctrl-C and exact resume with the real GaussianModel + GaussianRenderer + DefaultStrategy.

Two runs of the real command line on the tiny scene: one straight through 16 steps, one that
receives a real SIGINT after step 7 and is then resumed with the command it printed. Densification
runs after 0-based steps 3 and 6 (before the stop) and 9, 12, 15 (after it), so the resumed run
must restore a model whose size changed, Adam moments row-aligned with it, the strategy's
gradient statistics, the data order, the learning-rate schedule and the RNG states.

Tolerance: none. On the CPU every operation is deterministic for identical inputs (the `backend`
fixture checks the rasterizer), so any difference at all is state the checkpoint failed to carry.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys

import pytest
import torch

from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file

from .cli_helpers import FAULT_PLUGIN, REPO, logged, run_train, train_cmd, write_config
from .scene import real_raw_config

STOP = 7  # mid-epoch (6 training views), between the refinements after steps 6 and 9


def _tensors_equal(a, b, where: str) -> None:
    """Recursively compare nested checkpoint data; tensors bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _tensors_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _tensors_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_then_resume_equals_uninterrupted_run(tmp_path, tiny_scene, backend):
    straight = real_raw_config(tmp_path / "straight", tiny_scene, backend)
    stopped = real_raw_config(tmp_path / "stopped", tiny_scene, backend)
    stopped["hooks"].append({"type": "SigintAtHook", "step": STOP})
    cmds = [
        train_cmd("--config", str(write_config(tmp_path / "straight.yaml", straight))),
        train_cmd("--config", str(write_config(tmp_path / "stopped.yaml", stopped)), "--plugin", str(FAULT_PLUGIN)),
    ]
    procs = [subprocess.Popen(c, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    (_, err_a), (_, err_b) = (p.communicate(timeout=300) for p in procs)
    assert procs[0].returncode == 0, err_a
    assert procs[1].returncode == 128 + signal.SIGINT, err_b

    # Ctrl-C: checkpoint of the finished step, pointer updated, message says how to resume.
    exp_a, exp_b = tmp_path / "straight" / "tiny", tmp_path / "stopped" / "tiny"
    ckpt = exp_b / "checkpoints" / f"step_{STOP:06d}.pth"
    assert f"interrupted at step {STOP}; checkpoint saved to {ckpt}" in err_b
    assert find_latest(exp_b) == ckpt and load_checkpoint_file(ckpt)["step"] == STOP
    assert max(logged(exp_b)) == STOP  # writers flushed and closed: every line parses

    resume_line = next(line for line in err_b.splitlines() if line.startswith("resume with: python "))
    args = shlex.split(resume_line.removeprefix("resume with: python "))
    assert args[0] == "scripts/train.py" and "--resume" in args
    res = run_train(*args[1:])
    assert res.returncode == 0, res.stderr

    # Same loss at every step, bit for bit, and the model really changed size on both sides of the stop.
    assert logged(exp_b) == logged(exp_a) and sorted(logged(exp_a)) == list(range(1, 17))
    sizes = logged(exp_a, "train/num_gaussians")
    assert sizes == logged(exp_b, "train/num_gaussians")
    assert sizes[1] < sizes[STOP] < sizes[16], sizes

    # Same final model, optimizer moments, strategy statistics, data position and RNG states.
    final_a = load_checkpoint_file(exp_a / "checkpoints" / "step_000016.pth")
    final_b = load_checkpoint_file(exp_b / "checkpoints" / "step_000016.pth")
    for key in ("model", "optimizer", "strategy", "datapipeline", "rng", "step", "epoch"):
        _tensors_equal(final_a[key], final_b[key], key)
