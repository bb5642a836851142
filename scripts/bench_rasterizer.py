"""Benchmark the native C++ rasterizer against the pure-torch reference, side by side.

    .venv/bin/python scripts/bench_rasterizer.py [--scenes small,large] [--reps 5] [--threads 2]
    .venv/bin/python scripts/bench_rasterizer.py --against 1c2aacc [--rounds 3] [--threads 1]

``--against REV`` times the native backend of the working tree and of revision REV (a cached git
worktree with its own extension build, see ``bench_revision.py``) with the same measurement code,
alternating between the two trees ``--rounds`` times in one run. It prints, per tree, the median
forward and forward+backward wall time, the CPU time of each native stage (each extension call
timed around the call, so it works for any revision's bindings) and the forward's alpha evaluations
per pixel (one per in-image pixel of each visited Gaussian block or row), then the ratio REV / working tree.

For each fixed seeded scene and backend a fresh subprocess measures (so peak memory is
per measurement): median forward ms, median forward+backward ms, peak memory, and the
Gaussian-pixel alpha evaluations per second of the native forward. Peak memory is the
growth of the process's peak RSS (``resource.getrusage(...).ru_maxrss``) over its RSS just
before the first render, i.e. what rendering itself allocated, torch's allocations included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bench_revision

# name: (width, height, n_gaussians, sh_degree)
SCENES = {
    "small": (160, 160, 20_000, 3),
    "large": (400, 300, 200_000, 3),
}


def make_scene(width: int, height: int, n: int, sh_degree: int, seed: int = 0) -> dict:
    """Gaussians filling a cube in front of one camera, sized like a trained scene's (a few px)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) * 2 - 1) * torch.tensor([1.2, 1.2, 1.0])
    spacing = (8.0 / n) ** (1 / 3)
    scales = torch.exp(torch.randn(n, 3, generator=g) * 0.4) * spacing * 0.5
    f = 1.0 * width
    viewmat = torch.eye(4)
    viewmat[2, 3] = 3.0  # camera 3 units behind the cube centre, looking along +z
    return dict(
        means=means,
        quats=torch.randn(n, 4, generator=g),
        scales=scales,
        opacities=torch.rand(n, generator=g) * 0.9 + 0.05,
        colors=torch.randn(n, (sh_degree + 1) ** 2, 3, generator=g) * 0.3,
        viewmats=viewmat[None],
        Ks=torch.tensor([[[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]]]),
        width=width,
        height=height,
        sh_degree=sh_degree,
    )


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# extension function -> stage name (the same names on every revision since the native backend landed)
STAGES = {"project_fwd": "projection", "sh_fwd": "SH", "bin_tiles": "binning", "raster_fwd": "raster fwd",
          "raster_bwd": "raster bwd", "sh_bwd": "SH bwd", "project_bwd": "projection bwd"}  # fmt: skip


def _time_stages(totals: dict) -> None:
    """Wrap the loaded extension's functions so each call adds its wall ms to ``totals[stage]``.

    Wrapping the module attributes (rather than profiling autograd nodes) measures the C++ call
    alone and needs nothing from the revision under test but its function names.
    """
    from pointrix_lite.renderer.native._build import load_extension

    ext = load_extension()
    for fn_name, stage in STAGES.items():
        fn = getattr(ext, fn_name, None)
        if fn is None:
            continue

        def timed(*args, _fn=fn, _stage=stage):
            t0 = time.perf_counter()
            try:
                return _fn(*args)
            finally:
                totals[_stage] = totals.get(_stage, 0.0) + 1e3 * (time.perf_counter() - t0)

        setattr(ext, fn_name, timed)


