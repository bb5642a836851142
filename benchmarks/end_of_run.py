"""What a whole run costs outside its training loop, runs side by side in one invocation.

    python -m benchmarks end_of_run                                   # the shipped template, 1000 steps
    python -m benchmarks end_of_run --compare configs/colmap_cpu.yaml@9156c00 configs/colmap_cpu.yaml
    python -m benchmarks end_of_run --scene photo --compare configs/colmap_cpu.yaml \\
        'configs/colmap_cpu.yaml+hooks.1.test_align_method=adam'

Each run is ``scripts/train.py`` of its own code tree (``CFG@REV``: that revision's config and code,
checked out by ``benchmarks/revision.py``; ``+key=value``: overrides for that run only) in a fresh
process, as a user starts it, on a generated photo-textured COLMAP scene: ``photo160`` (default) is
160 views of 800x800 (issue 24's end-of-run scene; the template's ``scale: auto`` trains it at
400x400), ``photo`` the 56-view 400x300 benchmark scene. "Outside" is the process's wall time minus
``train_seconds`` from its ``metrics.json``: start-up and imports, image loading, validation, test
renders and metrics, test-time alignment, exports (each tree's native extension is built before
its first run, so no compile is counted). Where ``metrics.json`` has ``phase_seconds``
they are listed too. Runs go one after another, so load drifts hit them unequally: compare shares,
and repeat the invocation before believing a small difference.
"""

from __future__ import annotations

import os

from benchmarks import revision, workers
from benchmarks._common import add_run_arguments, load_average, parser
from benchmarks.datasets import SCENES, scene_root


def psnr(report: dict, key: str) -> str:
    value = (report.get(key) or {}).get("psnr")
    return "-" if value is None else f"{value:.2f}"


def print_table(names: list[str], reports: list[dict]) -> None:
    phases = sorted({k for r in reports for k in (r.get("phase_seconds") or {})})
    head = ["run", "train s", "outside s", "outside / train", *phases, "PSNR", "PSNR aligned", "Gaussians"]
    rows = []
    for name, r in zip(names, reports):
        outside = r["wall_seconds"] - r["train_seconds"]
        ph = r.get("phase_seconds") or {}
        rows.append(
            [
                name,
                f"{r['train_seconds']:.1f}",
                f"{outside:.1f}",
                f"{100 * outside / r['train_seconds']:.0f}%",
                *(f"{ph[k]:.1f}" if k in ph else "-" for k in phases),
                psnr(r, "mean"),
                psnr(r, "mean_aligned"),
                str(r.get("num_gaussians", "-")),
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--compare", nargs="+", default=["configs/colmap_cpu.yaml"], metavar="CFG[@REV][+k=v]")
    p.add_argument("--scene", choices=sorted(SCENES), default="photo160")
    p.add_argument("--steps", type=int, default=1000, help="trainer.max_steps of every run (default 1000)")
    add_run_arguments(p, __name__)
    args = p.parse_args(argv)

    scratch = revision.scratch_folder(args.out)
    root = scene_root(args.scene)
    common = [f"dataset.data_path={root}", f"trainer.max_steps={args.steps}", "writers=[]", *args.overrides]
    print(f"scene {args.scene} ({root}), {args.steps} steps, {os.cpu_count()} CPUs, load average {load_average()}")
    names, reports, built = [], [], set()
    for i, text in enumerate(args.compare):
        head, rev, own = revision.compare_spec(text)
        tree = revision.tree_for(rev)
        if tree not in built:
            workers.prebuild(tree)
            built.add(tree)
        cfg = revision.config_file(head.partition("@")[0], tree, scratch)
        name = head if not own else f"{head} +{'+'.join(own)}"
        print(f"run {i}: {name} ({revision.label(rev)}) ...", flush=True)
        report = workers.train_script(tree, cfg, common + own, args.out / f"run_{i}")
        names.append(f"{i}: {name}")
        reports.append(report)
        print(f"  train {report['train_seconds']:.1f} s, wall {report['wall_seconds']:.1f} s", flush=True)
    print_table(names, reports)
    return 0
