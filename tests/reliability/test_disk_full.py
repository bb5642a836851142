"""Full disk and unwritable outputs: checked before training where possible, survivable during it."""

from __future__ import annotations

import errno
import os
import shutil

import pytest
import torch

from pointrix_lite.cli import preflight
from pointrix_lite.cli.train import main
from pointrix_lite.engine import checkpoint as ckpt_io
from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer
from pointrix_lite.errors import ConfigError

from .cli_helpers import logged, write_config
from .scene import real_raw_config


def test_enospc_on_second_save_keeps_first_checkpoint(tmp_path, tiny_scene, backend, monkeypatch, capsys):
    raw = real_raw_config(tmp_path, tiny_scene, backend, max_steps=12)
    raw["hooks"][1]["interval"] = 4
    config = write_config(tmp_path / "run.yaml", raw)
    real_save, calls = torch.save, []

    def save_filling_the_disk(obj, f, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            f.write(b"PK\x03\x04" + bytes(1000))  # part of the file made it to disk, then the disk filled
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt_io.torch, "save", save_filling_the_disk)
    assert main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    ckpt_dir = tmp_path / "tiny" / "checkpoints"
    assert err == (
        f"error: {ckpt_dir / 'step_000008.pth'}: disk full (No space left on device) while writing; "
        "files written before it are intact\n"
    )
    monkeypatch.undo()
    assert sorted(p.name for p in ckpt_dir.iterdir()) == ["latest.txt", "step_000004.pth"]  # no temp file left
    assert find_latest(tmp_path / "tiny") == ckpt_dir / "step_000004.pth"
    assert load_checkpoint_file(ckpt_dir / "step_000004.pth")["step"] == 4
    assert sorted(logged(tmp_path / "tiny")) == list(range(1, 9))  # the log written so far is intact


def test_enospc_while_writing_outputs_is_one_line(tmp_path, tiny_scene, backend, monkeypatch, capsys):
    """Not a checkpoint: a writer's buffered write fails (no file name on the OSError)."""
    from pointrix_lite.writers.jsonl import JsonlWriter

    raw = real_raw_config(tmp_path, tiny_scene, backend, max_steps=4)
    config = write_config(tmp_path / "run.yaml", raw)

    def full(self, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(JsonlWriter, "write_scalar", full)
    assert main(["--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        "error: disk full (No space left on device) while writing outputs; files written before it are intact\n"
    )


def test_free_space_estimate_bounds_a_real_checkpoint(tmp_path, tiny_scene, backend, monkeypatch):
    """The documented estimate is >= the real size and within 10% of it for a model of 20k Gaussians."""
    raw = real_raw_config(tmp_path, tiny_scene, backend, max_steps=2)
    raw["dataset"]["random_init_points"] = 20_000
    raw["strategy"]["refine_start_iter"] = 100  # keep N fixed: the estimate is taken for this model
    cfg = load_experiment(None, data=raw)
    trainer = DefaultTrainer(cfg, cfg.exp_dir, "cpu")
    trainer.run()
    estimate = preflight.estimate_checkpoint_bytes(trainer.model)
    actual = find_latest(cfg.exp_dir).stat().st_size
    assert actual <= estimate <= 1.1 * actual, (actual, estimate)

    # Keep-all, interval 8 over 16 steps: step 8 and 16 (the final save is step 16's) + a temp file.
    assert preflight.checkpoints_on_disk_at_once(trainer.hooks, max_steps=16) == 3
    assert preflight.checkpoints_on_disk_at_once(trainer.hooks, max_steps=20) == 4  # 8, 16, final 20
    need, usage = 3 * estimate, shutil.disk_usage(cfg.exp_dir)
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: usage._replace(free=need))
    assert preflight.check_free_space(cfg.exp_dir, trainer.model, trainer.hooks, 16) == need
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: usage._replace(free=need - 1))
    with pytest.raises(preflight.DiskFullError, match=r"^exp_dir: disk full: .* has .* MiB free"):
        preflight.check_free_space(cfg.exp_dir, trainer.model, trainer.hooks, 16)


def test_output_dir_checks(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"exp_dir: cannot write to output folder .*a_file/run \(Not a directory\)"):
        preflight.check_output_dir(blocker / "run")
    with pytest.raises(ConfigError, match=r"a_file \(a file with that name exists\)"):
        preflight.check_output_dir(blocker)
    assert preflight.check_output_dir(tmp_path / "new" / "run").is_dir()
    assert list((tmp_path / "new" / "run").iterdir()) == []  # the probe file is gone


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_output_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match=r"ro/run \(Permission denied\)"):
        preflight.check_output_dir(ro / "run")
