"""On a GPU every read of a device value back to Python waits for the queued kernels. The hooks that
run every step (NaNGuardHook, LogHook) keep their per-step work on the device there and read it
back only now and then; on the CPU they behave as before. The device path is driven here with CPU
tensors by forcing the hooks' device test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from pointrix_lite.engine.hooks.log_hook import LogHook
from pointrix_lite.engine.hooks.nan_guard_hook import NaNGuardHook, NonFiniteLossError


class FakeTrainer:  # what the hooks read; a class so the hooks' weak reference can point at it
    def __init__(self, exp_dir: Path) -> None:
        self.exp_dir = exp_dir
        self.global_step = 0
        self.loss_dict: dict = {}
        self.param = torch.nn.Parameter(torch.zeros(4))
        self.model = torch.nn.Module()
        self.model.register_parameter("w", self.param)


def _guard(tmp_path: Path, monkeypatch, read_every: int) -> tuple[NaNGuardHook, FakeTrainer, list[int]]:
    monkeypatch.setattr(NaNGuardHook, "_deferred", staticmethod(lambda terms: True))
    hook = NaNGuardHook(NaNGuardHook.Config(gpu_read_every=read_every))
    trainer = FakeTrainer(tmp_path)
    hook.trainer = trainer
    reads: list[int] = []
    real = NaNGuardHook._read_device_flags
    monkeypatch.setattr(
        NaNGuardHook, "_read_device_flags", lambda self: reads.append(trainer.global_step) or real(self)
    )
    return hook, trainer, reads


def _step(hook: NaNGuardHook, trainer: FakeTrainer, l1: float) -> None:
    trainer.global_step += 1
    trainer.loss_dict = {"loss": torch.tensor(0.5 + l1), "l1": torch.tensor(l1), "ssim": torch.tensor(0.9)}
    hook.after_train_iter(batch_idx=0, batch=[])


def test_deferred_guard_reads_every_n_steps_and_names_the_first_bad_step(tmp_path, monkeypatch) -> None:
    hook, trainer, reads = _guard(tmp_path, monkeypatch, read_every=4)
    for _ in range(5):
        _step(hook, trainer, 0.1)
    assert reads == [1, 4]  # the first step (flags created), then every 4th step
    _step(hook, trainer, math.nan)  # step 6: not read yet, training goes on
    _step(hook, trainer, 0.1)
    with pytest.raises(
        NonFiniteLossError, match=r"^step 8: non-finite loss \(loss first at step 6, l1 first at step 6\)"
    ):
        _step(hook, trainer, 0.1)


def test_deferred_guard_reads_before_a_checkpoint_and_at_the_end(tmp_path, monkeypatch) -> None:
    hook, trainer, _ = _guard(tmp_path, monkeypatch, read_every=100)
    _step(hook, trainer, 0.1)
    hook.before_save_checkpoint(checkpoint={})  # nothing wrong: the save goes on
    _step(hook, trainer, math.inf)
    with pytest.raises(NonFiniteLossError, match="l1 first at step 2"):
        hook.before_save_checkpoint(checkpoint={})  # the checkpoint of a broken step is never written
    hook, trainer, _ = _guard(tmp_path, monkeypatch, read_every=100)
    _step(hook, trainer, 0.1)
    with torch.no_grad():
        trainer.param[1] = math.nan
    with pytest.raises(NonFiniteLossError, match=r"non-finite model parameters \(w: 1 of 4 values\)"):
        hook.after_train()


def test_cpu_guard_still_stops_at_the_step(tmp_path) -> None:
    hook, trainer = NaNGuardHook(), FakeTrainer(tmp_path)
    hook.trainer = trainer
    _step(hook, trainer, 0.1)
    with pytest.raises(NonFiniteLossError, match=r"^step 2: non-finite loss \(loss=nan, l1=nan\)"):
        _step(hook, trainer, math.nan)


@pytest.mark.parametrize(
    ("values", "bad"),
    [
        ([1.0, math.inf, -math.inf, 2.0], 2),  # opposite infinities: their sum is NaN, still caught
        ([math.nan, 0.0, 0.0, 0.0], 1),
        ([3e38, 3e38, -1.0, 5.0], 0),  # finite values whose float32 sum overflows: counted, no stop
        ([1e-45, -1e-45, 0.0, 0.0], 0),
    ],
)
def test_cpu_guard_parameter_check_counts_exactly(tmp_path, values, bad) -> None:
    hook, trainer = NaNGuardHook(), FakeTrainer(tmp_path)
    hook.trainer = trainer
    with torch.no_grad():
        trainer.param.copy_(torch.tensor(values))
    if bad:
        with pytest.raises(NonFiniteLossError, match=rf"non-finite model parameters \(w: {bad} of 4 values\)"):
            _step(hook, trainer, 0.1)
    else:
        _step(hook, trainer, 0.1)  # no stop


def test_log_hook_keeps_a_device_loss_on_the_device() -> None:
    hook = LogHook(LogHook.Config())
    on_meta = torch.tensor(2.0, device="meta")  # any non-CPU tensor; a meta tensor cannot be read at all
    hook._update_ema(on_meta)
    hook._update_ema(on_meta)
    assert isinstance(hook._ema, torch.Tensor) and hook._ema.device.type == "meta"
    cpu = LogHook(LogHook.Config(ema=0.9))
    for value in (1.0, 0.5, torch.tensor(0.25)):
        cpu._update_ema(value)
    assert isinstance(cpu._ema, float) and cpu.ema_loss == pytest.approx(0.9 * (0.9 * 1.0 + 0.1 * 0.5) + 0.1 * 0.25)
    gpu_like = LogHook(LogHook.Config(ema=0.9))
    gpu_like._ema = torch.tensor(1.0)  # as on a GPU: a tensor EMA, read back as a float when shown
    assert gpu_like.ema_loss == 1.0 and gpu_like.state_dict() == {"ema_loss": 1.0}
