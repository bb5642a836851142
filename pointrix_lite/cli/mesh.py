"""Command line: ``python scripts/mesh.py`` extracts a trained scene's surface as a mesh and a point cloud.

    mesh.py --exp-dir DIR [--checkpoint CKPT] [--out DIR] [--resolution N | --voxel-size S] [--trunc T]
            [--depth expected|median] [--min-alpha A] [--far F] [--points N] [--max-voxels N] [--overwrite]
            [--backend B]

Stages, one status line each: the model, the training views' depth and normals, the scene's box, TSDF
fusion, marching cubes, the point cloud, the files. Writes ``<out>/mesh.ply`` (MeshLab, CloudCompare,
Open3D, Blender), ``<out>/mesh.glb`` (glTF viewers) and ``<out>/points.ply`` (coloured points with normals);
``<out>`` is the experiment folder unless given. Exit codes: 0 written, 2 bad input (``error: <one line>``).
docs/geometry.md explains each option and the defaults.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..errors import ConfigError, DataError
from ..geometry import DEPTH_KINDS
from .common import (
    OneLineErrorParser,
    add_plugin_option,
    load_components,
    open_experiment,
    replace_outputs,
    run_command,
)

OUTPUTS = ("mesh.ply", "mesh.glb", "points.ply")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="mesh.py",
        description="Extract a trained scene's surface: TSDF fusion of its training views' depth, a mesh and a point cloud.",
        epilog="example: mesh.py --exp-dir outputs/demo (then open outputs/demo/mesh.ply in MeshLab)",
    )
    p.add_argument("--exp-dir", type=Path, required=True, help="experiment folder written by train.py")
    p.add_argument("--checkpoint", type=Path, help="this checkpoint instead of the latest")
    p.add_argument("--out", type=Path, help="output folder (default: the experiment folder)")
    p.add_argument("--resolution", type=int, default=256, help="voxels along the scene box's longest side")
    p.add_argument("--voxel-size", type=float, help="voxel edge in scene units (instead of --resolution)")
    p.add_argument("--trunc", type=float, help="TSDF truncation in scene units (default: 4 voxels)")
    p.add_argument(
        "--depth",
        choices=DEPTH_KINDS,
        default="expected",
        help="the depth fused: expected (blended) or median (where alpha passes one half); docs/geometry.md",
    )
    p.add_argument("--min-alpha", type=float, default=0.5, help="fuse pixels whose rendered alpha is at least this")
    p.add_argument("--far", type=float, default=3.0, help="fuse depth up to this many times a view's median depth")
    p.add_argument("--points", type=int, default=500_000, help="at most this many points in points.ply")
    p.add_argument("--max-voxels", type=int, default=256**3, help="memory bound: the voxel grows to fit")
    p.add_argument("--overwrite", action="store_true", help="replace mesh.ply, mesh.glb, points.ply in --out")
    p.add_argument("--backend", choices=("auto", "torch", "native", "gsplat"), help="rasterizer backend override")
    add_plugin_option(p)
    return p


def check_args(args: argparse.Namespace) -> None:
    """One-line errors for option values argparse cannot judge."""
    positive = {"--resolution": args.resolution, "--points": args.points, "--max-voxels": args.max_voxels}
    positive.update({"--voxel-size": args.voxel_size, "--trunc": args.trunc, "--far": args.far})
    for name, value in positive.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{name}: must be > 0, got {value}")
    if not 0 <= args.min_alpha < 1:
        raise ConfigError(f"--min-alpha: must be in [0, 1), got {args.min_alpha}")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..geometry.extract import SurfacePoints, fuse, scene_box, view_depth
    from ..io.mesh import write_mesh_glb, write_mesh_ply, write_points_ply
    from ..progress import phase

    check_args(args)
    out = args.out or args.exp_dir
    replace_outputs(out, [out / name for name in OUTPUTS if (out / name).exists()], args.overwrite)
    load_components(args.plugin)
    start = time.perf_counter()
    say = print
    evaluator = open_experiment(args.exp_dir, args.checkpoint, args.exp_dir, args.backend)
    model, cameras = evaluator.model, [v.camera for v in evaluator.dataset.train_views]
    model.eval()
    say(f"model: {getattr(model, 'num_gaussians', '?'):,} Gaussians at step {evaluator.global_step}")
    pixels = 0  # the views' pixels with depth, for SurfacePoints' share

    def views(advance):  # one view's maps at a time: memory stays one view's (geometry/extract.py)
        for camera in cameras:
            view = view_depth(
                model, evaluator.renderer, camera, evaluator.dataset.background, args.min_alpha, args.far, args.depth
            )
            advance()
            yield view

    def counted(stream):
        nonlocal pixels
        for view in stream:
            pixels += int((view.depth > 0).sum())
            yield view

    with torch.no_grad(), phase("rendering depth", total=len(cameras), unit="views") as advance:
        try:
            lo, hi = scene_box(counted(views(advance)))
        except ValueError as exc:
            raise DataError(f"--exp-dir {args.exp_dir}: {exc} (lower --min-alpha?)") from None
    say(f"box: {_vec(lo)} .. {_vec(hi)}")
    points = SurfacePoints(pixels, args.points)
    with torch.no_grad(), phase("fusing", total=len(cameras), unit="views") as advance:
        stream = views(lambda: None)  # rendered again: cheaper than holding every view's maps
        volume = fuse(
            stream, lo, hi, args.resolution, args.voxel_size, args.trunc, args.max_voxels, advance, points.add
        )
    g = volume.grid
    say(f"TSDF: {g.dims[0]}x{g.dims[1]}x{g.dims[2]} voxels of {g.voxel:.4g}, truncation {volume.trunc:.4g}")
    verts, faces, rgb, normals = volume.extract_mesh()
    if not len(faces):
        raise DataError(f"--exp-dir {args.exp_dir}: the fused depth holds no surface (check --far, --min-alpha)")
    say(f"mesh: {len(verts):,} vertices, {len(faces):,} triangles")
    xyz, colors, point_normals = points.on(volume)
    say(f"points: {len(xyz):,} on the surface")
    out.mkdir(parents=True, exist_ok=True)
    write_mesh_ply(out / "mesh.ply", verts, faces, rgb, normals)
    write_mesh_glb(out / "mesh.glb", verts, faces, rgb, normals)
    write_points_ply(out / "points.ply", xyz, colors, point_normals)
    say(f"wrote {', '.join(str(out / n) for n in OUTPUTS)} in {time.perf_counter() - start:.1f} s")
    say(f"next: open {out / 'mesh.ply'} in MeshLab, CloudCompare or Blender; {out / 'mesh.glb'} in a glTF viewer")
    return 0


def _vec(v: object) -> str:
    return "(" + ", ".join(f"{x:.3g}" for x in v) + ")"


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
