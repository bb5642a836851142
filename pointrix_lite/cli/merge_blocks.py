"""Command line: ``scripts/merge_blocks.py --manifest M --out merged/`` joins the trained blocks.

Writes ``merged/point_cloud.ply`` (each block's Gaussians inside its own cell), ``config.yaml`` and
``merge.json``; ``render.py --ply merged/point_cloud.ply --data <scene>`` then scores it on the whole
scene's test views. Exit codes: 0 done, 2 bad input or a block that did not finish (one line).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from .common import OneLineErrorParser, run_command


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="merge_blocks.py",
        description="Merge the blocks trained by train_blocks.py into one PLY.",
        epilog="example: merge_blocks.py --manifest data/city_blocks/manifest.json --out outputs/city",
    )
    p.add_argument("--manifest", type=Path, required=True, help="manifest.json written by partition.py (or its folder)")
    p.add_argument("--out", type=Path, required=True, help="output folder: point_cloud.ply, config.yaml, merge.json")
    p.add_argument(
        "--runs", type=Path, help="the blocks' runs (default: runs/ beside the manifest, as train_blocks.py)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace a merged model already in --out")
    return p


def check_out(out: Path, runs: Path, partition: Path, overwrite: bool) -> None:
    """Refuse an output inside the blocks' runs or the partition (a later merge or train_blocks.py would take
    the merged PLY for a block's), and an earlier merge there unless ``overwrite``."""
    from ..errors import ConfigError

    target = out.resolve()
    for inside, what in ((runs, "the blocks' runs"), (partition, "the partition")):
        if target == inside or inside in target.parents:
            raise ConfigError(
                f"--out {out}: inside {what} ({inside}), where the merged PLY would be read as a block's; "
                "choose a folder outside it"
            )
    if (out / "point_cloud.ply").exists() and not overwrite:
        raise ConfigError(f"--out {out}: holds a merged model already; pass --overwrite to replace it")


def run(args: argparse.Namespace) -> int:
    from ..partition.manifest import load_manifest
    from ..partition.merge import merge_blocks

    manifest = load_manifest(args.manifest)
    runs = (args.runs or manifest.root / "runs").resolve()
    check_out(args.out, runs, manifest.root.resolve(), args.overwrite)
    start = time.perf_counter()
    print(f"merge: {len(manifest.blocks)} blocks from {runs}")
    ply, counts = merge_blocks(manifest, runs, args.out)
    total = sum(c.kept for c in counts)
    print(
        f"merge: {total:,} Gaussians of {sum(c.total for c in counts):,} -> {ply} in {time.perf_counter() - start:.1f} s"
    )
    print(
        f"next: {shlex.join([sys.executable, 'scripts/render.py', '--ply', str(ply), '--data', str(manifest.scene)])}"
        "   # scores the "
        f"{len(manifest.test_views)} test views of the whole scene"
    )
    print(f"      {shlex.join([sys.executable, 'scripts/export.py', '--ply', str(ply), '--format', 'splat'])}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
