"""Command line: ``python scripts/report.py EXP_DIR`` (re)writes ``EXP_DIR/report.html``.

The page a run writes as its last end phase (``pointrix_lite/report``), for a folder of ``train.py``
or ``render.py``: after a ``render.py --out``, for a run from before the report existed, or with
other image limits. Exit codes: 0 written, 2 bad input (``error: <one line>`` on stderr).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError
from ..report import MAX_SIDE, MAX_VIEWS, write_report
from ..report.collect import run_outputs
from .common import OneLineErrorParser, run_command


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="report.py",
        description="Write report.html (curves, test views, scores, times, config) into a run folder.",
        epilog="examples: report.py outputs/demo | report.py /tmp/at1000 --max-side 256",
    )
    p.add_argument("exp_dir", type=Path, metavar="EXP_DIR", help="a folder written by train.py or render.py")
    p.add_argument(
        "--max-side",
        type=_positive,
        default=MAX_SIDE,
        help=f"longest image side on the page in px (default {MAX_SIDE})",
    )
    p.add_argument(
        "--max-views", type=_positive, default=MAX_VIEWS, help=f"test views shown with images (default {MAX_VIEWS})"
    )
    return p


def run(args: argparse.Namespace) -> int:
    if not args.exp_dir.is_dir():
        raise DataError(f"{args.exp_dir}: no such folder")
    if not run_outputs(args.exp_dir):
        raise DataError(
            f"{args.exp_dir}: not a run folder (none of config.yaml, metrics.json, log.jsonl, renders/test/; "
            "train.py and render.py write them)"
        )
    path = write_report(args.exp_dir, max_side=args.max_side, max_views=args.max_views)
    print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB); open file://{path.resolve()} in a browser")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(run, build_parser().parse_args(argv))
