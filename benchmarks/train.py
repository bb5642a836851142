"""Training speed and time-to-quality, always side by side in one run (these machines are noisy).

    python -m benchmarks train                       # 60 steps per backend, fixed N (no densification)
    python -m benchmarks train --steps 200 --densify # with the config's densification
    python -m benchmarks train --backends native --time-to-psnr 28
    python -m benchmarks train --densify --against 1c2aacc        # step time: REV vs working tree, ratio
    python -m benchmarks train --time-to-psnr 30 --against 1c2aacc
    python -m benchmarks train --compare configs/demo.yaml@1c2aacc configs/demo.yaml --time-to-psnr 30
    python -m benchmarks train --scene photo --compare \\
        'configs/demo_colmap.yaml@1c2aacc+trainer.max_steps=5000' configs/colmap_cpu.yaml
    python -m benchmarks train --scene photo160 --config configs/colmap_cpu.yaml@9156c00 --backends native \\
        --init-ply EXP/point_cloud.ply --against 9156c00 dataset.scale=1   # a trained model, after densification
    python -m benchmarks train ... --profile 25     # then each tree's torch.profiler table (an extra, untimed run)

Every measurement runs in a worker subprocess that imports ``pointrix_lite`` from the code tree it
measures (``benchmarks/workers.py``): the working tree, or a cached worktree of a git revision
(``benchmarks/revision.py``). The measuring code is always this checkout's
(``benchmarks/training.py``), so both sides are timed by the same loop through
``DefaultTrainer.train_step`` (the exact step of train.py) without hooks, writers or checkpoints.

Step timing starts from the config's initial points, so at a real capture's resolution it would time
the few Gaussians SfM gives, not a trained model. ``--init-ply PLY`` replaces them with a trained
model's Gaussians (e.g. ``scripts/train.py``'s ``point_cloud.ply`` of the same scene, its SH degree
that of the config) and counts steps from two thirds of ``max_steps``: after densification, at full
SH degree, the steps that make up most of a run at a fixed budget.

``--config CFG[@REV]``: the config file (``@REV``: its contents at that revision); step timing and
``--against`` use this one file for both code trees, so their ratio is about code, not recipe.
``--compare CFG[@REV][+key=value...]``: whole runs, each with its own config and code
(``CFG@REV`` is that revision's config file *and* code; ``+key=value`` are overrides for that run
only; positional ``key=value`` overrides apply to every run). Runs advance in turns of
``--val-every`` steps, so machine load hits them alike; each turn's training seconds are timed
(validation excluded), then val PSNR is measured at full resolution. At the end each run reports
its test PSNR, and ``--plot`` writes PSNR against seconds (and steps), one line per run.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from benchmarks import revision, workers
from benchmarks._common import REPO, add_run_arguments, load_average, parser
from benchmarks.curves import CurveRun, plot, print_curve_table, print_time_to, run_curves
from benchmarks.datasets import SCENES, scene_root

KEEP_HOOKS = ["ResolutionScheduleHook"]  # recipe hooks that change what a step trains on


def _steps_worker(tree: Path, spec: dict, what: str) -> tuple[str, dict]:
    """A step-timing worker's stderr and result (a one-line error naming ``what`` when it failed)."""
    proc = workers.run("benchmarks.training:steps", spec, tree)
    results = workers.results(proc.stdout)
    if proc.returncode != 0 or not results:
        raise SystemExit(f"error: {what} worker in {tree} failed: {workers.stderr_tail(proc)}")
    return proc.stderr, results[-1]


def run_steps(tree: Path, spec: dict) -> dict:
    return _steps_worker(tree, spec, "step-timing")[1]


def profile_table(tree: Path, spec: dict) -> str:
    """The torch.profiler table a step-timing worker with ``spec["profile"]`` prints."""
    stderr, _ = _steps_worker(tree, spec, "profiling")
    return stderr[stderr.find("torch.profiler") :].rstrip()


def compare(args: argparse.Namespace, overrides: list[str], scratch: Path) -> None:
    """``--compare``: whole val-PSNR curves, each run its own config and code tree."""
    runs = []
    for i, text in enumerate(args.compare):
        head, rev, own = revision.compare_spec(text)
        tree = revision.tree_for(rev)
        cfg = revision.config_file(head.partition("@")[0], tree, scratch)
        spec = {
            "config": str(cfg),
            "overrides": overrides + own,
            "backend": "native",
            "val_every": args.val_every,
            "out": str(args.out / f"compare_{i}"),
            "keep_hooks": KEEP_HOOKS,
        }
        name = head if not own else f"{head} +{'+'.join(own)}"
        print(f"run {i}: {name} ({revision.label(rev)}, config {cfg})")
        runs.append(CurveRun(name, tree, spec))
    run_curves(runs, args.time_to_psnr, args.max_seconds, stop_at_target=False)
    print_curve_table(runs)
    if args.time_to_psnr is not None:
        print_time_to(runs, args.time_to_psnr)
    if args.plot:
        plot(runs, args.plot, args.time_to_psnr, f"{args.scene} scene, {' vs '.join(r.name for r in runs)}"[:160])


