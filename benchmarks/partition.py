"""Partitioned training against one process on the whole scene: PSNR, seams, per-block time and memory.

    .venv/bin/python -m benchmarks partition                          # 600 views of 64x48, 2x2 blocks, 2 ranks
    .venv/bin/python -m benchmarks partition --steps 2000 --views 240 # smaller
    .venv/bin/python -m benchmarks partition --skip-whole             # rerun the blocks only
    .venv/bin/python -m benchmarks partition --scene data/facade --grid 2x1 --steps 1500 --cap 200000
    .venv/bin/python -m benchmarks partition --context coarse+points --reuse --skip-whole --record

Generates the street scene (``pointrix_lite/partition/synthetic.py``; cached in ``--out/scene``),
splits it (``scripts/partition.py --grid``, or ``--kd``), trains the blocks with ``torchrun --nproc_per_node
--nproc scripts/train_blocks.py`` once per ``--context`` variant (``none``; ``coarse``, starting the blocks from the
coarse model; ``coarse+points``, from their SfM points) (``configs/colmap_cpu.yaml``, ``--steps`` each, Gaussian
budget ``--cap`` x (block points / all points)), merges them and scores the merged PLY with ``render.py
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
COMMON = ["dataset.orientation=none", "trainer.val_interval=0"]


def build_parser():
    p = parser(__name__, __doc__)
    add_run_arguments(p, __name__)
    p.add_argument("--views", type=int, default=600)
    p.add_argument("--size", default="64x48", help="image width x height")
    p.add_argument("--grid", default="2x2")
    p.add_argument("--kd", type=int, help="K blocks of about equal point counts (partition.py --kd) instead of --grid")
    p.add_argument("--nproc", type=int, default=2, help="torchrun processes for the blocks")
    p.add_argument("--steps", type=int, default=7500, help="steps per block; the whole-scene run gets blocks x steps")
    p.add_argument(
        "--cap", type=int, default=40000, help="Gaussian budget of the whole scene (shared out among blocks)"
    )
    p.add_argument(
        "--band", type=float, default=1.0, help="pixels whose surface is this close to a cell border are 'near'"
    )
    p.add_argument(
        "--context",
        default="none,coarse+points,coarse",
        help="train_blocks.py --context values to compare, comma-separated; coarse+points: with --block-init points; "
        "a suffix @N: --coarse-steps N",
    )
    p.add_argument("--scene", type=Path, help="a COLMAP scene folder in place of the generated street (no seams)")
    switches = (
        ("--skip-whole", "reuse the whole-scene run in --out (and its scores, when kept)"),
        ("--reuse", "keep the --context variants already trained, merged and scored in --out"),
        ("--record", "store the rows in benchmarks/results (docs/results.md)"),
        ("--rows-only", "train nothing: print (and --record) the rows of --out/results.json"),
    )
    for flag, text in switches:
        p.add_argument(flag, action="store_true", help=text)
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


RECORDS_ITSELF = True  # --record stores one row per model, not the closing lines


def rows(result: dict, overrides: list[str] = ()) -> list[dict]:
    """One row per model of ``result`` (results.json): each way of training the blocks, and the whole scene;
    ``overrides`` (the run's key=value, e.g. a seed) follow the model's name."""
    out = []
    for model, psnr in result["psnr"].items():
        variant = result.get("variants", {}).get(model.removeprefix("merged_"))
        seams = result.get("seams", {}).get(model)
        wall = variant["blocks_wall_s"] + variant["merge_s"] if variant else result["whole_train_s"]
        out.append(
            {
                "scene": _label(result["scene"]),
                "grid": result["grid"],
                "model": " ".join(
                    [_flags(model.removeprefix("merged_")) if variant else "whole scene, 1 process", *overrides]
                ),
                "PSNR": round(psnr, 2),
                "SSIM": round(result["ssim"][model], 4),
                "Gaussians": f"{result['gaussians'][model]:,}",
                "wall s": round(wall) if wall else "",
                "PSNR near a border": round(seams["near"]["psnr"], 2) if seams else "",
                "PSNR inside": round(seams["inside"]["psnr"], 2) if seams else "",
            }
        )
    return out


def _flags(variant: str) -> str:
    """A ``--context`` value of this benchmark (``coarse+coarse@1500``) as the train_blocks.py flags it stands for."""
    return "merged, " + " ".join(_block_flags(variant))


def _block_flags(variant: str) -> list[str]:
    """``coarse+points@1500`` -> ``--context coarse --block-init points --coarse-steps 1500``; a bare ``coarse``
    starts its blocks from the coarse model and trains that for train_blocks.py's default steps."""
    variant, _, steps = variant.partition("@")
    context, _, start = variant.partition("+")
    if context != "coarse":
        return ["--context", context]
    return ["--context", context, "--block-init", start or "coarse", *(["--coarse-steps", steps] if steps else [])]


def _label(scene: str) -> str:
    """A scene folder as its last two parts (``entry-P10/sfm``); the street's description as it is."""
    return "/".join(Path(scene).parts[-2:]) if scene.startswith("/") else scene


def record(result: dict, argv: list[str], overrides: list[str]) -> None:
    from benchmarks.results import Table
    from benchmarks.results import record as store

    about = (
        "Partitioned training (`train_blocks.py`) merged, against one process training the whole scene with the "
        "blocks' total steps and Gaussian budget, scored by `render.py --ply` on the scene's test views; `--context "
        "coarse` adds the coarse stage's steps (train_blocks.py's default, or `--coarse-steps` where the row says). Near a border: test pixels whose surface "
        "lies within `--band` of a cell border (the generated street's ray caster finds it). Wall seconds: the "
        "blocks on `--nproc` processes (coarse stage included) plus the merge; the whole run's training alone."
    )
    columns = ("scene", "grid", "model", "PSNR", "SSIM", "Gaussians", "wall s", "PSNR near a border", "PSNR inside")
    table = Table("partition_context", "Partitioned training: blocks with and without context", about, columns, 38)
    command = ["python", "-m", "benchmarks", "partition", *(a for a in argv if a not in ("--record", "--rows-only"))]
    for row in rows(result, overrides):
        path = store(table, f"{row['scene']} {row['grid']} {row['model']}", row, command)
    print(f"recorded in {path}; python -m benchmarks results rewrites docs/results.md")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.rows_only:
        result = json.loads((args.out / "results.json").read_text())
        for row in rows(result, args.overrides):
            print(" | ".join(str(v) for v in row.values()))
        if args.record:
            record(result, argv, args.overrides)
        return 0
    from pointrix_lite.partition.manifest import load_manifest
    from pointrix_lite.partition.synthetic import generate_street

    out, py = args.out.resolve(), sys.executable
    street = args.scene is None
    scene = out / "scene" if street else args.scene.resolve()
    part, log = out / "part", out / "bench.log"
    out.mkdir(parents=True, exist_ok=True)
    print(f"cpu: {cpu_name()}, load {load_average()}")
    if street and not (scene / "sparse").is_dir():
        width, height = (int(v) for v in args.size.split("x"))
        generate_street(scene, args.views, width, height)
    common = [*COMMON, *(["dataset.scale=1"] if street else [])]
    split = ["--kd", str(args.kd)] if args.kd else ["--grid", args.grid]
    _run([py, "scripts/partition.py", "--scene", str(scene), "--out", str(part), *split, "--overwrite"], log)
    manifest = load_manifest(part)
    n = len(manifest.blocks)
    # The whole budget shared out by points; a block trains its margin's points too, so it gets their share.
    cap_block = round(
        args.cap * sum(b.n_points for b in manifest.blocks) / n / sum(b.n_cell_points for b in manifest.blocks)
    )
    block_overrides = [*common, f"trainer.max_steps={args.steps}", f"strategy.cap_max={cap_block}", *args.overrides]
    variants = {
        name: _blocks(args, manifest, part, out, name, block_overrides, log) for name in args.context.split(",")
    }
    whole_s = whole_rss = None
    if not args.skip_whole:
        whole = [
            *common,
            f"trainer.max_steps={args.steps * n}",
            f"strategy.cap_max={args.cap}",
            *args.overrides,
            f"dataset.data_path={scene}",
            f"exp_dir={fresh_run(out / 'whole')}",
        ]
        whole_s, whole_rss = _run([py, "scripts/train.py", "--config", str(CONFIG), *whole], log)
        (out / "whole.json").write_text(json.dumps([whole_s, whole_rss]))
    elif (out / "whole.json").is_file():  # kept by the run that trained it
        whole_s, whole_rss = json.loads((out / "whole.json").read_text())
    if not (args.skip_whole and (out / "whole" / "point_cloud_render" / "metrics.json").is_file()):
        _run([py, "scripts/render.py", "--ply", str(out / "whole" / "point_cloud.ply"), "--data", str(scene)], log)
    models = {f"merged_{name}": out / f"merged_{name}" for name in variants} | {"whole": out / "whole"}
    metrics = {k: json.loads((d / "point_cloud_render" / "metrics.json").read_text()) for k, d in models.items()}
    result = {
        "cpu": cpu_name(),
        "scene": str(scene) if not street else f"street {args.views} views of {args.size}",
        "grid": f"kd {args.kd}" if args.kd else args.grid,
        "nproc": args.nproc,
        "steps_per_block": args.steps,
        "cap_whole": args.cap,
        "cap_block": cap_block,
        "variants": variants,
        "whole_train_s": whole_s,
        "whole_peak_rss_gb": whole_rss / 1e9 if whole_rss else None,
        "psnr": {k: m["mean"]["psnr"] for k, m in metrics.items()},
        "ssim": {k: m["mean"]["ssim"] for k, m in metrics.items()},
        "per_view_psnr": {k: {v: r["psnr"] for v, r in m["per_view"].items()} for k, m in metrics.items()},
        "gaussians": {k: m["num_gaussians"] for k, m in metrics.items()},
    }
    if street:
        renders = {k: d / "point_cloud_render" / "renders" / "test" for k, d in models.items()}
        result |= {"seams": seams(manifest, scene, renders, args.band), "band": args.band}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    for row in rows(result, args.overrides):
        print(" | ".join(str(v) for v in row.values()))
    if args.record:
        record(result, argv, args.overrides)
    return 0


def _blocks(args, manifest, part: Path, out: Path, context: str, overrides: list[str], log: Path) -> dict:
    """Train the blocks with ``--context context`` (in ``part/runs_<context>``), merge and score them."""
    from pointrix_lite.partition.status import read_status

    py, runs, merged = sys.executable, part / f"runs_{context}", out / f"merged_{context}"
    torchrun = [py, "-m", "torch.distributed.run", "--nproc_per_node", str(args.nproc)]
    torchrun += ["--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
    blocks = ["--manifest", str(part / "manifest.json"), "--runs", str(runs), "--config", str(CONFIG)]
    blocks += [*_block_flags(context), *overrides, "--overwrite"]
    kept = out / f"{context}.json"  # the variant's wall times, for --reuse
    if args.reuse and kept.is_file() and (merged / "point_cloud_render" / "metrics.json").is_file():
        blocks_s, merge_s = json.loads(kept.read_text())
    else:
        blocks_s, _ = _run([*torchrun, "scripts/train_blocks.py", *blocks], log)
        merge = ["--manifest", str(part), "--runs", str(runs), "--out", str(merged), "--overwrite"]
        merge_s, _ = _run([py, "scripts/merge_blocks.py", *merge], log)
        _run([py, "scripts/render.py", "--ply", str(merged / "point_cloud.ply"), "--data", manifest.scene], log)
        kept.write_text(json.dumps([blocks_s, merge_s]))
    names = ["coarse"] * context.startswith("coarse") + [b.name for b in manifest.blocks]
    statuses = [read_status(runs, name) for name in names]
    return {
        "blocks": [
            {
                "name": s.block,
                "seconds": s.seconds,
                "train_seconds": _train_seconds(Path(s.log)),
                "peak_rss_gb": s.peak_rss_bytes / 1e9,
            }
            for s in statuses
        ],
        "blocks_wall_s": blocks_s,
        "merge_s": merge_s,
    }
