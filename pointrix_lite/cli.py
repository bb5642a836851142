"""Command line: ``python scripts/train.py --config X.yaml [key=value ...] [options]``.

Exit codes: 0 done, 2 user error (``error: <one line>`` on stderr), 130 interrupted by Ctrl-C
(after saving a checkpoint; the message says how to resume).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import CheckpointError, PointrixError

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Train a Gaussian-splatting model from a YAML config.",
        epilog="Overrides are dotted keys with YAML values: trainer.max_steps=500 dataset.data_path=/x "
        "save_ckpt_after_iter=1000",
    )
    p.add_argument("--config", required=True, help="experiment YAML file")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.add_argument(
        "--resume", nargs="?", const="latest", default=None, metavar="CKPT",
        help="continue from CKPT, or without a value from the latest checkpoint in exp_dir",
    )
    p.add_argument("--show-hooks", action="store_true", help="print the hook table and exit")
    p.add_argument(
        "--plugin", action="append", default=[], metavar="FILE.py",
        help="import a Python file that registers custom components (repeatable)",
    )
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    args = build_parser().parse_intermixed_args(argv)
    # `--resume key=value` : argparse hands the override to --resume; give it back.
    if args.resume not in (None, "latest") and "=" in args.resume and not os.path.exists(args.resume):
        args.overrides.insert(0, args.resume)
        args.resume = "latest"
    return args


def run(args: argparse.Namespace) -> int:
    from .components import import_all
    from .engine.checkpoint import find_latest
    from .engine.experiment import load_experiment, resolve_device, save_config
    from .engine.hooks import build_hooks, format_hook_table
    from .engine.plugins import load_plugin
    from .engine.trainer import DefaultTrainer, TrainingInterrupted

    import_all()
    for plugin in args.plugin:  # after the built-ins, so plugins may subclass them
        load_plugin(plugin)
    cfg = load_experiment(args.config, args.overrides)
    if args.show_hooks:
        print(format_hook_table(build_hooks(cfg.hooks)))
        return 0

    exp_dir = Path(cfg.exp_dir)
    resume = None
    if args.resume == "latest":
        resume = find_latest(exp_dir)
        if resume is None:
            raise CheckpointError(f"--resume: no checkpoint in {exp_dir / 'checkpoints'} to resume from")
    elif args.resume is not None:
        resume = Path(args.resume)
    save_config(cfg, exp_dir)
    trainer = DefaultTrainer(cfg, exp_dir, resolve_device(cfg.device))
    try:
        trainer.run(resume_from=resume)
    except TrainingInterrupted as stop:
        print(
            f"\ninterrupted at step {stop.step}; checkpoint saved to {stop.checkpoint}\n"
            f"resume with: python scripts/train.py --config {exp_dir / 'config.yaml'} --resume"
            + "".join(f" --plugin {p}" for p in args.plugin),
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(f"done: {trainer.global_step} steps; outputs in {exp_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except PointrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # Ctrl-C outside the training loop (loading data, testing)
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
