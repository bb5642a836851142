"""This project's trainer beside gsplat's own ``examples/simple_trainer.py`` on the same COLMAP folders.

    python -m benchmarks gsplat_trainer --trainer GSPLAT/examples/simple_trainer.py --scene DIR [--scene DIR2 ...]
    python -m benchmarks gsplat_trainer --trainer ... --scene DIR --steps 30000 --config configs/colmap_gpu.yaml
    python -m benchmarks gsplat_trainer --trainer ... --scene SUITE_OUT/work/fountain-P11/sfm --record

For each ``--scene`` (a COLMAP folder: ``images/`` + ``sparse/0``, e.g. the real-capture suite's
``<out>/work/SCENE/sfm`` written by ``process.py``), one after the other:

1. ``scripts/train.py --config CONFIG`` (default ``configs/colmap_gpu.yaml``, gsplat's recipe) for
   ``--steps`` steps, no mid-run validation or writers: test PSNR / SSIM and ``train_seconds``;
2. gsplat's trainer ``default`` on the same folder and steps, at the images' own size
   (``--data_factor 1``; gsplat's INRIA-style rule does not apply, so give folders at most 1600 px on the long
   side, where this project's ``dataset.scale: auto`` keeps the full size too), viewer and video off: its
   ``stats/val_step*.json`` (PSNR, SSIM) and ``train_step*_rank0.json`` (its clock at the last step). Both hold
   out every 8th image by name.

gsplat's trainer runs with this Python; its own requirements (``examples/requirements.txt``: fused-ssim, the
pycolmap reader, tyro, viser, ...) must be installed. ``--trainer-arg`` passes more arguments to it. Needs a
CUDA device (gsplat's trainer has no CPU path). Prints one table; ``--record`` stores its rows in
benchmarks/results/gsplat_trainer.json (``python -m benchmarks results`` rewrites docs/results.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks import workers
from benchmarks._common import REPO, parser
from benchmarks.results import Table, record

RECORDS_ITSELF = True
TABLE = Table(
    name="gsplat_trainer",
    title="Beside gsplat's trainer",
    about=(
        "`python -m benchmarks gsplat_trainer`: this project's `configs/colmap_gpu.yaml` and gsplat's "
        "`examples/simple_trainer.py default` on the same COLMAP folder for the same steps, one after the "
        "other on one GPU: test PSNR / SSIM on every 8th image and each trainer's own training seconds."
    ),
    columns=(
        "scene",
        "steps",
        "PSNR",
        "SSIM",
        "s",
        "Gaussians",
        "gsplat PSNR",
        "gsplat SSIM",
        "gsplat s",
        "gsplat Gaussians",
    ),
    order=92,
)
QUIET = ["trainer.val_interval=0", "save_ckpt_after_iter=100000000", "writers=[]"]


def gsplat_command(trainer: Path, scene: Path, result: Path, steps: int, extra: list[str]) -> list[str]:
    """gsplat's ``simple_trainer.py default`` on ``scene`` for ``steps`` steps, evaluated and saved at the last."""
    at = str(steps)
    return [
        sys.executable,
        str(trainer),
        "default",
        "--data_dir",
        str(scene),
        "--data_factor",
        "1",
        "--result_dir",
        str(result),
        "--max_steps",
        at,
        "--eval_steps",
        at,
        "--save_steps",
        at,
        "--ply_steps",
        at,
        "--disable_viewer",
        "--disable_video",
        *extra,
    ]


def gsplat_scores(result: Path) -> dict:
    """PSNR, SSIM, training seconds and Gaussians from gsplat's ``result/stats`` (the last step's files)."""

    def last(pattern: str) -> dict:
        files = sorted((result / "stats").glob(pattern), key=lambda p: int("".join(filter(str.isdigit, p.stem))))
        if not files:
            raise SystemExit(f"error: {result / 'stats'}: no {pattern} (did gsplat's trainer reach its last step?)")
        return json.loads(files[-1].read_text())

    val, train = last("val_step*.json"), last("train_step*_rank0.json")
    return {"psnr": val["psnr"], "ssim": val["ssim"], "seconds": train["ellipse_time"], "gaussians": val["num_GS"]}


