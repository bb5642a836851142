"""``scripts/process.py`` / ``pointrix-process``: photos or a video -> a COLMAP scene to train on.

The command checks its arguments and inputs, then runs the stages in a child process: pycolmap is
C++ and some of its failures abort the whole process (a failed assertion, an allocator error),
which would otherwise end the command with no message. The parent names the stage that died and
where COLMAP's log is. COLMAP's own log goes to ``OUT/colmap/colmap.log``, not the terminal.

Exit codes: 0 done, 2 bad input (``error: <one line>``), 1 pycolmap crashed, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from ..errors import DataError
from ..process.colmap_log import LOG_NAME
from ..process.options import (
    CAMERA_MODELS,
    CLUSTER_IMAGES,
    CLUSTER_OVERLAP,
    EXHAUSTIVE_MAX_IMAGES,
    MAPPERS,
    MATCHERS,
    RETRIEVAL_NEIGHBORS,
    RETRIEVAL_OVERLAP,
    ProcessOptions,
)
from .common import EXIT_CRASH, EXIT_INTERRUPTED, EXIT_OK, EXIT_USER_ERROR, replace_outputs, run_command

WORKER_FLAG = "--_worker"
MIN_CLUSTER_IMAGES = 20  # smaller clusters have too few images to start a model from, and merge on too few


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="process.py",
        description="Structure from motion with pycolmap on the CPU: photos or a video -> images/ + sparse/0 "
        "that ColmapDataset trains on.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--images", type=Path, help="folder of photos (one camera)")
    src.add_argument("--video", type=Path, help="video file (frames are extracted with ffmpeg)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument(
        "--camera-model",
        choices=CAMERA_MODELS,
        default="SIMPLE_RADIAL",
        help="lens model (default SIMPLE_RADIAL; OPENCV can squash focal lengths on small sets)",
    )
    p.add_argument(
        "--principal-point",
        choices=("refine", "centre"),
        default="centre",
        help="refine: free each camera's principal point in a last bundle adjustment (kept within 5%% of the "
        "image size of the centre); centre: COLMAP's, held at the image centre",
    )
    p.add_argument(
        "--matcher",
        choices=MATCHERS,
        default="auto",
        help=f"auto: exhaustive up to {EXHAUSTIVE_MAX_IMAGES} images, retrieval above (vocab_tree when "
        "--vocab-tree is given)",
    )
    p.add_argument(
        "--retrieval-neighbors",
        type=int,
        default=RETRIEVAL_NEIGHBORS,
        metavar="K",
        help=f"retrieval: match each image with its K most similar images (and the next {RETRIEVAL_OVERLAP} by name)",
    )
    p.add_argument(
        "--vocab-tree",
        type=Path,
        help="vocabulary tree file: enables vocab_tree matching and "
        "loop detection in sequential matching (never downloaded)",
    )
    p.add_argument(
        "--mapper",
        choices=MAPPERS,
        default="auto",
        help="auto: incremental up to --cluster-images images, hierarchical (clusters mapped apart, "
        "then merged) above; global: GLOMAP",
    )
    p.add_argument(
        "--cluster-images",
        type=int,
        default=CLUSTER_IMAGES,
        metavar="N",
        help=f"hierarchical: at most N images per cluster, plus {CLUSTER_OVERLAP} shared with its "
        f"neighbour (default {CLUSTER_IMAGES})",
    )
    p.add_argument("--max-image-size", type=int, default=3200, help="features are found on images downsized to this")
    p.add_argument("--max-features", type=int, default=8192, help="SIFT features per image")
    p.add_argument("--num-frames", type=int, default=100, help="video: frames to extract (evenly spaced)")
    p.add_argument("--sharp-frames", action="store_true", help="video: the sharpest frame of each window")
    p.add_argument("--downscales", type=int, default=0, metavar="K", help="also write images_2 .. images_{2^K}")
    p.add_argument("--threads", type=int, default=-1, help="CPU threads for COLMAP (-1: all)")
    p.add_argument(
        "--masks",
        type=Path,
        help="folder of masks DIR/<photo stem>.png (0 = ignore the pixel): no "
        "features there; written undistorted to OUT/masks for training",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace images/, sparse/, colmap/, masks/ already in --out"
    )
    p.add_argument(
        "--import",
        dest="import_file",
        type=Path,
        metavar="FILE",
        help="skip SfM: read the cameras of a photogrammetry project (OpenSfM / ODM reconstruction.json, "
        "Metashape camera .xml) for the photos in --images",
    )
    p.add_argument("--points", type=Path, help="with --import: the sparse points as a PLY (Metashape's XML has none)")
    return p


def to_options(args: argparse.Namespace) -> ProcessOptions:
    for key, minimum in (
        ("max_image_size", 16),
        ("max_features", 16),
        ("num_frames", 3),
        ("downscales", 0),
        ("retrieval_neighbors", 1),
        ("cluster_images", MIN_CLUSTER_IMAGES),
    ):
        if getattr(args, key) < minimum:
            raise DataError(f"--{key.replace('_', '-')}: must be >= {minimum}, got {getattr(args, key)}")
    if args.vocab_tree is not None and not args.vocab_tree.is_file():
        raise DataError(f"--vocab-tree {args.vocab_tree}: file not found")
    if args.masks is not None and args.video is not None:
        raise DataError("--masks works with --images only (video frames get new names)")
    if args.matcher == "vocab_tree" and args.vocab_tree is None:
        raise DataError("--matcher vocab_tree needs --vocab-tree FILE (COLMAP would download one, and abort offline)")
    return ProcessOptions(
        out=args.out,
        images=args.images,
        video=args.video,
        camera_model=args.camera_model,
        principal_point=args.principal_point,
        matcher=args.matcher,
        retrieval_neighbors=args.retrieval_neighbors,
        vocab_tree=args.vocab_tree,
        mapper=args.mapper,
        cluster_images=args.cluster_images,
        max_image_size=args.max_image_size,
        max_features=args.max_features,
        num_frames=args.num_frames,
        sharp_frames=args.sharp_frames,
        downscales=args.downscales,
        threads=args.threads,
        overwrite=args.overwrite,
        masks=args.masks,
    )


def check_inputs(opts: ProcessOptions) -> None:
    """The checks that need no pycolmap, done before the worker starts."""
    from ..process.inputs import scan_images

    if opts.images is not None:
        images = scan_images(opts.images)
        if opts.masks is not None:
            from ..process.masks import check_masks

            check_masks(opts.masks, images.root, images.names)
    elif not opts.video.is_file():
        raise DataError(f"--video {opts.video}: file not found")
    if opts.out.exists() and not opts.out.is_dir():
        raise DataError(f"--out {opts.out}: exists and is not a folder")
    clear_outputs(opts.out, opts.overwrite)


def clear_outputs(out: Path, overwrite: bool) -> None:
    """Refuse an ``out`` that holds what this run writes, unless ``overwrite``: then remove only that,
    never other files the user keeps there."""
    from ..process.pipeline import outputs_in_the_way

    replace_outputs(out, outputs_in_the_way(out), overwrite, DataError)


def _worker(argv: list[str]) -> int:
    """The child: run the stages with fd 2 (COLMAP's log) sent to ``colmap/colmap.log``."""
    opts = to_options(build_parser().parse_args(argv))
    colmap_dir = opts.out / "colmap"
    colmap_dir.mkdir(parents=True, exist_ok=True)
    stderr = os.fdopen(os.dup(2), "w", buffering=1)
    log = os.open(colmap_dir / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    return run_command(_run_stages, opts, stderr=stderr)


def _run_stages(opts: ProcessOptions) -> int:
    from rich.console import Console

    from ..process.pipeline import run

    run(opts, Console(highlight=False))
    return EXIT_OK


def _crash_message(returncode: int, out: Path) -> str:
    stage_file = out / "colmap" / "stage.txt"
    stage = stage_file.read_text().strip() if stage_file.is_file() else "startup"
    try:
        what = signal.Signals(-returncode).name if returncode < 0 else f"exit code {returncode}"
    except ValueError:
        what = f"signal {-returncode}"
    return (
        f"pycolmap stopped the process ({what}) during stage '{stage}'; COLMAP's log: "
        f"{out / 'colmap' / LOG_NAME}; files written before it are kept"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [WORKER_FLAG]:
        return _worker(argv[1:])
    return run_command(lambda args: _run_in_child(args, argv), build_parser().parse_args(argv))


def _import(args: argparse.Namespace) -> int:
    """``--import FILE``: the project's cameras and points as a COLMAP scene in ``--out``, no SfM."""
    from ..process.imports import import_project
    from ..process.report import TRAIN_CONFIG

    if args.images is None:
        raise DataError("--import needs --images DIR, the photos the project was made from")
    for flag, path in (("--import", args.import_file), ("--points", args.points)):
        if path is not None and not path.is_file():
            raise DataError(f"{flag} {path}: file not found")
    if not args.images.is_dir():
        raise DataError(f"--images {args.images}: folder not found")
    clear_outputs(args.out, args.overwrite)
    _, lines = import_project(args.import_file, args.images, args.out, args.points)
    for line in lines:
        print(line)
    print(
        f"next: {shlex.join(['python', 'scripts/train.py', '--config', TRAIN_CONFIG, f'dataset.data_path={args.out}'])}"
    )
    return EXIT_OK


def _run_in_child(args: argparse.Namespace, argv: list[str]) -> int:
    """Check the inputs here (one-line errors), then run the stages in a child process."""
    if args.import_file is not None:
        return _import(args)
    if args.points is not None:
        raise DataError("--points goes with --import")
    opts = to_options(args)
    check_inputs(opts)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the child imports this same pointrix_lite
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    child = subprocess.Popen([sys.executable, "-m", "pointrix_lite.cli.process", WORKER_FLAG, *argv], env=env)
    try:
        rc = child.wait()
    except KeyboardInterrupt:  # the child got the same Ctrl-C; let it report
        rc = child.wait()
        return EXIT_INTERRUPTED if rc != EXIT_USER_ERROR else rc
    if rc in (EXIT_OK, EXIT_USER_ERROR, EXIT_INTERRUPTED):
        return rc
    print(f"error: {_crash_message(rc, opts.out)}", file=sys.stderr)
    return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
