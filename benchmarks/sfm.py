"""Structure from motion for 50 to 300 photos (or more): features, matching and mapping, timed and scored.

    python -m benchmarks sfm                                  # 1 and 2 MP, 50/150/300 photos
    python -m benchmarks sfm --sizes 1 --counts 50,150 --matchers retrieval --mappers incremental,global
    python -m benchmarks sfm --sizes 1 --to-model 150     # photos -> model as a user runs it, timed
    python -m benchmarks sfm --sizes 1 --rendered --counts 300 --matchers retrieval \
        --mappers incremental,hierarchical --cluster-images 100   # both mappers on the same matches

``--to-model N`` runs ``scripts/process.py`` on ``N`` photos of the capture (``--downscales 1``) and then
``scripts/train.py --config configs/colmap_cpu.yaml`` on its output, each in a fresh process, and prints
their wall time, peak RSS, ``process.py``'s stage seconds and the run's ``phase_seconds``.

The scene is a hand-held capture of the photo scene (:mod:`pointrix_lite.data.demo.capture`: three
orbits, 300 JPEGs at 1632x1224, generated once into ``--root``, ~15 min on 2 cores; the 1 MP set is
resized from it). ``N`` photos are every ``300/N``-th photo, as a person taking fewer photos along the
same path would. The stages are ``process.py``'s own functions (:mod:`pointrix_lite.process.sfm`) with
its options; features of the smaller sets are reused by the larger ones (each image is extracted once
per size, and the time is per new image). Each matcher gets its own copy of the feature database; each
mapper maps each matcher's matches, and its cameras are compared with the true ones after a similarity
fit (:func:`pointrix_lite.process.compare.compare_cameras`). Exhaustive matching runs only up to
``--exhaustive-up-to`` photos; above, its time is the measured seconds per pair times ``n (n - 1) / 2``
and printed as an estimate. One JSON line per measurement goes to ``--root``/``results.jsonl``, with
wall and CPU seconds (this process's, all threads: the figure that holds on a shared machine).

``--capture N`` renders a capture of ``N`` photos instead of 300 (``--counts`` divide it); ``--rendered``
renders it at the asked size instead of resizing the 2 MP one (half the rendering time, ~1.2 s of CPU
per 1 MP photo). ``--reuse`` keeps the feature and match databases of an earlier run (map again with
other mappers). COLMAP's log goes to ``--root``/``work_<mp>mp/colmap.log``; the incremental mapper's
rows hold the time of every 10th registration (how its cost grows with the model, what
``python -m benchmarks sfm_scale extrapolate`` fits), the hierarchical mapper's its clusters' sizes and
minutes and the merge time, read from that log.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._common import REPO, cpu_name, fresh_run, load_average, parser, timed

if TYPE_CHECKING:
    import argparse

    from pointrix_lite.io.colmap import ColmapModel

FULL = 300
SIZES = {1: (1152, 864), 2: (1632, 1224)}  # megapixels -> (width, height), 4:3 like a phone


def capture(root: Path, mp: int, photos: int = FULL, rendered: bool = False) -> Path:
    """The ``photos``-photo capture at ``mp`` megapixels: the 1 MP one resized from the 2 MP one, or
    ``rendered`` at its size."""
    from pointrix_lite.data.demo.capture import capture_cameras, ensure_capture, write_truth
    from pointrix_lite.data.demo.make import ensure_generated

    w, h = SIZES[mp]
    if rendered and mp != 2:
        return ensure_capture(root / f"capture_{photos}_{w}x{h}_rendered", photos, w, h)
    w2, h2 = SIZES[2]
    full = ensure_capture(root / f"capture_{photos}_{w2}x{h2}", photos, w2, h2)
    if mp == 2:
        return full

    def resize(folder: Path) -> None:
        from PIL import Image

        (folder / "images").mkdir(parents=True)
        for src in sorted((full / "images").glob("*.jpg")):
            Image.open(src).resize((w, h), Image.LANCZOS).save(folder / "images" / src.name, quality=90)
        write_truth(folder / "truth", capture_cameras(photos, w, h))

    return ensure_generated(root / f"capture_{photos}_{w}x{h}", f"the {w}x{h} copy", resize)


def only(model: ColmapModel, names: list[str]) -> ColmapModel:
    """``model`` with only the images named ``names``."""
    keep = set(names)
    return dataclasses.replace(model, images={k: im for k, im in model.images.items() if im.name in keep})


def subset(n: int, photos: int = FULL) -> list[str]:
    """The names of ``n`` photos of the ``photos``-photo capture, evenly spread along its path."""
    from pointrix_lite.data.demo.capture import photo_name

    if photos % n:
        raise SystemExit(f"--counts: {n} does not divide {photos}")
    return [f"{photo_name(i)}.jpg" for i in range(0, photos, photos // n)]


def main(argv: list[str] | None = None) -> int:
    from pointrix_lite.process.options import RETRIEVAL_NEIGHBORS  # no torch: --help stays instant

    p = parser(__name__, __doc__)
    p.add_argument("--root", type=Path, default=REPO / "build" / "sfm_bench")
    p.add_argument("--sizes", default="1,2", help="megapixels, of 1,2")
    p.add_argument("--counts", default="50,150,300", help="photos per set, divisors of --capture, ascending")
    p.add_argument("--capture", type=int, default=FULL, metavar="N", help="photos in the capture (a multiple of 3)")
    p.add_argument("--rendered", action="store_true", help="render the capture at each size (no 2 MP capture)")
    p.add_argument("--reuse", action="store_true", help="keep the feature and match databases of the last run")
    p.add_argument("--matchers", default="exhaustive,sequential,retrieval")
    p.add_argument("--mappers", default="incremental,global", help="of incremental, global, hierarchical")
    p.add_argument("--cluster-images", type=int, default=None, help="hierarchical: images per cluster")
    p.add_argument("--exhaustive-up-to", type=int, default=50, help="larger sets: exhaustive is estimated")
    p.add_argument("--threads", type=int, default=-1)
    p.add_argument("--neighbors", type=int, default=RETRIEVAL_NEIGHBORS, help="retrieval: --retrieval-neighbors")
    p.add_argument("--to-model", type=int, metavar="N", help="photos -> process.py -> train.py on N photos")
    p.add_argument("--config", default="configs/colmap_cpu.yaml", help="--to-model: the training config")
    args = p.parse_args(argv)
    if args.to_model:
        photos_to_model(args.root, int(args.sizes.split(",")[0]), args.to_model, args.config)
        return 0
    print("\n" + markdown(stages(args)))
    return 0


def stages(args: argparse.Namespace) -> list[dict]:
    """Features, matching and mapping for every size and photo count asked for; one row per measurement."""
    from pointrix_lite.io.colmap import read_model
    from pointrix_lite.process.colmap_import import import_pycolmap
    from pointrix_lite.process.colmap_log import log_to

    pycolmap = import_pycolmap()
    print(
        f"CPU: {cpu_name()}; pycolmap {pycolmap.__version__}; threads {args.threads}; load average {load_average()}",
        flush=True,
    )
    results = args.root / "results.jsonl"
    args.root.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def record(**row) -> None:
        rows.append(row)
        with results.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            "  " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True
        )

    for mp in (int(s) for s in args.sizes.split(",")):
        folder = capture(args.root, mp, args.capture, args.rendered)
        work = args.root / f"work_{mp}mp"
        if not args.reuse:
            shutil.rmtree(work, ignore_errors=True)
        work.mkdir(exist_ok=True)
        with log_to(work / "colmap.log"):
            _one_size(pycolmap, args, mp, folder, read_model(folder / "truth"), work, record)
    return rows


def _cpu_timed(fn, *args):
    """``fn(*args)``, its wall seconds and this process's CPU seconds (all threads)."""
    cpu = time.process_time()
    out, secs = timed(fn, *args)
    return out, secs, time.process_time() - cpu


