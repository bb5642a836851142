"""Sizes and rendered quality of each export format on a trained experiment; SOG export time.

    python -m benchmarks export --exp-dir outputs/demo
    python -m benchmarks export --sizes 100000 1000000                  # SOG export seconds, this tree
    python -m benchmarks export --sizes 100000 --against main [--record]  # ... and REV's, side by side

``--exp-dir``: for every format, export the experiment's checkpoint, decode the file as a viewer
would (``pointrix_lite.export.decode``), render the test split from the decoded Gaussians with the
experiment's own renderer and compare the PSNR / SSIM with the full PLY's. Nothing is written into
the experiment folder. ``--via-splat-transform`` adds SOG decoded by PlayCanvas splat-transform (what
PlayCanvas and SuperSplat read it with), written by this tree and, with ``--against REV``, by REV's.

``--sizes``: SOG export (``write_sog``, the SH palette fit most of it) of a seeded synthetic SH-3
model of each size, timed in a fresh process of this tree and, with ``--against``, of REV's tree (a
git revision or a folder holding ``pointrix_lite``), one after the other, then their ratio and each
file's decoded SH-rest RMS error. The synthetic SH rest imitates a trained model's: small, decaying
with the band, the three colours alike, per-Gaussian magnitudes log-normal. REV skips sizes above
``--against-max`` (its k-means takes hours at a million): "not run", nothing extrapolated; with
``--against-cap F`` they run, stopped after F times this tree's seconds at that size: a stopped run is
printed as "> limit" and its speed-up as "> F x", a measured lower bound. ``--splat-transform F``
also times PlayCanvas splat-transform's SOG writer on the CPU (``-g cpu``, from tests/export/splat_transform,
``npm ci`` there) on the same model saved as a PLY, stopped after F times this tree's seconds.
``--record`` stores one row per size in benchmarks/results/export_sog.json (docs/results.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import workers
from benchmarks._common import REPO, code_tree, cpu_name, load_average, parser

RECORDS_ITSELF = True  # --sizes rows are structured; --exp-dir runs take the generic --record
SH_DEGREE = 3
AGAINST_MAX = 200_000  # REV's largest size by default: the old full-data k-means runs for minutes at 100k


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


def synthetic_model(n: int, seed: int = 0) -> dict:
    """``n`` seeded RDF Gaussians of SH degree 3 as float32 tensors (see the module docstring)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    band = np.repeat([0.15, 0.08, 0.04], [3, 5, 7])[None, :, None]  # rest coefficients of bands 1, 2, 3
    shared = rng.standard_normal((n, 15, 1)) * band
    rest = (shared + 0.3 * shared * rng.standard_normal((n, 15, 3))) * np.exp(0.7 * rng.standard_normal((n, 1, 1)))
    params = {
        "means": rng.standard_normal((n, 3)) * 3,
        "scales": rng.standard_normal((n, 3)) - 4,
        "quats": rng.standard_normal((n, 4)),
        "opacities": rng.standard_normal(n) * 2,
        "sh0": rng.standard_normal((n, 1, 3)) * 0.5,
        "shN": rest,
    }
    return {k: torch.from_numpy(v).float() for k, v in params.items()}


def sog_worker(spec: dict) -> dict:
    """Worker (:mod:`benchmarks.workers`): seconds of ``write_sog`` on ``synthetic_model(spec["n"])`` in
    the tree under test, the file's bytes and its decoded SH rest's RMS error (None where the tree has no
    SOG decoder)."""
    import io

    import numpy as np

    from pointrix_lite.export.sog import morton_order, write_sog

    params = synthetic_model(spec["n"], spec["seed"])
    out = io.BytesIO()
    start = time.perf_counter()
    write_sog(params, out)
    seconds = time.perf_counter() - start
    rms = None
    try:
        from pointrix_lite.export.decode_sog import read_sog
    except ImportError:
        read_sog = None
    if read_sog is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.sog"
            path.write_bytes(out.getvalue())
            decoded = read_sog(path)["shN"].double().numpy()
        source = params["shN"].double().numpy()[morton_order(params["means"].double().numpy())]  # the file's order
        rms = float(np.sqrt(((decoded - source) ** 2).mean()))
    return {"seconds": seconds, "bytes": len(out.getvalue()), "rms": rms}


