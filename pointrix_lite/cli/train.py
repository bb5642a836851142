"""Command line: ``python scripts/train.py --config X.yaml [key=value ...] [options]``.

Exit codes: 0 done, 2 user error (``error: <one line>`` on stderr), 130 interrupted by Ctrl-C
(after saving a checkpoint; the message says how to resume: during the export, test or report of a
run that finished training, ``--resume`` redoes only the phases not yet done). Under ``torchrun`` errors read
``error (rank k): ...`` and the failing rank exits at once (1 for an unexpected exception, after
its traceback), so torchrun stops the other ranks; see docs/distributed.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ..errors import CheckpointError, PointrixError
from .common import EXIT_CRASH, EXIT_INTERRUPTED, EXIT_OK, EXIT_USER_ERROR, add_plugin_option, load_components


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
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="CKPT",
        help="continue from CKPT, or without a value from the latest checkpoint in exp_dir",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in exp_dir (its checkpoints, logs, metrics and exports) with a new one",
    )
    p.add_argument("--show-hooks", action="store_true", help="print the hook table and exit")
    p.add_argument(
        "--viewer",
        action="store_true",
        help="watch training in the browser (ViewerHook on 127.0.0.1:--viewer-port); see docs/viewer.md",
    )
    p.add_argument("--viewer-port", type=int, default=8080, metavar="PORT", help="port for --viewer (default 8080)")
    add_plugin_option(p)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    args = build_parser().parse_intermixed_args(argv)
    # `--resume key=value` : argparse hands the override to --resume; give it back.
    if args.resume not in (None, "latest") and "=" in args.resume and not os.path.exists(args.resume):
        args.overrides.insert(0, args.resume)
        args.resume = "latest"
    return args


def run(args: argparse.Namespace) -> int:
    from .. import distributed
    from ..engine.checkpoint import find_latest
    from ..engine.experiment import load_experiment, resolve_device, save_config
    from ..engine.hooks import build_hooks, format_hook_table
    from ..engine.trainer import DefaultTrainer, TrainingInterrupted
    from .preflight import check_free_space, check_output_dir, check_resume_file

    load_components(args.plugin)
    cfg = load_experiment(args.config, args.overrides)
    if args.show_hooks:
        print(format_hook_table(build_hooks(cfg.hooks)))
        return EXIT_OK

    exp_dir = Path(cfg.exp_dir)
    in_place = continues_in_place(cfg.load_ckpt_before_run, exp_dir)
    check_earlier_run(args, exp_dir, in_place)
    resume = None
    if args.resume == "latest":
        resume = find_latest(exp_dir)
        if resume is None:
            raise CheckpointError(f"--resume: no checkpoint in {exp_dir / 'checkpoints'} to resume from")
    elif args.resume is not None:
        resume = Path(args.resume)
    if resume is not None or cfg.load_ckpt_before_run:
        check_resume_file(resume or cfg.load_ckpt_before_run)  # before the data loads: fails in a second
    # Under torchrun: join the process group; on CUDA each process takes the GPU of its LOCAL_RANK.
    device = distributed.init_from_env(resolve_device(cfg.device))
    main_process = distributed.is_main_process()
    if main_process and resume is None and not in_place:  # a new run (from a checkpoint elsewhere, or none)
        from ..engine.run_folder import clear_run, run_outputs, setup_files

        # --overwrite: the earlier run goes; otherwise only what a run that never got going left behind
        if exp_dir.exists():
            clear_run(exp_dir, run_outputs(exp_dir, cfg) if args.overwrite else setup_files(exp_dir, cfg))
        check_output_dir(exp_dir)
        save_config(cfg, exp_dir)
    trainer = DefaultTrainer(cfg, exp_dir, device)
    scale_used = getattr(trainer.dataset, "scale_used", None)
    if main_process and cfg.dataset.get("scale") == "auto" and scale_used is not None:
        # config.yaml holds the factor auto chose (by this run's device), so a resumed run and render.py
        # load the views at the size this run trained at, on any device.
        cfg = trainer.cfg = dataclasses.replace(cfg, dataset=cfg.dataset.replace(scale=scale_used))
        save_config(cfg, exp_dir)
    if args.viewer:  # added here, not to the config: a resumed run does not reopen a viewer unasked
        from ..viewer.hook import add_viewer_hook

        add_viewer_hook(trainer, args.viewer_port)
    if main_process:  # needs the model: the estimate is from its size (cli/preflight.py)
        check_free_space(exp_dir, trainer.model, trainer.hooks, cfg.trainer.max_steps)
    try:
        trainer.run(resume_from=resume)
    except TrainingInterrupted as stop:
        if not main_process:
            return EXIT_INTERRUPTED
        from .summary import resume_command

        # A shell comment: the line still pastes as a command.
        redo = (
            "" if stop.phase == "training" else f"  # redoes the {stop.phase} and what follows; earlier phases are kept"
        )
        print(f"\n{stop}\nresume with: {resume_command(exp_dir, args.plugin)}{redo}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if main_process:
        from .summary import trainer_summary

        print(trainer_summary(trainer, args.plugin))
    distributed.finish()  # a distributed rank exits here (status 0), see its docstring
    return EXIT_OK


def continues_in_place(load_ckpt_before_run: str | None, exp_dir: Path) -> bool:
    """Whether ``load_ckpt_before_run`` names a checkpoint inside ``exp_dir``: the run then continues the one
    there, as ``--resume`` does (DI-engine's resume); a checkpoint elsewhere starts a new run from its weights."""
    if not load_ckpt_before_run:
        return False
    return Path(os.path.abspath(load_ckpt_before_run)).is_relative_to(os.path.abspath(exp_dir))


def check_earlier_run(args: argparse.Namespace, exp_dir: Path, in_place: bool = False) -> None:
    """A run already in ``exp_dir`` is continued (``--resume``, or ``in_place``: ``load_ckpt_before_run`` names one
    of its checkpoints) or replaced (``--overwrite``) only when asked; otherwise one line with both commands
    (``engine/run_folder.py`` says why)."""
    import shlex

    from ..engine.run_folder import earlier_run
    from ..errors import ConfigError

    if args.resume is not None and args.overwrite:
        raise ConfigError("--resume continues the run in exp_dir, --overwrite replaces it: pass one")
    if in_place and args.overwrite:
        raise ConfigError(
            f"load_ckpt_before_run: {exp_dir} holds the checkpoint it names, and --overwrite would remove it; "
            "drop --overwrite to continue that run, or copy the checkpoint out of exp_dir first"
        )
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun rank 0 decides: the others would see the config.yaml it has just written
    if args.resume is not None or in_place or args.overwrite or not earlier_run(exp_dir):
        return
    plugins = [a for p in args.plugin for a in ("--plugin", p)]
    resume = ["python", "scripts/train.py", "--config", str(exp_dir / "config.yaml"), "--resume", *plugins]
    again = ["python", "scripts/train.py", "--config", str(args.config), *args.overrides, *plugins, "--overwrite"]
    raise ConfigError(
        f"exp_dir: {exp_dir} holds an earlier run; continue it with: {shlex.join(resume)}"
        f"; or replace it with: {shlex.join(again)}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except PointrixError as exc:
        print(f"error{_rank_tag()}: {exc}", file=sys.stderr)
        return _fail(EXIT_USER_ERROR)
    except KeyboardInterrupt:  # Ctrl-C outside the training loop (loading data, testing)
        print("\ninterrupted", file=sys.stderr)
        return _fail(EXIT_INTERRUPTED)
    except Exception as exc:
        from .preflight import os_error_message

        message = os_error_message(exc) if isinstance(exc, OSError) else None
        if message is not None:  # disk full / no permission while writing outputs: the user's to fix
            print(f"error{_rank_tag()}: {message}", file=sys.stderr)
            return _fail(EXIT_USER_ERROR)
        if os.environ.get("WORLD_SIZE", "1") in ("", "1"):
            raise  # one process: the usual traceback
        from .. import distributed

        if distributed.is_peer_failure(exc):  # not this rank's fault: point at the one that failed
            print(f"error{_rank_tag()}: stopped because another rank failed (see its error)", file=sys.stderr)
        else:
            distributed.report_unexpected(exc)
        return _fail(EXIT_CRASH)


def _rank_tag() -> str:
    # From the environment: the error may come before the process group exists (a config error).
    return f" (rank {os.environ.get('RANK', '?')})" if os.environ.get("WORLD_SIZE", "1") not in ("", "1") else ""


def _fail(code: int) -> int:
    """``code``, or under torchrun an immediate exit with it (see ``distributed.abort``): the other
    ranks are blocked in a collective this rank will never join, and torchrun stops them only
    once this process is gone."""
    if os.environ.get("WORLD_SIZE", "1") in ("", "1"):
        return code
    from .. import distributed

    distributed.abort(code)
    return code  # not reached