def _one_size(
    pycolmap, args: argparse.Namespace, mp: int, folder: Path, truth: ColmapModel, work: Path, record
) -> None:
    """Every count, matcher and mapper at one size; databases are written under a temporary name and
    renamed when complete, so ``--reuse`` never takes a half-written one."""
    from benchmarks._sfm_mapping import map_once
    from pointrix_lite.io.colmap import read_model
    from pointrix_lite.process import sfm
    from pointrix_lite.process.compare import compare_cameras
    from pointrix_lite.process.matching import match_features
    from pointrix_lite.process.options import ProcessOptions

    counts = sorted(int(c) for c in args.counts.split(","))
    previous: Path | None = None
    per_pair: float | None = None  # exhaustive seconds per pair, measured on the largest set it ran on
    for n in counts:
        names = subset(n, args.capture)
        opts = ProcessOptions(
            out=work, images=folder / "images", threads=args.threads, retrieval_neighbors=args.neighbors
        )
        if args.cluster_images:
            opts.cluster_images = args.cluster_images
        features = work / f"features_{n}.db"
        if not features.exists():
            partial = work / f"features_{n}.partial.db"
            done = set()
            if previous is not None:
                shutil.copy(previous, partial)
                done = set(subset(counts[counts.index(n) - 1], args.capture))
            new = [name for name in names if name not in done]
            keypoints, secs, cpu = _cpu_timed(
                sfm.extract_features, pycolmap, partial, folder / "images", new, opts, lambda d, t: None
            )
            partial.rename(features)
            record(
                stage="features",
                mp=mp,
                n=n,
                new_images=len(new),
                seconds=secs,
                cpu_seconds=cpu,
                per_image=secs / len(new),
                keypoints_per_image=keypoints / n,
            )
        previous = features
        for matcher in args.matchers.split(","):
            pairs_all = n * (n - 1) // 2
            if matcher == "exhaustive" and n > args.exhaustive_up_to:
                if per_pair is not None:
                    record(
                        stage="matching",
                        mp=mp,
                        n=n,
                        matcher=matcher,
                        pairs=pairs_all,
                        estimated=True,
                        seconds=per_pair * pairs_all,
                        per_image=per_pair * pairs_all / n,
                    )
                continue
            db = work / f"{matcher}_{n}.db"
            if not db.exists():
                partial = work / f"{matcher}_{n}.partial.db"
                shutil.copy(features, partial)
                (matched, verified), secs, cpu = _cpu_timed(match_features, pycolmap, partial, matcher, opts)
                partial.rename(db)
                if matcher == "exhaustive":
                    per_pair = secs / max(matched, 1)
                record(
                    stage="matching",
                    mp=mp,
                    n=n,
                    matcher=matcher,
                    neighbors=args.neighbors,
                    pairs=matched,
                    verified=verified,
                    seconds=secs,
                    cpu_seconds=cpu,
                    per_image=secs / n,
                    per_pair=secs / max(matched, 1),
                )
            for mapper in args.mappers.split(","):
                sparse = work / f"sparse_{matcher}_{mapper}_{n}"
                shutil.rmtree(sparse, ignore_errors=True)
                recs, timing = map_once(pycolmap, db, folder / "images", sparse, opts, mapper, work / "colmap.log")
                row = dict(
                    stage="mapping",
                    mp=mp,
                    n=n,
                    matcher=matcher,
                    mapper=mapper,
                    **timing,
                    per_image=timing["seconds"] / n,
                )
                if recs:
                    best = max(recs, key=lambda k: recs[k].num_reg_images())
                    model_dir = sparse / f"best{best}"
                    model_dir.mkdir()
                    recs[best].write(str(model_dir))
                    score = compare_cameras(read_model(model_dir), only(truth, names))
                    row.update(
                        models=len(recs),
                        registered=score.registered,
                        centre_median=score.centre_median,
                        centre_max=score.centre_max,
                        rotation_median_deg=score.rotation_median_deg,
                        focal_rel=score.focal_rel,
                        points=int(recs[best].num_points3D()),
                        reprojection_px=float(recs[best].compute_mean_reprojection_error()),
                    )
                record(**row)