SPLAT_TRANSFORM = REPO / "tests" / "export" / "splat_transform" / "node_modules" / "@playcanvas" / "splat-transform"


def splat_transform_cli(option: str) -> Path:
    """splat-transform's command-line script (the pinned install the tests use); a one-line ``SystemExit``
    naming ``option`` when it is not installed."""
    cli = SPLAT_TRANSFORM / "bin" / "cli.mjs"
    if not cli.is_file():
        raise SystemExit(f"error: {option}: {cli} missing (npm ci --prefix tests/export/splat_transform)")
    return cli


def splat_transform_worker(spec: dict) -> dict:
    """Worker: seconds of PlayCanvas splat-transform writing SOG on the CPU (``-g cpu``) from
    ``synthetic_model(spec["n"])`` saved as a PLY (the PLY's writing not timed)."""
    import subprocess

    from pointrix_lite.io.ply import save_ply

    with tempfile.TemporaryDirectory() as tmp:
        ply = save_ply(synthetic_model(spec["n"], spec["seed"]), Path(tmp) / "m.ply")
        cmd = ["node", spec["cli"], "-q", "-w", "-g", "cpu", str(ply), str(Path(tmp) / "m.sog")]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"splat-transform failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return {"seconds": seconds, "bytes": (Path(tmp) / "m.sog").stat().st_size}


def _splat_transform_run(n: int, seed: int, limit: float) -> dict:
    """splat-transform's CPU SOG writer on the size-``n`` model, stopped after ``limit`` seconds."""
    cli = splat_transform_cli("--splat-transform")
    try:
        proc = workers.run(
            "benchmarks.export:splat_transform_worker", {"n": n, "seed": seed, "cli": str(cli)}, timeout=limit
        )
    except subprocess.TimeoutExpired:
        return {"seconds": limit, "stopped": True}
    found = workers.results(proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"error: splat-transform on {n:,} Gaussians failed: {workers.stderr_tail(proc)}")
    return found[-1]


def sog_file_worker(spec: dict) -> None:
    """Worker: the checkpoint's Gaussians written as SOG to ``spec["out"]`` by the tree under test."""
    from pointrix_lite.export.sog import write_sog
    from pointrix_lite.export.source import gaussians_from_checkpoint

    with open(spec["out"], "wb") as f:
        write_sog(gaussians_from_checkpoint(Path(spec["checkpoint"])), f)


