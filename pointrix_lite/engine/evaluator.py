"""Evaluation: render the val/test views one by one, score them, write ``metrics.json`` and PNGs.

:class:`Evaluator` is a model on a data set plus the hooks that watch its evaluation; it holds the
run state hooks read while a split is scored (``metric_dict``, ``view_metrics``, ``image_dict``,
``render_out``, ``test_report``). ``DefaultTrainer`` is an Evaluator that also trains; ``render.py``
and ``view.py`` use an Evaluator alone, so the numbers they write are exactly training's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from .. import distributed, progress
from ..hook.base import Hook
from ..io.atomic import atomic_write_text
from ..io.file_names import unique_stems
from ..io.images import write_png
from ..metrics.aggregate import mean_metrics, metric_float
from ..writers.base import WriterGroup, image_to_uint8
from . import checkpoint as ckpt_io
from .build import build_scene
from .experiment import ExperimentConfig, resolve_device
from .hook_list import HookList
from .state import RunState, StateAttributes


def as_device(device: str | torch.device) -> torch.device:
    """A torch device from a resolved one or a config string (``"auto"`` allowed)."""
    return device if isinstance(device, torch.device) else torch.device(resolve_device(str(device)))


class Evaluator(StateAttributes):
    """Scores a model on the val/test views of its data set, calling the hooks' val/test sites.

    Args:
        cfg: A resolved :class:`ExperimentConfig` (``load_experiment``).
        exp_dir: Where ``metrics.json`` and ``renders/test/`` go.
        device: The run's torch device (or a config string, ``"auto"`` allowed).
        hooks: Hooks to attach (each gets this object as ``hook.trainer``).
        model: A model to evaluate instead of building ``cfg.model`` (one read from a PLY file).
        after_dataset: Passed to :func:`build_scene` (the trainer builds its data pipeline there).
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        exp_dir: str | Path,
        device: str | torch.device = "auto",
        hooks: Iterable[Hook] = (),
        model: Any | None = None,
        after_dataset: Callable[[Any], None] | None = None,
    ) -> None:
        progress.PHASES.reset()  # this run's phase_seconds (metrics.json, summary)
        setup_start = time.perf_counter()
        self.cfg = cfg
        self.exp_dir = Path(exp_dir)
        self.exp_dir.mkdir(parents=True, exist_ok=True)
        self.device = as_device(device)
        # torchrun: cli/train.py joined the process group; see distributed.py and docs/distributed.md.
        self.rank, self.world_size = distributed.get_rank(), distributed.get_world_size()
        self.console = Console(highlight=False)
        # Run state (engine/state.py): step, epoch and seconds read by hooks through the properties below.
        self.state = RunState()
        self.loss_dict: dict[str, Any] = {}  # loss terms of the last train step
        self.metric_dict: dict[str, float | None] = {}  # mean metrics of the last val/test
        self.view_metrics: dict[str, float | None] = {}  # metrics of the current val/test view
        self.image_dict: dict[str, np.ndarray] = {}  # images of the last val/test for the writers
        self.log_vars: dict[str, float] = {}  # extra scalars hooks publish for LogHook
        self.render_out: dict[str, Any] = {}  # renderer output of the current step / view
        # Entries hooks add to metrics.json while test() runs (e.g. PoseOptHook's "mean_aligned").
        self.test_report: dict[str, Any] = {}
        # {view name: PNG file name} of the split being evaluated, under renders/<split>/{render,gt}/
        self.render_files: dict[str, str] = {}
        self.writer = WriterGroup([])  # the trainer's writers; none when only evaluating
        self._hooks = HookList(self)
        exp_dir_main = self.exp_dir if self.is_main_process else None
        scene = build_scene(cfg, self.device, exp_dir_main, self._announce_main, after_dataset, model)
        self.dataset, self.model, self.renderer = scene.dataset, scene.model, scene.renderer
        for hook in hooks:
            self.register_hook(hook)
        progress.PHASES.add("setup", time.perf_counter() - setup_start)  # loading images included

    def announce(self, line: str) -> None:
        """Print one status line (plain text, not rich markup)."""
        self.console.print(line, markup=False)

    def _announce_main(self, line: str) -> None:
        if self.is_main_process:
            self.announce(line)

    @property
    def is_main_process(self) -> bool:
        """Rank 0: the process that prints, logs, saves checkpoints, validates, tests and exports."""
        return self.rank == 0

    # --- hooks ----------------------------------------------------------------------------------
    @property
    def hooks(self) -> list[Hook]:
        """The hooks in the order they run (a copy; add one with :meth:`register_hook`)."""
        return self._hooks.as_list()

    def register_hook(self, hook: Hook) -> None:
        """Attach ``hook`` (weakly referencing this object) at its priority; ties go after existing ones."""
        self._hooks.add(hook)

    def call_hook(self, name: str, **kwargs: Any) -> None:
        """Call site ``name`` on every hook that has it, in priority order (:meth:`HookList.call`)."""
        self._hooks.call(name, **kwargs)

    def hook_keys(self) -> list[str]:
        """Stable names for hook states in checkpoints: the type name, ``#k`` for repeats."""
        return self._hooks.keys()

    def hook_table(self) -> str:
        return self._hooks.table()

    # --- evaluation -------------------------------------------------------------------------
    @torch.no_grad()
    def _evaluate(self, split: str, views: list, save_dir: Path | None) -> dict[str, dict[str, float | None]]:
        """Render each view alone, collect per-view metrics, fill image_dict; calls the split's sites."""
        was_training = self.model.training
        self.model.eval()
        self.image_dict = {}
        per_view: dict[str, dict[str, float | None]] = {}
        # Unique per split ("a b" and "a?b" must not share a_b.png) and the same in every run (io/file_names.py).
        self.render_files = {name: f"{stem}.png" for name, stem in unique_stems(v.name for v in views).items()}
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
                write_png(save_dir / kind / self.render_files[view.name], image)
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
            # which file under renders/test/{render,gt}/ holds each view (its name made safe and unique)
            **({"render_files": self.render_files} if save_dir is not None else {}),
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
    def load_checkpoint(self, path: str | Path) -> dict[str, Any]:
        """Restore the model, the hooks' states and the step counters a checkpoint stored.

        Raises:
            CheckpointError: missing/corrupt file, or a checkpoint from an incompatible config.
        """
        path = Path(path)
        ckpt = ckpt_io.load_checkpoint_file(path, map_location=self.device)
        ckpt_io.check_model_type(ckpt, self.cfg.model.get("type"), path)
        with ckpt_io.mismatch_is_checkpoint_error(path):
            self.model.load_state_dict(ckpt["model"])
            self._restore_training_state(ckpt)
        self._hooks.load_state_dict(ckpt.get("hooks", {}))
        self.global_step = int(ckpt["step"])
        self.epoch = int(ckpt.get("epoch", 0))
        self.train_seconds = float(ckpt.get("train_seconds", 0.0))
        self._after_load(ckpt)
        self.call_hook("after_load_checkpoint", checkpoint=ckpt)
        return ckpt

    def _restore_training_state(self, ckpt: dict[str, Any]) -> None:
        """Nothing to evaluate with; the trainer restores its optimizer here."""

    def _after_load(self, ckpt: dict[str, Any]) -> None:
        """Nothing to evaluate with; the trainer restores its strategy, pipeline and RNG here."""