def markdown(rows: list[dict]) -> str:
    """One table row per (size, photos, matcher, mapper): the stages' seconds and the cameras' errors."""
    out = [
        "| MP | photos | features | matcher: pairs, time | mapper: time | registered | centre error median / worst | total |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    features = {(r["mp"], r["n"]): r for r in rows if r["stage"] == "features"}
    matching = {(r["mp"], r["n"], r["matcher"]): r for r in rows if r["stage"] == "matching"}
    for r in rows:
        if r["stage"] == "matching" and r.get("estimated"):
            f = features[(r["mp"], r["n"])]
            out.append(
                f"| {r['mp']} | {r['n']} | {f['per_image']:.2f} s/image | {r['matcher']}: {r['pairs']}, "
                f"~{r['seconds']:.0f} s (estimate) | | | | |"
            )
        if r["stage"] != "mapping":
            continue
        f, m = features[(r["mp"], r["n"])], matching[(r["mp"], r["n"], r["matcher"])]
        feature_s = f["per_image"] * r["n"]
        errors = f"{r['centre_median']:.1e} / {r['centre_max']:.1e}" if "registered" in r else "no model"
        out.append(
            f"| {r['mp']} | {r['n']} | {feature_s:.0f} s ({f['per_image']:.2f} s/image) | {r['matcher']}: {m['pairs']}, "
            f"{m['seconds']:.0f} s | {r['mapper']}: {r['seconds']:.0f} s | {r.get('registered', 0)}/{r['n']} | {errors} | "
            f"{feature_s + m['seconds'] + r['seconds']:.0f} s |"
        )
    return "\n".join(out)


def run_child(cmd: list[str], log: Path) -> tuple[float, float]:
    """Run ``cmd`` with its output in ``log``; returns (wall seconds, peak RSS in GB) of that process alone."""
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}); see {log}")
    return time.perf_counter() - start, usage.ru_maxrss / 1e6  # ru_maxrss: kB on Linux


