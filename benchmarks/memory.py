"""Peak memory of a run on many large photos: loading them, building the trainer, a few steps.

    .venv/bin/python -m benchmarks memory                        # 300 images of 1 MP, scale 1 and auto
    .venv/bin/python -m benchmarks memory --images 150 --megapixels 2 --steps 20

Writes a COLMAP scene of ``--images`` JPEG photos (a smooth random texture per image, 4:3, the
given megapixels; cached under ``data/bench_memory/``), then for each ``--scales`` value runs, in a
fresh subprocess each, ``DefaultTrainer`` with ``configs/colmap_cpu.yaml`` (its coarse-to-fine
schedule, whose downscaled copies are cached) for ``--steps`` steps, and prints the peak RSS
(``ru_maxrss``) after loading and after the steps, with the seconds of each phase. The images are
kept as uint8 [H, W, 3] (``View.image``), so 300 x 1 MP hold 0.9 GB at scale 1.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

from benchmarks import workers
from benchmarks._common import REPO, parser


def make_scene(root: Path, n: int, megapixels: float) -> Path:
    """``root`` with ``images/`` and ``sparse/0`` (cameras on a circle looking at the origin)."""
    import numpy as np
    from PIL import Image

    from pointrix_lite.data.cameras import look_at, rotmat_to_qvec
    from pointrix_lite.io.colmap import ColmapCamera, ColmapImage, ColmapModel, write_model

    h = int(round((megapixels * 1e6 * 3 / 4) ** 0.5))
    w = int(round(h * 4 / 3))
    if (root / "sparse" / "0" / "images.bin").is_file() and len(list((root / "images").glob("*.jpg"))) == n:
        return root
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    images = {}
    for i in range(n):
        coarse = rng.integers(0, 256, size=(h // 32 + 1, w // 32 + 1, 3), dtype=np.uint8)
        img = Image.fromarray(coarse).resize((w, h), Image.Resampling.BICUBIC)
        name = f"img_{i:04d}.jpg"
        img.save(root / "images" / name, quality=90)
        angle = 2 * np.pi * i / n
        eye = np.array([4 * np.cos(angle), 0.5, 4 * np.sin(angle)])
        w2c = look_at(eye, np.zeros(3), np.array([0.0, -1.0, 0.0]))
        images[i + 1] = ColmapImage(i + 1, rotmat_to_qvec(w2c[:3, :3]), w2c[:3, 3].copy(), 1, name)
    camera = ColmapCamera(1, "PINHOLE", w, h, np.array([0.9 * w, 0.9 * w, w / 2, h / 2]))
    xyz = rng.normal(size=(5000, 3))
    rgb = rng.integers(0, 256, size=(5000, 3), dtype=np.uint8)
    write_model(ColmapModel({1: camera}, images, xyz, rgb, {}), root / "sparse" / "0")
    return root


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB


def worker(spec: dict) -> dict:
    """Worker (a fresh process per scale, so each peak is its own): load, build the trainer, train."""
    import torch

    from pointrix_lite import progress
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    root, scale, steps = spec["root"], spec["scale"], spec["steps"]
    import_all()
    exp = Path(root).parent / f"exp_{scale}"
    cfg = load_experiment(
        REPO / "configs" / "colmap_cpu.yaml",
        [f"dataset.data_path={root}", f"dataset.scale={scale}", f"exp_dir={exp}", "writers=[]", "device=cpu"],
    )
    start = time.perf_counter()
    trainer = DefaultTrainer(cfg, exp, "cpu")
    loaded = _rss_gb()
    views = trainer.dataset.train_views + trainer.dataset.test_views
    image_gb = sum(v.image.numel() * v.image.element_size() for v in views) / 1e9
    hooks = [h for h in trainer.hooks if type(h).__name__ == "ResolutionScheduleHook"]
    t0 = time.perf_counter()
    for step in range(steps):
        trainer.global_step = step * (cfg.trainer.max_steps // max(steps, 1))  # walk the resolution schedule
        batch = [trainer.dataset.train_views[step % len(trainer.dataset.train_views)]]
        for hook in hooks:
            hook.before_train_iter(step, batch)
        trainer.train_step(batch)
    return {
        "scale": scale,
        "views": len(views),
        "size": f"{views[0].camera.width}x{views[0].camera.height}",
        "image_gb": round(image_gb, 3),
        "rss_after_load_gb": round(loaded, 3),
        "rss_peak_gb": round(_rss_gb(), 3),
        "setup_s": round(t0 - start, 1),
        "steps": steps,
        "step_s": round((time.perf_counter() - t0) / max(steps, 1), 3),
        "phases": progress.PHASES.as_dict(1),
        "gaussians": trainer.model.num_gaussians,
        "torch": torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    ap = parser(__name__, __doc__)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--megapixels", type=float, default=1.0)
    ap.add_argument("--scales", default="1,auto", help="comma list of dataset.scale values, one subprocess each")
    ap.add_argument("--steps", type=int, default=10, help="training steps after loading (peak includes them)")
    args = ap.parse_args(argv)
    root = make_scene(
        REPO / "data" / "bench_memory" / f"{args.images}x{args.megapixels:g}mp", args.images, args.megapixels
    )
    print(f"scene: {root} ({args.images} JPEG photos, {args.megapixels:g} MP)")
    for scale in args.scales.split(","):
        proc = workers.run("benchmarks.memory:worker", {"root": str(root), "scale": scale, "steps": args.steps})
        results = workers.results(proc.stdout)
        if proc.returncode != 0 or not results:
            raise SystemExit(f"worker for scale {scale} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        r = results[-1]
        print(
            f"scale {r['scale']:>4}: {r['views']} views at {r['size']}, images {r['image_gb']:.2f} GB; peak RSS "
            f"{r['rss_after_load_gb']:.2f} GB after loading, {r['rss_peak_gb']:.2f} GB after {r['steps']} steps "
            f"({r['step_s']:.2f} s/step, {r['gaussians']:,} Gaussians); phases {r['phases']}"
        )
    return 0
