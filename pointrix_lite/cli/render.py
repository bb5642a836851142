"""Command line: ``python scripts/render.py`` re-renders a trained model.

Three things it does (the first two recompute ``metrics.json`` with the trainer's own ``test()``,
so the numbers are exactly training's):

- ``--exp-dir D``: test split from D's latest checkpoint (or ``--checkpoint``), written into D
  (or ``--out``): ``metrics.json`` and ``renders/test/{render,gt}/``.
- ``--ply FILE --data PATH``: a 3DGS PLY against a data set (layout inferred, or
  ``--dataset-type``); output in ``--out`` (default ``<FILE without .ply>_render/``).
- ``--trajectory orbit|interp|ellipse|spiral`` with either source: frames of a camera path
  through the data set's cameras and a video instead of the test split
  (``<out>/trajectory/<kind>/*.png`` + ``<kind>.mp4`` or ``.gif``; paths in ``trajectory.py``);
  ``--camera-path FILE`` renders a path file's cameras the same way (``<out>/trajectory/path/``).

Exit codes: 0 done, 2 bad input (``error: <one line>`` on stderr).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError
from .common import (
    add_plugin_option,
    check_model_source,
    eval_only,
    load_components,
    model_source_parser,
    open_experiment,
    replace_outputs,
    run_command,
)

# Layout marker -> dataset type, checked in this order by --data inference.
LAYOUT_MARKERS: tuple[tuple[str, str], ...] = (
    ("transforms_train.json", "NerfSyntheticDataset"),
    ("transforms.json", "NerfstudioDataset"),
    ("sparse", "ColmapDataset"),
)
EXAMPLES = (
    "examples: render.py --exp-dir outputs/demo | render.py --ply model.ply --data data/scene "
    "| render.py --exp-dir outputs/demo --trajectory orbit --frames 90"
)


def build_parser() -> argparse.ArgumentParser:
    p = model_source_parser(
        "render.py",
        "Re-render a trained model: test split + metrics.json, or a camera path video.",
        EXAMPLES,
        exp_dir_help="experiment folder written by train.py (holds config.yaml)",
        ply_help="3DGS PLY file to render (needs --data)",
    )
    p.add_argument("--data", type=Path, help="with --ply: data set folder whose cameras to render")
    p.add_argument("--dataset-type", help="with --ply: registered dataset type (default: from the folder layout)")
    p.add_argument(
        "--scale",
        type=_scale_arg,
        help="with --ply: image downscale factor of the data set, or auto "
        "(default: the factor the run trained at, from config.yaml beside the PLY; else 1)",
    )
    p.add_argument("--out", type=Path, help="output folder (default: the exp dir, or <ply>_render/)")
    p.add_argument("--backend", choices=("auto", "torch", "native", "gsplat"), help="rasterizer backend override")
    p.add_argument(
        "--trajectory",
        choices=("orbit", "interp", "ellipse", "spiral"),
        help="render this camera path through the data set's cameras instead of the test split",
    )
    p.add_argument("--overwrite", action="store_true", help="replace what an earlier render left in --out")
    p.add_argument(
        "--camera-path", type=Path, help="render the cameras of this path file (nerfstudio's camera path JSON)"
    )
    p.add_argument("--frames", type=int, default=120, help="frames on the camera path (default 120)")
    p.add_argument("--fps", type=int, default=30, help="video frame rate (default 30)")
    p.add_argument("--video", choices=("mp4", "gif"), default="mp4", help="video format (default mp4)")
    p.add_argument(
        "--outputs",
        default="rgb",
        help="with the test split: what to write, of rgb, depth (expected), median_depth, normal (the Gaussians'), "
        "normal_depth (comma-separated; default rgb): renders/test/<kind>/<view>.png and .npy (docs/geometry.md)",
    )
    add_plugin_option(p)
    return p


def _scale_arg(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _trained_scale(ply: Path) -> float | str:
    """The ``dataset.scale`` of the run whose experiment folder holds ``ply`` (its config.yaml), else 1."""
    import yaml

    config = ply.with_name("config.yaml")
    try:
        scale = (yaml.safe_load(config.read_text()) or {}).get("dataset", {}).get("scale", 1.0)
    except (OSError, yaml.YAMLError, AttributeError):
        return 1.0
    return scale if scale == "auto" or isinstance(scale, (int, float)) else 1.0


def _infer_dataset_type(data: Path) -> str:
    if not data.is_dir():
        raise DataError(f"--data: folder not found: {data}")
    for marker, type_name in LAYOUT_MARKERS:
        if (data / marker).exists():
            return type_name
    markers = " or ".join(m for m, _ in LAYOUT_MARKERS)
    raise DataError(f"--data {data}: cannot tell the layout (no {markers}); pass --dataset-type")


def _evaluator_from_ply(args: argparse.Namespace) -> tuple[Any, Path]:
    from ..data.orientation import ORIENTATION_FILE, read_orientation
    from ..engine.evaluator import Evaluator
    from ..engine.experiment import load_experiment
    from ..engine.hooks import build_hooks
    from ..model.gaussian_model import GaussianModel
    from ..registry import DATASETS

    if args.data is None:
        raise ConfigError("--ply needs --data (the data set whose cameras to render)")
    if not args.ply.is_file():
        raise DataError(f"--ply: file not found: {args.ply}")
    model = GaussianModel.from_ply(args.ply)  # a bad file fails here, before the data set loads
    type_name = args.dataset_type or _infer_dataset_type(args.data)
    DATASETS.get(type_name, "--dataset-type")
    out = args.out or args.ply.with_name(f"{args.ply.stem}_render")
    scale = _trained_scale(args.ply) if args.scale is None else args.scale  # a factor below 1 was trained or asked for
    raw = {
        "name": "render",
        "exp_dir": str(out),
        "dataset": {"type": type_name, "data_path": str(args.data), "scale": scale},
        "model": {"type": "GaussianModel", "sh_degree": model.config.sh_degree},
        "renderer": {"type": "GaussianRenderer"},
    }
    if scale != "auto" and scale < 1:  # only then: a data set type without the option still renders
        raw["dataset"]["upsample"] = True
    turn_file = args.ply.with_name(ORIENTATION_FILE)
    saved = read_orientation(turn_file)
    if saved is not None:  # trained with dataset.orientation: render the data set turned the same way
        if type_name != "ColmapDataset":
            raise DataError(
                f"{turn_file}: the model was trained on a turned COLMAP scene, but --data {args.data} is a {type_name}"
            )
        raw["dataset"]["orientation"] = "manhattan"
    cfg = eval_only(load_experiment(None, data=raw), out, args.backend)
    evaluator = Evaluator(cfg, out, cfg.device, hooks=build_hooks(cfg.hooks), model=model)  # the PLY's Gaussians
    if saved is not None and not np.allclose(evaluator.dataset.world_rotation, saved, atol=1e-6):
        raise DataError(
            f"{turn_file}: --data {args.data} turns by another rotation than the "
            "model was trained in (not the same data?); render with --exp-dir"
        )
    return evaluator, out


def render_trajectory(
    trainer: Any, kind: str, n_frames: int, fps: int, video: str, out: Path, camera_path: Path | None = None
) -> Path:
    """Render ``kind`` through ``trainer.dataset``'s cameras (or ``camera_path``'s cameras, as ``kind``
    ``path``); write PNG frames and a video.

    Returns:
        The video file, ``<out>/trajectory/<kind>.<video>``.
    """
    import imageio.v2 as imageio

    from ..trajectory import make_trajectory, path_cameras
    from ..writers.base import image_to_uint8

    if video == "mp4":
        from ..io.ffmpeg import import_ffmpeg

        import_ffmpeg("--video mp4 (or --video gif)")
    ds = trainer.dataset
    cameras = [v.camera for v in [*ds.train_views, *ds.test_views]]
    frame_dir = out / "trajectory" / kind
    frame_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    trainer.model.eval()
    with torch.no_grad():
        for cam in path_cameras(camera_path) if camera_path else make_trajectory(kind, cameras, n_frames):
            rgb = trainer.renderer(trainer.model, [cam], ds.background)["rgb"][0]
            frame = image_to_uint8(rgb)
            imageio.imwrite(frame_dir / f"{cam.name}.png", frame)
            frames.append(frame)
    path = out / "trajectory" / f"{kind}.{video}"
    if video == "mp4":
        # yuv420p needs even sizes; macro_block_size=2 pads/resizes only odd ones.
        imageio.mimwrite(path, frames, fps=fps, codec="libx264", quality=8, macro_block_size=2)
    else:
        imageio.mimwrite(path, frames, duration=1000.0 / fps, loop=0)
    return path


def clear_render_out(out: Path, kind: str | None, video: str, overwrite: bool) -> None:
    """Refuse an ``--out`` that holds what this render writes (a camera path's frames and video, or the test
    split's ``metrics.json`` and renders) unless ``overwrite``; then remove only that (``engine/run_folder.py``)."""
    if kind is not None:
        targets = [out / "trajectory" / kind, out / "trajectory" / f"{kind}.{video}"]
    else:
        targets = [out / "metrics.json", out / "renders"]
    replace_outputs(out, [t for t in targets if t.exists()], overwrite)


def run(args: argparse.Namespace) -> int:
    from ..io.atomic import atomic_write_text
    from ..report import write_report
    from .summary import format_summary

    if args.frames < 1:
        raise ConfigError(f"--frames: must be >= 1, got {args.frames}")
    if args.fps < 1:
        raise ConfigError(f"--fps: must be >= 1, got {args.fps}")
    if args.exp_dir is not None and (args.data or args.dataset_type):
        raise ConfigError("--data / --dataset-type go with --ply; --exp-dir uses the data set of its config")
    check_model_source(args)
    if args.trajectory and args.camera_path:
        raise ConfigError("--trajectory builds a path, --camera-path reads one: pass one")
    kind = args.trajectory or ("path" if args.camera_path else None)
    maps = output_kinds(args.outputs)
    if maps and kind is not None:
        raise ConfigError("--outputs depth/normal go with the test split, not with --trajectory or --camera-path")
    if args.exp_dir is None or args.out is not None:  # into the run's own folder: re-rendering it is the point
        clear_render_out(args.out or args.ply.with_name(f"{args.ply.stem}_render"), kind, args.video, args.overwrite)
    load_components(args.plugin)
    if args.exp_dir is not None:
        out = args.out or args.exp_dir
        trainer = open_experiment(args.exp_dir, args.checkpoint, out, args.backend)
    else:
        trainer, out = _evaluator_from_ply(args)
    if kind is not None:
        path = render_trajectory(trainer, kind, args.frames, args.fps, args.video, out, args.camera_path)
        print(f"frames in {path.parent / kind}; video: {path}")
        return 0
    if not trainer.dataset.test_views:
        raise DataError("the data set has no test views (eval: false?); nothing to render")
    report = trainer.test()
    if maps:
        write_test_maps(trainer, out / "renders" / "test", maps)
    if args.ply is not None:
        # No training happened here: say where the Gaussians came from instead of a step count.
        report.update(steps=None, train_seconds=None, source=str(args.ply))
        atomic_write_text(out / "metrics.json", json.dumps(report, indent=2))
    write_report(out)
    print(format_summary(out, ply=args.ply))
    return 0


def output_kinds(text: str) -> tuple[str, ...]:
    """The geometry maps ``--outputs`` asks for besides rgb (the test renders are always written)."""
    from ..geometry.maps import MAP_KINDS

    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in ("rgb", *MAP_KINDS)]
    if unknown or not kinds:
        raise ConfigError(
            f"--outputs: unknown {', '.join(unknown) or 'empty list'}; choose from rgb, {', '.join(MAP_KINDS)}"
        )
    return tuple(k for k in MAP_KINDS if k in kinds)


def write_test_maps(trainer: Any, folder: Path, kinds: tuple[str, ...]) -> None:
    """Depth / normal maps of every test view, under the file names the test renders got."""
    from ..geometry.maps import save_maps, view_maps
    from ..progress import phase

    trainer.model.eval()
    views = list(trainer.dataset.test_views)
    with torch.no_grad(), phase("geometry maps", total=len(views), unit="views") as advance:
        for view in views:
            background = trainer.dataset.background
            maps = view_maps(
                trainer.model,
                trainer.renderer,
                view.camera,
                background,
                gaussian_normals="normal" in kinds,
                median="median_depth" in kinds,
            )
            stem = Path(trainer.render_files.get(view.name, f"{view.name}.png")).stem
            save_maps(maps, folder, stem, kinds)
            advance()


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
