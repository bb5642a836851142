"""The engine's seam: loop.py and run.py drive any object with the LoopTrainer protocol (here a double,
not a DefaultTrainer), and nothing outside the trainer's own classes touches its private attributes."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pointrix_lite.engine import loop
from pointrix_lite.engine.state import LoopTrainer, RunState, StateAttributes

PACKAGE = Path(__file__).resolve().parents[2] / "pointrix_lite"


class DoubleTrainer(StateAttributes):
    """The protocol's attributes and methods, recording what the loop does."""

    def __init__(self, max_steps: int, batches: list[list[str]], stop_at: int | None = None) -> None:
        self.cfg = SimpleNamespace(trainer=SimpleNamespace(max_steps=max_steps, val_interval=2), seed=0)
        self.state = RunState()
        self.model = SimpleNamespace(train=lambda: None)
        self.datapipeline = SimpleNamespace(batches_for_epoch=lambda epoch: list(batches))
        self.is_main_process = True
        self.console = SimpleNamespace(print=lambda *a, **k: None)
        self.end_phases = SimpleNamespace(record=lambda name, step: contextlib.nullcontext())
        self.calls: list[str] = []
        self.stop_at = stop_at

    def call_hook(self, site: str, **kwargs: Any) -> None:
        self.calls.append(site if "batch" not in kwargs else f"{site}:{kwargs['batch'][0]}")

    def train_step(self, batch: list) -> dict[str, Any]:
        self.calls.append(f"step:{batch[0]}")
        if self.stop_at is not None and self.state.step + 1 == self.stop_at:
            self.state.stop_requested = True  # what the first Ctrl-C sets
        return {}

    def validation(self) -> None:
        self.calls.append(f"val@{self.state.step}")


def test_the_loop_drives_a_double_through_the_protocol():
    t = DoubleTrainer(max_steps=3, batches=[["a"], ["b"]])
    loop.train_loop(t)  # type: ignore[arg-type]  (a structural match, checked below)
    assert t.calls == [
        "before_train",
        "before_train_epoch",
        "before_train_iter:a",
        "step:a",
        "after_train_iter:a",
        "before_train_iter:b",
        "step:b",
        "after_train_iter:b",
        "val@2",
        "after_train_epoch",
        "before_train_epoch",
        "before_train_iter:a",
        "step:a",
        "after_train_iter:a",
        "after_train_epoch",
        "after_train",
    ]
    assert (t.state.step, t.state.epoch, t.state.phase) == (3, 1, "export") and t.state.train_seconds > 0


def test_a_stop_request_in_the_state_ends_the_loop_after_that_step():
    t = DoubleTrainer(max_steps=10, batches=[["a"], ["b"]], stop_at=2)
    with pytest.raises(KeyboardInterrupt):
        loop.train_loop(t)  # type: ignore[arg-type]
    assert t.state.step == 2 and "after_train" not in t.calls


def test_the_default_trainer_has_what_the_protocol_declares(toy_config):
    from pointrix_lite.engine.trainer import DefaultTrainer

    trainer = DefaultTrainer(toy_config(), toy_config().exp_dir, "cpu")
    names = [n for n in LoopTrainer.__annotations__] + [
        n for n in vars(LoopTrainer) if not n.startswith("_") and callable(getattr(LoopTrainer, n))
    ]
    missing = [n for n in names if not hasattr(trainer, n)]
    assert missing == []
    trainer.global_step = 5
    assert trainer.state.step == 5  # one state: the property and the RunState agree


def test_no_module_reads_the_trainers_private_attributes():
    pattern = re.compile(r"\btrainer\._[a-z]")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
