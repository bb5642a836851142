"""Command line: ``python scripts/view.py (--ply FILE | --exp-dir DIR [--checkpoint CKPT])``.

Serves the model in the browser until Ctrl-C. Exit codes: 0 after Ctrl-C while serving, 2 bad input
(``error: <one line>`` on stderr: missing file, busy port, unknown host), 130 Ctrl-C while loading.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..errors import ConfigError, DataError
from .common import (
    EXIT_OK,
    add_plugin_option,
    check_model_source,
    load_components,
    model_source_parser,
    open_experiment,
    run_command,
)


def build_parser() -> argparse.ArgumentParser:
    p = model_source_parser(
        "view.py",
        "Fly around a trained Gaussian-splatting model in the browser (viser).",
        "examples: view.py --exp-dir outputs/demo | view.py --ply outputs/demo/point_cloud.ply --port 8081",
        exp_dir_help="experiment folder written by train.py (its data set gives the start view)",
        ply_help="3DGS PLY file",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 exposes the scene to the network)",
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    p.add_argument("--max-res", type=int, default=512, help="longest image side once the camera stops (default 512)")
    p.add_argument(
        "--preview-res", type=int, default=256, help="longest image side while the camera moves (default 256)"
    )
    p.add_argument("--backend", choices=("auto", "native", "torch", "gsplat"), default=None, help="rasterizer backend")
    p.add_argument("--white-background", action="store_true", help="with --ply: render on white instead of black")
    add_plugin_option(p)
    return p


def _scene_from_exp_dir(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..viewer.camera import initial_view_from_cameras
    from ..viewer.scene import SceneView

    trainer = open_experiment(args.exp_dir, args.checkpoint, backend=args.backend)
    ds = trainer.dataset
    cameras = [v.camera for v in [*ds.train_views, *ds.test_views]]
    model = trainer.model
    model.eval()
    return SceneView(model, trainer.renderer, ds.background), initial_view_from_cameras(cameras)


def _scene_from_ply(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..model.gaussian_model import GaussianModel
    from ..renderer.renderer import GaussianRenderer
    from ..viewer.camera import initial_view_from_points
    from ..viewer.scene import SceneView

    if not args.ply.is_file():
        raise DataError(f"--ply: file not found: {args.ply}")
    model = GaussianModel.from_ply(args.ply)
    renderer = GaussianRenderer(GaussianRenderer.Config(backend=args.backend or "auto"))
    background = (1.0, 1.0, 1.0) if args.white_background else (0.0, 0.0, 0.0)
    return SceneView(model, renderer, background), initial_view_from_points(model.params["means"])


def start(args: argparse.Namespace) -> Any:
    """Load the model and start serving it; returns the running :class:`Viewer`."""
    from ..viewer.scene import DisplayOptions
    from ..viewer.server import Viewer, check_bind

    if args.max_res < 16 or args.preview_res < 16:
        raise ConfigError(f"--max-res / --preview-res: must be >= 16, got {args.max_res} / {args.preview_res}")
    check_model_source(args)
    check_bind(args.host, args.port)  # before loading a large model: a busy port fails in a second
    load_components(args.plugin)
    scene, view = _scene_from_exp_dir(args) if args.exp_dir is not None else _scene_from_ply(args)
    options = DisplayOptions(max_res=args.max_res, preview_res=args.preview_res)
    return Viewer(scene, args.host, args.port, options=options, initial_view=view)


def serve(args: argparse.Namespace) -> int:
    """Start the viewer and serve until Ctrl-C, which is the normal way to stop it (exit 0)."""
    viewer = start(args)
    try:
        print("viewer: serving until Ctrl-C")
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return EXIT_OK
    finally:
        viewer.close()


def main(argv: list[str] | None = None) -> int:
    return run_command(serve, build_parser().parse_args(argv))
