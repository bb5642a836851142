"""Partitioned training against one process on the whole scene: PSNR, seams, per-block time and memory.

    .venv/bin/python -m benchmarks partition                          # 600 views of 64x48, 2x2 blocks, 2 ranks
    .venv/bin/python -m benchmarks partition --steps 2000 --views 240 # smaller
    .venv/bin/python -m benchmarks partition --skip-whole             # rerun the blocks only

Generates the street scene (``pointrix_lite/partition/synthetic.py``; cached in ``--out/scene``),
splits it (``scripts/partition.py --grid``), trains the blocks with ``torchrun --nproc_per_node
--nproc scripts/train_blocks.py`` (``configs/colmap_cpu.yaml``, ``--steps`` each, Gaussian budget
``--cap`` x (block points / all points)), merges them and scores the merged PLY with ``render.py
--ply`` on the whole scene's test views; then trains the whole scene in one process for the blocks'
total steps with budget ``--cap`` and scores its PLY the same way. Seams: each test pixel is put on
the ground by the surface the ray caster finds there, and the error of pixels within ``--band`` of
a cell border is compared with the error of the others (``partition/seams.py``). Writes
``--out/results.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from benchmarks._common import REPO, add_run_arguments, cpu_name, fresh_run, load_average, parser

CONFIG = REPO / "configs" / "colmap_cpu.yaml"
COMMON = ["dataset.scale=1", "dataset.orientation=none", "trainer.val_interval=0"]


def build_parser():
    p = parser(__name__, __doc__)
    add_run_arguments(p, __name__)
    p.add_argument("--views", type=int, default=600)
    p.add_argument("--size", default="64x48", help="image width x height")
    p.add_argument("--grid", default="2x2")
    p.add_argument("--nproc", type=int, default=2, help="torchrun processes for the blocks")
    p.add_argument("--steps", type=int, default=7500, help="steps per block; the whole-scene run gets blocks x steps")
    p.add_argument(
        "--cap", type=int, default=40000, help="Gaussian budget of the whole scene (shared out among blocks)"
    )
    p.add_argument(
        "--band", type=float, default=1.0, help="pixels whose surface is this close to a cell border are 'near'"
    )
    p.add_argument("--skip-whole", action="store_true", help="reuse the whole-scene run in --out")
    return p


def _run(cmd: list[str], log: Path) -> tuple[float, int]:
    """Run ``cmd`` (output to ``log``); wall seconds and peak RSS. Stops the benchmark on failure."""
    from pointrix_lite.partition.runner import measured_run

    start = time.perf_counter()
    with open(log, "a") as f:
        code, rss = measured_run(cmd, f, {**os.environ, "POINTRIX_LPIPS_DOWNLOAD": "0"})
    if code != 0:
        raise SystemExit(f"error: {cmd[1]} failed with exit code {code}; see {log}")
    return time.perf_counter() - start, rss


def _train_seconds(log: Path) -> float | None:
    """The training loop's seconds from the last ``done: N steps in X s`` line of a run's output."""
    import re

    found = re.findall(r"^done: \d+ steps in ([0-9.]+) s", log.read_text(errors="replace"), flags=re.M)
    return float(found[-1]) if found else None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seams(manifest, scene: Path, renders: dict[str, Path], band: float) -> dict:
    """Per model: the near-border and inside error over all test views (see partition/seams.py)."""
    import numpy as np

    from pointrix_lite.data.cameras import viewmat_from_colmap
    from pointrix_lite.data.demo.scene import DemoCamera
    from pointrix_lite.io import colmap as colmap_io
    from pointrix_lite.io.images import read_image
    from pointrix_lite.partition.seams import border_distance, class_errors
    from pointrix_lite.partition.synthetic import build_street, surface_points

    cm = colmap_io
    model = cm.read_model(cm.find_sparse_dir(scene))
    street, rot = build_street(), manifest.ground_rotation()
    cells = [b.cell for b in manifest.blocks]
    near, inside, stacks = [], [], {name: ([], []) for name in renders}
    for im in (im for im in model.images.values() if im.name in set(manifest.test_views)):
        cam = model.cameras[im.camera_id]
        fx, fy, cx, cy = cam.params
        demo = DemoCamera(im.name, viewmat_from_colmap(im.qvec, im.tvec), fx, fy, cx, cy, cam.width, cam.height)
        points = surface_points(demo, street).reshape(-1, 3)
        valid = np.isfinite(points).all(axis=1)
        dist = np.full(len(points), np.inf)
        dist[valid] = border_distance(cells, points[valid] @ rot[:2].T)
        near.append((dist < band) & valid)
        inside.append((dist >= band) & valid)
        for name, folder in renders.items():
            stem = Path(im.name).stem
            stacks[name][0].append(read_image(folder / "render" / f"{stem}.png")[..., :3].reshape(-1, 3))
            stacks[name][1].append(read_image(folder / "gt" / f"{stem}.png")[..., :3].reshape(-1, 3))
    masks = {"near": np.concatenate(near), "inside": np.concatenate(inside)}
    return {
        name: {k: v.__dict__ for k, v in class_errors(np.concatenate(r), np.concatenate(g), masks).items()}
        for name, (r, g) in stacks.items()
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pointrix_lite.partition.manifest import load_manifest
    from pointrix_lite.partition.status import read_status
    from pointrix_lite.partition.synthetic import generate_street

    out, py = args.out.resolve(), sys.executable
    width, height = (int(v) for v in args.size.split("x"))
    scene, part, log = out / "scene", out / "part", out / "bench.log"
    out.mkdir(parents=True, exist_ok=True)
    print(f"cpu: {cpu_name()}, load {load_average()}")
    if not (scene / "sparse").is_dir():
        generate_street(scene, args.views, width, height)
    _run(
        [py, "scripts/partition.py", "--scene", str(scene), "--out", str(part), "--grid", args.grid, "--overwrite"], log
    )
    manifest = load_manifest(part)
    n = len(manifest.blocks)
    # The whole budget shared out by points; a block trains its margin's points too, so it gets their share.
    cap_block = round(
        args.cap * sum(b.n_points for b in manifest.blocks) / n / sum(b.n_cell_points for b in manifest.blocks)
    )
    block_overrides = [*COMMON, f"trainer.max_steps={args.steps}", f"strategy.cap_max={cap_block}", *args.overrides]
    blocks_s, _ = _run(
        [
            py,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(args.nproc),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(_free_port()),
            "scripts/train_blocks.py",
            "--manifest",
            str(part / "manifest.json"),
            "--config",
            str(CONFIG),
            *block_overrides,
            "--overwrite",
        ],
        log,
    )
    merge_s, _ = _run([py, "scripts/merge_blocks.py", "--manifest", str(part), "--out", str(out / "merged")], log)
    _run([py, "scripts/render.py", "--ply", str(out / "merged" / "point_cloud.ply"), "--data", str(scene)], log)
    whole_s = whole_rss = None
    if not args.skip_whole:
        whole = [
            *COMMON,
            f"trainer.max_steps={args.steps * n}",
            f"strategy.cap_max={args.cap}",
            *args.overrides,
            f"dataset.data_path={scene}",
            f"exp_dir={fresh_run(out / 'whole')}",
        ]
        whole_s, whole_rss = _run([py, "scripts/train.py", "--config", str(CONFIG), *whole], log)
    _run([py, "scripts/render.py", "--ply", str(out / "whole" / "point_cloud.ply"), "--data", str(scene)], log)
    metrics = {
        k: json.loads((out / k / "point_cloud_render" / "metrics.json").read_text()) for k in ("merged", "whole")
    }
    renders = {k: out / k / "point_cloud_render" / "renders" / "test" for k in metrics}
    statuses = [read_status(part / "runs", b.name) for b in manifest.blocks]
    result = {
        "cpu": cpu_name(),
        "views": args.views,
        "size": args.size,
        "grid": args.grid,
        "nproc": args.nproc,
        "steps_per_block": args.steps,
        "cap_whole": args.cap,
        "cap_block": cap_block,
        "blocks": [
            {
                "name": s.block,
                "seconds": s.seconds,
                "train_seconds": _train_seconds(Path(s.log)),
                "peak_rss_gb": s.peak_rss_bytes / 1e9,
                "views": len(b.views),
                "points": b.n_points,
            }
            for s, b in zip(statuses, manifest.blocks)
        ],
        "blocks_wall_s": blocks_s,
        "merge_s": merge_s,
        "whole_train_s": whole_s,
        "whole_peak_rss_gb": whole_rss / 1e9 if whole_rss else None,
        "psnr": {k: m["mean"]["psnr"] for k, m in metrics.items()},
        "ssim": {k: m["mean"]["ssim"] for k, m in metrics.items()},
        "gaussians": {k: m["num_gaussians"] for k, m in metrics.items()},
        "seams": seams(manifest, scene, renders, args.band),
        "band": args.band,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0
