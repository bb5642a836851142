"""Training steps inside a worker (:mod:`benchmarks.workers`), with ``pointrix_lite`` from the tree under test.

Both sides of a comparison are timed by this same loop through ``DefaultTrainer.train_step`` (the
exact step of scripts/train.py) without hooks, writers or checkpoints, except the recipe hooks a
spec keeps (``keep_hooks``: e.g. a resolution schedule, which changes what a step trains on).
Only calls every revision since the native backend landed has are used.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.workers import emit


def build_trainer(spec: dict) -> Any:
    """A CPU ``DefaultTrainer`` of ``spec["config"]`` with ``spec["overrides"]``, set up as at a run's start."""
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()
    out = Path(spec["out"])
    base = [f"renderer.backend={spec['backend']}", f"exp_dir={out}", "writers=[]", "trainer.val_interval=0"]
    cfg = load_experiment(Path(spec["config"]), base + list(spec["overrides"]))
    cfg.hooks = [h for h in cfg.hooks if h.get("type") in spec.get("keep_hooks", [])]
    trainer = DefaultTrainer(cfg, out, "cpu")
    trainer.call_hook("before_run")  # kept hooks (e.g. a resolution schedule) are part of the recipe
    trainer.call_hook("before_train")
    return trainer


def batches(trainer: Any) -> Iterator[list]:
    """The trainer's batches, epoch after epoch, without end."""
    while True:
        yield from trainer.datapipeline.batches_for_epoch(trainer.epoch)
        trainer.epoch += 1


def one_step(trainer: Any, batch: list) -> None:
    """``train_step`` plus the per-iteration hook sites the recipe's hooks use."""
    trainer.call_hook("before_train_iter", batch_idx=0, batch=batch)
    trainer.train_step(batch)
    trainer.global_step += 1
    trainer.call_hook("after_train_iter", batch_idx=0, batch=batch)


def steps(spec: dict) -> dict:
    """Worker: time ``steps`` training steps after ``warmup`` untimed ones; one result."""
    trainer = build_trainer(spec)
    import torch

    if spec.get("init_ply"):
        trained = type(trainer.model).from_ply(spec["init_ply"])  # the same call on every revision since 9156c00
        trainer.model.load_params(dict(trained.params), source=spec["init_ply"])
        trainer.global_step = 2 * trainer.cfg.trainer.max_steps // 3
    n0 = trainer.model.num_gaussians
    it = batches(trainer)
    for _ in range(spec["warmup"]):
        one_step(trainer, next(it))
    start = time.perf_counter()
    if spec.get("profile"):  # the same steps under torch.profiler: where a step's time goes, by op
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(spec["steps"]):
                one_step(trainer, next(it))
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=spec["profile"])
        print(
            f"torch.profiler, {spec['steps']} steps (native extension calls outside autograd ops are "
            f"not listed, e.g. binning):\n{table}",
            file=sys.stderr,
        )
    else:
        for _ in range(spec["steps"]):
            one_step(trainer, next(it))
    seconds = time.perf_counter() - start
    cam = trainer.dataset.train_views[0].camera
    return {
        "seconds": seconds,
        "n0": n0,
        "n1": trainer.model.num_gaussians,
        "size": f"{cam.width}x{cam.height}",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def _phase_seconds(name: str) -> float:
    try:  # revisions before the phase timer have no phases to add
        from pointrix_lite.progress import PHASES
    except ImportError:
        return 0.0
    return float(PHASES.seconds.get(name, 0.0))


def curve(spec: dict) -> None:
    """Worker, persistent: each ``next`` line on stdin trains up to the next val point and reports it;
    ``stop`` (or reaching max_steps) runs the test views and ends."""
    trainer = build_trainer(spec)
    max_steps = trainer.cfg.trainer.max_steps
    it = batches(trainer)
    # Time spent before the first step that a recipe adds (model.seeding's plane sweep) counts as training
    # time, so runs compared "at equal time" pay for it.
    seconds = _phase_seconds("seeding")
    psnr0 = trainer.validation()["psnr"]  # untimed: also loads the native extension (a JIT build on first use)
    emit({"ready": True, "max_steps": max_steps, "n": trainer.model.num_gaussians, "psnr": psnr0, "seconds": seconds})
    for line in sys.stdin:
        if line.strip() != "next" or trainer.global_step >= max_steps:
            break
        target = min(max_steps, (trainer.global_step // spec["val_every"] + 1) * spec["val_every"])
        start = time.perf_counter()
        while trainer.global_step < target:
            one_step(trainer, next(it))
        seconds += time.perf_counter() - start  # validation is not counted
        psnr = trainer.validation()["psnr"]
        emit(
            {
                "step": trainer.global_step,
                "seconds": seconds,
                "psnr": psnr,
                "n": trainer.model.num_gaussians,
                "done": trainer.global_step >= max_steps,
            }
        )
    test = trainer._evaluate("test", list(trainer.dataset.test_views), None)
    psnrs = [m["psnr"] for m in test.values()]
    emit(
        {
            "test_psnr": sum(psnrs) / max(len(psnrs), 1),
            "step": trainer.global_step,
            "seconds": seconds,
            "half_fitted_psnr": _half_fitted(trainer),
        }
    )


def _half_fitted(trainer: Any) -> float | None:
    """Mean test PSNR under NeRF-W's protocol (gain and bias fitted on each view's left half, the right
    half scored), the same for every run whatever its hooks; None on revisions without it."""
    try:
        from pointrix_lite.model.appearance_hook import half_fitted_psnr
    except ImportError:
        return None
    import torch

    scores = []
    with torch.no_grad():
        for view in trainer.dataset.test_views:
            rgb = trainer.renderer(trainer.model, [view.camera], trainer.dataset.background)["rgb"][0]
            scores.append(half_fitted_psnr(rgb, view.float_image(rgb.device)))
    return sum(scores) / max(len(scores), 1)
