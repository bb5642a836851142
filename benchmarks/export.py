"""Sizes and rendered quality of each export format, measured on one trained experiment.

For every format: export the experiment's checkpoint, decode the file as a viewer would
(``pointrix_lite.export.decode``), render the test split from the decoded Gaussians with the
experiment's own renderer and compare the PSNR / SSIM with the full PLY's. Nothing is written into
the experiment folder.

    python -m benchmarks export --exp-dir outputs/demo
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks._common import parser


def readers() -> dict[str, Callable[[Path], dict]]:
    """Each format's reader, back to the Gaussians a viewer would draw."""
    from pointrix_lite.export.decode import read_compressed_ply, read_splat
    from pointrix_lite.export.decode_sog import read_sog
    from pointrix_lite.export.decode_spz_glb import read_glb, read_spz
    from pointrix_lite.io.ply import load_ply

    return {
        "ply": load_ply,
        "splat": read_splat,
        "ply_compressed": read_compressed_ply,
        "spz": read_spz,
        "glb": read_glb,
        "sog": read_sog,
    }


def main(argv: list[str] | None = None) -> int:
    ap = parser(__name__, __doc__)
    ap.add_argument("--exp-dir", type=Path, required=True)
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--backend", default=None, help="rasterizer backend override (default: the experiment's)")
    args = ap.parse_args(argv)
    import torch  # after the parse: --help stays instant; torch before pointrix_lite, as this benchmark always did

    from pointrix_lite.cli.common import experiment_checkpoint, load_components, open_experiment
    from pointrix_lite.export import FORMATS, Selection, export_gaussians
    from pointrix_lite.export.source import gaussians_from_checkpoint

    read = readers()
    load_components(())
    ckpt = experiment_checkpoint(args.exp_dir, args.checkpoint)
    params = gaussians_from_checkpoint(ckpt)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trainer = open_experiment(args.exp_dir, ckpt, tmp / "render", args.backend)
        model = trainer.model
        k_rest = model.params["shN"].shape[1]
        rows = []
        # "ply sh0": the full PLY cut to SH degree 0, to tell .splat's SH loss from its quantisation.
        variants = [(fmt.name, fmt, None) for fmt in FORMATS.values()] + [
            ("ply sh0", FORMATS["ply"], Selection(sh_degree=0))
        ]
        for label, fmt, selection in variants:
            path = tmp / f"{label.replace(' ', '_')}{fmt.suffix}"
            t0 = time.perf_counter()
            report = export_gaussians(params, fmt, path, selection)
            seconds = time.perf_counter() - t0
            decoded = read[fmt.name](path)
            n = decoded["shN"].shape[0]
            # Bands a format does not store render as zero (what a viewer does without them).
            decoded["shN"] = torch.cat([decoded["shN"], torch.zeros(n, k_rest - decoded["shN"].shape[1], 3)], 1)
            model.load_params(decoded, source=str(path))
            mean = trainer.test()["mean"]
            rows.append((label, report, seconds, mean["psnr"], mean["ssim"]))
    print(
        f"{ckpt}: {params['means'].shape[0]:,} Gaussians, SH degree {model.config.sh_degree}, {len(trainer.dataset.test_views)} test views"
    )
    print(f"{'format':<15}{'bytes':>12}{'ratio':>8}{'Gaussians':>11}{'export s':>10}{'PSNR':>9}{'dPSNR':>8}{'SSIM':>8}")
    ref = rows[0][3]
    for name, report, seconds, psnr, ssim in rows:
        print(
            f"{name:<15}{report.size:>12,}{report.source_ply_size / report.size:>7.2f}x{report.num_out:>11,}"
            f"{seconds:>10.2f}{psnr:>9.3f}{psnr - ref:>+8.3f}{ssim:>8.4f}"
        )
    return 0
