"""The short report printed at the end of a run: test metrics, size, time and where the outputs are.

Built from the files in ``exp_dir`` (``metrics.json``, the PLY, renders, checkpoints), so it
shows what a user will actually find on disk, and ``scripts/render.py`` prints the same thing.
"""

from __future__ import annotations

import importlib
import json
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..engine.checkpoint import find_latest
from ..progress import format_phase_seconds


def _fmt(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _metrics_line(report: dict[str, Any], suffix: str = "", label: str = "test") -> str:
    """One line of ``report["mean" + suffix]`` (``suffix`` "_aligned": PoseOptHook's fitted poses)."""
    mean = report.get("mean" + suffix) or {}
    n_views = len(report.get("per_view" + suffix) or {})
    parts = [f"PSNR {_fmt(mean.get('psnr'), 2)} dB", f"SSIM {_fmt(mean.get('ssim'), 4)}"]
    lpips = mean.get("lpips")
    reason = (report.get("notes") or {}).get("lpips")
    parts.append(f"LPIPS {_fmt(lpips, 4)}" + (f" ({reason})" if lpips is None and reason and not suffix else ""))
    return f"{label} ({n_views} views): " + "  ".join(parts)


def format_summary(
    exp_dir: str | Path,
    steps: int | None = None,
    train_seconds: float | None = None,
    num_gaussians: int | None = None,
    ply: Path | None = None,
    metrics_file: str = "metrics.json",
) -> str:
    """Multi-line summary of ``exp_dir``; values in ``metrics.json`` win over the arguments.

    Args:
        exp_dir: The experiment (or render output) folder.
        steps, train_seconds, num_gaussians: Used when there is no ``metrics.json`` (no test run).
        ply: The exported PLY; default ``<exp_dir>/point_cloud.ply`` when it exists.
    """
    exp_dir = Path(exp_dir)
    metrics_path = exp_dir / metrics_file
    report: dict[str, Any] = {}
    if metrics_path.is_file():
        report = json.loads(metrics_path.read_text())
    steps = report.get("steps", steps)
    train_seconds = report.get("train_seconds", train_seconds)
    num_gaussians = report.get("num_gaussians", num_gaussians)

    head = f"done: {steps} steps" if steps is not None else "done"
    if train_seconds:
        head += f" in {train_seconds:.1f} s"
        if steps:
            head += f" ({steps / train_seconds:.1f} it/s incl. validation)"
    if num_gaussians is not None:
        head += f"; {num_gaussians:,} Gaussians"
    lines = [head]
    if report:
        lines.append(_metrics_line(report))
        if "mean_aligned" in report:  # the figure that compares with INRIA's protocol stays first
            lines.append(_metrics_line(report, "_aligned", "test, poses fitted to the images"))
        if report.get("phase_seconds"):
            lines.append("time outside training: " + format_phase_seconds(report["phase_seconds"]))
    lines.append(f"outputs in {exp_dir}:")
    items: list[tuple[str, str]] = []
    if report:
        items.append(("metrics", str(metrics_path)))
    if (exp_dir / "report.html").is_file():
        items.append(("report", str(exp_dir / "report.html")))
    renders = exp_dir / "renders" / "test"
    if (renders / "render").is_dir():
        n = len(list((renders / "render").glob("*.png")))
        items.append(("renders", f"{renders}/{{render,gt}}/ ({n} views)"))
    ply = ply if ply is not None else exp_dir / "point_cloud.ply"
    if ply.is_file():
        items.append(("point cloud", str(ply)))
    latest = find_latest(exp_dir)
    if latest is not None:
        items.append(("checkpoint", str(latest)))
    if (exp_dir / "tensorboard").is_dir():
        items.append(("tensorboard", shlex.join(["tensorboard", "--logdir", str(exp_dir / "tensorboard")])))
    lines.extend(f"  {name:<12} {where}" for name, where in items)
    return "\n".join(lines)


def resume_command(exp_dir: str | Path, plugins: Iterable[str] = (), max_steps: int | None = None) -> str:
    """The command that continues the run in ``exp_dir`` from its latest checkpoint (to ``max_steps``)."""
    command = ["python", "scripts/train.py", "--config", str(Path(exp_dir) / "config.yaml"), "--resume"]
    if max_steps is not None:
        command.append(f"trainer.max_steps={max_steps}")
    return shlex.join(command + [a for p in plugins for a in ("--plugin", str(p))])  # pastes back as these arguments


def viewer_available() -> bool:
    # The viewer is optional (its own package and dependencies); offer it only where it imports.
    try:
        importlib.import_module("pointrix_lite.viewer")
    except ImportError:
        return False
    return True


def next_commands(exp_dir: str | Path, plugins: Iterable[str] = (), finished_steps: int | None = None) -> str:
    """What to do next with a run: view it (once a viewer is installed) and continue training it.

    ``finished_steps``: the run reached its ``max_steps`` at this step, so continuing needs a
    larger one (twice as many is offered); ``None`` resumes to the configured ``max_steps``.
    """
    lines = ["next:"]
    if viewer_available():
        lines.append(f"  {'view':<12} {shlex.join(['python', 'scripts/view.py', '--exp-dir', str(exp_dir)])}")
    more = 2 * finished_steps if finished_steps else None
    lines.append(f"  {'train longer' if more else 'resume':<12} {resume_command(exp_dir, plugins, more)}")
    return "\n".join(lines)


def trainer_summary(trainer: Any, plugins: Iterable[str] = ()) -> str:
    """:func:`format_summary` of a finished :class:`DefaultTrainer` (PLY path from PlyExportHook),
    then :func:`next_commands` (``plugins``: the ``--plugin`` files the resume command must repeat)."""
    ply = next((h.path for h in trainer.hooks if type(h).__name__ == "PlyExportHook" and h.path), None)
    n = getattr(trainer.model, "num_gaussians", None)
    summary = format_summary(
        trainer.exp_dir, trainer.global_step, trainer.train_seconds, int(n) if n is not None else None, ply
    )
    finished = trainer.global_step if trainer.global_step >= trainer.cfg.trainer.max_steps else None
    return summary + "\n" + next_commands(trainer.exp_dir, plugins, finished)
