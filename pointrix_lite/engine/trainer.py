"""DefaultTrainer: builds the components from a config and runs train -> val -> test with hooks.

The trainer is generic: the model supplies its losses and metrics (``get_loss_dict``,
``get_metric_dict``), the renderer turns (model, cameras) into images, the strategy grows and
prunes Gaussians, and everything else (logging, checkpoints, profiling) is a hook. See
docs/architecture.md for the data flow and the order of hook sites.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from .. import device_policy, distributed, progress
from ..atomic_io import atomic_write_text
from ..config import to_dict
from ..data.images import write_png
from ..errors import CheckpointError, ConfigError, DataError
from ..metrics.aggregate import mean_metrics, metric_float
from ..registry import DATASETS, MODELS, RENDERERS, STRATEGIES, WRITERS
from ..writers.base import WriterGroup, image_to_uint8
from . import checkpoint as ckpt_io
from .end_phases import EndPhases
from .experiment import ExperimentConfig, resolve_device
from .hooks.base import Hook
from .hooks.builder import build_hooks, format_hook_table, sort_hooks
from .hooks.resolve import check_once

# (dataset, batch_size, seed, rank, world_size) -> object with batches_for_epoch / state_dict / load_state_dict
DataPipelineFactory = Callable[..., Any]


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


def default_datapipeline(dataset: Any, batch_size: int, seed: int, rank: int = 0, world_size: int = 1) -> Any:
    # Imported lazily: the engine must import (and --show-hooks work) without the data package.
    from ..data.pipeline import DataPipeline

    return DataPipeline(dataset, batch_size, seed, rank=rank, world_size=world_size)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def _file_stem(name: str) -> str:
    stem = re.sub(r"\.(png|jpe?g|exr|tiff?)$", "", name, flags=re.IGNORECASE)
    return re.sub(r"[^\w.-]+", "_", stem)


def _step_render_kw(model: Any, renderer: Any) -> dict[str, Any]:
    """Keyword arguments for the training steps' renderer call: ``depth=False`` when the model's
    loss does not read depth (``train_depth`` False, as GaussianModel's) and the renderer takes the
    flag. Depth then costs nothing in training; evaluation, alignment and the viewer still get it."""
    if getattr(model, "train_depth", True):
        return {}
    try:
        takes_flag = "depth" in inspect.signature(renderer).parameters
    except (TypeError, ValueError):  # a renderer without an inspectable signature: call it as before
        return {}
    return {"depth": False} if takes_flag else {}


def _dataset_kw(dataset_cfg: Any, device: torch.device) -> dict[str, Any]:
    """``device=`` for a dataset class that takes it (the built-in ones: ``scale: auto`` picks the
    training resolution by device, ``data/resolution.py``); a custom dataset without it is built as before."""
    try:
        cls = DATASETS.get(dataset_cfg.get("type", ""), "dataset.type")
        takes = "device" in inspect.signature(cls).parameters
    except (ConfigError, TypeError, ValueError, AttributeError):  # let build() report a bad type
        return {}
    return {"device": device.type} if takes else {}


class DefaultTrainer:
    """Builds dataset, pipeline, model, optimizer, renderer, strategy, writers and hooks, then trains.

    Build order (each step may use the ones before it):

    1. seeds (python, numpy, torch) from ``cfg.seed``
    2. ``dataset = DATASETS.build(cfg.dataset, "dataset")``; its training images are pinned when
       training on CUDA (``device_policy.pin_host_images``)
    3. ``datapipeline = datapipeline_factory(dataset, batch_size, seed, rank, world_size)``
    4. ``model = MODELS.build(cfg.model, "model", dataset=dataset).to(device)``
    5. ``optimizer = model.create_optimizer(max_steps, batch_size=effective_batch_size)`` (the
       ``batch_size`` keyword only when more than one view per step, over all processes)
    6. ``renderer = RENDERERS.build(cfg.renderer, "renderer")`` (moved to device if a Module), then
       ``renderer.prepare(device, announce=...)`` if it has one (builds the native CPU extension)
    7. ``strategy = STRATEGIES.build(cfg.strategy, "strategy", scene_extent=..., max_steps=...)``
       and ``strategy.check(model, optimizer)``, or ``None``
    8. ``writer = WriterGroup(WRITERS.build(w, "writers[i]", exp_dir=exp_dir) ...)`` + ``write_config``
    9. hooks from ``cfg.hooks`` (resolved: defaults and shorthands folded in), sorted by priority

    Args:
        cfg: A resolved :class:`ExperimentConfig` (``load_experiment``).
        exp_dir: Where checkpoints, logs, renders and metrics go.
        device: torch device string (``"auto"`` allowed).
        datapipeline_factory: Builds the data pipeline; default ``pointrix_lite.data.pipeline.DataPipeline``.
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        exp_dir: str | Path,
        device: str | torch.device = "auto",
        datapipeline_factory: DataPipelineFactory | None = None,
    ) -> None:
        self.cfg = cfg
        self.exp_dir = Path(exp_dir)
        self.exp_dir.mkdir(parents=True, exist_ok=True)
        self.device = torch.device(resolve_device(str(device)))
        # torchrun: cli/train.py joined the process group; see distributed.py and docs/distributed.md.
        self.rank, self.world_size = distributed.get_rank(), distributed.get_world_size()
        self.console = Console(highlight=False)

        # Run state, read and written by hooks.
        self.global_step = 0  # number of finished optimizer steps
        self.epoch = 0  # number of finished passes over the training views
        self.train_seconds = 0.0  # wall time inside train_loop, summed over resumes
        self.loss_dict: dict[str, Any] = {}  # loss terms of the last train step
        self.metric_dict: dict[str, float | None] = {}  # mean metrics of the last val/test
        self.view_metrics: dict[str, float | None] = {}  # metrics of the current val/test view
        self.image_dict: dict[str, np.ndarray] = {}  # images of the last val/test for the writers
        self.log_vars: dict[str, float] = {}  # extra scalars hooks publish for LogHook
        self.render_out: dict[str, Any] = {}  # renderer output of the current step / view
        # Entries hooks add to metrics.json while test() runs (e.g. PoseOptHook's "mean_aligned").
        self.test_report: dict[str, Any] = {}
        self._stop_requested = False
        self._phase = "training"  # or the end phase running (export, test, report): the Ctrl-C message names it
        # Replaced in run(); a caller that drives train_loop()/test() itself records nothing.
        self.end_phases = EndPhases(self.exp_dir, write=False)

        progress.PHASES.reset()  # this run's phase_seconds (metrics.json, summary)
        setup_start = time.perf_counter()
        seed_everything(cfg.seed)
        max_steps = cfg.trainer.max_steps
        self.dataset = DATASETS.build(cfg.dataset, "dataset", **_dataset_kw(cfg.dataset, self.device))
        turned = getattr(self.dataset, "world_rotation", None)  # dataset.orientation
        if turned is not None and self.is_main_process:
            from ..data.orientation import save_orientation

            save_orientation(self.exp_dir, turned)
        if device_policy.pin_host_images(self.device) and hasattr(self.dataset, "train_views"):
            from ..data.cameras import pin_images  # lazy: the engine imports without the data package

            pin_images(self.dataset.train_views)
        factory = datapipeline_factory or default_datapipeline
        self.datapipeline = factory(self.dataset, cfg.trainer.batch_size, cfg.seed, self.rank, self.world_size)
        self.model = MODELS.build(cfg.model, "model", dataset=self.dataset).to(self.device)
        distributed.broadcast_params(dict(self.model.named_parameters()))  # every rank starts from rank 0's model
        self.optimizer = self._create_optimizer()
        self.renderer = RENDERERS.build(cfg.renderer, "renderer")
        if isinstance(self.renderer, torch.nn.Module):
            self.renderer = self.renderer.to(self.device)
        prepare = getattr(self.renderer, "prepare", None)
        if callable(prepare):  # e.g. the native CPU build: here, not in the first step's train_seconds
            prepare(self.device, announce=self._announce if self.is_main_process else None)
        self._step_render_kw = _step_render_kw(self.model, self.renderer)
        self.strategy = None
        if cfg.strategy is not None:
            self.strategy = STRATEGIES.build(
                cfg.strategy, "strategy", scene_extent=self.dataset.scene_extent, max_steps=max_steps
            )
            self.strategy.check(self.model, self.optimizer)
            bind = getattr(self.strategy, "bind_renderer", None)
            if callable(bind):
                try:
                    bind(self.renderer)
                except ValueError as exc:
                    raise ConfigError(str(exc)) from None
        # Only rank 0 writes: other ranks get an empty group, so hooks can write unconditionally.
        writer_cfgs = cfg.writers if self.is_main_process else []
        self.writer = WriterGroup(WRITERS.build(w, f"writers[{i}]", exp_dir=self.exp_dir) for i, w in enumerate(writer_cfgs))
        self.writer.write_config(to_dict(cfg))
        self.hooks: list[Hook] = []
        for hook in build_hooks(cfg.hooks):
            self.register_hook(hook)
        progress.PHASES.add("setup", time.perf_counter() - setup_start)  # loading images included

    def _announce(self, line: str) -> None:
        self.console.print(line, markup=False)

    # --- processes ------------------------------------------------------------------------------
    @property
    def is_main_process(self) -> bool:
        """Rank 0: the process that prints, logs, saves checkpoints, validates, tests and exports."""
        return self.rank == 0

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

    # --- hooks ----------------------------------------------------------------------------------
    def register_hook(self, hook: Hook) -> None:
        """Attach ``hook`` (weakly referencing this trainer) at its priority; ties go after existing ones."""
        check_once(type(hook), f"hook {hook.name}")  # a wrong site signature fails now, not mid-run
        hook.trainer = self
        self.hooks = sort_hooks([*self.hooks, hook])

    def call_hook(self, name: str, **kwargs: Any) -> None:
        """Call site ``name`` on every hook that has it, in priority order.

        Works for the 22 built-in sites and for any custom site name a hook defines (a hook can
        announce its own events, e.g. ``trainer.call_hook("after_densify", n_new=...)``).

        Raises:
            TypeError: a hook raised one (usually a wrong site signature); re-raised naming the hook.
        """
        for hook in self.hooks:
            fn = getattr(hook, name, None)
            if fn is None:
                continue
            try:
                fn(**kwargs)
            except TypeError as exc:
                raise TypeError(f"hook {hook.name} ({type(hook).__module__}) failed at site {name!r}: {exc}") from exc

    def hook_keys(self) -> list[str]:
        """Stable names for hook states in checkpoints: the type name, ``#k`` for repeats."""
        seen: dict[str, int] = {}
        keys = []
        for hook in self.hooks:
            k = seen.get(hook.name, 0)
            seen[hook.name] = k + 1
            keys.append(hook.name if k == 0 else f"{hook.name}#{k}")
        return keys

    def hook_table(self) -> str:
        return format_hook_table(self.hooks)

    # --- run --------------------------------------------------------------------------------
    def run(self, resume_from: str | Path | None = None) -> None:
        """before_run -> (load checkpoint) -> train_loop -> test -> report -> after_run; writers closed at the end.

        The phases after training (export in ``after_train``, test, report) are recorded in
        ``end_phases.json`` (``engine/end_phases.py``); resuming a run that finished training
        skips those recorded at its step whose files are still there.

        Raises:
            TrainingInterrupted: Ctrl-C during training or an end phase (a checkpoint of the
                last step is on disk first).
        """
        if self.is_main_process:
            self.console.print(self.hook_table(), markup=False)
        try:
            self.call_hook("before_run")
            to_load = resume_from or self.cfg.load_ckpt_before_run
            if to_load:
                self.load_checkpoint(to_load)
            self.end_phases = EndPhases(self.exp_dir, write=self.is_main_process)
            finished = self.global_step >= self.cfg.trainer.max_steps
            if not (to_load and finished):  # this run trains: a record left in exp_dir is of another model
                self.end_phases.forget()
            self._phase = "training"
            try:
                if self._end_phase_due("export"):
                    self.train_loop()
                if self.cfg.trainer.test_at_end and self.is_main_process and self._end_phase_due("test"):
                    self._phase = "test"
                    with self.end_phases.record("test", self.global_step):
                        self.test()
                if self.is_main_process and self._end_phase_due("report"):
                    self._phase = "report"
                    with self.end_phases.record("report", self.global_step):
                        self.write_report()
            except KeyboardInterrupt:
                raise TrainingInterrupted(self.global_step, self._checkpoint_at_step(), self._phase) from None
            self.call_hook("after_run")
        except BaseException:
            # The error that stopped the run matters more than a failed flush (on a full disk the
            # writers fail too): close what can be closed, then re-raise the original.
            with contextlib.suppress(Exception):
                self.writer.close()
            raise
        self.writer.close()

    def _end_phase_due(self, name: str) -> bool:
        """False for an end phase a resumed run already finished at this step (one line says so)."""
        if not self.end_phases.done(name, self.global_step):
            return True
        if self.is_main_process:
            kept = self.end_phases.files(name)
            shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
            self._announce(f"{name}: done at step {self.global_step} before this resume, kept ({shown or 'no files'})")
        return False

    def _checkpoint_at_step(self) -> Path:
        """The checkpoint of ``global_step``: the latest one when it is of this step, else saved now."""
        latest = ckpt_io.find_latest(self.exp_dir)
        if latest is not None and latest.name == ckpt_io.checkpoint_name(self.global_step):
            return latest
        return self.save_checkpoint(ckpt_io.checkpoint_name(self.global_step))

    def write_report(self) -> Path | None:
        """``<exp_dir>/report.html`` from what the run wrote (``pointrix_lite/report``)."""
        from ..report import write_report  # lazy: the engine imports without the report package

        self.writer.flush()  # the curves come from log.jsonl, still open here
        return write_report(self.exp_dir)

    @contextlib.contextmanager
    def _graceful_sigint(self) -> Iterator[None]:
        """First Ctrl-C: finish the current step, then stop (so the checkpoint is consistent).

        A second Ctrl-C interrupts immediately (the default behaviour), for a step that hangs.
        """
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be installed from the main thread
            return

        def handler(signum: int, frame: Any) -> None:
            if self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = True
            if self.is_main_process:  # under torchrun every rank gets the signal; say it once
                self.console.print("\nCtrl-C: stopping after this step (press again to stop now)", markup=False)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def train_loop(self) -> None:
        """Train until ``trainer.max_steps``; validate every ``trainer.val_interval`` steps."""
        cfg = self.cfg.trainer
        self.call_hook("before_train")
        start = time.perf_counter()
        try:
            with self._graceful_sigint():
                while self.global_step < cfg.max_steps:
                    self.model.train()
                    self.call_hook("before_train_epoch")
                    n_batches = 0
                    for batch_idx, batch in enumerate(self.datapipeline.batches_for_epoch(self.epoch)):
                        n_batches += 1
                        self.call_hook("before_train_iter", batch_idx=batch_idx, batch=batch)
                        self.train_step(batch)
                        self.global_step += 1
                        # Kept current every step: checkpoints saved inside the loop store it.
                        now = time.perf_counter()
                        self.train_seconds, start = self.train_seconds + now - start, now
                        self.call_hook("after_train_iter", batch_idx=batch_idx, batch=batch)
                        if cfg.val_interval > 0 and self.global_step % cfg.val_interval == 0 and self.is_main_process:
                            self.validation()
                        # Ranks must stop at the same step: a Ctrl-C may reach them at different times.
                        if distributed.any_rank(self._stop_requested):
                            raise KeyboardInterrupt
                        if self.global_step >= cfg.max_steps:
                            break
                    else:  # the epoch ran to its end (not cut short by max_steps)
                        if n_batches == 0:
                            raise DataError("dataset: the data pipeline yielded no training batches (no train views?)")
                        self.epoch += 1
                    self.call_hook("after_train_epoch")
        finally:
            self.train_seconds += time.perf_counter() - start
        # Training is finished from here on: a Ctrl-C in the export keeps the steps trained, and a
        # resumed run at this step skips the export once it is recorded.
        self._phase = "export"
        with self.end_phases.record("export", self.global_step):
            self.call_hook("after_train")

    def train_step(self, batch: list) -> dict[str, Any]:
        """One optimizer step on ``batch`` (a list of View). Returns the loss terms.

        Order follows gsplat's simple_trainer: the optimizer steps *before* the strategy's
        post-backward densification, because densifying replaces parameters with new tensors
        that have no ``.grad``; stepping after that would silently skip this step's update.
        """
        step = self.global_step  # 0-based index of this step
        if hasattr(self.model, "update_learning_rate"):
            self.model.update_learning_rate(step)  # lr used *for* this step (3DGS convention)
        render_out = self.renderer(self.model, [v.camera for v in batch], self.dataset.background, **self._step_render_kw)
        render_out["views"] = batch  # what was rendered, for strategies that score the step's error
        self.render_out = render_out
        loss_dict = dict(self.model.get_loss_dict(render_out, batch))
        if self.strategy is not None:
            for name, term in (self.strategy.extra_loss(self.model, step) or {}).items():
                loss_dict[name] = term
                loss_dict["loss"] = loss_dict["loss"] + term
            self.strategy.step_pre_backward(self.model, self.optimizer, step, render_out)
        loss_dict["loss"].backward()
        distributed.all_reduce_gradients(p for group in self.optimizer.param_groups for p in group["params"])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.strategy is not None:
            # Seeded per step: every rank (and a resumed run) draws the same split offsets / noise.
            with distributed.step_rng(self.cfg.seed, step, self.device):
                self.strategy.step_post_backward(self.model, self.optimizer, step, render_out)
        # Detached so hooks holding on to loss_dict don't keep this step's graph alive; averaged
        # over ranks so logs and NaNGuardHook see the loss of the whole batch on every rank.
        detached = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in loss_dict.items()}
        self.loss_dict = distributed.mean_over_ranks(detached)
        return self.loss_dict

    # --- evaluation -------------------------------------------------------------------------
    @torch.no_grad()
    def _evaluate(self, split: str, views: list, save_dir: Path | None) -> dict[str, dict[str, float | None]]:
        """Render each view alone, collect per-view metrics, fill image_dict; calls the split's sites."""
        was_training = self.model.training
        self.model.eval()
        self.image_dict = {}
        per_view: dict[str, dict[str, float | None]] = {}
        self.call_hook(f"before_{split}_epoch")
        with progress.phase("validation" if split == "val" else split, total=len(views), unit="views") as advance:
            for i, view in enumerate(views):
                self._evaluate_view(split, i, view, per_view, save_dir)
                advance()
        self.metric_dict = mean_metrics(per_view)
        self.call_hook(f"after_{split}_epoch", metrics=self.metric_dict)
        self.model.train(was_training)
        return per_view

    def _evaluate_view(self, split: str, i: int, view: Any, per_view: dict, save_dir: Path | None) -> None:
        """Render one view alone, score it into ``per_view`` and ``image_dict``, save its PNGs."""
        batch = [view]
        self.call_hook(f"before_{split}_iter", batch_idx=i, batch=batch)
        # batch[0], not view: a hook may have swapped in another view (e.g. with another pose).
        self.render_out = self.renderer(self.model, [v.camera for v in batch], self.dataset.background)
        self.view_metrics = {k: metric_float(v) for k, v in self.model.get_metric_dict(self.render_out, batch).items()}
        per_view[view.name] = self.view_metrics
        render = image_to_uint8(self.render_out["rgb"][0])
        gt = image_to_uint8(view.image)
        if i < self.cfg.trainer.val_images:
            self.image_dict[view.name] = np.concatenate([gt, render], axis=1)  # gt | render
        if save_dir is not None:
            for kind, image in (("render", render), ("gt", gt)):
                (save_dir / kind).mkdir(parents=True, exist_ok=True)
                write_png(save_dir / kind / f"{_file_stem(view.name)}.png", image)
        self.call_hook(f"after_{split}_iter", batch_idx=i, batch=batch)

    def validation(self) -> dict[str, float | None]:
        """Mean metrics over the validation views (also in ``self.metric_dict``)."""
        self.call_hook("before_val")
        self._evaluate("val", list(self.dataset.val_views), None)
        self.call_hook("after_val")
        return self.metric_dict

    def test(self) -> dict[str, Any]:
        """Render every test view; write ``<exp_dir>/metrics.json`` and the PNGs; return the report."""
        self.test_report = {}
        self.call_hook("before_test")
        save_dir = self.exp_dir / "renders" / "test" if self.cfg.trainer.save_test_renders else None
        per_view = self._evaluate("test", list(self.dataset.test_views), save_dir)
        n = getattr(self.model, "num_gaussians", None)
        # "mean" is always the test views on their given poses (INRIA's protocol); hooks that score
        # them otherwise (PoseOptHook's test-time alignment) add their own keys beside it.
        report = {
            "mean": self.metric_dict,
            "per_view": per_view,
            **self.test_report,
            "num_gaussians": int(n) if n is not None else None,
            "steps": self.global_step,
            "train_seconds": round(self.train_seconds, 3),
            # Outside the training loop: setup includes loading images; test excludes alignment.
            "phase_seconds": progress.PHASES.as_dict(),
            "notes": dict(getattr(self.model, "metric_notes", {}) or {}),
        }
        atomic_write_text(self.exp_dir / "metrics.json", json.dumps(report, indent=2))  # never half a file
        self.call_hook("after_test")
        return report

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
            "hooks": {key: hook.state_dict() for key, hook in zip(self.hook_keys(), self.hooks)},
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
        path = Path(path)
        ckpt = ckpt_io.load_checkpoint_file(path, map_location=self.device)
        saved_type = (ckpt.get("config") or {}).get("model", {}).get("type")
        if saved_type is not None and saved_type != self.cfg.model.get("type"):
            raise CheckpointError(
                f"{path}: checkpoint is from model type {saved_type!r}, this config has model.type "
                f"{self.cfg.model.get('type')!r}"
            )
        try:
            self.model.load_state_dict(ckpt["model"])
            self.optimizer = self._create_optimizer()
            self.optimizer.load_state_dict(ckpt["optimizer"])
        except (CheckpointError, RuntimeError, KeyError, ValueError) as exc:  # CheckpointError: the model's own check
            detail = " ".join(str(exc).split())[:300]  # torch's message spans lines; keep its gist
            raise CheckpointError(f"{path}: checkpoint does not match this config's model/optimizer: {detail}") from None
        if self.strategy is not None and ckpt.get("strategy") is not None:
            self.strategy.load_state_dict(ckpt["strategy"])
        hook_states = ckpt.get("hooks", {})
        for key, hook in zip(self.hook_keys(), self.hooks):
            if key in hook_states:
                hook.load_state_dict(hook_states[key])
        self.datapipeline.load_state_dict(ckpt["datapipeline"])
        ckpt_io.set_rng_state(ckpt["rng"])
        self.global_step = int(ckpt["step"])
        # The pipeline's epoch is authoritative: a checkpoint taken on an epoch's last batch has the
        # pipeline already at the next epoch while the loop had not yet counted the finished one.
        self.epoch = int(getattr(self.datapipeline, "epoch", ckpt.get("epoch", 0)))
        self.train_seconds = float(ckpt.get("train_seconds", 0.0))
        self.call_hook("after_load_checkpoint", checkpoint=ckpt)
        return ckpt
