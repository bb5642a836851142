"""Mesh accuracy against the true surface: scripts/mesh.py's TSDF mesh of a generated scene, with its test PSNR.

    python -m benchmarks geometry                            # trains configs/demo_colmap.yaml, then meshes it
    python -m benchmarks geometry --exp-dir outputs/demo_colmap   # a run of the demo's COLMAP layout
    python -m benchmarks geometry model.sh_degree=0          # overrides for the training run
    python -m benchmarks geometry --scene photo              # photo, clutter, outdoor: configs/colmap_cpu.yaml

The generated scenes are ray cast (``data/demo/raycast.py``), so their true surface is known: every training
camera's rays (every ``--stride``-th pixel) are traced and their first hits are the reference points (the
surface the cameras see), turned into the model's frame where the dataset turned the scene
(``orientation.json``) and kept inside the box the extraction meshes (the outdoor scene's skyline lies beyond
it: the count kept is printed). The demo trains ``configs/demo_colmap.yaml``, the others the shipped
``configs/colmap_cpu.yaml`` (``benchmarks/datasets.py`` makes them under data/ on first use). The mesh
(``geometry.extract``: the training views' expected depth, or median depth with ``--depth median``, fused into a
TSDF, marching cubes, the defaults of ``scripts/mesh.py``) is sampled uniformly by area, as many points as the reference. Printed:

- accuracy (mesh to true) and completeness (true to mesh), mean distances, and their mean, the Chamfer
  distance; precision, recall and F-score at a threshold of 1 % of the true surface's bounding-box
  diagonal (``--tau``), the usual figures of Tanks and Temples and the surface-reconstruction papers;
- the rendered depth (``--depth``) of the test views against the ray caster's depth: median absolute error
  where both have a surface (alpha >= 0.5), as a share of the true depth;
- the run's test PSNR and training time (what a regulariser costs), the extraction's time and peak memory.

``--gaussians N`` times the extraction at another model size: the trained Gaussians tiled to ``N`` (each copy's
centres jittered by a hundredth of the scene extent). The surface rows then score that tiled model, not the run.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks._common import REPO, add_run_arguments, cpu_name, load_average, parser
from pointrix_lite.geometry import DEPTH_KINDS

SCENES = ("demo", "photo", "clutter", "outdoor")


def train(out: Path, scene: str, overrides: list[str]) -> Path:
    """``scripts/train.py`` of ``scene`` into ``out``; the run folder."""
    config = "configs/demo_colmap.yaml" if scene == "demo" else "configs/colmap_cpu.yaml"
    data = []
    if scene != "demo":
        from benchmarks.datasets import scene_root

        data = [f"dataset.data_path={scene_root(scene)}"]
    name = f"geometry_{scene}"
    cmd = [sys.executable, "scripts/train.py", "--config", config, f"output_dir={out}", f"name={name}", "--overwrite"]
    subprocess.run([*cmd, *data, *overrides], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return out / name


def scene_truth(scene: str) -> tuple[dict, Callable]:
    """``scene``'s cameras by name and ``prims_for(camera)``, the primitives the ray caster traces."""
    from pointrix_lite.data.demo import clutter, outdoor, photo
    from pointrix_lite.data.demo.scene import build_scene, camera_ring

    if scene == "demo":
        prims = build_scene()
        return {c.name: c for c in camera_ring()}, lambda cam: prims
    from benchmarks.datasets import SCENES as DATA

    build, cameras = {
        "photo": (photo.build_photo_scene, photo.photo_cameras),
        "clutter": (clutter.build_clutter_scene, photo.photo_cameras),
        "outdoor": (outdoor.build_outdoor_scene, outdoor.outdoor_cameras),
    }[scene]
    return {c.name: c for c in cameras(*DATA[scene][2])}, build().prims_for


def true_surface(cams: list, prims_for: Callable, stride: int = 1) -> tuple[np.ndarray, list[np.ndarray]]:
    """The ray caster's first hits through every ``stride``-th pixel of ``cams``: all points ``[N, 3]``, and
    each camera's z-depth map (0 on a miss)."""
    from pointrix_lite.data.demo.raycast import trace
    from pointrix_lite.data.demo.scene import camera_rays

    points, depths = [], []
    for cam in cams:
        v, u = np.meshgrid(np.arange(0, cam.height, stride) + 0.5, np.arange(0, cam.width, stride) + 0.5, indexing="ij")
        o, d = camera_rays(cam, u.ravel(), v.ravel())
        hits = trace(prims_for(cam), o, d)
        ok = np.isfinite(hits.t)
        points.append(hits.points[ok])
        z = (hits.points - o) @ cam.w2c[2, :3]  # distance along the optical axis
        depths.append(np.where(ok, z, 0.0).reshape(u.shape))
    return np.concatenate(points), depths


