"""Where SfM poses lose quality (issue 25): train variants that swap one link of the SfM chain at a time.

    python -m benchmarks sfm_quality                          # photo scene, every variant, 1500 steps each
    python -m benchmarks sfm_quality --scene demo320          # the demo rendered at 320 px, trained at 160
    python -m benchmarks sfm_quality --steps 500 --variants true,undistorted
    python -m benchmarks sfm_quality --variants true,sfm --set seed=1     # run-to-run spread

A scene with true cameras and true surface points (``photo``: the 56-view 400x300 photo scene of
:mod:`pointrix_lite.data.demo.photo`, generated into ``data/bench_photo`` on first use, or another
scene of ``benchmarks/datasets.py``; ``demo320``: the demo's 48 views at 320 px, generated under ``--root``) goes through ``scripts/process.py`` as a user's
photos would (SIMPLE_RADIAL, exhaustive matching, undistortion to PINHOLE); its raw SfM model is also
undistorted by ``pycolmap.undistort_images`` (process.py's undistortion until issue 25). Every variant
is then a COLMAP folder under ``--root`` that differs from the true scene (``true``) in one thing only:

* ``undistorted``: process.py's undistorted images, with the pinhole camera that describes them
  exactly given the true lens (focal and principal point mapped through SfM's calibration, its radial
  term left out); ``colmap_undistorter`` the same with COLMAP's undistorted images, and
  ``colmap_undistorter_sharp_test`` that run scored on the original test photos;
* ``sfm_intrinsics``: SfM's focal length and principal point (its radial term dropped);
* ``pp_shift``: the true principal point moved by +0.5 px in x and y, the size of a pixel-centre
  convention error;
* ``sfm_poses``: SfM's poses moved into the true frame by the similarity that aligns the camera
  centres (``robust_similarity``), so only the pose error is left; ``sfm_poses_no_outliers`` the same
  with the views SfM misplaced (centre off by more than 5% of the camera spread) on their true poses;
* ``sfm_points``: SfM's points, moved the same way, as the initial cloud;
* ``sfm_frame``: the true cameras and points moved into SfM's frame (its scale and origin): what
  the scene normalisation and scale-dependent settings make of another frame; ``sfm_rotation``: the
  true scene only turned as SfM's frame is (no scale, no shift); ``scaled``: the true scene 10x smaller,
  ``scaled_up`` 10x larger;
* ``sfm``: process.py's output as it is, ``sfm_colmap_undistorter`` with COLMAP's undistortion, and
  ``sfm_poseopt`` process.py's output with ``configs/colmap_cpu.yaml``'s pose refinement.

Each trains ``configs/colmap_cpu.yaml`` for ``--steps`` steps in a fresh ``scripts/train.py`` process
(no PLY export, no checkpoints). Every variant but ``sfm_poseopt`` carries a PoseOptHook with
``refine: false`` (runs before 2026-11-25 evening: lr 1e-12), which leaves the training cameras as given
and fits each test view's pose before a second scoring: ``mean`` is the test PSNR on the given test poses, ``mean_aligned`` after that fit.
The same test views (every 8th registered image by name) are held out everywhere. Prints a markdown
table and appends one JSON line per variant to ``--root``/``results.jsonl``. Results: docs/data.md,
"Where SfM poses lose quality".
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks import datasets, workers
from benchmarks._common import REPO, cpu_name, parser
from benchmarks.sfm import only

if TYPE_CHECKING:
    from pointrix_lite.io.colmap import ColmapCamera, ColmapModel

# pointrix_lite is imported inside the functions that use it: it imports torch, and --help should not wait for it.
RESOLUTION = "{type: ResolutionScheduleHook, start_factor: 4, full_res_at: 0.3, hold_means_lr: true}"
ALIGN_ONLY = "{type: PoseOptHook, refine: false, test_align_steps: 100}"
SCALED = 0.1  # the "scaled" variant: the true scene 10x smaller, as an SfM frame may be
SCALED_UP = 10.0  # "scaled_up": 10x larger (COLMAP's scale is arbitrary either way)
OUTLIER = 0.05  # a camera this far from its true centre (in units of the camera spread) is misplaced
TEST_EVERY = 8  # configs/colmap_cpu.yaml's dataset.test_every
POSE_OPT = "{{type: PoseOptHook, lr: {lr}, weight_decay: 1.0e-6, test_align_steps: 100}}"  # sfm_poseopt, --pose-lr


@dataclasses.dataclass
class Chain:
    """The true scene and what process.py made of it, with the similarity from SfM's frame to the true one."""

    truth: ColmapModel
    true_images: Path
    raw: ColmapModel  # SfM's distorted (SIMPLE_RADIAL) model
    undistorted: ColmapModel  # process.py's
    sfm_images: Path
    colmap_undistorted: ColmapModel  # pycolmap.undistort_images' (process.py's undistortion until issue 25)
    colmap_images: Path
    s: float
    R: np.ndarray
    t: np.ndarray