def time_steps(args: argparse.Namespace, trees: list[tuple[str, Path]], cfg: Path, overrides: list[str]) -> None:
    """Step time per backend, alternating between the trees (``--against``) ``--rounds`` times."""
    step_overrides = overrides + ([] if args.densify else ["strategy=null"])
    print(
        f"config {args.config} ({cfg}), {args.steps} timed steps after {args.warmup} warm-up"
        f"{', densifying' if args.densify else ', fixed N'}"
    )
    per_backend: dict[str, float] = {}
    for backend in args.backends:
        per_step: dict[str, list[float]] = {name: [] for name, _ in trees}
        spec = {
            "config": str(cfg),
            "overrides": step_overrides,
            "backend": backend,
            "steps": args.steps,
            "warmup": args.warmup,
            "out": str(args.out / backend),
            "keep_hooks": KEEP_HOOKS,
            "init_ply": str(args.init_ply.resolve()) if args.init_ply else None,
        }
        for _ in range(args.rounds if args.against else 1):
            for name, tree in trees:  # alternating, so drifting machine load hits both trees alike
                res = run_steps(tree, spec)
                per_step[name].append(res["seconds"] / args.steps)
                print(
                    f"{backend:>7} {name:>22}: {args.steps} steps in {res['seconds']:.2f} s = "
                    f"{args.steps / res['seconds']:.2f} steps/s, {1e3 * res['seconds'] / args.steps:.1f} ms/step "
                    f"({res['size']}, N {res['n0']} -> {res['n1']}, {res['threads']} threads)",
                    flush=True,
                )
        if args.profile:  # extra runs, not timed: the profiler slows what it watches
            for name, tree in trees:
                print(f"\n{backend} {name}: {profile_table(tree, dict(spec, profile=args.profile))}", flush=True)
        if args.against:
            old, new = (statistics.median(per_step[name]) for name, _ in trees)
            print(
                f"{backend:>7}: working tree {1e3 * new:.1f} ms/step vs {trees[0][0]} {1e3 * old:.1f} ms/step "
                f"(medians of {args.rounds}): {old / new:.2f}x faster per step"
            )
        per_backend[backend] = statistics.median(per_step["working tree"])
    if "torch" in per_backend and "native" in per_backend:
        print(f"working tree: native is {per_backend['torch'] / per_backend['native']:.1f}x faster per step than torch")


def time_to_psnr(args: argparse.Namespace, trees: list[tuple[str, Path]], cfg: Path, overrides: list[str]) -> None:
    """``--time-to-psnr`` after step timing: each tree trains the config's schedule until the target."""
    print(f"\ntime to {args.time_to_psnr} dB val PSNR (native, config schedule):")
    runs = [
        CurveRun(
            name,
            tree,
            {
                "config": str(cfg),
                "overrides": overrides,
                "backend": "native",
                "val_every": args.val_every,
                "out": str(args.out / f"ttp_{i}"),
                "keep_hooks": KEEP_HOOKS,
            },
        )
        for i, (name, tree) in enumerate(trees)
    ]
    run_curves(runs, args.time_to_psnr, args.max_seconds, stop_at_target=True)
    print_time_to(runs, args.time_to_psnr)


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--config", default="configs/demo.yaml", help="CFG or CFG@REV (default configs/demo.yaml)")
    p.add_argument("--backends", nargs="+", default=["torch", "native"], choices=("torch", "native"))
    p.add_argument("--steps", type=int, default=60, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--densify", action="store_true", help="keep the config's densification (N then grows)")
    p.add_argument(
        "--init-ply",
        type=Path,
        metavar="PLY",
        help="step timing: start from this trained model's Gaussians (from 2/3 of max_steps)",
    )
    p.add_argument(
        "--time-to-psnr", type=float, metavar="DB", help="train until val PSNR >= DB (curve modes: report it)"
    )
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--against", metavar="REV", help="measure REV's code and the working tree's, alternating")
    p.add_argument("--rounds", type=int, default=2, help="--against step timing: alternating rounds per tree")
    p.add_argument(
        "--profile",
        type=int,
        metavar="ROWS",
        help="step timing: then one more, untimed run per tree under torch.profiler; prints its top ROWS ops",
    )
    p.add_argument("--compare", nargs="+", metavar="CFG[@REV][+k=v]", help="whole val-PSNR curves, side by side")
    p.add_argument("--max-seconds", type=float, help="curve modes: stop a run after this many training seconds")
    p.add_argument(
        "--scene",
        choices=("demo", *SCENES),
        default="demo",
        help="photo / clutter / photo160 / outdoor: generate that COLMAP scene (benchmarks/datasets.py) and train on it",
    )
    p.add_argument("--plot", type=Path, help="curve modes: write PSNR-vs-seconds/steps PNG here")
    add_run_arguments(p, __name__)
    args = p.parse_args(argv)

    scratch = revision.scratch_folder(args.out)
    overrides = list(args.overrides)
    if args.scene != "demo":
        overrides = [f"dataset.data_path={scene_root(args.scene)}", "dataset.white_background=false", *overrides]
    print(
        f"{os.cpu_count()} CPUs, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
        f"load average {load_average()}"
    )
    if args.compare:
        compare(args, overrides, scratch)
        return 0
    trees = [(revision.label(args.against), revision.tree_for(args.against))] if args.against else []
    trees.append(("working tree", REPO))
    cfg = revision.config_file(args.config, REPO, scratch)
    time_steps(args, trees, cfg, overrides)
    if args.time_to_psnr is not None:
        time_to_psnr(args, trees, cfg, overrides)
    return 0
