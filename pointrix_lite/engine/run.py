"""A whole run: before_run, resume, train, then the end phases (export, test, report), after_run.

The phases after training are recorded in ``end_phases.json`` (:mod:`engine.end_phases`);
resuming a run that finished training skips those recorded at its step whose files are still
there. A Ctrl-C anywhere ends in :class:`TrainingInterrupted` with a checkpoint of the last step
on disk, naming the phase it cut short.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from . import checkpoint as ckpt_io
from .end_phases import EndPhases
from .state import LoopTrainer


class TrainingInterrupted(Exception):
    """Ctrl-C during the run; a checkpoint of the last finished step is on disk.

    ``phase`` is ``"training"``, or the end phase that was cut short once training had finished
    (``"export"``, ``"test"``, ``"report"``): the phases before it and their files are kept.
    """

    def __init__(self, step: int, checkpoint: Path, phase: str = "training") -> None:
        where = f"at step {step}" if phase == "training" else f"during {phase} (training finished at step {step})"
        super().__init__(f"interrupted {where}; checkpoint saved to {checkpoint}")
        self.step = step
        self.checkpoint = checkpoint
        self.phase = phase


def run(trainer: LoopTrainer, resume_from: str | Path | None = None) -> None:
    """before_run -> (load checkpoint) -> train_loop -> test -> report -> after_run; writers closed at the end.

    Raises:
        TrainingInterrupted: Ctrl-C during training or an end phase (a checkpoint of the
            last step is on disk first).
    """
    main = trainer.is_main_process
    if main:
        trainer.console.print(trainer.hook_table(), markup=False)
    try:
        trainer.call_hook("before_run")
        to_load = resume_from or trainer.cfg.load_ckpt_before_run
        if to_load:
            trainer.load_checkpoint(to_load)
        trainer.end_phases = EndPhases(trainer.exp_dir, write=main)
        finished = trainer.global_step >= trainer.cfg.trainer.max_steps
        if not (to_load and finished):  # this run trains: a record left in exp_dir is of another model
            trainer.end_phases.forget()
        trainer.state.phase = "training"
        try:
            if _end_phase_due(trainer, "export"):
                trainer.train_loop()
            if trainer.cfg.trainer.test_at_end and main and _end_phase_due(trainer, "test"):
                _end_phase(trainer, "test", trainer.test)
            if main and _end_phase_due(trainer, "report"):
                _end_phase(trainer, "report", trainer.write_report)
        except KeyboardInterrupt:
            raise TrainingInterrupted(trainer.global_step, _checkpoint_at_step(trainer), trainer.state.phase) from None
        trainer.call_hook("after_run")
    except BaseException:
        # The error that stopped the run matters more than a failed flush (on a full disk the
        # writers fail too): close what can be closed, then re-raise the original.
        with contextlib.suppress(Exception):
            trainer.writer.close()
        raise
    trainer.writer.close()


def _end_phase(trainer: LoopTrainer, name: str, body: Any) -> None:
    trainer.state.phase = name
    with trainer.end_phases.record(name, trainer.global_step):
        body()


def _end_phase_due(trainer: LoopTrainer, name: str) -> bool:
    """False for an end phase a resumed run already finished at this step (one line says so)."""
    if not trainer.end_phases.done(name, trainer.global_step):
        return True
    if trainer.is_main_process:
        kept = trainer.end_phases.files(name)
        shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
        trainer.announce(f"{name}: done at step {trainer.global_step} before this resume, kept ({shown or 'no files'})")
    return False


def _checkpoint_at_step(trainer: LoopTrainer) -> Path:
    """The checkpoint of ``global_step``: the latest one when it is of this step, else saved now."""
    latest = ckpt_io.find_latest(trainer.exp_dir)
    if latest is not None and latest.name == ckpt_io.checkpoint_name(trainer.global_step):
        return latest
    return trainer.save_checkpoint(ckpt_io.checkpoint_name(trainer.global_step))
