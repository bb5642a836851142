"""Command line: ``python scripts/partition.py --scene S --out P`` splits a COLMAP scene into blocks.

Writes ``P/blocks/block_NNN/`` (COLMAP scene folders: the block's training views and SfM points) and
``P/manifest.json``; then ``train_blocks.py`` trains them and ``merge_blocks.py`` joins them
(docs/distributed.md, "Partitioned training"). Exit codes: 0 done, 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..partition.frame import UP_CHOICES
from .common import OneLineErrorParser, run_command

EXAMPLES = "example: partition.py --scene data/city --out data/city_blocks --grid 4x4 --margin 0.15"


# Each block is a training run with its own views and folder: past a few hundred, blocks hold a handful of
# views each and the manifest, status files and merge grow without a model that could use them.
MAX_BLOCKS = 1024
MAX_BLOCKS_WHY = "each block is a whole training run; split into fewer, larger blocks"


def _grid(text: str) -> tuple[int, int]:
    try:
        nx, ny = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NxM (e.g. 2x2), got {text!r}") from None
    if nx < 1 or ny < 1:
        raise argparse.ArgumentTypeError(f"both counts must be >= 1, got {text!r}")
    if nx * ny > MAX_BLOCKS:
        raise argparse.ArgumentTypeError(f"{nx * ny:,} blocks; at most {MAX_BLOCKS} ({MAX_BLOCKS_WHY})")
    return nx, ny


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="partition.py",
        epilog=EXAMPLES,
        description="Split a COLMAP scene (images/ + sparse/0) into spatial blocks to train apart.",
    )
    p.add_argument("--scene", type=Path, required=True, help="COLMAP scene folder (images/ and sparse/0/)")
    p.add_argument("--out", type=Path, required=True, help="output folder: blocks/ and manifest.json")
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--grid",
        type=_grid,
        default=(2, 2),
        metavar="NxM",
        help="a grid of N x M equal cells along the ground's major and minor axis (default 2x2)",
    )
    how.add_argument("--kd", type=int, metavar="K", help="K blocks of about equal point counts (k-d split)")
    p.add_argument("--margin", type=float, default=0.15, help="overlap on each side, fraction of a cell (default 0.15)")
    p.add_argument(
        "--min-share",
        type=float,
        default=0.15,
        help="a view trains a block when this share of its image shows the block (default 0.15)",
    )
    p.add_argument(
        "--up", choices=UP_CHOICES, default="auto", help="the scene's up axis (default: from the cameras, else PCA)"
    )
    p.add_argument(
        "--test-every",
        type=int,
        default=8,
        help="every n-th image sorted by name is a test view, held out of every block (default 8, as "
        "ColmapDataset and render.py; 0: none)",
    )
    p.add_argument(
        "--links",
        choices=("hardlink", "symlink", "copy"),
        default="hardlink",
        help="how block folders get their images (default hardlink; falls back to symlink, then copy)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a partition already in --out")
    return p


def run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..partition.split import SplitOptions, split_scene

    if not 0 <= args.margin < 1:
        raise ConfigError(f"--margin: must be in [0, 1), got {args.margin}")
    if not 0 < args.min_share <= 1:
        raise ConfigError(f"--min-share: must be in (0, 1], got {args.min_share}")
    if args.kd is not None and not 1 <= args.kd <= MAX_BLOCKS:
        raise ConfigError(f"--kd: must be in 1 .. {MAX_BLOCKS} ({MAX_BLOCKS_WHY}), got {args.kd}")
    if args.test_every < 0:
        raise ConfigError(f"--test-every: must be >= 0, got {args.test_every}")
    opts = SplitOptions(
        split="kd" if args.kd else "grid",
        grid=args.grid,
        blocks=args.kd or 0,
        margin=args.margin,
        min_share=args.min_share,
        up=args.up,
        test_every=args.test_every,
        links=args.links,
        overwrite=args.overwrite,
    )
    manifest = split_scene(args.scene, args.out, opts)
    if args.test_every not in (0, 8):
        print(f"note: render.py --ply scores every 8th view; this partition held out every {args.test_every}th")
    print(f"manifest: {manifest.path}")
    print(
        "next: torchrun --nproc_per_node N "
        + shlex.join(
            ["scripts/train_blocks.py", "--manifest", str(manifest.path), "--config", "configs/colmap_cpu.yaml"]
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
