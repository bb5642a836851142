"""The summary printed after processing, and ``colmap/summary.json`` with the same numbers."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

TRAIN_CONFIG = "configs/colmap_cpu.yaml"


@dataclass
class Summary:
    out: str
    n_input: int
    registered: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    dropped_models: list[tuple[int, int]] = field(default_factory=list)
    skipped_inputs: list[tuple[str, str]] = field(default_factory=list)
    reprojection_error: float = 0.0
    focal_lengths: list[tuple[float, float]] = field(default_factory=list)
    principal_points: list[list[float]] = field(default_factory=list)  # [cx, cy] per camera, where refined
    num_points: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    downscaled: list[str] = field(default_factory=list)
    image_size: list[int] = field(default_factory=list)  # [width, height] of the largest registered camera
    turned_upright: int = 0  # photos written upright (colmap/upright/) because of their EXIF orientation
    matcher: str = ""  # the matcher and mapper that ran (what --matcher/--mapper auto chose)
    mapper: str = ""

    def train_command(self) -> str:
        """The command that trains on this output (the data path quoted for the shell)."""
        return f"python scripts/train.py --config {TRAIN_CONFIG} dataset.data_path={shlex.quote(self.out)}"


def registration_verdict(n_registered: int, n_input: int) -> tuple[str, str]:
    """(rich style, sentence) in nerfstudio's wording for the share of images COLMAP posed."""
    pct = 100.0 * n_registered / max(n_input, 1)
    if pct < 40:
        return "bold red", (
            f"COLMAP only found poses for {pct:.2f}% of the images. This is low. This can be caused by a variety "
            "of reasons, such poor scene coverage, blurry images, or large exposure changes."
        )
    if pct < 80:
        return "bold yellow", (
            f"Warning: COLMAP only found poses for {pct:.2f}% of the images. This can be caused by a variety of "
            "reasons, such poor scene coverage, blurry images, or large exposure changes."
        )
    return "bold green", f"COLMAP found poses for {pct:.2f}% of the images."


def print_summary(console: Console, s: Summary) -> None:
    n_reg = len(s.registered)
    style, verdict = registration_verdict(n_reg, s.n_input)
    console.print(f"\n[bold]Registered {n_reg}/{s.n_input} images[/bold]")
    console.print(f"[{style}]{verdict}[/{style}]")
    if s.unregistered:
        more = f" and {len(s.unregistered) - 10} more" if len(s.unregistered) > 10 else ""
        console.print(f"  not registered: {', '.join(s.unregistered[:10])}{more}", markup=False)
    for k, n in s.dropped_models:
        console.print(f"  dropped model colmap/sparse/{k} ({n} images; only the largest model is used)", markup=False)
    if s.skipped_inputs:
        console.print(
            f"  skipped {len(s.skipped_inputs)} unreadable file(s), e.g. {s.skipped_inputs[0][0]}", markup=False
        )
    focal = ", ".join(f"fx {fx:.1f} fy {fy:.1f}" for fx, fy in s.focal_lengths)
    console.print(
        f"  mean reprojection error {s.reprojection_error:.3f} px; {s.num_points} points; focal {focal}", markup=False
    )
    stages = ", ".join(f"{name} {sec:.1f} s" for name, sec in s.stage_seconds.items())
    console.print(f"  time: {stages} (total {sum(s.stage_seconds.values()):.1f} s)", markup=False)
    if s.downscaled:
        console.print(
            f"  downscaled: {', '.join(s.downscaled)} (train on them with dataset.scale=2, 4, ...)", markup=False
        )
    if s.image_size:
        from ..data.resolution import auto_scale, describe  # the rule the training config applies

        w, h = s.image_size
        console.print(
            f"  {describe(w, h, auto_scale(w, h))} ({TRAIN_CONFIG} has scale: auto)", markup=False, soft_wrap=True
        )
    console.print("\n[bold]Train next:[/bold]")
    console.print(f"  {s.train_command()}", markup=False, soft_wrap=True)


def write_summary(path: Path, s: Summary) -> None:
    data = asdict(s)
    data["train_command"] = s.train_command()
    path.write_text(json.dumps(data, indent=2))
