"""Training speed on the demo scene: torch vs native rasterizer, side by side; optional time-to-PSNR.

    python scripts/bench_train.py                       # 60 steps per backend, fixed N (no densification)
    python scripts/bench_train.py --steps 200 --densify # with the config's densification
    python scripts/bench_train.py --backends native --time-to-psnr 28

Each backend trains a fresh model from the same seed through ``DefaultTrainer.train_step`` (the
exact training step of train.py), without hooks, writers or validation. The first ``--warmup``
steps are not timed (extension load, allocator warm-up). Only measured numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # works without `pip install`

import torch  # noqa: E402

from pointrix_lite.components import import_all  # noqa: E402
from pointrix_lite.engine.experiment import load_experiment  # noqa: E402
from pointrix_lite.engine.trainer import DefaultTrainer  # noqa: E402


def build_trainer(config: Path, backend: str, out: Path, overrides: list[str]) -> DefaultTrainer:
    base = [f"renderer.backend={backend}", f"exp_dir={out}", "writers=[]", "trainer.val_interval=0"]
    cfg = load_experiment(config, base + overrides)
    cfg.hooks.clear()  # timing the step itself: no logging, checkpoints or export
    return DefaultTrainer(cfg, out, "cpu")


def batches(trainer: DefaultTrainer) -> Iterator[list]:
    while True:
        yield from trainer.datapipeline.batches_for_epoch(trainer.epoch)
        trainer.epoch += 1


def time_steps(trainer: DefaultTrainer, steps: int, warmup: int) -> float:
    """Seconds for ``steps`` training steps after ``warmup`` untimed ones."""
    it = batches(trainer)
    for _ in range(warmup):
        trainer.train_step(next(it))
        trainer.global_step += 1
    start = time.perf_counter()
    for _ in range(steps):
        trainer.train_step(next(it))
        trainer.global_step += 1
    return time.perf_counter() - start


def time_to_psnr(trainer: DefaultTrainer, target: float, every: int, max_steps: int) -> tuple[float | None, int, float]:
    """Train until validation PSNR >= target; returns (train seconds or None, steps, last PSNR)."""
    it = batches(trainer)
    seconds, psnr = 0.0, float("nan")
    while trainer.global_step < max_steps:
        start = time.perf_counter()
        for _ in range(every):
            trainer.train_step(next(it))
            trainer.global_step += 1
        seconds += time.perf_counter() - start  # validation time is not counted
        psnr = trainer.validation()["psnr"]
        print(f"  step {trainer.global_step:5d}  {seconds:7.1f} s  val PSNR {psnr:.2f} dB  N {trainer.model.num_gaussians}")
        if psnr >= target:
            return seconds, trainer.global_step, psnr
    return None, trainer.global_step, psnr


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=REPO / "configs" / "demo.yaml")
    p.add_argument("--backends", nargs="+", default=["torch", "native"], choices=("torch", "native"))
    p.add_argument("--steps", type=int, default=60, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--densify", action="store_true", help="keep the config's densification (N then grows)")
    p.add_argument("--time-to-psnr", type=float, metavar="DB", help="also train the config until val PSNR >= DB")
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--out", type=Path, default=Path("/tmp/pointrix_bench_train"))
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    args = p.parse_args(argv)
    import_all()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}, config {args.config}")
    overrides = list(args.overrides) + ([] if args.densify else ["strategy=null"])
    per_step: dict[str, float] = {}
    for backend in args.backends:
        trainer = build_trainer(args.config, backend, args.out / backend, overrides)
        n0 = trainer.model.num_gaussians
        seconds = time_steps(trainer, args.steps, args.warmup)
        per_step[backend] = seconds / args.steps
        v = trainer.dataset.train_views[0].camera
        print(f"{backend:>7}: {args.steps} steps in {seconds:.2f} s = {args.steps / seconds:.2f} steps/s, "
              f"{1e3 * per_step[backend]:.1f} ms/step ({v.width}x{v.height}, N {n0} -> {trainer.model.num_gaussians})")
    if "torch" in per_step and "native" in per_step:
        print(f"native is {per_step['torch'] / per_step['native']:.1f}x faster per step than torch")

    if args.time_to_psnr is not None:
        backend = "native" if "native" in args.backends else args.backends[0]
        trainer = build_trainer(args.config, backend, args.out / f"ttp_{backend}", list(args.overrides))
        max_steps = trainer.cfg.trainer.max_steps
        print(f"time to {args.time_to_psnr} dB val PSNR ({backend}, config schedule, max {max_steps} steps):")
        seconds, steps, psnr = time_to_psnr(trainer, args.time_to_psnr, args.val_every, max_steps)
        if seconds is None:
            print(f"  not reached in {steps} steps (last val PSNR {psnr:.2f} dB)")
        else:
            print(f"  reached {psnr:.2f} dB after {steps} steps, {seconds:.1f} s of training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
