"""The training loop: epochs of steps, periodic validation, a graceful Ctrl-C.

Functions of the trainer rather than methods, so the loop reads in one place; the trainer's
``train_loop()`` and ``train_step()`` call them. They read and update the run state hooks see
(``global_step``, ``epoch``, ``train_seconds``, ``loss_dict``, ``render_out``).
"""

from __future__ import annotations

import contextlib
import inspect
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch

from .. import distributed
from ..config import OptionError
from ..errors import DataError
from .state import LoopTrainer

BACKGROUND_STREAM = 1  # step_background's stream of distributed.step_generator


def step_render_kw(model: Any, renderer: Any) -> dict[str, Any]:
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


@contextlib.contextmanager
def graceful_sigint(trainer: LoopTrainer) -> Iterator[None]:
    """First Ctrl-C: finish the current step, then stop (so the checkpoint is consistent).

    A second Ctrl-C interrupts immediately (the default behaviour), for a step that hangs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def handler(signum: int, frame: Any) -> None:
        if trainer.state.stop_requested:
            raise KeyboardInterrupt
        trainer.state.stop_requested = True
        if trainer.is_main_process:  # under torchrun every rank gets the signal; say it once
            trainer.console.print("\nCtrl-C: stopping after this step (press again to stop now)", markup=False)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def train_loop(trainer: LoopTrainer) -> None:
    """Train until ``trainer.max_steps``; validate every ``trainer.val_interval`` steps; then the
    ``after_train`` site (the export end phase)."""
    trainer.call_hook("before_train")
    with graceful_sigint(trainer):
        for _ in steps(trainer):
            # Ranks must stop at the same step: a Ctrl-C may reach them at different times.
            if distributed.any_rank(trainer.state.stop_requested):
                raise KeyboardInterrupt
    # Training is finished from here on: a Ctrl-C in the export keeps the steps trained, and a
    # resumed run at this step skips the export once it is recorded.
    trainer.state.phase = "export"
    with trainer.end_phases.record("export", trainer.global_step):
        trainer.call_hook("after_train")


def steps(trainer: LoopTrainer) -> Iterator[dict[str, Any]]:
    """Train one step per ``next()`` until ``trainer.max_steps``, yielding its loss terms.

    Each step runs its iteration hooks and the periodic validation before it is yielded, so a
    caller that steps the trainer itself (nerfbaselines' ``train_iteration``) trains exactly as
    :func:`train_loop` does. Time spent by the caller between steps is not training time.
    """
    cfg = trainer.cfg.trainer
    start: float | None = time.perf_counter()
    try:
        while trainer.global_step < cfg.max_steps:
            trainer.model.train()
            trainer.call_hook("before_train_epoch")
            n_batches = 0
            for batch_idx, batch in enumerate(trainer.datapipeline.batches_for_epoch(trainer.epoch)):
                n_batches += 1
                trainer.call_hook("before_train_iter", batch_idx=batch_idx, batch=batch)
                loss_dict = trainer.train_step(batch)
                trainer.global_step += 1
                # Kept current every step: checkpoints saved inside the loop store it.
                now = time.perf_counter()
                trainer.train_seconds, start = trainer.train_seconds + now - start, now
                trainer.call_hook("after_train_iter", batch_idx=batch_idx, batch=batch)
                if cfg.val_interval > 0 and trainer.global_step % cfg.val_interval == 0 and trainer.is_main_process:
                    trainer.validation()
                trainer.train_seconds += time.perf_counter() - start
                start = None  # the caller's time between steps is not training time
                yield loss_dict
                start = time.perf_counter()
                if trainer.global_step >= cfg.max_steps:
                    break
            else:  # the epoch ran to its end (not cut short by max_steps)
                if n_batches == 0:
                    raise DataError("dataset: the data pipeline yielded no training batches (no train views?)")
                trainer.epoch += 1
            trainer.call_hook("after_train_epoch")
    finally:
        if start is not None:
            trainer.train_seconds += time.perf_counter() - start


def train_step(trainer: LoopTrainer, batch: list) -> dict[str, Any]:
    """One optimizer step on ``batch`` (a list of View). Returns the loss terms.

    Order follows gsplat's simple_trainer: the optimizer steps *before* the strategy's
    post-backward densification, because densifying replaces parameters with new tensors
    that have no ``.grad``; stepping after that would silently skip this step's update.
    """
    step = trainer.global_step  # 0-based index of this step
    model, optimizer, strategy = trainer.model, trainer.optimizer, trainer.strategy
    if hasattr(model, "update_learning_rate"):
        model.update_learning_rate(step)  # lr used *for* this step (3DGS convention)
    render_out = trainer.renderer(
        model, [v.camera for v in batch], step_background(trainer, step), **trainer.step_render_kw
    )
    render_out["views"] = batch  # what was rendered, for strategies that score the step's error
    trainer.render_out = render_out
    loss_dict = dict(model.get_loss_dict(render_out, batch))
    if strategy is not None:
        for name, term in (strategy.extra_loss(model, step) or {}).items():
            loss_dict[name] = term
            loss_dict["loss"] = loss_dict["loss"] + term
        strategy.step_pre_backward(model, optimizer, step, render_out)
    loss_dict["loss"].backward()
    distributed.all_reduce_gradients(p for group in optimizer.param_groups for p in group["params"])
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if strategy is not None:
        # Seeded per step: every rank (and a resumed run) draws the same split offsets / noise.
        with distributed.step_rng(trainer.cfg.seed, step, trainer.device):
            strategy.step_post_backward(model, optimizer, step, render_out)
    # Detached so hooks holding on to loss_dict don't keep this step's graph alive; averaged
    # over ranks so logs and NaNGuardHook see the loss of the whole batch on every rank.
    detached = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in loss_dict.items()}
    trainer.loss_dict = distributed.mean_over_ranks(detached)
    return trainer.loss_dict


def step_background(trainer: LoopTrainer, step: int) -> tuple[float, float, float]:
    """The background training step ``step`` renders on: the data set's, or with
    ``trainer.random_background`` a colour drawn uniformly in [0, 1]^3.

    The draw is seeded by ``(seed, step)`` alone, so every rank and a resumed run see the same
    colour at a step without the generator's state travelling in checkpoints; from a stream of its own
    (``distributed.step_generator``), so the colour tells nothing of the strategy's draws at that step.
    """
    if not trainer.cfg.trainer.random_background:
        return trainer.dataset.background
    r, g, b = distributed.step_generator(trainer.cfg.seed, step, BACKGROUND_STREAM).random(3).tolist()
    return (r, g, b)


def check_random_background(cfg: Any, dataset: Any) -> None:
    """Refuse ``trainer.random_background`` (``cfg``: the TrainerConfig) on a data set whose images
    had transparent pixels: those were composited on the data set's background when loaded, so a
    step on any other colour would pull the scene towards it where the capture shows nothing."""
    if cfg.random_background and getattr(dataset, "transparent", None) is not None:
        raise OptionError(
            "random_background",
            f"{dataset.transparent} has transparent pixels (composited on the data set's background when "
            "loaded), which a random training background contradicts; set it false",
            "trainer",
        )