def run_gsplat(trainer: Path, scene: Path, result: Path, steps: int, extra: list[str]) -> dict:
    """Train gsplat's trainer (working folder: its examples folder, whose modules it imports); its scores."""
    cmd = gsplat_command(trainer, scene, result, steps, extra)
    proc = subprocess.run(cmd, cwd=trainer.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
        raise SystemExit(f"error: gsplat's trainer failed on {scene} (exit {proc.returncode}):\n{tail}")
    return gsplat_scores(result)


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--trainer", type=Path, required=True, help="gsplat's examples/simple_trainer.py")
    p.add_argument("--scene", type=Path, action="append", required=True, help="a COLMAP folder (repeatable)")
    p.add_argument("--steps", type=int, default=7000, help="steps of both trainers (gsplat evaluates at 7k and 30k)")
    p.add_argument("--config", type=Path, default=Path("configs/colmap_gpu.yaml"), help="this project's config")
    p.add_argument("--trainer-arg", action="append", default=[], help="one more argument for gsplat's trainer")
    p.add_argument("--out", type=Path, default=Path("/tmp/pointrix_gsplat_trainer"))
    p.add_argument("--record", action="store_true", help="store the rows in benchmarks/results")
    p.add_argument("--device", default="cuda", help="this project's device (cpu: a dry run of the plumbing)")
    args = p.parse_args(argv)
    if not args.trainer.is_file():
        raise SystemExit(f"error: --trainer: no file {args.trainer}")
    if args.steps < 1:
        raise SystemExit(f"error: --steps must be >= 1, got {args.steps}")
    config = args.config if args.config.is_absolute() else REPO / args.config
    if not config.is_file():
        raise SystemExit(f"error: --config: no file {args.config}")
    for scene in args.scene:
        if not (scene / "images").is_dir():
            raise SystemExit(f"error: --scene {scene}: no images/ folder (a COLMAP folder: images/ + sparse/0)")
    rows = []
    for scene in args.scene:
        name = scene.resolve().parent.name if scene.name == "sfm" else scene.name
        print(f"{name}: {config.name}, {args.steps} steps", flush=True)
        overrides = [f"dataset.data_path={scene.resolve()}", f"trainer.max_steps={args.steps}", *QUIET]
        ours = workers.train_script(REPO, config, [*overrides, f"device={args.device}"], args.out / name / "ours")
        print(f"  ours: {ours['mean']['psnr']:.2f} dB in {ours['train_seconds']:.1f} s", flush=True)
        theirs = run_gsplat(
            args.trainer.resolve(), scene.resolve(), args.out / name / "gsplat", args.steps, args.trainer_arg
        )
        print(f"  gsplat's trainer: {theirs['psnr']:.2f} dB in {theirs['seconds']:.1f} s", flush=True)
        rows.append(
            {
                "scene": name,
                "steps": args.steps,
                "PSNR": round(ours["mean"]["psnr"], 2),
                "SSIM": round(ours["mean"]["ssim"], 4),
                "s": round(ours["train_seconds"], 1),
                "Gaussians": ours.get("num_gaussians"),
                "gsplat PSNR": round(theirs["psnr"], 2),
                "gsplat SSIM": round(theirs["ssim"], 4),
                "gsplat s": round(theirs["seconds"], 1),
                "gsplat Gaussians": theirs["gaussians"],
            }
        )
    print("\n| " + " | ".join(TABLE.columns) + " |\n|" + " --- |" * len(TABLE.columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in TABLE.columns) + " |")
    if args.record:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        command = [
            "python",
            "-m",
            "benchmarks",
            "gsplat_trainer",
            *(a for a in (argv or sys.argv[2:]) if a != "--record"),
        ]
        for row in rows:
            path = record(TABLE, f"{row['scene']} {config.stem} {args.steps}", row, command, on=gpu)
        print(f"recorded in {path}; python -m benchmarks results rewrites docs/results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
