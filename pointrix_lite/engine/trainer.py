"""DefaultTrainer: an :class:`Evaluator` that also trains, with hooks, checkpoints and writers.

The trainer is generic: the model supplies its losses and metrics (``get_loss_dict``,
``get_metric_dict``), the renderer turns (model, cameras) into images, the strategy grows and
prunes Gaussians, and everything else (logging, checkpoints, profiling) is a hook. Where each
part lives: building (``build.py``), the loop (``loop.py``), evaluation (``evaluator.py``), the
run and its end phases (``run.py``), hook dispatch (``hook_list.py``). See docs/architecture.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import distributed, progress
from ..config import to_dict
from ..data.pipeline import DataPipeline
from ..errors import ConfigError
from ..registry import STRATEGIES, WRITERS
from ..writers.base import WriterGroup
from . import checkpoint as ckpt_io
from . import loop
from . import run as run_mod
from .end_phases import EndPhases
from .evaluator import Evaluator
from .experiment import ExperimentConfig
from .hooks.builder import build_hooks
from .run import TrainingInterrupted

# (dataset, batch_size, seed, rank, world_size) -> object with batches_for_epoch / state_dict / load_state_dict
DataPipelineFactory = Callable[..., Any]

__all__ = ["DataPipelineFactory", "DefaultTrainer", "TrainingInterrupted", "default_datapipeline"]


def default_datapipeline(dataset: Any, batch_size: int, seed: int, rank: int = 0, world_size: int = 1) -> Any:
    return DataPipeline(dataset, batch_size, seed, rank=rank, world_size=world_size)


class DefaultTrainer(Evaluator):
    """Builds dataset, pipeline, model, renderer, optimizer, strategy, writers and hooks, then trains.

    Build order (each step may use the ones before it; the order random numbers are drawn in):

    1. the scene (``build.build_scene``): seeds from ``cfg.seed``, the data set (its training
       images pinned when training on CUDA), then
       ``datapipeline = datapipeline_factory(dataset, batch_size, seed, rank, world_size)``, the
       model on ``device``, the renderer and its ``prepare`` (the native CPU build)
    2. ``optimizer = model.create_optimizer(max_steps, batch_size=effective_batch_size)`` (the
       ``batch_size`` keyword only when more than one view per step, over all processes)
    3. ``strategy = STRATEGIES.build(cfg.strategy, scene_extent=..., max_steps=...)``,
       ``strategy.check(model, optimizer)``, ``bind_cameras`` (the training views') and
       ``bind_renderer``, or ``None``
    4. ``writer = WriterGroup(WRITERS.build(w, exp_dir=exp_dir) ...)`` + ``write_config``
    5. hooks from ``cfg.hooks`` (resolved and checked when the config loaded), by priority

    Args:
        cfg: A resolved :class:`ExperimentConfig` (``load_experiment``).
        exp_dir: Where checkpoints, logs, renders and metrics go.
        device: The run's torch device (or a config string, ``"auto"`` allowed).
        datapipeline_factory: Builds the data pipeline; default ``pointrix_lite.data.pipeline.DataPipeline``.
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        exp_dir: str | Path,
        device: str | torch.device = "auto",
        datapipeline_factory: DataPipelineFactory | None = None,
    ) -> None:
        # Replaced in run(); a caller that drives train_loop()/test() itself records nothing.
        self.end_phases = EndPhases(Path(exp_dir), write=False)
        self._datapipeline_factory = datapipeline_factory or default_datapipeline
        super().__init__(cfg, exp_dir, device, after_dataset=self._build_datapipeline)
        setup_start = time.perf_counter()  # the scene's setup time is counted by Evaluator
        distributed.broadcast_params(dict(self.model.named_parameters()))  # every rank starts from rank 0's model
        self.optimizer = self._create_optimizer()
        self.step_render_kw = loop.step_render_kw(self.model, self.renderer)
        self.strategy = self._build_strategy()
        # Only rank 0 writes: other ranks get an empty group, so hooks can write unconditionally.
        writer_cfgs = cfg.writers if self.is_main_process else []
        self.writer = WriterGroup(
            WRITERS.build(w, f"writers[{i}]", exp_dir=self.exp_dir) for i, w in enumerate(writer_cfgs)
        )
        self.writer.write_config(to_dict(cfg))
        for hook in build_hooks(cfg.hooks):
            self.register_hook(hook)
        progress.PHASES.add("setup", time.perf_counter() - setup_start)

    def _build_datapipeline(self, dataset: Any) -> None:
        loop.check_random_background(self.cfg.trainer, dataset)
        self.datapipeline = self._datapipeline_factory(
            dataset, self.cfg.trainer.batch_size, self.cfg.seed, self.rank, self.world_size
        )

    def _build_strategy(self) -> Any:
        if self.cfg.strategy is None:
            return None
        strategy = STRATEGIES.build(
            self.cfg.strategy, "strategy", scene_extent=self.dataset.scene_extent, max_steps=self.cfg.trainer.max_steps
        )
        strategy.check(self.model, self.optimizer)
        bind_cameras = getattr(strategy, "bind_cameras", None)
        if callable(bind_cameras):  # for strategy.min_views: the views a Gaussian must be seen by
            bind_cameras([v.camera for v in self.dataset.train_views])
        bind = getattr(strategy, "bind_renderer", None)
        if callable(bind):
            try:
                bind(self.renderer)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return strategy

    @property
    def effective_batch_size(self) -> int:
        """Views per optimizer step over all processes (``trainer.batch_size * world_size``)."""
        return self.cfg.trainer.batch_size * self.world_size

    def _create_optimizer(self) -> Any:
        batch = self.effective_batch_size
        if batch == 1:  # the contract's create_optimizer(max_steps); a model may not take batch_size
            return self.model.create_optimizer(self.cfg.trainer.max_steps)
        try:
            return self.model.create_optimizer(self.cfg.trainer.max_steps, batch_size=batch)
        except ValueError as exc:  # e.g. Adam's beta1 = 1 - batch * 0.1 turns negative past 10 views
            raise ConfigError(
                f"trainer.batch_size: {self.cfg.trainer.batch_size} x {self.world_size} process(es) = {batch} "
                f"views per step is too many for the model's optimizer ({exc})"
            ) from None

    # --- run --------------------------------------------------------------------------------
    def run(self, resume_from: str | Path | None = None) -> None:
        """before_run -> (load checkpoint) -> train_loop -> test -> report -> after_run (``run.py``).

        Raises:
            TrainingInterrupted: Ctrl-C during training or an end phase (a checkpoint of the
                last step is on disk first).
        """
        run_mod.run(self, resume_from)

    def train_loop(self) -> None:
        """Train until ``trainer.max_steps``, then the ``after_train`` site (``loop.train_loop``)."""
        loop.train_loop(self)

    def train_step(self, batch: list) -> dict[str, Any]:
        """One optimizer step on ``batch`` (a list of View); returns the loss terms (``loop.train_step``)."""
        return loop.train_step(self, batch)

    def write_report(self) -> Path | None:
        """``<exp_dir>/report.html`` from what the run wrote (``pointrix_lite/report``)."""
        from ..report import write_report  # lazy: the engine imports without the report package

        self.writer.flush()  # the curves come from log.jsonl, still open here
        return write_report(self.exp_dir)

    # --- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, filename: str | None = None, update_latest: bool = True) -> Path:
        """Write a checkpoint of the current state to ``<exp_dir>/checkpoints/<filename>``.

        Hooks see (and may extend) the dict in ``before_save_checkpoint``. Everything stored is
        tensors or plain data, so :meth:`load_checkpoint` can use ``weights_only=True``.
        """
        filename = filename or ckpt_io.checkpoint_name(self.global_step)
        if not self.is_main_process:  # ranks hold identical state; rank 0 alone writes it
            return self.exp_dir / ckpt_io.CHECKPOINT_DIR / filename
        checkpoint: dict[str, Any] = {
            "format": ckpt_io.FORMAT_VERSION,
            "step": self.global_step,
            "epoch": self.epoch,
            "train_seconds": self.train_seconds,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "strategy": self.strategy.state_dict() if self.strategy is not None else None,
            "hooks": self._hooks.state_dict(),
            "datapipeline": self.datapipeline.state_dict(),
            "rng": ckpt_io.rng_state(),
            "config": to_dict(self.cfg),
        }
        self.call_hook("before_save_checkpoint", checkpoint=checkpoint)
        ckpt_dir = self.exp_dir / ckpt_io.CHECKPOINT_DIR
        path = ckpt_io.save_checkpoint_file(checkpoint, ckpt_dir / filename)
        if update_latest:
            ckpt_io.write_latest_pointer(ckpt_dir, filename)
        return path

    def load_checkpoint(self, path: str | Path) -> dict[str, Any]:
        """Restore everything :meth:`save_checkpoint` stored; continue training from its step.

        The optimizer is re-created from the loaded model before its state is loaded: the model may
        have a different number of Gaussians than at build time, i.e. new parameter tensors.

        Raises:
            CheckpointError: missing/corrupt file, or a checkpoint from an incompatible config.
        """
        return super().load_checkpoint(path)

    def _restore_training_state(self, ckpt: dict[str, Any]) -> None:
        self.optimizer = self._create_optimizer()
        self.optimizer.load_state_dict(ckpt["optimizer"])

    def _after_load(self, ckpt: dict[str, Any]) -> None:
        if self.strategy is not None and ckpt.get("strategy") is not None:
            self.strategy.load_state_dict(ckpt["strategy"])
        self.datapipeline.load_state_dict(ckpt["datapipeline"])
        ckpt_io.set_rng_state(ckpt["rng"])
        # The pipeline's epoch is authoritative: a checkpoint taken on an epoch's last batch has the
        # pipeline already at the next epoch while the loop had not yet counted the finished one.
        self.epoch = int(getattr(self.datapipeline, "epoch", ckpt.get("epoch", 0)))
