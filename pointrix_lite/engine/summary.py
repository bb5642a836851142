"""The short report printed at the end of a run: test metrics, size, time and where the outputs are.

Built from the files in ``exp_dir`` (``metrics.json``, the PLY, renders, checkpoints), so it
shows what a user will actually find on disk, and ``scripts/render.py`` prints the same thing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from .checkpoint import find_latest


def _fmt(value: Optional[float], digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _metrics_line(report: dict[str, Any]) -> str:
    mean = report.get("mean") or {}
    n_views = len(report.get("per_view") or {})
    parts = [f"PSNR {_fmt(mean.get('psnr'), 2)} dB", f"SSIM {_fmt(mean.get('ssim'), 4)}"]
    lpips = mean.get("lpips")
    reason = (report.get("notes") or {}).get("lpips")
    parts.append(f"LPIPS {_fmt(lpips, 4)}" + (f" ({reason})" if lpips is None and reason else ""))
    return f"test ({n_views} views): " + "  ".join(parts)


def format_summary(
    exp_dir: str | Path,
    steps: Optional[int] = None,
    train_seconds: Optional[float] = None,
    num_gaussians: Optional[int] = None,
    ply: Optional[Path] = None,
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
    lines.append(f"outputs in {exp_dir}:")
    items: list[tuple[str, str]] = []
    if report:
        items.append(("metrics", str(metrics_path)))
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
        items.append(("tensorboard", f"tensorboard --logdir {exp_dir / 'tensorboard'}"))
    lines.extend(f"  {name:<12} {where}" for name, where in items)
    return "\n".join(lines)


def trainer_summary(trainer: Any) -> str:
    """:func:`format_summary` of a finished :class:`DefaultTrainer` (PLY path from PlyExportHook)."""
    ply = next((h.path for h in trainer.hooks if type(h).__name__ == "PlyExportHook" and h.path), None)
    n = getattr(trainer.model, "num_gaussians", None)
    return format_summary(
        trainer.exp_dir, trainer.global_step, trainer.train_seconds, int(n) if n is not None else None, ply
    )
