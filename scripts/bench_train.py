"""Training speed and time-to-quality, always side by side in one run (these machines are noisy).

    python scripts/bench_train.py                       # 60 steps per backend, fixed N (no densification)
    python scripts/bench_train.py --steps 200 --densify # with the config's densification
    python scripts/bench_train.py --backends native --time-to-psnr 28
    python scripts/bench_train.py --densify --against 1c2aacc        # step time: REV vs working tree, ratio
    python scripts/bench_train.py --time-to-psnr 30 --against 1c2aacc
    python scripts/bench_train.py --compare configs/demo.yaml@1c2aacc configs/demo.yaml --time-to-psnr 30
    python scripts/bench_train.py --scene photo --compare \\
        'configs/demo_colmap.yaml@1c2aacc+trainer.max_steps=5000' configs/colmap_cpu.yaml
    python scripts/bench_train.py --scene photo160 --config configs/colmap_cpu.yaml@9156c00 --backends native \\
        --init-ply EXP/point_cloud.ply --against 9156c00 dataset.scale=1   # a trained model, after densification
    python scripts/bench_train.py ... --profile 25     # then each tree's torch.profiler table (an extra, untimed run)

Every measurement runs in a worker subprocess that imports ``pointrix_lite`` from the code tree it
measures (``scripts/bench_revision.py``): the working tree, or a cached worktree of a git revision.
The measuring code is always this file, so both sides are timed by the same loop through
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
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import bench_revision  # noqa: E402
from bench_data import SCENES, scene_root  # noqa: E402

TAG = "@@bench "  # worker result lines; anything else a worker prints is passed through to stderr


# --- worker side: runs with pointrix_lite from $POINTRIX_LITE_ROOT ------------------------------
def _emit(payload: dict) -> None:
    print(TAG + json.dumps(payload), flush=True)


def build_trainer(spec: dict) -> Any:
    bench_revision.use_root()
    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()
    out = Path(spec["out"])
    base = [f"renderer.backend={spec['backend']}", f"exp_dir={out}", "writers=[]", "trainer.val_interval=0"]
    cfg = load_experiment(Path(spec["config"]), base + list(spec["overrides"]))
    cfg.hooks = [h for h in cfg.hooks if h.get("type") in spec.get("keep_hooks", [])]
    trainer = DefaultTrainer(cfg, out, "cpu")
    trainer.call_hook("before_run")  # kept hooks (e.g. a resolution schedule) are part of the recipe
    trainer.call_hook("before_train")
    return trainer


def batches(trainer: Any) -> Iterator[list]:
    while True:
        yield from trainer.datapipeline.batches_for_epoch(trainer.epoch)
        trainer.epoch += 1


def one_step(trainer: Any, batch: list) -> None:
    """``train_step`` plus the per-iteration hook sites the recipe's hooks use."""
    trainer.call_hook("before_train_iter", batch_idx=0, batch=batch)
    trainer.train_step(batch)
    trainer.global_step += 1
    trainer.call_hook("after_train_iter", batch_idx=0, batch=batch)


def worker_steps(spec: dict) -> None:
    """Time ``steps`` training steps after ``warmup`` untimed ones; one result line."""
    trainer = build_trainer(spec)
    import torch

    if spec.get("init_ply"):
        trained = type(trainer.model).from_ply(spec["init_ply"])  # the same call on every revision since 9156c00
        trainer.model.load_params(dict(trained.params), source=spec["init_ply"])
        trainer.global_step = 2 * trainer.cfg.trainer.max_steps // 3
    n0 = trainer.model.num_gaussians
    it = batches(trainer)
    for _ in range(spec["warmup"]):
        one_step(trainer, next(it))
    start = time.perf_counter()
    if spec.get("profile"):  # the same steps under torch.profiler: where a step's time goes, by op
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(spec["steps"]):
                one_step(trainer, next(it))
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=spec["profile"])
        print(f"torch.profiler, {spec['steps']} steps (native extension calls outside autograd ops are "
              f"not listed, e.g. binning):\n{table}", file=sys.stderr)
    else:
        for _ in range(spec["steps"]):
            one_step(trainer, next(it))
    seconds = time.perf_counter() - start
    cam = trainer.dataset.train_views[0].camera
    _emit({"seconds": seconds, "n0": n0, "n1": trainer.model.num_gaussians, "size": f"{cam.width}x{cam.height}",
           "threads": torch.get_num_threads(), "torch": torch.__version__})


