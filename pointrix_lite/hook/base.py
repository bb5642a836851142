"""The :class:`Hook` base class and the fixed list of sites the trainer calls.

A hook is a plain object with one method per site it cares about. The trainer calls every
site in :data:`SITES` (the same 22 as MMEngine, in the order they occur in a run) on every hook,
sorted by priority; a hook overrides only what it needs.

Hooks reach the trainer through ``self.trainer``, a weak reference (as detectron2's
``HookBase``): the trainer owns its hooks, so a strong back-reference would be a cycle that keeps
the model and its GPU memory alive until the cycle collector runs.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Protocol

from .priority import Priority, get_priority


class TrainerLike(Protocol):
    """What hooks read from ``self.trainer``: what the package's own hooks read (checked against
    them by ``tests/engine/test_seam.py``) and the run state the docs offer user hooks.
    ``DefaultTrainer`` provides it all; an ``engine.evaluator.Evaluator``, as ``render.py`` uses,
    lacks ``effective_batch_size`` and calls only the val/test and checkpoint-load sites.

    The optimizer, strategy and data pipeline are not declared: an Evaluator has none, so a hook
    that needs one reads it with ``getattr(self.trainer, "optimizer", None)`` (as LogHook does).

    A Protocol rather than an import of the trainer: this package sits below the engine, whose
    trainer imports the hooks; user hooks and test doubles need no base class.
    """

    # Read by the package's hooks.
    cfg: Any  # engine.experiment.ExperimentConfig
    model: Any
    renderer: Any
    dataset: Any
    device: Any  # torch.device
    exp_dir: Path
    global_step: int  # finished optimizer steps
    effective_batch_size: int  # views per step over all processes
    is_main_process: bool
    writer: Any  # writers.base.WriterGroup
    console: Any  # rich.console.Console
    loss_dict: dict[str, Any]
    log_vars: dict[str, Any]  # scalars hooks publish for LogHook
    image_dict: dict[str, Any]
    render_out: dict[str, Any]  # the renderer's output of the last step or evaluated view
    test_report: dict[str, Any]  # entries hooks add to metrics.json
    state: Any  # engine.state.RunState: step, epoch, seconds, stop request, phase

    def save_checkpoint(self, filename: str | None = None, update_latest: bool = True) -> Path: ...

    # The rest of the run state the docs offer hooks (docs/architecture.md, docs/extending.md).
    epoch: int
    train_seconds: float
    metric_dict: dict[str, float | None]  # mean metrics of the last val/test
    view_metrics: dict[str, float | None]  # metrics of the current val/test view
    rank: int  # this process under torchrun (0 alone otherwise)
    world_size: int

    def call_hook(self, site: str, **kwargs: Any) -> None: ...  # a hook's own sites


# The single source of truth for hook sites, in run order. The trainer, the hook table and the
# tests all read this tuple; add a site here and everywhere picks it up.
SITES: tuple[str, ...] = (
    "before_run",
    "after_load_checkpoint",
    "before_train",
    "before_train_epoch",
    "before_train_iter",
    "after_train_iter",
    "after_train_epoch",
    "before_val",
    "before_val_epoch",
    "before_val_iter",
    "after_val_iter",
    "after_val_epoch",
    "after_val",
    "before_save_checkpoint",
    "after_train",
    "before_test",
    "before_test_epoch",
    "before_test_iter",
    "after_test_iter",
    "after_test_epoch",
    "after_test",
    "after_run",
)


# Keys of a `hooks:` entry that belong to the engine, not to the hook's own Config.
HOOK_ENGINE_KEYS: tuple[str, ...] = ("type", "priority", "enabled")


class Hook:
    """Base class for hooks; every site is a no-op here.

    Site signatures (all keyword arguments):

    - ``after_load_checkpoint(checkpoint)`` / ``before_save_checkpoint(checkpoint)``: the mutable
      checkpoint dict (add or read your own keys).
    - ``before_*_iter(batch_idx, batch)`` / ``after_*_iter(batch_idx, batch)``: index of the batch
      within its epoch and the batch (a list of ``View``).
    - ``after_val_epoch(metrics)`` / ``after_test_epoch(metrics)``: mean metrics ``{name: float | None}``.
    - every other site: no arguments.

    A subclass's sites are checked against these when its hooks are built (``signature.py``): one
    taking the trainer as an argument, as in Pointrix or MMEngine, is refused before anything runs.

    Class attribute ``priority`` is the default; YAML's ``priority:`` overrides it per instance.
    Subclasses with options declare a nested ``Config`` dataclass and take it as the first argument.
    """

    priority: int | str = Priority.NORMAL

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self.priority = get_priority(type(self).priority, f"{type(self).__name__}.priority")
        self._trainer_ref: weakref.ReferenceType | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def trainer(self) -> TrainerLike:
        trainer = self._trainer_ref() if self._trainer_ref is not None else None
        if trainer is None:
            raise RuntimeError(f"{self.name} is not attached to a live trainer")
        return trainer

    @trainer.setter
    def trainer(self, trainer: TrainerLike) -> None:
        self._trainer_ref = weakref.ref(trainer)

    def state_dict(self) -> dict[str, Any]:
        """State to store in checkpoints (plain types and tensors only: loaded with weights_only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def overrides(self, site: str) -> bool:
        """True when this hook's class implements ``site`` (used by the hook table)."""
        base = getattr(Hook, site, None)
        return getattr(type(self), site, None) is not base and callable(getattr(self, site, None))

    # --- the 22 sites -------------------------------------------------------------------------
    def before_run(self) -> None: ...
    def after_load_checkpoint(self, checkpoint: dict) -> None: ...
    def before_train(self) -> None: ...
    def before_train_epoch(self) -> None: ...
    def before_train_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_train_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_train_epoch(self) -> None: ...
    def before_val(self) -> None: ...
    def before_val_epoch(self) -> None: ...
    def before_val_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_val_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_val_epoch(self, metrics: dict) -> None: ...
    def after_val(self) -> None: ...
    def before_save_checkpoint(self, checkpoint: dict) -> None: ...
    def after_train(self) -> None: ...
    def before_test(self) -> None: ...
    def before_test_epoch(self) -> None: ...
    def before_test_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_test_iter(self, batch_idx: int, batch: list) -> None: ...
    def after_test_epoch(self, metrics: dict) -> None: ...
    def after_test(self) -> None: ...
    def after_run(self) -> None: ...


def _check_sites_defined() -> None:
    # Keep SITES and the methods above in step: a site missing on Hook would make call_hook skip it.
    missing = [s for s in SITES if not callable(getattr(Hook, s, None))]
    assert not missing, f"Hook lacks sites {missing}"


_check_sites_defined()
