"""What the command-line tools share: exit codes, one-line argument errors, ``--plugin``, the model
source options (``--exp-dir`` / ``--ply`` / ``--checkpoint``), the error handling around a command,
and opening an experiment folder that ``train.py`` wrote.

Heavy imports (torch, the engine) happen inside the functions: ``--help`` and argument errors stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ..errors import CheckpointError, ConfigError, PointrixError, shorten

EXIT_OK = 0
EXIT_CRASH = 1  # pycolmap aborted the worker, or an unexpected exception on one torchrun rank
EXIT_USER_ERROR = 2  # bad input: ``error: <one line>`` on stderr
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class OneLineErrorParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, like every other user error
        # argparse quotes the argument whole ("invalid int value: '...'"): an argument can be 128 KB
        print(f"error: {shorten(' '.join(message.split()), 300)} (see --help)", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR)


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE.py",
        help="import a Python file that registers custom components (repeatable)",
    )


def load_components(plugins: Iterable[str]) -> None:
    """Register the built-in components, then the ``--plugin`` files (after the built-ins, so
    plugins may subclass them)."""
    from ..components import import_all
    from .plugins import load_plugin

    import_all()
    for plugin in plugins:
        load_plugin(plugin)


def model_source_parser(
    prog: str, description: str, epilog: str, exp_dir_help: str, ply_help: str
) -> OneLineErrorParser:
    """The parser of a command that reads trained Gaussians, with its source options:
    ``--exp-dir DIR [--checkpoint CKPT]`` or ``--ply FILE``."""
    parser = OneLineErrorParser(prog=prog, description=description, epilog=epilog)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--exp-dir", type=Path, help=exp_dir_help)
    src.add_argument("--ply", type=Path, help=ply_help)
    parser.add_argument("--checkpoint", type=Path, help="with --exp-dir: this checkpoint instead of the latest")
    return parser


def check_model_source(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` for ``--checkpoint`` without ``--exp-dir`` (argparse cannot say it)."""
    if args.checkpoint is not None and args.exp_dir is None:
        raise ConfigError("--checkpoint goes with --exp-dir")


def run_command(command: Callable[[Any], int], args: Any, stderr: TextIO | None = None) -> int:
    """``command(args)``: a user error is one line and exit 2, Ctrl-C exit 130.

    ``stderr``: where those lines go (default ``sys.stderr`` at the time of the call).
    """
    stream = stderr if stderr is not None else sys.stderr
    try:
        return command(args)
    except PointrixError as exc:
        print(f"error: {exc}", file=stream)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("\ninterrupted", file=stream)
        return EXIT_INTERRUPTED


def experiment_checkpoint(exp_dir: Path, checkpoint: Path | None) -> Path:
    """The checkpoint to use from an experiment folder: ``checkpoint`` if given, else the latest.

    Raises:
        ConfigError: ``exp_dir`` has no config.yaml (not written by train.py).
        CheckpointError: no checkpoint there, or ``checkpoint`` does not exist.
    """
    from ..engine.checkpoint import find_latest

    if not (exp_dir / "config.yaml").is_file():
        raise ConfigError(f"--exp-dir {exp_dir}: no config.yaml (not an experiment folder written by train.py)")
    ckpt = checkpoint or find_latest(exp_dir)
    if ckpt is None:
        raise CheckpointError(f"--exp-dir {exp_dir}: no checkpoint in {exp_dir / 'checkpoints'}")
    if not Path(ckpt).is_file():
        raise CheckpointError(f"--checkpoint: file not found: {ckpt}")
    return Path(ckpt)


def eval_only(cfg: Any, out: Path, backend: str | None) -> Any:
    """The config with training-only parts removed: no writers, only LogHook (the metrics table)."""
    renderer = cfg.renderer.replace(backend=backend) if backend else cfg.renderer
    hooks = [h for h in cfg.hooks if h["type"] == "LogHook"]
    return dataclasses.replace(cfg, exp_dir=str(out), writers=[], hooks=hooks, renderer=renderer)


def open_experiment(
    exp_dir: Path, checkpoint: Path | None = None, out: Path | None = None, backend: str | None = None
) -> Any:
    """An :class:`~pointrix_lite.engine.evaluator.Evaluator` of the run in ``exp_dir``, its checkpoint loaded.

    Built from ``exp_dir/config.yaml`` (data set, model, renderer; no optimizer, strategy or
    writers) with LogHook alone (the metrics table), writing into ``out`` (default ``exp_dir``);
    ``backend`` overrides the renderer's. The components the config names must be registered
    first (:func:`load_components`).

    Raises:
        ConfigError, CheckpointError: see :func:`experiment_checkpoint`; the config's own errors.
    """
    from ..engine.evaluator import Evaluator
    from ..engine.experiment import load_experiment
    from ..engine.hooks import build_hooks

    ckpt = experiment_checkpoint(exp_dir, checkpoint)
    out = out or exp_dir
    cfg = eval_only(load_experiment(exp_dir / "config.yaml"), out, backend)
    evaluator = Evaluator(cfg, out, cfg.device, hooks=build_hooks(cfg.hooks))
    # Step and train_seconds too, not just the weights: the report then matches training's.
    evaluator.load_checkpoint(ckpt)
    return evaluator


def replace_outputs(out: Path, existing: list[Path], overwrite: bool, error: type[PointrixError] = ConfigError) -> None:
    """An ``--out`` that already holds ``existing`` (what this command writes there) is refused unless
    ``overwrite``; then only those are removed, never other files kept there (``engine/run_folder.py``)."""
    if existing and not overwrite:
        names = ", ".join(p.relative_to(out).as_posix() for p in existing)
        raise error(f"--out {out}: already holds {names}; pass --overwrite to replace them or choose another folder")
    for path in existing:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
