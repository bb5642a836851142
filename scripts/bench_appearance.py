"""Spoiled photos: per-image exposure and occluders, with and without masks + AppearanceOptHook.

    python scripts/bench_appearance.py                 # 2000 steps of the demo recipe per run
    python scripts/bench_appearance.py --steps 1000 --seed 1

Real captures change exposure and white balance from photo to photo and have people or cars in some
of them. This benchmark takes the 400x300 photo-textured COLMAP scene (``--scene photo`` of
bench_train.py) and spoils its *training* images: every one gets an exposure gain drawn from
0.6-1.4 and a white balance of +-10% per channel (the product kept within 0.6-1.4; images clipped and quantised like a camera would); every
third gets an opaque textured occluder, which ``masks/`` marks (0 = ignore). Test images stay clean:
they are what the canonical colours are scored against. Three runs of ``configs/demo.yaml``'s recipe
advance side by side (bench_train.py's curve workers, so machine load hits them alike):

  clean      the original images
  spoiled    the spoiled images, no masks, no appearance model
  repaired   the spoiled images with ``masks/`` and ``AppearanceOptHook``

and the table ends with each run's test PSNR (given poses, no alignment). Issue 26's target:
repaired within 1 dB of clean and at least 2 dB above spoiled.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))
import bench_train  # noqa: E402

TEST_EVERY = 8  # ColmapDataset's default split: sorted image i is a test view when i % 8 == 0
GAIN = (0.6, 1.4)
WHITE_BALANCE = 0.1
OCCLUDED_EVERY = 3  # every third training image


def occluder(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """An opaque striped rectangle (10-25% of the image) somewhere in the frame: (keep mask, RGB patch image)."""
    rh, rw = (int(rng.uniform(0.3, 0.5) * n) for n in (h, w))
    y0, x0 = int(rng.integers(0, h - rh)), int(rng.integers(0, w - rw))
    keep = np.ones((h, w), bool)
    keep[y0:y0 + rh, x0:x0 + rw] = False
    yy, xx = np.mgrid[0:h, 0:w]
    period = rng.uniform(6, 14)
    stripes = (np.sin((xx * np.cos(1.0) + yy * np.sin(1.0)) * 2 * np.pi / period) > 0)[..., None]
    a, b = rng.uniform(0, 1, 3), rng.uniform(0, 1, 3)
    return keep, np.where(stripes, a, b)


def spoil(src: Path, spoiled: Path, repaired: Path, seed: int) -> dict:
    """Write the two spoiled COLMAP folders (same images; ``repaired`` also has ``masks/``)."""
    rng = np.random.default_rng(seed)
    for out in (spoiled, repaired):
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(src / "sparse", out / "sparse")
        (out / "images").mkdir(parents=True)
    (repaired / "masks").mkdir()
    names = sorted(p.name for p in (src / "images").iterdir())
    gains, occluded = [], 0
    for i, name in enumerate(names):
        rgb = np.asarray(Image.open(src / "images" / name).convert("RGB"), np.float64) / 255.0
        keep = np.ones(rgb.shape[:2], bool)
        if i % TEST_EVERY != 0:  # a training view
            train_idx = i - i // TEST_EVERY - 1
            # exposure times white balance, kept inside the stated gain range per channel
            gain = np.clip(rng.uniform(*GAIN) * rng.uniform(1 - WHITE_BALANCE, 1 + WHITE_BALANCE, 3), *GAIN)
            gains.append(gain)
            rgb = rgb * gain
            if train_idx % OCCLUDED_EVERY == 0:
                keep, patch = occluder(rng, *rgb.shape[:2])
                rgb = np.where(keep[..., None], rgb, patch)
                occluded += 1
        img = Image.fromarray(np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8))
        for out in (spoiled, repaired):
            img.save(out / "images" / name)
        Image.fromarray(keep.astype(np.uint8) * 255).save(repaired / "masks" / f"{Path(name).stem}.png")
    g = np.stack(gains)
    return {"images": len(names), "train": len(gains), "occluded": occluded, "gain_min": g.min(), "gain_max": g.max()}


def run_config(scratch: Path, name: str, data_path: Path, appearance: bool, steps: int) -> Path:
    """configs/demo.yaml's recipe on a COLMAP folder (+ AppearanceOptHook)."""
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    cfg["dataset"] = {"type": "ColmapDataset", "data_path": str(data_path), "white_background": False,
                      "test_every": TEST_EVERY}
    cfg["trainer"]["max_steps"] = steps
    if appearance:
        cfg["hooks"].append({"type": "AppearanceOptHook"})
    path = scratch / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--val-every", type=int, default=500)
    p.add_argument("--seed", type=int, default=0, help="seed of the gains and occluders")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "pointrix_bench_appearance")
    args = p.parse_args(argv)

    from pointrix_lite.data.demo.photo import ensure_photo_scene
    from pointrix_lite.errors import PointrixError

    try:
        clean = ensure_photo_scene(REPO / "data" / "bench_photo") / "colmap"
    except PointrixError as e:
        raise SystemExit(f"error: {e}") from None
    args.out.mkdir(parents=True, exist_ok=True)
    spoiled, repaired = args.out / "spoiled", args.out / "repaired"
    s = spoil(clean, spoiled, repaired, args.seed)
    print(f"{s['images']} images, {s['train']} training views spoiled (channel gains {s['gain_min']:.2f}-"
          f"{s['gain_max']:.2f}), {s['occluded']} with an occluder marked in {repaired / 'masks'}; test views clean")
    keep = ["ResolutionScheduleHook", "AppearanceOptHook"]
    runs = []
    for name, data, appearance in (("clean", clean, False), ("spoiled", spoiled, False), ("repaired", repaired, True)):
        spec = {"config": str(run_config(args.out, name, data, appearance, args.steps)), "overrides": [],
                "backend": "native", "val_every": args.val_every, "out": str(args.out / f"run_{name}"),
                "keep_hooks": keep}
        runs.append(bench_train.CurveRun(name, REPO, spec))
    bench_train.run_curves(runs, None, None, stop_at_target=False)
    bench_train.print_curve_table(runs)
    by = {r.name: r.test_psnr for r in runs}
    print(f"\nrepaired - clean: {by['repaired'] - by['clean']:+.2f} dB (target >= -1.0); "
          f"repaired - spoiled: {by['repaired'] - by['spoiled']:+.2f} dB (target >= +2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