def via_splat_transform(path: Path) -> dict:
    """``path`` decoded by PlayCanvas splat-transform (what SuperSplat and PlayCanvas load it with), as
    the Gaussians of the full PLY it writes."""
    import subprocess

    from pointrix_lite.io.ply import load_ply

    cli = splat_transform_cli("--via-splat-transform")
    out = path.with_name(path.stem + "_st.ply")
    done = subprocess.run(["node", str(cli), "-q", "-w", str(path), str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: splat-transform could not read {path.name}: {done.stderr.strip()[-300:]}")
    return load_ply(out)


def _sog_run(tree: Path, n: int, seed: int, limit: float | None = None) -> dict:
    """``sog_worker``'s figures; ``{"seconds": limit, "stopped": True}`` when it ran past ``limit`` seconds."""
    try:
        proc = workers.run("benchmarks.export:sog_worker", {"n": n, "seed": seed}, tree, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"seconds": limit, "rms": None, "stopped": True}
    found = workers.results(proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"error: SOG export of {n:,} Gaussians in {tree} failed: {workers.stderr_tail(proc)}")
    return found[-1]


def _fmt(value: float | None, spec: str) -> str:
    return "not run" if value is None else format(value, spec)


def _ratio(theirs: dict | None, mine: dict) -> str:
    """REV's seconds over this tree's; ``> F x`` for a run stopped at its limit."""
    if theirs is None:
        return "not run"
    return f"{'> ' if theirs.get('stopped') else ''}{theirs['seconds'] / mine['seconds']:.1f}x"


def _secs(run: dict | None) -> str:
    """A run's seconds; ``> T`` for one stopped at its limit."""
    if run is None:
        return "not run"
    return f"> {run['seconds']:.0f}" if run.get("stopped") else f"{run['seconds']:.1f}"


def sog_timing(args: argparse.Namespace, argv: list[str]) -> int:
    """``--sizes``: SOG export seconds per size, this tree and ``--against``'s (module docstring)."""
    other = code_tree(args.against)
    rows = []
    for n in args.sizes:
        mine = _sog_run(REPO, n, args.seed)
        capped = args.against_cap * mine["seconds"] if args.against_cap and n > args.against_max else None
        run_it = other and (n <= args.against_max or capped)
        theirs = _sog_run(other[1], n, args.seed, capped) if run_it else None
        st = (
            _splat_transform_run(n, args.seed, args.splat_transform * mine["seconds"]) if args.splat_transform else None
        )
        if st:
            print(f"  {n:,} Gaussians: splat-transform -g cpu {_secs(st)} s ({_ratio(st, mine)} ours)", flush=True)
        rows.append((n, mine, theirs, st))
        print(
            f"  {n:,} Gaussians: {mine['seconds']:.1f} s" + (f", {other[0]} {_secs(theirs)} s" if theirs else ""),
            flush=True,
        )
    name = other[0] if other else "-"
    print(f"\nSOG export, synthetic SH-{SH_DEGREE} models ({cpu_name()}, load {load_average()})")
    head = f"{'Gaussians':>10}{'s':>9}{'shN RMS':>10}{'  against':<24}{'s':>9}{'shN RMS':>10}{'speed-up':>10}"
    print(head + ("  splat-transform -g cpu s" if args.splat_transform else ""))
    for n, mine, theirs, st in rows:
        old_rms = theirs["rms"] if theirs else None
        ratio = _ratio(theirs, mine) if other else "-"
        print(
            f"{n:>10,}{mine['seconds']:>9.1f}{_fmt(mine['rms'], '.5f'):>10}  {name:<22}"
            f"{_secs(theirs) if other else '-':>9}{_fmt(old_rms, '.5f') if other else '-':>10}{ratio:>10}"
            + (f"  {_secs(st):>24}" if st else "")
        )
    if args.record:
        _record(rows, name if other else None, argv)
    return 0


TABLE_ABOUT = (
    "Seconds of `write_sog` (SOG, PlayCanvas) on a seeded synthetic SH-3 model, the SH-rest palette fit "
    "most of it, and the decoded SH rest's RMS error; `against` is an older tree timed in the same run, "
    "splat-transform PlayCanvas' own SOG writer on the CPU (`-g cpu`); `> T`: stopped at T seconds."
)


def _record(rows: list, against: str | None, argv: list[str]) -> None:
    from benchmarks.results import Table, record

    table = Table(
        "export_sog",
        "SOG export time",
        TABLE_ABOUT,
        (
            "Gaussians",
            "export s",
            "shN RMS",
            "against",
            "against s",
            "against shN RMS",
            "speed-up",
            "splat-transform -g cpu s",
        ),
        order=40,
    )
    command = ["python", "-m", "benchmarks", "export", *(a for a in argv if a != "--record")]
    for n, mine, theirs, st in rows:
        cells = {"Gaussians": f"{n:,}", "export s": round(mine["seconds"], 1), "shN RMS": mine["rms"]}
        if st:
            cells["splat-transform -g cpu s"] = _secs(st)
        if against:
            cells["against"] = against
            cells["against s"] = _secs(theirs)
            cells["against shN RMS"] = _fmt(theirs["rms"] if theirs else None, ".5f")
            cells["speed-up"] = _ratio(theirs, mine)
        path = record(table, f"{n:09d}", cells, command)
    print(f"recorded in {path.relative_to(REPO)}; python -m benchmarks results rewrites docs/results.md")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = parser(__name__, __doc__)
    ap.add_argument("--exp-dir", type=Path, help="a trained experiment: every format's size and quality")
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--backend", default=None, help="rasterizer backend override (default: the experiment's)")
    ap.add_argument("--sizes", type=int, nargs="+", metavar="N", help="time SOG export of synthetic models instead")
    ap.add_argument("--against", metavar="REV|TREE", help="--sizes: also time this code (a git revision or a folder)")
    ap.add_argument(
        "--against-max", type=int, default=AGAINST_MAX, metavar="N", help="--against: sizes above N are not run"
    )
    ap.add_argument(
        "--against-cap",
        type=float,
        metavar="F",
        help="--against: run sizes above --against-max too, stopped after F x this tree's seconds (a lower bound)",
    )
    ap.add_argument(
        "--splat-transform",
        type=float,
        metavar="F",
        help="--sizes: also time PlayCanvas splat-transform's SOG writer on the CPU, stopped after F x this tree's seconds",
    )
    ap.add_argument(
        "--via-splat-transform",
        action="store_true",
        help="--exp-dir: also render SOG as splat-transform decodes it (this tree's file and --against's)",
    )
    ap.add_argument("--seed", type=int, default=0, help="--sizes: the synthetic models' seed")
    ap.add_argument("--record", action="store_true", help="store the figures (docs/results.md)")
    args = ap.parse_args(argv)
    if args.sizes:
        return sog_timing(args, argv)
    if args.exp_dir is None:
        ap.error("give --exp-dir (format sizes and quality) or --sizes (SOG export time)")
    if args.record:
        from benchmarks.__main__ import recorded

        return recorded("export", sys.modules[__name__], [a for a in argv if a != "--record"])  # main again, unrecorded
    return formats(args)


def formats(args: argparse.Namespace) -> int:
    """``--exp-dir``: every format's size, export seconds and rendered quality (module docstring)."""
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
        if args.via_splat_transform:  # SOG as PlayCanvas reads it: this tree's, and --against's
            variants.append(("sog via st", FORMATS["sog"], None))
        other = code_tree(args.against)
        if other and args.via_splat_transform:
            variants.append((f"sog {args.against} via st", FORMATS["sog"], None))
        for label, fmt, selection in variants:
            path = tmp / f"{label.replace(' ', '_')}{fmt.suffix}"
            t0 = time.perf_counter()
            report = export_gaussians(params, fmt, path, selection)
            seconds = time.perf_counter() - t0
            if other and label.startswith(f"sog {args.against}"):  # the same file, written by the other tree
                spec = {"checkpoint": str(ckpt), "out": str(path)}
                t0 = time.perf_counter()
                proc = workers.run("benchmarks.export:sog_file_worker", spec, other[1])
                seconds = time.perf_counter() - t0  # includes the worker's start-up
                if proc.returncode != 0:
                    raise SystemExit(f"error: SOG export in {other[0]} failed: {workers.stderr_tail(proc)}")
                report = dataclasses.replace(report, size=path.stat().st_size)
            decoded = via_splat_transform(path) if label.endswith("via st") else read[fmt.name](path)
            n = decoded["shN"].shape[0]
            # Bands a format does not store render as zero (what a viewer does without them).
            decoded["shN"] = torch.cat([decoded["shN"], torch.zeros(n, k_rest - decoded["shN"].shape[1], 3)], 1)
            model.load_params(decoded, source=str(path))
            mean = trainer.test()["mean"]
            rows.append((label, report, seconds, mean["psnr"], mean["ssim"]))
    print(
        f"{ckpt}: {params['means'].shape[0]:,} Gaussians, SH degree {model.config.sh_degree}, {len(trainer.dataset.test_views)} test views"
    )
    w = max(15, *(len(r[0]) + 1 for r in rows))
    print(
        f"{'format':<{w}}{'bytes':>12}{'ratio':>8}{'Gaussians':>11}{'export s':>10}{'PSNR':>9}{'dPSNR':>8}{'SSIM':>8}"
    )
    ref = rows[0][3]
    for name, report, seconds, psnr, ssim in rows:
        print(
            f"{name:<{w}}{report.size:>12,}{report.source_ply_size / report.size:>7.2f}x{report.num_out:>11,}"
            f"{seconds:>10.2f}{psnr:>9.3f}{psnr - ref:>+8.3f}{ssim:>8.4f}"
        )
    return 0
