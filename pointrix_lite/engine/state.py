"""What a run keeps between steps, and the trainer's seam as the loop and the run see it.

``RunState`` is the run's progress in one object: the loop and the run (``loop.py``, ``run.py``)
advance it, the checkpoint stores it, hooks read it through the trainer's ``global_step`` / ``epoch`` /
``train_seconds``. ``LoopTrainer`` declares exactly what ``loop.py`` and ``run.py`` use of a trainer, so
they touch no private attribute and a test double (or another trainer) can drive them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass
class RunState:
    """The run's progress.

    Attributes:
        step: Finished optimizer steps (``trainer.global_step``).
        epoch: Finished passes over the training views.
        train_seconds: Wall time inside the training loop, summed over resumes.
        stop_requested: A first Ctrl-C arrived: stop after the current step, with a checkpoint.
        phase: ``"training"`` or the end phase running (``export``, ``test``, ``report``): a Ctrl-C's
            message names it, and a resume redoes it and what follows.
    """

    step: int = 0
    epoch: int = 0
    train_seconds: float = 0.0
    stop_requested: bool = False
    phase: str = "training"


class _StateField:
    """A trainer attribute that reads and writes one field of ``self.state``."""

    def __init__(self, field: str, doc: str) -> None:
        self.field, self.__doc__ = field, doc

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else getattr(obj.state, self.field)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj.state, self.field, value)


class StateAttributes:
    """``global_step``, ``epoch`` and ``train_seconds`` as views of ``self.state`` (a :class:`RunState`):
    the names hooks, checkpoints and user code have always read, with one state behind them."""

    state: RunState
    global_step = _StateField("step", "Finished optimizer steps.")
    epoch = _StateField("epoch", "Finished passes over the training views.")
    train_seconds = _StateField("train_seconds", "Wall time inside the training loop, summed over resumes.")


class LoopTrainer(Protocol):
    """What ``loop.train_loop`` / ``loop.train_step`` and ``run.run`` use of a trainer
    (``DefaultTrainer`` provides it all)."""

    cfg: Any  # ExperimentConfig: .trainer (max_steps, val_interval, test_at_end), .seed, .load_ckpt_before_run
    state: RunState
    global_step: int  # = state.step
    epoch: int  # = state.epoch
    train_seconds: float  # = state.train_seconds
    model: Any
    optimizer: Any
    strategy: Any
    renderer: Any
    dataset: Any
    datapipeline: Any
    device: Any
    exp_dir: Path
    is_main_process: bool
    console: Any
    writer: Any
    end_phases: Any  # engine.end_phases.EndPhases
    step_render_kw: dict[str, Any]  # extra renderer keywords of a training step (loop.step_render_kw)
    loss_dict: dict[str, Any]
    render_out: dict[str, Any]

    def call_hook(self, site: str, **kwargs: Any) -> None: ...
    def hook_table(self) -> str: ...
    def announce(self, line: str) -> None: ...
    def train_loop(self) -> None: ...
    def train_step(self, batch: list) -> dict[str, Any]: ...
    def validation(self) -> Any: ...
    def test(self) -> Any: ...
    def write_report(self) -> Any: ...
    def load_checkpoint(self, path: str | Path) -> dict[str, Any]: ...
    def save_checkpoint(self, filename: str | None = None, update_latest: bool = True) -> Path: ...