def moved(model: ColmapModel, s: float, R: np.ndarray, t: np.ndarray) -> ColmapModel:
    """``model`` (poses and points) in the frame where ``x' = s R x + t``; camera rotations turn by ``R^T``."""
    from pointrix_lite.data.cameras import qvec_to_rotmat, rotmat_to_qvec

    images = {}
    for k, im in model.images.items():
        rot = qvec_to_rotmat(im.qvec) @ R.T
        centre = s * R @ (-qvec_to_rotmat(im.qvec).T @ im.tvec) + t
        images[k] = dataclasses.replace(im, qvec=rotmat_to_qvec(rot), tvec=-rot @ centre)
    return dataclasses.replace(model, images=images, xyz=s * model.xyz @ R.T + t)


def inverse(s: float, R: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    return 1.0 / s, R.T, -R.T @ t / s


def pinhole(model: ColmapModel, fx: float, cx: float, cy: float, width: int, height: int) -> ColmapModel:
    from pointrix_lite.io.colmap import ColmapCamera

    camera = ColmapCamera(1, "PINHOLE", width, height, np.array([fx, fx, cx, cy]))
    images = {k: dataclasses.replace(im, camera_id=1) for k, im in model.images.items()}
    return dataclasses.replace(model, cameras={1: camera}, images=images)


def sharp_tests(
    model: ColmapModel, camera: ColmapCamera, images: Path, true_images: Path
) -> tuple[ColmapModel, dict[str, Path]]:
    """``model`` whose test views (every ``TEST_EVERY``-th by name, as the dataset holds them out) show
    the original photos through ``camera``, so a model trained on resampled photos is judged on sharp ones."""
    names = sorted(im.name for im in model.images.values())
    tests = set(names[::TEST_EVERY])
    kept = {k: dataclasses.replace(im, camera_id=2) if im.name in tests else im for k, im in model.images.items()}
    cameras = {**model.cameras, 2: dataclasses.replace(camera, id=2)}
    files = {n: (true_images if n in tests else images) / n for n in names}
    return dataclasses.replace(model, cameras=cameras, images=kept), files


def focal_centre(camera: ColmapCamera) -> tuple[float, float, float]:
    """``(fx, cx, cy)`` of a PINHOLE or SIMPLE_PINHOLE camera (COLMAP's undistorter keeps SIMPLE_PINHOLE)."""
    from pointrix_lite.data.colmap import pinhole_intrinsics

    fx, _, cx, cy = pinhole_intrinsics(camera, Path("cameras.bin"))
    return fx, cx, cy


def exact_pinhole(truth: ColmapModel, raw: ColmapCamera, undistorted: ColmapCamera) -> ColmapModel:
    """``truth``'s images on the pinhole camera that describes the ``undistorted`` photos exactly, given
    the true lens: an undistorted pixel u shows the photo pixel f_s / f_u (u - cx_u) + cx_s (SfM's radial
    term left out), which the true camera sees along the ray of that photo pixel."""
    f_t, cx_t, cy_t = focal_centre(next(iter(truth.cameras.values())))
    f_s, cx_s, cy_s = (float(v) for v in raw.params[:3])  # SIMPLE_RADIAL, SIMPLE_PINHOLE: f, cx, cy first
    f_u, cx_u, cy_u = focal_centre(undistorted)
    ratio = f_u / f_s
    return pinhole(
        truth,
        f_t * ratio,
        cx_u + (cx_t - cx_s) * ratio,
        cy_u + (cy_t - cy_s) * ratio,
        undistorted.width,
        undistorted.height,
    )


def with_true_outliers(model: ColmapModel, truth: ColmapModel) -> ColmapModel:
    """``model`` (in the true frame) whose cameras more than ``OUTLIER`` of the camera spread from their
    true centre take their true pose: the few views SfM misplaces, apart from everyone's small error."""
    from pointrix_lite.process.compare import centres

    found, true = centres(model), centres(truth)
    spread = float(np.mean([np.linalg.norm(v - np.mean(list(true.values()), axis=0)) for v in true.values()]))
    true_by_name = {im.name: im for im in truth.images.values()}
    images = {}
    for k, im in model.images.items():
        off = np.linalg.norm(found[im.name] - true[im.name]) > OUTLIER * spread
        images[k] = (
            dataclasses.replace(im, qvec=true_by_name[im.name].qvec, tvec=true_by_name[im.name].tvec) if off else im
        )
    return dataclasses.replace(model, images=images)


def variant_models(c: Chain) -> dict[str, tuple[ColmapModel, Path | dict[str, Path]]]:
    """Each variant's model and images (every model holds the images SfM registered, by name)."""
    true_cam, raw_cam = next(iter(c.truth.cameras.values())), next(iter(c.raw.cameras.values()))
    f_t, cx_t, cy_t = focal_centre(true_cam)
    w, h = true_cam.width, true_cam.height
    truth = only(c.truth, [im.name for im in c.undistorted.images.values()])
    sfm_in_true = moved(c.undistorted, c.s, c.R, c.t)
    ours = exact_pinhole(truth, raw_cam, next(iter(c.undistorted.cameras.values())))
    colmaps = exact_pinhole(truth, raw_cam, next(iter(c.colmap_undistorted.cameras.values())))
    sfm_poses = dataclasses.replace(pinhole(sfm_in_true, f_t, cx_t, cy_t, w, h), xyz=truth.xyz, rgb=truth.rgb)
    return {
        "true": (truth, c.true_images),
        "undistorted": (ours, c.sfm_images),
        "colmap_undistorter": (colmaps, c.colmap_images),
        "colmap_undistorter_sharp_test": sharp_tests(colmaps, true_cam, c.colmap_images, c.true_images),
        "sfm_intrinsics": (pinhole(truth, *(float(v) for v in raw_cam.params[:3]), w, h), c.true_images),
        "pp_shift": (pinhole(truth, f_t, cx_t + 0.5, cy_t + 0.5, w, h), c.true_images),
        "sfm_poses": (sfm_poses, c.true_images),
        "sfm_poses_no_outliers": (with_true_outliers(sfm_poses, truth), c.true_images),
        "sfm_points": (dataclasses.replace(truth, xyz=sfm_in_true.xyz, rgb=sfm_in_true.rgb), c.true_images),
        "sfm_frame": (moved(truth, *inverse(c.s, c.R, c.t)), c.true_images),
        "sfm_rotation": (moved(truth, 1.0, c.R.T, np.zeros(3)), c.true_images),
        "scaled": (moved(truth, SCALED, np.eye(3), np.zeros(3)), c.true_images),
        "scaled_up": (moved(truth, SCALED_UP, np.eye(3), np.zeros(3)), c.true_images),
        "sfm": (c.undistorted, c.sfm_images),
        "sfm_colmap_undistorter": (c.colmap_undistorted, c.colmap_images),
        "sfm_poseopt": (c.undistorted, c.sfm_images),
    }


VARIANTS = [
    "true",
    "undistorted",
    "colmap_undistorter",
    "colmap_undistorter_sharp_test",
    "sfm_intrinsics",
    "pp_shift",
    "sfm_poses",
    "sfm_poses_no_outliers",
    "sfm_points",
    "sfm_frame",
    "sfm_rotation",
    "scaled",
    "scaled_up",
    "sfm",
    "sfm_colmap_undistorter",
    "sfm_poseopt",
]
# Each scene's overrides. demo320: the first measurement, 48 demo views rendered at 320 px and
# trained at 160 (white background); the others are benchmarks/datasets.py's benchmark scenes.
SCENES = {**{name: [] for name in datasets.SCENES}, "demo320": ["dataset.white_background=true", "dataset.scale=2"]}


def true_scene(name: str, root: Path) -> Path:
    """The COLMAP folder of a scene with its true cameras and points, generated on first use."""
    from pointrix_lite.data.demo.make import ensure_generated, generate_demo

    if name in datasets.SCENES:
        return datasets.scene_root(name)
    return (
        ensure_generated(root / "demo_320", "the demo scene at 320 px", lambda f: generate_demo(f, 48, 320)) / "colmap"
    )


def load_chain(scene: Path, root: Path, threads: int) -> Chain:
    """The true scene, process.py's run on its images (once: reused when ``root/sfm`` holds it), the raw
    model undistorted by COLMAP's undistorter for comparison, and the similarity from SfM's frame to the true one."""
    from pointrix_lite.io.colmap import read_model
    from pointrix_lite.process.colmap_import import import_pycolmap
    from pointrix_lite.process.compare import centres, robust_similarity

    sfm_dir, colmap_dir = root / "sfm", root / "colmap_undistorter"
    if not (sfm_dir / "sparse" / "0").is_dir():
        cmd = [
            sys.executable,
            str(REPO / "scripts" / "process.py"),
            "--images",
            str(scene / "images"),
            "--out",
            str(sfm_dir),
            "--threads",
            str(threads),
            "--overwrite",
        ]
        print("$", " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit("error: process.py failed (its output is above)")
    raw_dir = max(
        (d for d in (sfm_dir / "colmap" / "sparse").iterdir() if d.is_dir()), key=lambda d: len(read_model(d).images)
    )
    if not (colmap_dir / "sparse").is_dir():
        import_pycolmap().undistort_images(colmap_dir, raw_dir, scene / "images", num_threads=threads)
    undistorted = read_model(sfm_dir / "sparse" / "0")
    truth = read_model(scene / "sparse" / "0")
    found, true = centres(undistorted), centres(truth)
    names = sorted(found)
    s, R, t = robust_similarity(np.array([found[n] for n in names]), np.array([true[n] for n in names]))
    return Chain(
        truth,
        scene / "images",
        read_model(raw_dir),
        undistorted,
        sfm_dir / "images",
        read_model(colmap_dir / "sparse"),
        colmap_dir / "images",
        s,
        R,
        t,
    )


def write_variant(folder: Path, model: ColmapModel, images: Path | dict[str, Path]) -> None:
    """The variant's COLMAP folder; ``images`` is a folder, or a file per image name (linked, not copied)."""
    from pointrix_lite.io.colmap import write_model

    if folder.exists():
        shutil.rmtree(folder)
    (folder / "sparse" / "0").mkdir(parents=True)
    write_model(model, folder / "sparse" / "0", binary=True)
    if isinstance(images, Path):
        (folder / "images").symlink_to(images.resolve(), target_is_directory=True)
        return
    (folder / "images").mkdir()
    for name, path in images.items():
        (folder / "images" / name).symlink_to(path.resolve())


def train(folder: Path, exp_dir: Path, steps: int, hooks: str, extra: list[str]) -> dict:
    overrides = [
        f"dataset.data_path={folder}",
        f"trainer.max_steps={steps}",
        "trainer.val_interval=0",
        "writers=[]",
        "save_ckpt_after_iter=1000000",
        f"hooks=[{hooks}, {RESOLUTION}]",
        *extra,
    ]
    print("$ scripts/train.py --config configs/colmap_cpu.yaml " + " ".join(f"'{o}'" for o in overrides), flush=True)
    return workers.train_script(REPO, REPO / "configs" / "colmap_cpu.yaml", overrides, exp_dir)


def describe(c: Chain) -> str:
    from pointrix_lite.process.compare import compare_cameras

    score = compare_cameras(c.undistorted, c.truth)
    raw, und, col = (next(iter(m.cameras.values())) for m in (c.raw, c.undistorted, c.colmap_undistorted))
    return (
        f"SfM: {score.registered}/{score.total} registered, centre error median {score.centre_median:.2e} "
        f"(worst {score.centre_max:.2e}) of the camera spread, rotation median {score.rotation_median_deg:.4f} deg, "
        f"scale true/SfM {c.s:.4f}; raw camera {raw.model} {raw.width}x{raw.height} {np.round(raw.params, 5).tolist()}, "
        f"undistorted {und.model} {und.width}x{und.height} {np.round(und.params, 4).tolist()}, "
        f"by COLMAP's undistorter {col.width}x{col.height} {np.round(col.params, 4).tolist()}"
    )


def table(rows: list[dict]) -> str:
    base = next((r["psnr"] for r in rows if r["variant"] == "true"), None)
    out = [
        "| variant | test PSNR | vs true | aligned test PSNR | SSIM | Gaussians | training s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        delta = f"{r['psnr'] - base:+.2f}" if base is not None else ""
        aligned = f"{r['psnr_aligned']:.2f}" if r["psnr_aligned"] is not None else ""
        label = r["variant"] + (f" ({', '.join(r['overrides'])})" if r.get("overrides") else "")
        out.append(
            f"| {label} | {r['psnr']:.2f} | {delta} | {aligned} | {r['ssim']:.4f} | {r['gaussians']:,} "
            f"| {r['train_seconds']:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--scene", default="photo", choices=list(SCENES))
    p.add_argument(
        "--root", type=Path, help="work folder (default build/sfm_quality/SCENE); process.py's output there is reused"
    )
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {','.join(VARIANTS)}")
    p.add_argument("--threads", type=int, default=1, help="process.py --threads")
    p.add_argument("--pose-lr", type=float, default=1e-5, help="sfm_poseopt: the refinement's lr (default 1e-5)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for every run, e.g. seed=1 (repeatable)",
    )
    args = p.parse_args(argv)
    chosen = args.variants.split(",")
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"error: --variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.steps < 1:
        raise SystemExit(f"error: --steps must be >= 1, got {args.steps}")
    args.root = args.root or REPO / "build" / "sfm_quality" / args.scene
    args.root.mkdir(parents=True, exist_ok=True)
    chain = load_chain(true_scene(args.scene, args.root), args.root, args.threads)
    print(f"CPU: {cpu_name()}; {describe(chain)}", flush=True)
    models = variant_models(chain)
    rows = []
    for name in chosen:
        folder = args.root / "variants" / name
        write_variant(folder, *models[name])
        start = time.perf_counter()
        pose_lr = args.pose_lr if name == "sfm_poseopt" else None  # the one variant whose training poses are refined
        tag = "".join(f"_{o}" for o in args.set).replace("/", "_") + (f"_lr{pose_lr:g}" if pose_lr is not None else "")
        hooks = POSE_OPT.format(lr=pose_lr) if pose_lr is not None else ALIGN_ONLY
        report = train(
            folder, args.root / "runs" / f"{name}_{args.steps}{tag}", args.steps, hooks, SCENES[args.scene] + args.set
        )
        aligned = report.get("mean_aligned") or {}
        row = dict(
            variant=name,
            scene=args.scene,
            steps=args.steps,
            overrides=args.set,
            pose_lr=pose_lr,
            psnr=report["mean"]["psnr"],
            psnr_aligned=aligned.get("psnr"),
            ssim=report["mean"]["ssim"],
            gaussians=report.get("num_gaussians", 0),
            train_seconds=report["train_seconds"],
            wall_seconds=time.perf_counter() - start,
            test_views=sorted(report["per_view"]),
            date=time.strftime("%Y-%m-%d"),
            cpu=cpu_name(),
        )
        rows.append(row)
        with (args.root / "results.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"  {name}: {row['psnr']:.2f} dB (aligned {row['psnr_aligned']}), {row['train_seconds']:.0f} s", flush=True
        )
    print("\n" + table(rows))
    return 0