def sample_mesh(verts: np.ndarray, faces: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``n`` points uniform by area on the triangles."""
    rng = np.random.default_rng(seed)
    a, b, c = (verts[faces[:, k]].astype(np.float64) for k in range(3))
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    tri = rng.choice(len(faces), size=n, p=area / area.sum())
    r1, r2 = rng.random(n), rng.random(n)
    s = np.sqrt(r1)
    return (1 - s)[:, None] * a[tri] + (s * (1 - r2))[:, None] * b[tri] + (s * r2)[:, None] * c[tri]


def tile(model, n: int, extent: float) -> None:
    """Replace ``model``'s Gaussians by ``n`` copies of them in turn, each copy's centres jittered (seeded)."""
    import torch

    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for key, value in list(model.params.items()):
            reps = -(-n // len(value))
            tiled = value.data.repeat(reps, *([1] * (value.dim() - 1)))[:n].clone()
            if key == "means":
                tiled[len(value) :] += torch.randn(tiled[len(value) :].shape, generator=g) * 0.01 * extent
            model.params[key] = torch.nn.Parameter(tiled)


def surface_scores(mesh_pts: np.ndarray, true_pts: np.ndarray, tau: float) -> dict[str, float]:
    from scipy.spatial import cKDTree

    acc = cKDTree(true_pts).query(mesh_pts, workers=-1)[0]
    comp = cKDTree(mesh_pts).query(true_pts, workers=-1)[0]
    precision, recall = float((acc < tau).mean()), float((comp < tau).mean())
    f = 2 * precision * recall / max(precision + recall, 1e-12)
    return {
        "accuracy": float(acc.mean()),
        "completeness": float(comp.mean()),
        "chamfer": float((acc.mean() + comp.mean()) / 2),
        "precision": precision,
        "recall": recall,
        "fscore": f,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    add_run_arguments(p, __name__)
    p.add_argument("--scene", choices=SCENES, default="demo", help="the generated scene (default: demo)")
    p.add_argument("--exp-dir", type=Path, help="mesh this run of --scene instead of training one")
    p.add_argument("--stride", type=int, default=0, help="reference rays every N pixels (default: 2 demo, 4 others)")
    p.add_argument("--tau", type=float, default=0.01, help="F-score threshold, share of the surface's bbox diagonal")
    p.add_argument("--resolution", type=int, default=256, help="as scripts/mesh.py --resolution")
    p.add_argument("--depth", choices=DEPTH_KINDS, default="expected", help="as scripts/mesh.py --depth")
    p.add_argument("--gaussians", type=int, help="tile the model to this many Gaussians first (timing at that size)")
    args = p.parse_args(argv)
    print(f"CPU: {cpu_name()}; load {load_average()}")
    exp_dir = args.exp_dir or train(args.out, args.scene, args.overrides)
    stride = args.stride or (2 if args.scene == "demo" else 4)

    import torch

    from pointrix_lite.cli.common import load_components, open_experiment
    from pointrix_lite.data.orientation import ORIENTATION_FILE, read_orientation
    from pointrix_lite.geometry.extract import fuse, render_views, scene_box
    from pointrix_lite.geometry.maps import view_maps

    load_components([])
    ev = open_experiment(exp_dir, out=Path(args.out) / "mesh_eval")
    if args.gaussians:
        tile(ev.model, args.gaussians, ev.dataset.scene_extent)
    ev.model.eval()
    cams, prims_for = scene_truth(args.scene)
    turn = read_orientation(exp_dir / ORIENTATION_FILE)  # model point = turn @ scene point
    train_views, test_views = list(ev.dataset.train_views), list(ev.dataset.test_views)
    start = time.perf_counter()
    with torch.no_grad():
        cameras = [v.camera for v in train_views]
        maps = render_views(ev.model, ev.renderer, cameras, ev.dataset.background, depth=args.depth)
        lo, hi = scene_box(maps)
        volume = fuse(maps, lo, hi, args.resolution)
        verts, faces, _, _ = volume.extract_mesh()
    seconds = time.perf_counter() - start
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    true_pts, _ = true_surface([cams[v.name] for v in train_views], prims_for, stride=stride)
    if turn is not None:
        true_pts = true_pts @ turn.T
    seen = len(true_pts)
    true_pts = true_pts[np.all((true_pts >= lo) & (true_pts <= hi), axis=1)]
    diag = float(np.linalg.norm(true_pts.max(0) - true_pts.min(0)))
    scores = surface_scores(sample_mesh(verts, faces, len(true_pts)), true_pts, args.tau * diag)

    errors = []
    _, true_depths = true_surface([cams[v.name] for v in test_views], prims_for)
    with torch.no_grad():
        for view, true_depth in zip(test_views, true_depths):
            m = view_maps(ev.model, ev.renderer, view.camera, ev.dataset.background, False, args.depth == "median")
            depth, alpha = m["median_depth" if args.depth == "median" else "depth"].numpy(), m["alpha"].numpy()
            both = (alpha >= 0.5) & (true_depth > 0)
            errors.append(np.abs(depth[both] - true_depth[both]) / true_depth[both])
    depth_err = float(np.median(np.concatenate(errors)))
    metrics = json.loads((exp_dir / "metrics.json").read_text())
    psnr, train_s = metrics["mean"]["psnr"], metrics.get("train_seconds")
    g = volume.grid
    print(f"run: {exp_dir} ({ev.model.num_gaussians:,} Gaussians, test PSNR {psnr:.2f} dB)")
    print(
        f"grid {g.dims[0]}x{g.dims[1]}x{g.dims[2]}, voxel {g.voxel:.4g}; mesh {len(verts):,} vertices, {len(faces):,} triangles"
    )
    print(
        f"surface diagonal {diag:.3f}, tau = {args.tau:.0%} = {args.tau * diag:.4f}; {len(true_pts):,} reference points"
        f" ({seen:,} hits, those inside the extraction box kept)"
    )
    tiled = f"tiled to {args.gaussians:,} Gaussians (PSNR: the run's, untiled): " if args.gaussians else ""
    print(
        f"{tiled}"
        f"{args.scene} mesh: F-score {scores['fscore']:.3f} (precision {scores['precision']:.3f}, recall {scores['recall']:.3f}) "
        f"at {args.tau:.0%} of the diagonal, Chamfer {scores['chamfer']:.4f} (accuracy {scores['accuracy']:.4f}, "
        f"completeness {scores['completeness']:.4f}); test {args.depth} depth error {100 * depth_err:.2f}% (median); "
        f"test PSNR {psnr:.2f} dB; training {train_s:.0f} s; extraction {seconds:.1f} s, peak {peak_gb:.2f} GB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