def worker_curve(spec: dict) -> None:
    """Persistent: each ``next`` line on stdin trains up to the next val point and reports it;
    ``stop`` (or reaching max_steps) runs the test views and ends."""
    trainer = build_trainer(spec)
    max_steps = trainer.cfg.trainer.max_steps
    it, seconds = batches(trainer), 0.0
    psnr0 = trainer.validation()["psnr"]  # untimed: also loads the native extension (a JIT build on first use)
    _emit({"ready": True, "max_steps": max_steps, "n": trainer.model.num_gaussians, "psnr": psnr0})
    for line in sys.stdin:
        if line.strip() != "next" or trainer.global_step >= max_steps:
            break
        target = min(max_steps, (trainer.global_step // spec["val_every"] + 1) * spec["val_every"])
        start = time.perf_counter()
        while trainer.global_step < target:
            one_step(trainer, next(it))
        seconds += time.perf_counter() - start  # validation is not counted
        psnr = trainer.validation()["psnr"]
        _emit({"step": trainer.global_step, "seconds": seconds, "psnr": psnr, "n": trainer.model.num_gaussians,
               "done": trainer.global_step >= max_steps})
    test = trainer._evaluate("test", list(trainer.dataset.test_views), None)
    psnrs = [m["psnr"] for m in test.values()]
    _emit({"test_psnr": sum(psnrs) / max(len(psnrs), 1), "step": trainer.global_step, "seconds": seconds})


# --- driver side -------------------------------------------------------------------------------
def worker_env(tree: Path) -> dict:
    env = dict(os.environ, **{bench_revision.ROOT_ENV: str(tree)})
    env.pop("PYTHONPATH", None)  # a PYTHONPATH pointing at this checkout would shadow the chosen tree
    return env


def parse_results(stdout: str) -> list[dict]:
    return [json.loads(line[len(TAG):]) for line in stdout.splitlines() if line.startswith(TAG)]


def config_file(spec: str, tree: Path, scratch: Path) -> Path:
    """``CFG`` (a path) or ``CFG@REV`` (its contents at REV, written under ``scratch``) as a file.

    A relative CFG is looked up in ``tree`` (``--compare``: the revision's own copy)."""
    path, _, rev = spec.partition("@")
    if rev:
        sha = bench_revision.resolve(rev)
        rel = (Path(path).resolve().relative_to(REPO) if Path(path).is_absolute() else Path(path)).as_posix()
        out = subprocess.run(["git", "-C", str(REPO), "show", f"{sha}:{rel}"], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"error: --config/--compare: {rel} does not exist at revision {rev}")
        dest = scratch / f"{sha[:12]}_{Path(rel).name}"
        dest.write_text(out.stdout)
        return dest
    p = Path(path)
    p = p if p.is_absolute() else (tree / p if (tree / p).is_file() else REPO / p)
    if not p.is_file():
        raise SystemExit(f"error: config file {path} not found")
    return p


def _steps_worker(tree: Path, spec: dict, what: str) -> tuple[subprocess.CompletedProcess, dict]:
    """A step-timing worker's finished process (a one-line error naming ``what`` when it failed)."""
    proc = bench_revision.run_worker(tree, [__file__, "--worker-steps", json.dumps(spec)])
    results = parse_results(proc.stdout)
    if proc.returncode != 0 or not results:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"error: {what} worker in {tree} failed: {tail}")
    return proc, results[-1]


def run_steps(tree: Path, spec: dict) -> dict:
    return _steps_worker(tree, spec, "step-timing")[1]


def profile_table(tree: Path, spec: dict) -> str:
    """The torch.profiler table a step-timing worker with ``spec["profile"]`` prints."""
    proc, _ = _steps_worker(tree, spec, "profiling")
    return proc.stderr[proc.stderr.find("torch.profiler"):].rstrip()


class CurveRun:
    """One persistent curve worker and the points it reported."""

    def __init__(self, name: str, tree: Path, spec: dict) -> None:
        self.name, self.points, self.test_psnr = name, [], None
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker-curve", json.dumps(spec)], cwd=os.getcwd(),
                                     env=worker_env(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = self._read()
        self.points.append({"step": 0, "seconds": 0.0, "psnr": self.info["psnr"], "n": self.info["n"]})
        self.done = False

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
            sys.stderr.write(line)
        raise SystemExit(f"error: curve worker {self.name!r} exited (code {self.proc.wait()}); see its output above")

    def advance(self) -> dict:
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()
        point = self._read()
        self.points.append(point)
        self.done = bool(point.get("done"))
        return point

    def finish(self) -> None:
        with_stdin = self.proc.stdin
        if not self.done:
            with_stdin.write("stop\n")
        with_stdin.close()
        final = self._read()
        self.test_psnr = final["test_psnr"]
        self.proc.wait()

    def time_to(self, target: float) -> tuple[float, int] | None:
        for p in self.points:
            if p["psnr"] >= target:
                return p["seconds"], p["step"]
        return None


def run_curves(runs: list[CurveRun], target: float | None, max_seconds: float | None, stop_at_target: bool) -> None:
    """Advance the runs in turns, printing each point, until every run is done."""
    active = list(runs)
    while active:
        for run in list(active):
            p = run.advance()
            print(f"  {run.name:<28} step {p['step']:6d}  {p['seconds']:8.1f} s  val PSNR {p['psnr']:6.2f} dB  "
                  f"N {p['n']}", flush=True)
            reached = target is not None and p["psnr"] >= target
            if run.done or (stop_at_target and reached) or (max_seconds is not None and p["seconds"] >= max_seconds):
                run.finish()
                active.remove(run)


def print_curve_table(runs: list[CurveRun]) -> None:
    steps = sorted({p["step"] for r in runs for p in r.points})
    print("\nval PSNR [dB] / training seconds, per run:")
    print(f"{'step':>7} " + " ".join(f"{r.name[:27]:>28}" for r in runs))
    for s in steps:
        cells = []
        for r in runs:
            p = next((q for q in r.points if q["step"] == s), None)
            cells.append(f"{p['psnr']:6.2f} dB {p['seconds']:7.1f} s N {p['n']:>6}" if p else "")
        print(f"{s:7d} " + " ".join(f"{c:>28}" for c in cells))
    for r in runs:
        last = r.points[-1] if r.points else {"step": 0, "seconds": 0.0}
        print(f"  {r.name}: test PSNR {r.test_psnr:.2f} dB after {last['step']} steps, {last['seconds']:.1f} s of training")


def print_time_to(runs: list[CurveRun], target: float) -> None:
    print(f"\ntime to {target} dB val PSNR:")
    base = runs[0].time_to(target)
    for r in runs:
        hit = r.time_to(target)
        if hit is None:
            print(f"  {r.name}: not reached (best {max((p['psnr'] for p in r.points), default=float('nan')):.2f} dB)")
            continue
        ratio = f", {hit[0] / base[0]:.2f}x the time of {runs[0].name}" if base and r is not runs[0] else ""
        print(f"  {r.name}: {hit[0]:.1f} s, {hit[1]} steps{ratio}")


def plot(runs: list[CurveRun], path: Path, target: float | None, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in runs:
        ax_t.plot([p["seconds"] for p in r.points], [p["psnr"] for p in r.points], marker=".", label=r.name)
        ax_s.plot([p["step"] for p in r.points], [p["psnr"] for p in r.points], marker=".", label=r.name)
    for ax, xlabel in ((ax_t, "training seconds (validation excluded)"), (ax_s, "training steps")):
        if target is not None:
            ax.axhline(target, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("val PSNR [dB]")
        ax.grid(alpha=0.3)
    ax_t.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def compare_spec(text: str) -> tuple[str, str | None, list[str]]:
    """``CFG[@REV][+k=v...]`` -> (CFG[@REV] as given, REV or None, overrides)."""
    head, *overrides = text.split("+")
    rev = head.partition("@")[2] or None
    return head, rev, overrides


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml", help="CFG or CFG@REV (default configs/demo.yaml)")
    p.add_argument("--backends", nargs="+", default=["torch", "native"], choices=("torch", "native"))
    p.add_argument("--steps", type=int, default=60, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--densify", action="store_true", help="keep the config's densification (N then grows)")
    p.add_argument("--init-ply", type=Path, metavar="PLY",
                   help="step timing: start from this trained model's Gaussians (from 2/3 of max_steps)")
    p.add_argument("--time-to-psnr", type=float, metavar="DB", help="train until val PSNR >= DB (curve modes: report it)")
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--against", metavar="REV", help="measure REV's code and the working tree's, alternating")
    p.add_argument("--rounds", type=int, default=2, help="--against step timing: alternating rounds per tree")
    p.add_argument("--profile", type=int, metavar="ROWS",
                   help="step timing: then one more, untimed run per tree under torch.profiler; prints its top ROWS ops")
    p.add_argument("--compare", nargs="+", metavar="CFG[@REV][+k=v]", help="whole val-PSNR curves, side by side")
    p.add_argument("--max-seconds", type=float, help="curve modes: stop a run after this many training seconds")
    p.add_argument("--scene", choices=("demo", *SCENES), default="demo",
                   help="photo / clutter / photo160: generate that COLMAP scene (scripts/bench_data.py) and train on it")
    p.add_argument("--plot", type=Path, help="curve modes: write PSNR-vs-seconds/steps PNG here")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "pointrix_bench_train")
    p.add_argument("--worker-steps", help=argparse.SUPPRESS)
    p.add_argument("--worker-curve", help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every run")
    args = p.parse_args(argv)
    if args.worker_steps:
        worker_steps(json.loads(args.worker_steps))
        return 0
    if args.worker_curve:
        worker_curve(json.loads(args.worker_curve))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="configs_", dir=args.out))
    overrides = list(args.overrides)
    if args.scene != "demo":
        overrides = [f"dataset.data_path={scene_root(args.scene)}", "dataset.white_background=false", *overrides]
    print(f"{os.cpu_count()} CPUs, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    keep = ["ResolutionScheduleHook"]  # recipe hooks that change what a step trains on

    if args.compare:
        runs = []
        for i, text in enumerate(args.compare):
            head, rev, own = compare_spec(text)
            tree = bench_revision.tree_for(rev)
            cfg = config_file(head.partition("@")[0], tree, scratch)
            spec = {"config": str(cfg), "overrides": overrides + own, "backend": "native", "val_every": args.val_every,
                    "out": str(args.out / f"compare_{i}"), "keep_hooks": keep}
            name = head if not own else f"{head} +{'+'.join(own)}"
            print(f"run {i}: {name} ({bench_revision.label(rev)}, config {cfg})")
            runs.append(CurveRun(name, tree, spec))
        run_curves(runs, args.time_to_psnr, args.max_seconds, stop_at_target=False)
        print_curve_table(runs)
        if args.time_to_psnr is not None:
            print_time_to(runs, args.time_to_psnr)
        if args.plot:
            plot(runs, args.plot, args.time_to_psnr, f"{args.scene} scene, {' vs '.join(r.name for r in runs)}"[:160])
        return 0

    trees = [(bench_revision.label(args.against), bench_revision.tree_for(args.against))] if args.against else []
    trees.append(("working tree", REPO))
    cfg = config_file(args.config, REPO, scratch)
    step_overrides = overrides + ([] if args.densify else ["strategy=null"])
    print(f"config {args.config} ({cfg}), {args.steps} timed steps after {args.warmup} warm-up"
          f"{', densifying' if args.densify else ', fixed N'}")
    for backend in args.backends:
        per_step: dict[str, list[float]] = {name: [] for name, _ in trees}
        spec = {"config": str(cfg), "overrides": step_overrides, "backend": backend, "steps": args.steps,
                "warmup": args.warmup, "out": str(args.out / backend), "keep_hooks": keep,
                "init_ply": str(args.init_ply.resolve()) if args.init_ply else None}
        for r in range(args.rounds if args.against else 1):
            for name, tree in trees:  # alternating, so drifting machine load hits both trees alike
                res = run_steps(tree, spec)
                per_step[name].append(res["seconds"] / args.steps)
                print(f"{backend:>7} {name:>22}: {args.steps} steps in {res['seconds']:.2f} s = "
                      f"{args.steps / res['seconds']:.2f} steps/s, {1e3 * res['seconds'] / args.steps:.1f} ms/step "
                      f"({res['size']}, N {res['n0']} -> {res['n1']}, {res['threads']} threads)", flush=True)
        if args.profile:  # extra runs, not timed: the profiler slows what it watches
            for name, tree in trees:
                print(f"\n{backend} {name}: {profile_table(tree, dict(spec, profile=args.profile))}", flush=True)
        if args.against:
            old, new = (statistics.median(per_step[name]) for name, _ in trees)
            print(f"{backend:>7}: working tree {1e3 * new:.1f} ms/step vs {trees[0][0]} {1e3 * old:.1f} ms/step "
                  f"(medians of {args.rounds}): {old / new:.2f}x faster per step")
        args.__dict__.setdefault("_per_backend", {})[backend] = statistics.median(per_step["working tree"])
    pb = args._per_backend
    if "torch" in pb and "native" in pb:
        print(f"working tree: native is {pb['torch'] / pb['native']:.1f}x faster per step than torch")

    if args.time_to_psnr is not None:
        print(f"\ntime to {args.time_to_psnr} dB val PSNR (native, config schedule):")
        runs = [CurveRun(name, tree, {"config": str(cfg), "overrides": overrides, "backend": "native",
                                      "val_every": args.val_every, "out": str(args.out / f"ttp_{i}"),
                                      "keep_hooks": keep})
                for i, (name, tree) in enumerate(trees)]
        run_curves(runs, args.time_to_psnr, args.max_seconds, stop_at_target=True)
        print_time_to(runs, args.time_to_psnr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