def worker(backend: str, scene_name: str, reps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from pointrix_lite.renderer import rasterization

    s = make_scene(*SCENES[scene_name])
    if backend == "native":
        from pointrix_lite.renderer import native

        assert native.is_available(), native.unavailable_reason()
    stage_ms: dict = {}
    if backend == "native":
        _time_stages(stage_ms)
    stage_runs: list[dict] = []
    params = {k: s[k].clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "colors")}

    def render():
        return rasterization(params["means"], params["quats"], params["scales"], params["opacities"],
                             params["colors"], s["viewmats"], s["Ks"], s["width"], s["height"],
                             sh_degree=s["sh_degree"], backend=backend)  # fmt: skip

    base_rss = _rss_mb()
    fwd, fwdbwd = [], []
    meta = {}
    for _ in range(reps + 1):  # first round is warm-up (allocator, lazy init)
        with torch.no_grad():
            t0 = time.perf_counter()
            _, _, meta = render()
            fwd.append(time.perf_counter() - t0)
        stage_ms.clear()
        t0 = time.perf_counter()
        colors, alphas, meta = render()
        meta["means2d"].retain_grad()
        (colors.sum() + alphas.sum()).backward()
        fwdbwd.append(time.perf_counter() - t0)
        stage_runs.append(dict(stage_ms))
        for p in params.values():
            p.grad = None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base_rss
    return dict(
        fwd_ms=1e3 * statistics.median(fwd[1:] if reps else fwd),
        fwdbwd_ms=1e3 * statistics.median(fwdbwd[1:] if reps else fwdbwd),
        peak_mb=peak_mb,
        n_evals=meta.get("n_evaluations"),
        n_pairs=int(meta["tiles_per_gauss"].sum()) if "tiles_per_gauss" in meta else None,
        stages_ms={k: statistics.median(r.get(k, 0.0) for r in stage_runs[1:] or stage_runs)
                   for k in STAGES.values() if any(k in r for r in stage_runs)},
        visible=int((meta["radii"] > 0).all(-1).sum()),
    )


