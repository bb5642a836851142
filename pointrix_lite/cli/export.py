"""Command line: ``python scripts/export.py`` writes trained Gaussians in a web viewer's format.

    export.py (--exp-dir DIR [--checkpoint CKPT] | --ply FILE) --format ply|splat|ply_compressed|spz|sog|glb
              [--out FILE] [--overwrite] [--min-opacity A] [--box x0 y0 z0 x1 y1 z1]
              [--sphere cx cy cz r] [--max-distance D] [--sh-degree 0..3] [--spz-frame rdf|rub]

Default output: ``<exp_dir>/point_cloud<suffix>`` (``point_cloud_<checkpoint stem><suffix>`` with
``--checkpoint``), or ``<FILE stem><suffix>`` beside ``--ply FILE`` (``<stem>_export.ply`` for
``--format ply``); suffixes ``.ply``, ``.splat``, ``.compressed.ply``, ``.spz``, ``.sog``, ``.glb``.
``--spz-frame`` (with ``--format spz``): ``rdf``, PLY's axes, the default, what SuperSplat, Spark
and Babylon.js show upright; ``rub``, the frame nianticlabs/spz documents (docs/export.md).
``--max-distance D`` drops centres farther than ``D`` from the scene centre (the centres' median):
stray far Gaussians that would cost an SPZ file its precision, which ``--format spz`` prints.
Exit codes: 0 written, 2 bad input (``error: <one line>`` on stderr, nothing written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError
from ..export.formats import FORMATS, ExportFormat, get_format, spz_format
from .common import check_model_source, experiment_checkpoint, model_source_parser, run_command

EXAMPLES = (
    "examples: export.py --exp-dir outputs/demo --format ply_compressed | "
    "export.py --ply scene.ply --format splat --min-opacity 0.05 --sphere 0 0 0 2"
)


SPZ_FRAME_NOTES = {
    "rdf": "PLY's, upright in SuperSplat, Spark and Babylon.js; --spz-frame rub for Niantic's spz library",
    "rub": "Niantic's documented frame, for spz's loaders; upside down in SuperSplat, Spark and Babylon.js",
}


def build_parser() -> argparse.ArgumentParser:
    p = model_source_parser(
        "export.py",
        "Export trained Gaussians for web splat viewers (.splat, PlayCanvas compressed PLY, SPZ, SOG, glTF) or as a full PLY.",
        EXAMPLES,
        exp_dir_help="experiment folder written by train.py (its latest checkpoint)",
        ply_help="a full-precision 3DGS PLY file",
    )
    # Not argparse choices: an unknown format is a one-line error that lists the known ones.
    p.add_argument("--format", required=True, help=f"output format: {', '.join(FORMATS)}")
    p.add_argument("--out", type=Path, help="output file (or an existing folder to write the default name into)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument(
        "--min-opacity", type=float, metavar="A", help="drop Gaussians whose opacity (alpha, 0..1) is below A"
    )
    p.add_argument(
        "--box", type=float, nargs=6, metavar=("X0", "Y0", "Z0", "X1", "Y1", "Z1"), help="keep centres inside this box"
    )
    p.add_argument(
        "--sphere", type=float, nargs=4, metavar=("CX", "CY", "CZ", "R"), help="keep centres inside this sphere"
    )
    p.add_argument(
        "--max-distance",
        type=float,
        metavar="D",
        help="drop centres farther than D from the scene centre (the centres' median): strays that cost SPZ precision",
    )
    p.add_argument("--sh-degree", type=int, metavar="D", help="keep SH bands up to degree D (0..3)")
    p.add_argument(
        "--spz-frame",
        metavar="FRAME",
        help="axes of a --format spz file: rdf (PLY's, default: SuperSplat, Spark, Babylon.js) or rub (Niantic's spz library)",
    )
    return p


def chosen_format(args: argparse.Namespace) -> ExportFormat:
    """``--format``, with ``--spz-frame`` applied (which only ``spz`` takes)."""
    fmt = get_format(args.format)
    if args.spz_frame is None:
        return fmt
    if fmt.name != "spz":
        raise ConfigError(f"--spz-frame: applies to --format spz only, got --format {fmt.name}")
    return spz_format(args.spz_frame)


def default_output(args: argparse.Namespace, fmt: ExportFormat) -> Path:
    if args.exp_dir is not None:
        stem = "point_cloud" if args.checkpoint is None else f"point_cloud_{args.checkpoint.stem}"
        return args.exp_dir / f"{stem}{fmt.suffix}"
    stem = args.ply.name[: -len(".ply")] if args.ply.name.endswith(".ply") else args.ply.stem
    return args.ply.with_name(f"{stem}_export.ply" if fmt.name == "ply" else f"{stem}{fmt.suffix}")


def output_path(args: argparse.Namespace, fmt: ExportFormat) -> Path:
    """Where to write, checked before any work: not the input, not an existing file unless --overwrite."""
    out = args.out if args.out is not None else default_output(args, fmt)
    if out.is_dir():
        out = out / default_output(args, fmt).name
    if args.ply is not None and out.exists() and out.resolve() == args.ply.resolve():
        raise ConfigError(f"--out {out}: is the input PLY; write the export to another file")
    if out.exists() and not args.overwrite:
        raise ConfigError(f"--out {out}: file exists; pass --overwrite to replace it")
    return out


def run(args: argparse.Namespace) -> int:
    from ..export.exporter import export_gaussians
    from ..export.filters import Selection
    from ..export.source import gaussians_from_checkpoint, gaussians_from_ply

    fmt = chosen_format(args)
    selection = Selection(
        min_opacity=args.min_opacity,
        box=tuple(args.box) if args.box else None,
        sphere=tuple(args.sphere) if args.sphere else None,
        max_distance=args.max_distance,
        sh_degree=args.sh_degree,
    )
    check_model_source(args)
    if args.exp_dir is not None:
        source = experiment_checkpoint(args.exp_dir, args.checkpoint)
        out = output_path(args, fmt)
        params = gaussians_from_checkpoint(source)
    else:
        source = args.ply
        out = output_path(args, fmt)
        params = gaussians_from_ply(source)
    report = export_gaussians(params, fmt, out, selection)
    print(f"source: {source}")
    print(report.summary())
    if fmt.name == "spz":  # the file cannot say which axes it holds (docs/export.md, "SPZ coordinates")
        print(f"  axes: {args.spz_frame or 'rdf'} ({SPZ_FRAME_NOTES[args.spz_frame or 'rdf']})")
    if not out.name.endswith(fmt.suffix):  # viewers choose their reader by the file name
        print(
            f"note: {out.name} does not end in {fmt.suffix}, which viewers use to recognise {fmt.name}", file=sys.stderr
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