def photos_to_model(root: Path, mp: int, n: int, config: str) -> None:
    folder = capture(root, mp)
    photos = root / f"photos_{n}_{mp}mp"
    if not photos.is_dir():
        photos.mkdir()
        for name in subset(n):
            (photos / name).symlink_to(folder / "images" / name)
    scene, exp = root / f"scene_{n}_{mp}mp", root / f"model_{n}_{mp}mp"
    shutil.rmtree(scene, ignore_errors=True)
    shutil.rmtree(exp, ignore_errors=True)
    print(f"CPU: {cpu_name()}; {n} photos at {SIZES[mp][0]}x{SIZES[mp][1]}", flush=True)
    py = sys.executable
    wall, rss = run_child(
        [py, "scripts/process.py", "--images", str(photos), "--out", str(scene), "--downscales", "1"],
        root / f"process_{n}_{mp}mp.log",
    )
    summary = json.loads((scene / "colmap" / "summary.json").read_text())
    print(
        f"process.py: {wall:.1f} s, peak RSS {rss:.2f} GB, {len(summary['registered'])}/{n} registered, "
        f"stages {summary['stage_seconds']}",
        flush=True,
    )
    wall, rss = run_child(
        [py, "scripts/train.py", "--config", config, f"dataset.data_path={scene}", f"exp_dir={fresh_run(exp)}"],
        root / f"train_{n}_{mp}mp.log",
    )
    metrics = json.loads((exp / "metrics.json").read_text())
    aligned = metrics.get("mean_aligned", {}).get("psnr")
    print(
        f"train.py: {wall:.1f} s, peak RSS {rss:.2f} GB, train_seconds {metrics['train_seconds']:.1f}, "
        f"test PSNR {metrics['mean']['psnr']:.2f} dB"
        + (f" ({aligned:.2f} aligned)" if aligned else "")
        + f", phases {metrics.get('phase_seconds')}",
        flush=True,
    )