def measure(backend: str, scene: str, reps: int, threads: int, tree: Path | None = None) -> dict:
    """Run :func:`worker` in a fresh subprocess importing ``pointrix_lite`` from ``tree`` (default: here)."""
    argv = [__file__, "--worker", backend, "--scenes", scene, "--reps", str(reps), "--threads", str(threads)]
    out = bench_revision.run_worker(tree or bench_revision.tree_for(None), argv)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def against(rev: str, scenes: list[str], reps: int, rounds: int, threads: int) -> None:
    """Native backend of the working tree vs revision ``rev``, alternating, one table per scene."""
    old_name, new_name = bench_revision.label(rev), "working tree"
    trees = {old_name: bench_revision.tree_for(rev), new_name: bench_revision.tree_for(None)}
    print(f"threads={threads}, {rounds} alternating rounds x {reps} reps per tree; medians over all rounds; "
          f"ratio = {old_name} / working tree; stages: wall ms inside each extension call")  # fmt: skip
    for scene in scenes:
        w, h, n, sh = SCENES[scene]
        runs: dict = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                r = measure("native", scene, reps, threads, tree)
                if "error" in r:
                    raise SystemExit(f"error: {name}: {r['error']}")
                runs[name].append(r)
        rows = {"fwd (wall)": "fwd_ms", "fwd+bwd (wall)": "fwdbwd_ms"}
        med = {}
        for name, rs in runs.items():
            m = {label: statistics.median(r[key] for r in rs) for label, key in rows.items()}
            for stage in STAGES.values():
                vals = [r["stages_ms"][stage] for r in rs if stage in r.get("stages_ms", {})]
                if vals:
                    m[stage] = statistics.median(vals)
            m["raster fwd+bwd"] = m.get("raster fwd", 0.0) + m.get("raster bwd", 0.0)
            med[name] = m
        print(f"\n{w}x{h}, {n:,} Gaussians, SH {sh}")
        print(f"{'ms':<18}{old_name:>22}{new_name:>16}{'speed-up':>10}")
        for label in med[new_name]:
            if label in med[old_name]:
                o, nw = med[old_name][label], med[new_name][label]
                print(f"{label:<18}{o:22.2f}{nw:16.2f}{o / nw if nw else float('nan'):9.2f}x")
        first = {name: rs[0] for name, rs in runs.items()}
        print(f"{'evals/px (fwd)':<18}{first[old_name]['n_evals'] / (w * h):22.1f}{first[new_name]['n_evals'] / (w * h):16.1f}")
        if all(first[k].get("n_pairs") for k in first):
            print(f"{'(Gauss, tile) pairs':<18}{first[old_name]['n_pairs']:22,}{first[new_name]['n_pairs']:16,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", default="small,large", help="comma list of: " + ", ".join(SCENES))
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions for the native backend")
    ap.add_argument("--ref-reps", type=int, default=2, help="timed repetitions for the torch reference")
    ap.add_argument("--large-ref-reps", type=int, default=1, help="reference repetitions on 'large' (slow)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-ref", action="store_true", help="native only")
    ap.add_argument("--train", action="store_true",
                    help="also time training steps on the demo scene for both backends (scripts/bench_train.py)")
    ap.add_argument("--train-steps", type=int, default=30, help="timed training steps per backend with --train")
    ap.add_argument("--against", metavar="REV", help="compare the native backend with git revision REV")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per tree with --against")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        bench_revision.use_root()  # before the first pointrix_lite import: the tree under test
        print(json.dumps(worker(args.worker, args.scenes, args.reps, args.threads)))
        return
    unknown = [s for s in args.scenes.split(",") if s not in SCENES]
    if unknown:
        raise SystemExit(f"error: --scenes: unknown scene(s) {', '.join(unknown)} (known: {', '.join(SCENES)})")
    if args.against:
        against(args.against, args.scenes.split(","), args.reps, args.rounds, args.threads)
        return

    print(f"threads={args.threads}  (medians; fwd+bwd = forward with autograd + backward of sum(colors)+sum(alphas))")
    header = f"{'scene':<22}{'backend':<8}{'fwd ms':>10}{'fwd+bwd ms':>12}{'peak MB':>9}{'Mevals/s':>10}"
    print(header)
    print("-" * len(header))
    for scene in args.scenes.split(","):
        w, h, n, sh = SCENES[scene]
        label = f"{w}x{h} {n // 1000}k sh{sh}"
        results = {"native": measure("native", scene, args.reps, args.threads)}
        if not args.skip_ref:
            ref_reps = args.large_ref_reps if scene == "large" else args.ref_reps
            results["torch"] = measure("torch", scene, ref_reps, args.threads)
        for backend, r in results.items():
            if "error" in r:
                print(f"{label:<22}{backend:<8}  failed: {r['error']}")
                continue
            evals = results["native"].get("n_evals") if "error" not in results["native"] else None
            rate = f"{evals / r['fwd_ms'] / 1e3:10.1f}" if evals else f"{'':>10}"
            print(f"{label:<22}{backend:<8}{r['fwd_ms']:10.1f}{r['fwdbwd_ms']:12.1f}{r['peak_mb']:9.0f}{rate}")
        if "torch" in results and "error" not in results["torch"] and "error" not in results["native"]:
            nat, ref = results["native"], results["torch"]
            print(f"{'':<22}{'speed-up':<8}{ref['fwd_ms'] / nat['fwd_ms']:9.1f}x{ref['fwdbwd_ms'] / nat['fwdbwd_ms']:11.1f}x")
        if "error" not in results["native"]:
            nat = results["native"]
            print(f"{'':<22}evals/frame={nat['n_evals']:,} ({nat['n_evals'] / (w * h):.0f}/px), "
                  f"visible Gaussians={nat['visible']:,}")  # fmt: skip
    if args.train:
        # One implementation of "a training step" lives in bench_train.py (DefaultTrainer.train_step);
        # reuse it rather than timing a second, possibly different, loop here.
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_train

        print("\ntraining on the demo scene (configs/demo.yaml, fixed N, no densification):")
        backends = ["native"] if args.skip_ref else ["torch", "native"]
        bench_train.main(["--backends", *backends, "--steps", str(args.train_steps)])


if __name__ == "__main__":
    main()
