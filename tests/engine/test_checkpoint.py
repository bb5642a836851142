"""Checkpoints: hook state, exact resume, Ctrl-C path, atomic writes, corrupt/mismatching files."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from pointrix_lite.engine import checkpoint as ckpt_io
from pointrix_lite.engine.checkpoint import find_latest, load_checkpoint_file
from pointrix_lite.engine.hooks import Hook
from pointrix_lite.engine.trainer import TrainingInterrupted
from pointrix_lite.errors import CheckpointError
from tests.engine.engine_helpers import make_trainer
from tests.renderer.cuda_required import ON_CUDA


class CounterHook(Hook):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def after_train_iter(self, batch_idx, batch):
        self.count += 1

    def state_dict(self):
        return {"count": self.count, "history": [self.count, "steps"]}

    def load_state_dict(self, state):
        self.count = state["count"]


def test_hook_states_saved_and_reloaded_into_new_trainer(toy_config):
    cfg = toy_config({"trainer": {"max_steps": 8, "test_at_end": False, "val_interval": 0}})
    a = make_trainer(cfg)
    a.register_hook(CounterHook())
    a.run()
    ckpt = load_checkpoint_file(find_latest(a.exp_dir))
    assert ckpt["hooks"]["CounterHook"] == {"count": 8, "history": [8, "steps"]}
    assert ckpt["hooks"]["CheckPointHook"]["saved"] == ["step_000008.pth"]

    b = make_trainer(cfg)
    counter = CounterHook()
    b.register_hook(counter)
    b.load_checkpoint(find_latest(a.exp_dir))
    log_a = next(h for h in a.hooks if h.name == "LogHook")
    log_b = next(h for h in b.hooks if h.name == "LogHook")
    assert counter.count == 8 and b.global_step == 8
    assert log_b.ema_loss == pytest.approx(log_a.ema_loss) and log_b.ema_loss is not None
    assert next(h for h in b.hooks if h.name == "CheckPointHook").saved == ["step_000008.pth"]
    assert b.datapipeline.state_dict() == a.datapipeline.state_dict()
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])


class StopAt(Hook):
    """Simulates Ctrl-C right after step ``n``."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def after_train_iter(self, batch_idx, batch):
        if self.trainer.global_step == self.n:
            raise KeyboardInterrupt


def test_interrupt_saves_and_resume_is_exact(toy_config, tmp_path):
    extra = {"trainer": {"max_steps": 11, "val_interval": 0, "test_at_end": False}}
    straight = make_trainer(toy_config(extra, overrides=[f"exp_dir={tmp_path / 'straight'}"]))
    straight.run()

    cfg = toy_config(extra, overrides=[f"exp_dir={tmp_path / 'resumed'}"])
    first = make_trainer(cfg)
    first.register_hook(StopAt(6))  # mid-epoch (4 views per epoch)
    with pytest.raises(TrainingInterrupted) as exc:
        first.run()
    assert exc.value.step == 6 and exc.value.checkpoint.name == "step_000006.pth"
    assert find_latest(cfg.exp_dir) == exc.value.checkpoint
    assert first.writer.writers[0]._file.closed  # writers closed on the way out

    second = make_trainer(cfg)
    second.run(resume_from=find_latest(cfg.exp_dir))
    assert second.global_step == 11
    p_straight = straight.model.params["means"].detach()
    p_resumed = second.model.params["means"].detach()
    assert torch.equal(p_straight, p_resumed)  # same batches, lrs and Adam moments: bit-identical


def test_keep_last_k_latest_pointer_and_best(toy_config):
    cfg = toy_config(
        {
            "trainer": {"max_steps": 10, "val_interval": 2, "test_at_end": False},
            "hooks": [{"type": "CheckPointHook", "interval": 2, "max_keep": 2, "best_metric": "psnr"}],
        }
    )
    trainer = make_trainer(cfg)
    trainer.run()
    ckpt_dir = trainer.exp_dir / "checkpoints"
    assert sorted(p.name for p in ckpt_dir.glob("*.pth")) == ["best.pth", "step_000008.pth", "step_000010.pth"]
    assert (ckpt_dir / "latest.txt").read_text().strip() == "step_000010.pth"
    assert find_latest(trainer.exp_dir) == ckpt_dir / "step_000010.pth"
    best = load_checkpoint_file(ckpt_dir / "best.pth")
    hook_state = best["hooks"]["CheckPointHook"]
    # psnr rises monotonically while fitting, so the best validation is the last one (step 10)
    assert best["step"] == 10 and hook_state["best_step"] == 10 and hook_state["best_value"] > 20


def test_failed_write_leaves_previous_checkpoint_loadable(toy_config, monkeypatch):
    trainer = make_trainer(toy_config())
    path = trainer.save_checkpoint("step_000000.pth")
    before = path.read_bytes()

    def broken_save(obj, f):
        f.write(b"PK\x03\x04 partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_io.torch, "save", broken_save)
    with pytest.raises(OSError, match="No space left"):
        trainer.save_checkpoint("step_000000.pth")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint_file(path)["step"] == 0
    assert [p.name for p in path.parent.iterdir()] == ["step_000000.pth", "latest.txt"] or sorted(
        p.name for p in path.parent.iterdir()
    ) == ["latest.txt", "step_000000.pth"]  # no temp files left


def test_truncated_and_missing_checkpoint_errors(toy_config, tmp_path):
    trainer = make_trainer(toy_config())
    path = trainer.save_checkpoint()
    cut = tmp_path / "cut.pth"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"cut\.pth: unreadable checkpoint") as exc:
        trainer.load_checkpoint(cut)
    assert "\n" not in str(exc.value)
    with pytest.raises(CheckpointError, match=r"nothing\.pth: checkpoint file not found"):
        trainer.load_checkpoint(tmp_path / "nothing.pth")


def test_checkpoint_from_other_config_is_a_clear_error(toy_config, tmp_path):
    trainer = make_trainer(toy_config())
    path = trainer.save_checkpoint()
    other = make_trainer(toy_config({"model": {"channels": 4}}, overrides=[f"exp_dir={tmp_path / 'other'}"]))
    with pytest.raises(CheckpointError, match=r"does not match this config's model/optimizer: .*size mismatch"):
        other.load_checkpoint(path)

    ckpt = torch.load(path, weights_only=True)
    ckpt["config"]["model"]["type"] = "GaussianModel"
    foreign = tmp_path / "foreign.pth"
    torch.save(ckpt, foreign)
    with pytest.raises(
        CheckpointError, match=r"from model type 'GaussianModel', this config has model.type 'ToyModel'"
    ):
        trainer.load_checkpoint(foreign)


@pytest.mark.parametrize("map_location", ["cpu", ON_CUDA])
def test_rng_state_round_trip_is_weights_only_safe(tmp_path, map_location):
    """``map_location`` is the training device: a checkpoint loaded onto CUDA (render.py, resume)
    carries the numpy state's keys as a CUDA tensor, which numpy cannot read without a copy."""
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    state = ckpt_io.rng_state()
    ckpt_io.save_checkpoint_file({"rng": state}, tmp_path / "rng.pth")
    loaded = torch.load(tmp_path / "rng.pth", weights_only=True, map_location=map_location)["rng"]
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    ckpt_io.set_rng_state(loaded)
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]
