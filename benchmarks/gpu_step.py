"""A CUDA training step, where its time goes: gsplat's kernels against everything else, per code tree.

    python -m benchmarks gpu_step --ply EXP/point_cloud.ply --data SCENE \\
        --tree new=. --tree old=/path/to/an/older/checkout [--steps 50] [key=value ...]
    python -m benchmarks gpu_step ... --start-step 3000 --tree scored=. \\
        --tree plain=.+strategy.error_every=0+strategy.error_weight=0.0   # what the error scores cost
    python -m benchmarks gpu_step ... --keep-hook AppearanceOptHook --tree plain=. \\
        --tree 'appearance=.+hooks=[{type: AppearanceOptHook, mode: bilagrid}]'   # what a hook costs per step

For each ``--tree NAME=PATH`` (a checkout whose ``pointrix_lite`` is imported; trees alternate, in
one run, so the ratio between them is what counts) a worker subprocess builds the trainer on CUDA
from ``--config`` (the tree's own copy when it has ``configs/`` with that name; default
``configs/colmap_cpu.yaml`` at a GPU's budget, the setup of issue 44:
SH 3, 1M-Gaussian MCMC, hooks and writers off), loads the trained Gaussians of ``--ply`` and
sets the step to ``--start-step`` (after densification), then, with the config's hooks off except
the types named by ``--keep-hook`` (their per-iteration sites run as in ``scripts/train.py``),

- times ``--steps`` steps of ``DefaultTrainer.train_step`` (CUDA-synchronised wall time),
- profiles 5 more under torch.profiler (CPU + CUDA) and sums kernel time by kind: **gsplat** (its
  projection, SH, tile intersection with its radix sort, rasterization forward and backward)
  against the rest (SSIM, Adam, elementwise, copies, GEMM, ...), the issue's "step time over
  gsplat's kernels" ratio,
- runs 3 steps under ``torch.cuda.set_sync_debug_mode("warn")`` and lists where the step makes the
  CPU wait for the GPU (each wait stops the CPU from queuing the next kernels).

Needs a CUDA device (and gsplat built for it); prints one table per tree and the ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import time
import warnings
from collections import defaultdict
from pathlib import Path

from benchmarks import workers
from benchmarks._common import REPO, parser
from benchmarks.training import batches, one_step

# issue 44's GPU budget on colmap_cpu.yaml: SH 3, MCMC up to 1M Gaussians
DEFAULT_OVERRIDES = [
    "model.sh_degree=3",
    "strategy.cap_max=1000000",
    "strategy.growth_rate=0.05",
    "strategy.steps_scaler=0.25",
    "trainer.max_steps=7000",
    "dataset.scale=1",
]
GSPLAT_KERNELS = re.compile(
    r"gsplat::|projection|spherical_harmonics|isect|intersect_tile|rasterize_to_pixels|RadixSort|radix_sort|DeviceScan",
    re.I,
)
KINDS = [  # first match names the kind of a non-gsplat kernel
    ("SSIM (fused, Triton)", re.compile(r"_blur_rows|_ssim_cols|_grad_cols")),
    ("SSIM (cuDNN convolutions)", re.compile(r"conv|cudnn|implicit_gemm|dgrad|wgrad", re.I)),
    ("MCMC noise (Triton)", re.compile(r"_add_noise")),
    ("bilateral grid (grid_sample)", re.compile(r"grid_sampler", re.I)),
    ("Adam", re.compile(r"adam|multi_tensor_apply", re.I)),
    ("GEMM", re.compile(r"gemm|sgemm|cutlass", re.I)),
    ("copies / cat", re.compile(r"cat|copy|Memcpy|memcpy", re.I)),
    ("reductions", re.compile(r"reduce", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled", re.I)),
]


def _kind(name: str) -> str:
    if GSPLAT_KERNELS.search(name):
        return "gsplat"
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def worker(spec: dict) -> dict:
    """Worker: time, profile and sync-check training steps of one tree (``pointrix_lite`` from that tree)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from pointrix_lite.components import import_all
    from pointrix_lite.engine.experiment import load_experiment
    from pointrix_lite.engine.trainer import DefaultTrainer

    import_all()
    out = Path(spec["out"])
    cfg = load_experiment(
        Path(spec["config"]),
        [
            f"exp_dir={out}",
            "writers=[]",
            "trainer.val_interval=0",
            f"dataset.data_path={spec['data']}",
            *spec["overrides"],
        ],
    )
    cfg.hooks = [h for h in cfg.hooks if h.get("type") in spec.get("keep_hooks", [])]
    device = spec.get("device", "cuda")
    trainer = DefaultTrainer(cfg, out, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    prepare = getattr(trainer.renderer, "prepare", None)
    if callable(prepare):  # older trees load their kernels inside the first step instead
        prepare(trainer.device)
    trained = type(trainer.model).from_ply(spec["ply"])
    trainer.model.load_params(dict(trained.params), source=spec["ply"])
    trainer.global_step = spec["start_step"]
    trainer.call_hook("before_run")  # kept hooks only (--keep-hook): they are part of the step measured
    trainer.call_hook("before_train")
    it = batches(trainer)

    def step() -> None:
        one_step(trainer, next(it))

    for _ in range(spec["warmup"]):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(spec["steps"]):
        step()
    sync()
    wall_ms = (time.perf_counter() - start) * 1000.0 / spec["steps"]

    n_prof = 5
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n_prof):
            step()
        sync()
    by_kind: dict[str, float] = defaultdict(float)
    by_name: dict[str, float] = defaultdict(float)
    for evt in prof.key_averages():
        # Ranges such as "Optimizer.step#Adam.step" also get a GPU span: it would count its kernels twice.
        annotation = getattr(evt, "is_user_annotation", False) or "#" in evt.key or evt.key.startswith("ProfilerStep")
        if str(getattr(evt, "device_type", "")).endswith("CUDA") and not annotation:
            us = float(getattr(evt, "self_device_time_total", getattr(evt, "self_cuda_time_total", 0.0)))
            by_kind[_kind(evt.key)] += us / 1000.0 / n_prof
            by_name[evt.key] += us / 1000.0 / n_prof

    waits: dict[str, int] = defaultdict(int)
    debug = torch.cuda.set_sync_debug_mode if device == "cuda" else (lambda mode: None)
    debug("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            step()
        sync()
    debug("default")
    for w in caught:
        if "synchroniz" in str(w.message):
            waits[f"{Path(w.filename).name}:{w.lineno}"] += 1
    cam = trainer.dataset.train_views[0].camera
    return {
        "wall_ms": wall_ms,
        "kinds": dict(by_kind),
        "top": sorted(by_name.items(), key=lambda kv: -kv[1])[:20],
        "waits_per_step": {k: v / 3 for k, v in waits.items()},
        "n": trainer.model.num_gaussians,
        "size": f"{cam.width}x{cam.height}",
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if device == "cuda" else "CPU (dry run)",
    }


def tree_config(config: Path, tree: Path) -> Path:
    """The config a tree runs: its own copy of a repository config (``configs/NAME`` in the tree, as
    ``benchmarks train``'s ``CFG@REV``), so an older tree does not meet keys it does not know; else ``config``."""
    config = config.resolve()
    own = tree.resolve() / "configs" / config.name
    return own if config.parent == (REPO / "configs").resolve() and own.is_file() else config


def run_tree(name: str, tree: str, args: argparse.Namespace) -> dict:
    tree, *own = tree.split("+")  # PATH+key=value+...: overrides for this tree only
    spec = {
        "config": str(tree_config(Path(args.config), Path(tree))),
        "ply": str(args.ply.resolve()),
        "data": str(args.data.resolve()),
        "overrides": args.overrides + own,
        "steps": args.steps,
        "warmup": args.warmup,
        "start_step": args.start_step,
        "out": str(Path(args.out) / name),
        "device": args.device,
        "keep_hooks": args.keep_hook,
    }
    proc = workers.run("benchmarks.gpu_step:worker", spec, Path(tree).resolve())
    results = workers.results(proc.stdout)
    if proc.returncode != 0 or not results:
        raise SystemExit(f"error: tree {name} ({tree}) failed:\n" + workers.stderr_tail(proc, 8))
    return results[-1]


def report(name: str, r: dict) -> None:
    kinds = r["kinds"]
    busy = sum(kinds.values())
    g = kinds.get("gsplat", 0.0)
    print(f"\n== {name}: {r['gpu']}, torch {r['torch']}, {r['n']:,} Gaussians at {r['size']}")
    print(
        f"step wall {r['wall_ms']:.2f} ms | GPU busy {busy:.2f} ms ({100 * busy / r['wall_ms']:.0f} %) | "
        f"gsplat's kernels {g:.2f} ms | wall / gsplat {r['wall_ms'] / max(g, 1e-9):.2f}x"
    )
    for kind, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:28s} {ms:7.2f} ms")
    print("  top kernels:")
    for kname, ms in r["top"]:
        print(f"    {ms:7.3f} ms  [{_kind(kname)}] {kname[:100]}")
    waits = r["waits_per_step"]
    print(
        f"  CPU waits for the GPU per step: {sum(waits.values()):.1f}"
        + "".join(f"\n    {k}: {v:.1f}" for k, v in waits.items())
    )


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")  # the GPU check's log shows progress as it comes
    p = parser(__name__, __doc__)
    p.add_argument("--config", default=str(REPO / "configs" / "colmap_cpu.yaml"))
    p.add_argument("--ply", type=Path, help="a trained model's point_cloud.ply (its SH degree = the config's)")
    p.add_argument("--data", type=Path, help="the COLMAP scene it was trained on")
    p.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH[+key=value...]",
        help="a checkout to measure, with overrides of its own after '+' (repeat)",
    )
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--start-step", type=int, default=6500, help="the step the timing starts at (after densification)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds per tree")
    p.add_argument("--out", default="/tmp/pointrix_gpu_step")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # "cpu": a dry run of the benchmark itself
    p.add_argument(
        "--keep-hook",
        action="append",
        default=[],
        metavar="TYPE",
        help="keep this hook type of the config (a tree's own hooks=[...] override may add it) in the step (repeat)",
    )
    p.add_argument("--no-default-overrides", action="store_true", help="leave out issue 44's GPU budget overrides")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args(argv)
    if not (args.ply and args.data and args.tree):
        p.error("--ply, --data and at least one --tree are required")
    args.overrides = ([] if args.no_default_overrides else DEFAULT_OVERRIDES) + args.overrides
    trees = [t.split("=", 1) for t in args.tree]
    results: dict[str, list[dict]] = defaultdict(list)
    for _ in range(args.rounds):
        for name, tree in trees:
            results[name].append(run_tree(name, tree, args))
    best = {name: min(rs, key=lambda r: r["wall_ms"]) for name, rs in results.items()}
    for name, r in best.items():
        report(name, r)
    print(
        "\nstep wall ms per round: "
        + "; ".join(f"{n} " + ", ".join(f"{r['wall_ms']:.2f}" for r in rs) for n, rs in results.items())
    )
    if len(best) > 1:
        first = trees[0][0]
        for name, _ in trees[1:]:
            print(f"{name} / {first} step time: {best[name]['wall_ms'] / best[first]['wall_ms']:.2f}x")
    return 0
